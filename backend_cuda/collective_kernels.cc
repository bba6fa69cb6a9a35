#include "backend_cuda/collective_kernels.h"

#include "absl/strings/str_format.h"
#include "backend_cuda/launch_context.h"

namespace commir::cuda {
namespace {

using Geometry = absl::StatusOr<CollectiveGeometry>;
using Shape = absl::Span<const int64_t>;
using Members = absl::Span<const comm::MemberBuffers>;

// The product of the extents before `end`: 1 when moving a block axis across them keeps
// the bytes in order.
int64_t Prefix(Shape dims, int64_t end) {
  int64_t p = 1;
  for (int64_t i = 0; i < end; ++i) p *= dims[i];
  return p;
}

comm::ReduceKind ToReduceKind(absl::string_view name) {
  if (name == "max") return comm::ReduceKind::kMax;
  if (name == "min") return comm::ReduceKind::kMin;
  return comm::ReduceKind::kSum;
}

// ---- Geometry ----------------------------------------------------------------------------

Geometry PlanAllGather(const Operation& op, Shape shape, absl::string_view, int64_t n) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t d = NormalizeDim(op.RequiredIntAttr("dim"), rank);
  if (d < 0 || d >= rank) return absl::InvalidArgumentError("all_gather: dim out of range");
  CollectiveGeometry g;
  g.recv_shape.assign(shape.begin(), shape.end());
  g.recv_shape.insert(g.recv_shape.begin(), n);
  g.result_shape.assign(shape.begin(), shape.end());
  g.result_shape[d] *= n;
  if (Prefix(shape, d) != 1) g.post_dim = d;
  return g;
}

Geometry PlanReduceScatter(const Operation& op, Shape shape, absl::string_view part_type,
                           int64_t n) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t d = NormalizeDim(op.RequiredIntAttr("dim"), rank);
  if (d < 0 || d >= rank || shape[d] % n != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("reduce_scatter: dimension %d of %s does not split into %d blocks",
                        op.RequiredIntAttr("dim"), part_type, n));
  }
  CollectiveGeometry g;
  if (Prefix(shape, d) != 1) g.pre_dim = d;
  g.recv_shape.assign(shape.begin(), shape.end());
  g.recv_shape[d] /= n;
  g.result_shape = g.recv_shape;
  return g;
}

Geometry PlanAllToAll(const Operation& op, Shape shape, absl::string_view part_type, int64_t n) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t sd = NormalizeDim(op.RequiredIntAttr("split_dim"), rank);
  const int64_t cd = NormalizeDim(op.RequiredIntAttr("concat_dim"), rank);
  if (sd < 0 || sd >= rank || cd < 0 || cd >= rank || shape[sd] % n != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "all_to_all: split_dim of %s does not split into %d blocks (or a dim is out of "
        "range)",
        part_type, n));
  }
  CollectiveGeometry g;
  if (Prefix(shape, sd) != 1) g.pre_dim = sd;
  std::vector<int64_t> block(shape.begin(), shape.end());
  block[sd] /= n;
  g.recv_shape = block;
  g.recv_shape.insert(g.recv_shape.begin(), n);
  g.result_shape = block;
  g.result_shape[cd] *= n;
  if (Prefix(block, cd) != 1) g.post_dim = cd;
  return g;
}

// all_reduce and shift: every member's buffer keeps its shape.
Geometry PlanSameShape(const Operation&, Shape shape, absl::string_view, int64_t) {
  CollectiveGeometry g;
  g.recv_shape.assign(shape.begin(), shape.end());
  g.result_shape = g.recv_shape;
  return g;
}

// ---- Engine calls ----------------------------------------------------------------------

absl::Status RunAllGather(comm::CollectiveEngine& engine, const Operation&, Shape group,
                          Members local, int64_t count, ElementType type) {
  return engine.AllGather(group, local, count, type);
}

absl::Status RunReduceScatter(comm::CollectiveEngine& engine, const Operation& op, Shape group,
                              Members local, int64_t count, ElementType type) {
  return engine.ReduceScatter(group, local, count, type, ToReduceKind(op.EnumAttr("reduce")));
}

absl::Status RunAllReduce(comm::CollectiveEngine& engine, const Operation& op, Shape group,
                          Members local, int64_t count, ElementType type) {
  return engine.AllReduce(group, local, count, type, ToReduceKind(op.EnumAttr("reduce")));
}

absl::Status RunAllToAll(comm::CollectiveEngine& engine, const Operation&, Shape group,
                         Members local, int64_t count, ElementType type) {
  return engine.AllToAll(group, local, count, type);
}

absl::Status RunShift(comm::CollectiveEngine& engine, const Operation& op, Shape group,
                      Members local, int64_t count, ElementType type) {
  return engine.Shift(group, local, count, type, op.IntAttr("offset"));
}

}  // namespace

const CollectiveKernelTable& CudaCollectiveKernels() {
  static const CollectiveKernelTable* const table = [] {
    auto* built = new CollectiveKernelTable;
    built->Register(OpKind::kAllGather, {PlanAllGather, RunAllGather});
    built->Register(OpKind::kReduceScatter, {PlanReduceScatter, RunReduceScatter});
    built->Register(OpKind::kAllReduce, {PlanSameShape, RunAllReduce});
    built->Register(OpKind::kAllToAll, {PlanAllToAll, RunAllToAll});
    built->Register(OpKind::kShift, {PlanSameShape, RunShift});
    return built;
  }();
  return *table;
}

absl::Status CheckCudaCollectiveKernels(const CollectiveKernelTable& table) {
  return table.CheckComplete("cuda", "collective", NeedsCollectiveKernel);
}

}  // namespace commir::cuda
