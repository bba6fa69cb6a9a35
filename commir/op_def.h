// The single definition of every CommIR op (docs/language.md, "Operations"): name, operand and
// attribute schema, traits, type inference (which is also shape verification) and cost.
// The parser, printer, verifier, executors and cost model all read these definitions.
#ifndef COMMIR_COMMIR_OP_DEF_H_
#define COMMIR_COMMIR_OP_DEF_H_

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "commir/attribute.h"
#include "commir/elementwise_fn.h"
#include "commir/reduction_fn.h"
#include "commir/type.h"

namespace commir {

class Mesh;
class OpBuilder;
class Operation;
class Value;

// What a derivative rule (OpDef::vjp) is given besides the builder.
struct VjpArgs {
  const Operation& op;
  // One per result of `op`; null for a result that gets no cotangent (attention's lse
  // when only its output is used). At least one is set.
  absl::Span<Value* const> result_cotangents;
  // The element type of every float cotangent (autodiff's `grad-type=f32`: a bf16
  // forward with f32 gradients); unset: each cotangent has its value's element type.
  std::optional<ElementType> grad_type;
};

// A reverse-mode derivative rule: emits, with the builder (positioned after the forward
// ops), the vector-Jacobian product of `op` and returns one cotangent per regular operand,
// null for an operand that gets none (a number literal, a predicate, a non-float value).
// Rules compute in their cotangents' element type, converting the forward values they
// read. A rule that cannot differentiate its op returns an error naming why; the pass
// adds the op's location.
using VjpRule = absl::StatusOr<std::vector<Value*>> (*)(OpBuilder& b, const VjpArgs& args);

enum class OpKind : uint8_t {
  // Elementwise unary.
  kNeg, kAbs, kExp, kLog, kSqrt, kRsqrt, kTanh, kSigmoid, kRelu, kSilu, kGelu, kConvert,
  // Elementwise binary (and index arithmetic in spmd functions).
  kAdd, kSub, kMul, kDiv, kMax, kMin, kPow, kRem,
  // Predicates and choice.
  kCompare, kSelect,
  // Tensor ops.
  kFull, kMatmul, kReduceSum, kReduceMax, kReduceMean, kSoftmax, kLayerNorm, kRmsNorm,
  kAttention, kAttentionGrad, kAttentionMerge, kReshape, kTranspose, kSlice, kConcat, kBroadcast, kReshard,
  // Random: a counter-based mask (ops/dropout_ops.cc).
  kDropout,
  // Rows at integer indices (commir/ops/gather_ops.cc).
  kGather, kScatterAdd,
  // Losses (ops/loss_ops.cc).
  kCrossEntropy, kCrossEntropyGrad,
  // Selection (topk_ops.cc).
  kTopK,
  // Mixture of experts: rows into per-expert buffers and back (ops/moe_ops.cc).
  kMoeDispatch, kMoeCollect,
  // Spmd-only.
  kRank, kAllGather, kReduceScatter, kAllReduce, kAllToAll, kShift, kDynamicSlice,
  kDynamicUpdateSlice, kFor,
  // Calls of another function of the module (global from global, spmd from spmd).
  kCall,
  // Terminators.
  kReturn, kYield,
};

enum class AttrKind {
  kInt,      // integer
  kNumber,   // integer or float
  kBool,     // true / false / bare key
  kEnum,     // one of `enum_values`, written as a bare identifier
  kIntList,  // [1, 2]
  kAxes,     // a mesh axis `tp` or an axis group `(dp, tp)`
  kSymbol,   // a function name, held as an identifier (call's callee, written `call @f(...)`)
};

struct AttrSpec {
  absl::string_view name;
  AttrKind kind;
  bool required = false;
  std::vector<absl::string_view> enum_values = {};
  // What an absent optional attribute means; the only place that meaning is spelled.
  // Unset when absence has no single value (attention's `scale` depends on the head dim).
  std::optional<Attribute> default_value = std::nullopt;
};

enum OpTrait : uint32_t {
  kElementwise = 1u << 0,         // same-shape (broadcasting) elementwise math
  kCommutative = 1u << 1,         // operands may be swapped
  kTerminator = 1u << 2,          // ends a block
  kSpmdOnly = 1u << 3,            // valid only in spmd functions
  kGlobalOnly = 1u << 4,          // valid only in global functions
  kResultTypeRequired = 1u << 5,  // the `: type` annotation must be written
  kCollective = 1u << 6,          // communicates between devices
  kAllowsLiteral = 1u << 7,       // one operand may be a number literal
  kHasRegion = 1u << 8,           // carries a body (for)
  kIndexOperands = 1u << 9,       // operates on `index` values too (index arithmetic)
};

// What an op's hooks see: operand types, attributes, written result types (empty when
// inferred) and context.
struct OpSignature {
  absl::Span<const Type> operand_types;
  const AttrDict& attrs;
  absl::Span<const Type> annotated_results;
  int num_results = 1;
  const Mesh* mesh = nullptr;
  bool in_spmd = false;
};

// Cost estimates for the cost model and reports; computed on per-device types in spmd
// functions and on global types otherwise.
struct OpCost {
  double flops = 0;
  double bytes_accessed = 0;      // read + written memory traffic
  double bytes_communicated = 0;  // sent per device by a collective
};

struct OpDef {
  OpKind kind;
  absl::string_view name;
  absl::string_view summary;
  int min_operands = 0;
  int max_operands = 0;  // -1: variadic
  int min_results = 1;
  int max_results = 1;   // -1: variadic (for)
  std::vector<AttrSpec> attrs = {};
  uint32_t traits = 0;
  // Result types from operand types and attributes; validates shapes and attribute
  // values and returns a message naming the problem otherwise. With a required
  // annotation it validates and returns that annotation.
  absl::StatusOr<std::vector<Type>> (*infer)(const OpSignature& sig) = nullptr;
  OpCost (*cost)(const OpSignature& sig, absl::Span<const Type> results) = nullptr;
  // The scalar function an elementwise op computes, from its attributes (gelu's
  // `approximate` picks the erf or the tanh form); the backends register and run their
  // elementwise kernels by it. Null for ops that compute none (convert, full, the
  // index-only rem and every op that is not elementwise).
  ElementwiseFn (*elementwise_fn)(const AttrDict& attrs) = nullptr;
  // The reduction a reducing op computes (reduce_sum ... reduce_mean by kind; all_reduce
  // and reduce_scatter by their `reduce` attribute); null for every other op.
  ReductionFn (*reduction_fn)(const AttrDict& attrs) = nullptr;
  // The op's derivative rule; null for ops that are not differentiable (compare, the
  // spmd ops, terminators) or have no operands to differentiate (full).
  VjpRule vjp = nullptr;

