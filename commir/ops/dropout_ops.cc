// dropout: elementwise keep-or-zero with a mask drawn from Philox 4x32-10 keyed by the
// seed, one draw per element of the unpartitioned tensor (commir/philox.h), so that
// every partitioning, schedule and recomputation of a program draws the one device's
// mask. An optional integer scalar operand, the step, is the counter's upper half: a
// training step passes its step count there, so that each step draws a new mask under
// the one seed the program text fixes. Its derivative is the same op on the cotangent: the mask is recomputed from
// (seed, global index), never stored.
#include "commir/builder.h"
#include "commir/ir.h"
#include "commir/ops/op_helpers.h"

namespace commir::ops {
namespace {

// Integer instructions per element of the cuda kernel: Philox's 10 rounds of two
// widening 32x32 multiplies, two three-input xors (one LOP3 each) and two key additions
// (60), plus the global index, the threshold compare and the scaling multiply (4).
constexpr double kIntOpsPerElement = 64;
// The cost model counts compute as f32 FLOPs against the GPU's f32 peak, which counts an
// FMA as 2 FLOPs. The CUDA C++ Programming Guide's arithmetic-throughput table gives
// 32-bit integer add, multiply-add and logic the f32 FMA's rate per SM on compute
// capability 8.x (64 per clock): one integer instruction takes an FMA's issue slot, 2
// FLOPs. (On 9.0 integers run at half the f32 rate, so there this is a lower bound.)
constexpr double kFlopsPerIntOp = 2;

absl::StatusOr<std::vector<Type>> InferDropout(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  if (absl::Status s = RequireFloat(*x, "the operand"); !s.ok()) return s;
  const int64_t rank = x->rank();
  // The step, when given, is operand 1: an integer tensor scalar (the offsets are index
  // values, so the two never read alike).
  const bool has_step = sig.operand_types.size() > 1 && sig.operand_types[1].is_tensor();
  if (has_step) {
    const Type& step = sig.operand_types[1];
    if (step.rank() != 0 ||
        (step.element_type() != ElementType::kI32 && step.element_type() != ElementType::kI64)) {
      return OpError("dropout's step must be an i32[] or i64[] scalar, got %s", step.ToString());
    }
  }
  const int64_t offsets = static_cast<int64_t>(sig.operand_types.size()) - 1 - (has_step ? 1 : 0);
  // Inference may run on unverified attributes: read `rate` without assuming it.
  const Attribute* rate_attr = sig.attrs.Find("rate");
  if (rate_attr == nullptr || !rate_attr->is_number()) {
    return OpError("dropout needs a number attribute 'rate'");
  }
  const double rate = rate_attr->number_value();
  if (!(rate >= 0 && rate < 1)) return OpError("rate must be in [0, 1), got %g", rate);
  const Attribute* global = sig.attrs.Find("global_shape");
  if (offsets != 0 && offsets != rank) {
    return OpError("dropout takes its operand alone or with one index offset per dimension "
                   "(%d), got %d offsets", rank, offsets);
  }
  for (int64_t i = has_step ? 2 : 1; i < static_cast<int64_t>(sig.operand_types.size()); ++i) {
    if (absl::Status s = IndexOperand(sig, static_cast<int>(i), "an offset"); !s.ok()) return s;
  }
  if ((global != nullptr) != (offsets != 0)) {
    return OpError("the offsets and 'global_shape' say where the operand's block lies in the "
                   "whole tensor: give both or neither");
  }
  if (global != nullptr) {
    std::optional<std::vector<int64_t>> dims = global->int_list();
    if (!dims.has_value() || static_cast<int64_t>(dims->size()) != rank) {
      return OpError("global_shape must list %d dimensions for %s", rank, x->ToString());
    }
    int64_t elements = 1;
    for (int64_t d = 0; d < rank; ++d) {
      if ((*dims)[d] < x->dims()[d]) {
        return OpError("global_shape %s is smaller than the block %s in dimension %d",
                       FormatShape(*dims), FormatShape(x->dims()), d);
      }
      // Global indices are 64-bit Philox counters: the element count must fit.
      if (__builtin_mul_overflow(elements, (*dims)[d], &elements)) {
        return OpError("global_shape %s has more elements than fit in 64 bits", FormatShape(*dims));
      }
    }
  }
  return std::vector<Type>{x->WithoutSharding()};
}

OpCost DropoutCost(const OpSignature& sig, absl::Span<const Type> results) {
  const Type x = sig.operand_types[0];
  const double elements = static_cast<double>(x.num_elements());
  // One read and one write of each element; the step and the offsets are scalars.
  return {elements * kIntOpsPerElement * kFlopsPerIntOp, ByteSize(x) + ByteSize(results[0]), 0};
}

// y = mask * x / (1 - rate) is linear in x: dx is the same op, with the same seed, step
// and global indices, on the cotangent; the step carries no gradient.
absl::StatusOr<std::vector<Value*>> DropoutVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  std::vector<OpBuilder::Operand> operands = {args.result_cotangents[0]};
  for (int i = 1; i < op.num_operands(); ++i) operands.push_back(op.operand(i));
  AttrDict attrs;
  for (const char* key : {"rate", "seed", "global_shape"}) {
    if (const Attribute* value = op.attrs().Find(key); value != nullptr) attrs.Set(key, *value);
  }
  std::vector<Value*> cotangents(op.num_operands(), nullptr);
  cotangents[0] = b.Op(OpKind::kDropout, std::move(operands), std::move(attrs));
  if (!b.ok()) return b.status();
  return cotangents;
}

}  // namespace

void AppendDropoutOps(std::vector<OpDef>& ops) {
  ops.push_back(OpDef{
      .kind = OpKind::kDropout,
      .name = "dropout",
      .summary = "keeps x / (1 - rate) where the Philox draw of (seed, global index, step) is >= rate, 0 elsewhere",
      .min_operands = 1,
      .max_operands = -1,
      .attrs = {
          {.name = "rate", .kind = AttrKind::kNumber, .required = true},
          {.name = "seed", .kind = AttrKind::kInt, .required = true},
          // With one index offset per dimension (the lowering fills both): the operand is
          // the block at those offsets of a tensor of this shape.
          {.name = "global_shape", .kind = AttrKind::kIntList},
      },
      .infer = InferDropout,
      .cost = DropoutCost,
      .vjp = DropoutVjp,
  });
}

}  // namespace commir::ops
