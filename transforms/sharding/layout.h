// The layout algebra of the partitioner: layouts of global tensors on a mesh, the
// collectives that turn one layout into another, and what that costs.
//
// A Layout is exactly the sharding a commir::Type carries (docs/language.md, "Tensor types"): for each
// dimension the mesh axes it is split over (first axis major), and the axes over which
// the value is `partial`. One addition exists only inside the partitioner: a partial
// value may be pending a *max* instead of a sum (`reduce_max` over a split dimension
// leaves each device the maximum of its block). Such a layout never reaches a type: the
// partitioner resolves it right where it is made.
//
// Partial axes are kept in mesh order, so layouts compare by meaning (`partial(tp, dp)`
// and `partial(dp, tp)` are the same layout).
//
// Resharding A -> B (PlanReshard) is a short sequence of steps, each one spmd op (or a
// few for a slice), in this order:
//  1. partial axes that B does not keep are reduced: a reduce_scatter onto a dimension
//     that B splits next over those axes, otherwise one all_reduce over the rest;
//  2. axes that must leave a dimension go, minor-most first: an all_to_all when B wants
//     that axis next on another dimension (the axis moves there), otherwise an
//     all_gather of the longest run of such axes that cannot move;
//  3. axes B adds at the minor end of a dimension are a local slice: dynamic_slice at
//     offset rank(axes) * (local size / group size), no communication;
//  4. partial axes that B has and A lacks: the device at coordinate 0 along them keeps
//     the value, the others take zeros (concat with zeros and a dynamic_slice), so the
//     addends sum to the value exactly.
// Every layout can be reached from every other (the worst case gathers everything and
// slices again). Each step is one spmd-only op, so the cost of a plan is the bytes per
// device of those ops, from their OpDef cost formulas (commir/ops/spmd_ops.cc) on the
// per-device types.
#ifndef COMMIR_TRANSFORMS_SHARDING_LAYOUT_H_
#define COMMIR_TRANSFORMS_SHARDING_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "commir/builder.h"
#include "commir/ir.h"
#include "commir/reduction_fn.h"

namespace commir::sharding {

struct Layout {
  // Axes of each dimension, first major; empty: not split.
  std::vector<AxisList> dims;
  // Axes the value is partial over, in mesh order.
  AxisList partial;
  ReductionFn partial_kind = ReductionFn::kSum;

  // The layout of a tensor type (partial axes put in mesh order).
  static Layout Of(Type type, const Mesh& mesh);
  static Layout Replicated(size_t rank);

  size_t rank() const { return dims.size(); }
  bool IsReplicated() const;
  bool UsesAxis(absl::string_view axis) const;
  // Every axis the layout names: the dimensions' in dimension order, then the partial.
  AxisList UsedAxes() const;
  // `type` with this layout (a max-partial layout cannot be written in a type).
  Type ApplyTo(Type type) const;
  // "[tp, -, (dp, tp)] partial(dp)" for messages and tests; "max(...)" for a max partial.
  std::string ToString() const;

  friend bool operator==(const Layout& a, const Layout& b) {
    return a.dims == b.dims && a.partial == b.partial &&
           (a.partial.empty() || a.partial_kind == b.partial_kind);
  }
  friend bool operator!=(const Layout& a, const Layout& b) { return !(a == b); }
};

// `axes` sorted into mesh order (unknown axes last, in their given order).
AxisList InMeshOrder(AxisList axes, const Mesh& mesh);

// Per-device dimensions of a global shape under `layout`.
std::vector<int64_t> LocalDims(absl::Span<const int64_t> global, const Layout& layout,
                               const Mesh& mesh);
// The per-device type (no sharding) of `global` under `layout`.
Type LocalTypeOf(Type global, const Layout& layout, const Mesh& mesh);
// Whether `layout` is valid for a tensor of `dims` on `mesh`: ranks agree, every axis is
// a mesh axis used once, and every split dimension is divisible by its group size.
bool IsValidLayout(absl::Span<const int64_t> dims, const Layout& layout, const Mesh& mesh);

struct ReshardStep {
  enum class Kind {
    kAllReduce,      // reduce partial `axes`
    kReduceScatter,  // reduce partial `axes`, keep block c of `dim`
    kAllGather,      // gather `dim` over `axes`
    kAllToAll,       // axis `axes` moves from `concat_dim` to `dim` (the split dim)
    kSlice,          // split `dim` further over `axes`, locally
    kMakePartial,    // become partial over `axes` (coordinate 0 keeps the value)
  };
  Kind kind;
  AxisList axes;
  int64_t dim = 0;
  int64_t concat_dim = 0;
  ReductionFn reduce = ReductionFn::kSum;
  // The layout after this step.
  Layout after;
};

// "all_gather(dim 0 over tp)" style, for tests and messages.
std::string StepToString(const ReshardStep& step);

// The steps that turn a tensor of `global_dims` laid out as `from` into `to`. Both must
// be valid; `to` must not be a max partial. Empty when the layouts are equal.
std::vector<ReshardStep> PlanReshard(absl::Span<const int64_t> global_dims, const Layout& from,
                                     const Layout& to, const Mesh& mesh);

// The layout after only step 1 of PlanReshard(from -> to): partial axes that `to` does
// not keep reduced, scattered onto the dimensions `to` splits next where possible.
Layout ReducePartial(const Layout& from, const Layout& to, const Mesh& mesh);

// Bytes each device sends for `steps` applied to a value of type `global` laid out as
// `from`, from the collectives' OpDef cost formulas on per-device types.
double PlanBytes(Type global, const Layout& from, absl::Span<const ReshardStep> steps,
                 const Mesh& mesh);
double ReshardBytes(Type global, const Layout& from, const Layout& to, const Mesh& mesh);

// The cost model the partitioner minimizes: bytes sent per device (weighted by
// CollectiveByteWeight, compute_cost.h, where a group spans nodes) plus, for each
// collective, its latency expressed as the bytes a link moves meanwhile. Between plans
// that move similar amounts, the one with fewer collectives wins; for large tensors the
// bytes dominate. At the 360 GB/s the compute term converts at (compute_cost.h), 1 MiB is
// 2.9 us: NCCL's own ring latency on NVLink (6.6 us LL base), below the 15-22 us a small
// all_reduce takes on 8 H100 (benchmarks/sim_calibration.md); raising it would favour
// fewer, larger collectives in every plan and is left until the partitioner prices
// collectives with the sim's model.
inline constexpr double kCollectiveLatencyBytes = 1 << 20;
int CollectiveCount(absl::Span<const ReshardStep> steps);
double ReshardCost(Type global, const Layout& from, const Layout& to, const Mesh& mesh);

// Emits PlanReshard(from -> to) for `value`, the per-device value of a tensor of type
// `global` laid out as `from`. Returns the per-device value laid out as `to` (`value`
// itself when the layouts are equal). Each new value is named after `value` with a
// suffix naming the step (`x_ag`), or `final_name` for the last one when given.
absl::StatusOr<Value*> EmitReshard(OpBuilder& emitter, Value* value, Type global,
                                   const Layout& from, const Layout& to, const std::string& final_name = "");

// AttrDict builders shared with the op lowering.
AttrDict AxisAttrs(const AxisList& axes);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_LAYOUT_H_