  bool Has(OpTrait trait) const { return (traits & trait) != 0; }
  const AttrSpec* FindAttr(absl::string_view name) const;

  // The default an optional attribute's spec declares. CHECK-fails when this op has no
  // such attribute or it has no default: asking for one is an internal error.
  const Attribute& DefaultAttr(absl::string_view name) const;
  // Typed attribute reads: the value in `attrs`, or the spec's default when it is absent
  // (or of another kind). Only for attributes whose spec declares a default.
  int64_t IntAttr(const AttrDict& attrs, absl::string_view name) const;
  double NumberAttr(const AttrDict& attrs, absl::string_view name) const;
  bool BoolAttr(const AttrDict& attrs, absl::string_view name) const;
  const std::string& EnumAttr(const AttrDict& attrs, absl::string_view name) const;
  // Typed reads of required attributes, for code that runs after the verifier (which
  // guarantees their presence and kind). CHECK-fail when the spec does not declare the
  // attribute required, or when it is missing or of another kind: both are internal
  // errors, and a made-up fallback would hide them.
  int64_t RequiredIntAttr(const AttrDict& attrs, absl::string_view name) const;
  double RequiredNumberAttr(const AttrDict& attrs, absl::string_view name) const;
  std::vector<int64_t> RequiredIntListAttr(const AttrDict& attrs, absl::string_view name) const;
  const std::string& RequiredEnumAttr(const AttrDict& attrs, absl::string_view name) const;

 private:
  const Attribute& RequiredAttr(const AttrDict& attrs, absl::string_view name) const;
};

// Looks an op up by its text name; null if unknown.
const OpDef* LookupOp(absl::string_view name);
const OpDef& GetOpDef(OpKind kind);
// Every op, in OpKind order.
const std::vector<const OpDef*>& AllOpDefs();

// The attribute autodiff{remat=...} puts on the forward ops it recomputes in the backward,
// `remat = B` (B: the index of the recomputed block). Valid on every op; passes that
// compare attributes (CSE) therefore never merge a recomputed op with its forward twin.
inline constexpr char kRematAttr[] = "remat";

// Checks `attrs` against the op's schema (unknown keys, kinds, enum values, required
// keys); `stream` is accepted on every op of a spmd function, `remat` on every op.
absl::Status ValidateAttributes(const OpDef& def, const AttrDict& attrs, bool in_spmd);

// Runs the op's inference and reconciles it with written result types: a written
// type must agree in shape and element type (a matmul's element type may differ) and
// then wins, carrying its sharding. Returns the result types the op should have.
absl::StatusOr<std::vector<Type>> InferResultTypes(const OpDef& def, const OpSignature& sig);

}  // namespace commir

#endif  // COMMIR_COMMIR_OP_DEF_H_
