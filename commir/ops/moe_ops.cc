// The mixture-of-experts pair: moe_dispatch copies each token's row into the slot its
// routing choice gets in a [experts, capacity, hidden] buffer, moe_collect reads each
// choice's slot back as a [tokens, k, hidden] tensor. Routing (a matmul, softmax or
// sigmoid, top_k), the expert FFNs (batched matmuls over the expert dimension), the
// weighting by the router's probabilities and the load-balancing loss are existing ops.
//
// Why a pair of pure copies and not a weighted combine: each op is linear in its rows and
// the other's adjoint, so two short derivative rules cover the layer, and the combine's
// weights get their gradient from the ordinary mul and reduce_sum that apply them. The
// expert dimension is an ordinary leading dimension of the buffer, which a sharding rule
// can split (expert parallelism: the dispatch and collect then become all_to_alls).
#include "commir/ops/moe_ops.h"

#include <algorithm>

#include "commir/moe_routing.h"
#include "commir/ops/op_helpers.h"

namespace commir::ops {
namespace {

// The routing indices: an integer [tokens, k].
absl::StatusOr<Type> RoutingOperand(const OpSignature& sig, absl::string_view op) {
  absl::StatusOr<Type> idx = TensorOperand(sig, 1, "the expert indices");
  if (!idx.ok()) return idx.status();
  if ((idx->element_type() != ElementType::kI32 && idx->element_type() != ElementType::kI64) ||
      idx->rank() != 2) {
    return OpError("%s needs the expert indices as an i32 or i64 [tokens, k], got %s", op,
                   idx->ToString());
  }
  return idx;
}

// Rows may be any element type but i1: the ops copy them bit for bit.
absl::Status CheckRows(Type rows, absl::string_view op, absl::string_view what) {
  if (rows.element_type() == ElementType::kI1) {
    return OpError("%s copies numeric rows, got %s as %s", op, rows.ToString(), what);
  }
  return absl::OkStatus();
}

// The routing groups: `groups` (default 1), positive and dividing the tokens.
absl::StatusOr<int64_t> GroupsOf(const OpSignature& sig, int64_t tokens, absl::string_view op) {
  const Attribute* groups = sig.attrs.Find("groups");
  if (groups == nullptr) return 1;
  if (!groups->is_int() || groups->int_value() < 1 || tokens % groups->int_value() != 0) {
    return OpError("%s: groups = %s must be a positive integer that divides the %d tokens", op,
                   groups->ToString(), tokens);
  }
  return groups->int_value();
}

// The capacity of each group's buffer: `capacity`, or `ceil(tokens * k * capacity_factor / experts)`;
// exactly one of the two is written.
absl::StatusOr<int64_t> CapacityOf(const OpSignature& sig, int64_t tokens, int64_t k,
                                   int64_t experts, bool grouped) {
  const Attribute* capacity = sig.attrs.Find("capacity");
  const Attribute* factor = sig.attrs.Find("capacity_factor");
  if ((capacity == nullptr) == (factor == nullptr)) {
    return OpError("moe_dispatch needs exactly one of 'capacity' and 'capacity_factor'");
  }
  if (capacity != nullptr) {
    if (!capacity->is_int() || capacity->int_value() < 1 || capacity->int_value() > tokens * k) {
      return OpError(
          "capacity = %s must be in [1, %d], %s x k (more slots than choices "
          "stay empty)",
          capacity->ToString(), tokens * k, grouped ? "a group's tokens" : "tokens");
    }
    return capacity->int_value();
  }
  if (!factor->is_number()) return OpError("capacity_factor must be a number");
  absl::StatusOr<int64_t> c = MoeCapacity(tokens, k, experts, factor->number_value());
  if (!c.ok()) return OpError("%s", c.status().message());
  return c;
}

// moe_dispatch(x: [T, H] or [T, k, H], indices: [T, k]) {experts, capacity..., groups}
//   -> [experts, groups * capacity, H].
absl::StatusOr<std::vector<Type>> InferMoeDispatch(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the rows");
  if (!x.ok()) return x.status();
  absl::StatusOr<Type> idx = RoutingOperand(sig, "moe_dispatch");
  if (!idx.ok()) return idx.status();
  if (absl::Status s = CheckRows(*x, "moe_dispatch", "the rows"); !s.ok()) return s;
  const int64_t tokens = idx->dims()[0];
  const int64_t k = idx->dims()[1];
  absl::StatusOr<int64_t> groups = GroupsOf(sig, tokens, "moe_dispatch");
  if (!groups.ok()) return groups.status();
  const bool per_token = x->rank() == 2 && x->dims()[0] == tokens;
  const bool per_choice = x->rank() == 3 && x->dims()[0] == tokens && x->dims()[1] == k;
  if (!per_token && !per_choice) {
    return OpError(
        "moe_dispatch needs rows [tokens, hidden] or [tokens, k, hidden] for the "
        "indices %s, got %s",
        idx->ToString(), x->ToString());
  }
  const Attribute* experts_attr = sig.attrs.Find("experts");
  if (experts_attr == nullptr || !experts_attr->is_int() || experts_attr->int_value() < 1) {
    return OpError("moe_dispatch needs a positive integer 'experts'");
  }
  const int64_t experts = experts_attr->int_value();
  // Each group is routed alone: its capacity counts its own tokens.
  absl::StatusOr<int64_t> capacity = CapacityOf(sig, tokens / *groups, k, experts, *groups > 1);
  if (!capacity.ok()) return capacity.status();
  const int64_t hidden = x->dims().back();
  // capacity <= tokens / groups * k, so the groups' columns fit in tokens * k.
  const int64_t columns = *groups * *capacity;
  absl::StatusOr<int64_t> slots = CheckedDimMul(experts, columns);
  if (!slots.ok()) return slots.status();
  if (absl::StatusOr<int64_t> n = CheckedDimMul(*slots, hidden); !n.ok()) return n.status();
  return std::vector<Type>{Type::Tensor(x->element_type(), {experts, columns, hidden})};
}

// moe_collect(buffer: [E, groups * C, H], indices: [T, k]) {groups} -> [T, k, H].
absl::StatusOr<std::vector<Type>> InferMoeCollect(const OpSignature& sig) {
  absl::StatusOr<Type> buffer = TensorOperand(sig, 0, "the expert buffer");
  if (!buffer.ok()) return buffer.status();
  absl::StatusOr<Type> idx = RoutingOperand(sig, "moe_collect");
  if (!idx.ok()) return idx.status();
  if (absl::Status s = CheckRows(*buffer, "moe_collect", "the expert buffer"); !s.ok()) return s;
  if (buffer->rank() != 3) {
    return OpError("moe_collect needs the expert buffer as [experts, capacity, hidden], got %s",
                   buffer->ToString());
  }
  absl::StatusOr<int64_t> groups = GroupsOf(sig, idx->dims()[0], "moe_collect");
  if (!groups.ok()) return groups.status();
  if (buffer->dims()[1] % *groups != 0) {
    return OpError("moe_collect: the buffer's %d columns are not %d groups of equal capacity",
                   buffer->dims()[1], *groups);
  }
  const std::vector<int64_t> dims = {idx->dims()[0], idx->dims()[1], buffer->dims()[2]};
  absl::StatusOr<int64_t> n = CheckedDimMul(dims[0] * dims[1], dims[2]);
  if (!n.ok()) return n.status();
  return std::vector<Type>{Type::Tensor(buffer->element_type(), dims)};
}

double RowBytes(Type rows) {
  return static_cast<double>(rows.dims().back()) *
         static_cast<double>(ElementTypeByteWidth(rows.element_type()));
}

// Memory-bound, no arithmetic: the indices are read, every buffer slot written (an empty
// one as zeros), and each kept choice's row read once; at most min(choices, slots) rows.
OpCost MoeDispatchCost(const OpSignature& sig, absl::Span<const Type> results) {
  const Type idx = sig.operand_types[1];
  const Type buffer = results[0];
  const double kept =
      static_cast<double>(std::min(idx.num_elements(), buffer.dims()[0] * buffer.dims()[1]));
  return {0, ByteSize(idx) + ByteSize(buffer) + kept * RowBytes(buffer), 0};
}

// The indices read, every choice's row written (a dropped one as zeros), each kept
// choice's slot read once.
OpCost MoeCollectCost(const OpSignature& sig, absl::Span<const Type> results) {
  const Type buffer = sig.operand_types[0];
  const Type idx = sig.operand_types[1];
  const double kept =
      static_cast<double>(std::min(idx.num_elements(), buffer.dims()[0] * buffer.dims()[1]));
  return {0, ByteSize(idx) + ByteSize(results[0]) + kept * RowBytes(buffer), 0};
}

}  // namespace

void AppendMoeOps(std::vector<OpDef>& ops) {
  ops.push_back(OpDef{
      .kind = OpKind::kMoeDispatch,
      .name = "moe_dispatch",
      .summary = "token rows copied into per-expert buffers of static capacity by their "
                 "routing choices (over-capacity choices dropped)",
      .min_operands = 2,
      .max_operands = 2,
      .attrs = {{.name = "experts", .kind = AttrKind::kInt, .required = true},
                {.name = "capacity", .kind = AttrKind::kInt},
                {.name = "capacity_factor", .kind = AttrKind::kNumber},
                {.name = "groups", .kind = AttrKind::kInt}},
      .infer = InferMoeDispatch,
      .cost = MoeDispatchCost,
      .vjp = MoeDispatchVjp,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kMoeCollect,
      .name = "moe_collect",
      .summary = "each routing choice's row read back from the per-expert buffers (zeros "
                 "for a dropped choice)",
      .min_operands = 2,
      .max_operands = 2,
      .attrs = {{.name = "groups", .kind = AttrKind::kInt}},
      .infer = InferMoeCollect,
      .cost = MoeCollectCost,
      .vjp = MoeCollectVjp,
  });
}

}  // namespace commir::ops
