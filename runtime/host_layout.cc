#include "runtime/host_layout.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "runtime/host_ops.h"

namespace commir::runtime {
namespace {

bool UsesAxis(Type type, const std::string& axis) {
  for (const AxisList& axes : type.dim_axes()) {
    if (std::find(axes.begin(), axes.end(), axis) != axes.end()) return true;
  }
  return false;
}

bool IsPartialAxis(Type type, const std::string& axis) {
  const AxisList& p = type.partial();
  return std::find(p.begin(), p.end(), axis) != p.end();
}

// Block index of `device` along dimension `dim` of `type`.
int64_t BlockOf(Type type, const Mesh& mesh, int64_t device, size_t dim) {
  const AxisList& axes = type.dim_axes()[dim];
  return axes.empty() ? 0 : mesh.GroupCoordinate(device, axes);
}

// The first member of `device`'s group over `axes`: the device with the same
// coordinates except 0 on each of `axes`. Arithmetic, so a check over all devices stays
// linear (Mesh::GroupMembers would list the whole group for every device).
int64_t GroupLeader(const Mesh& mesh, int64_t device, const std::vector<std::string>& axes) {
  std::vector<int64_t> coords = mesh.Coordinates(device);
  for (const std::string& axis : axes) {
    if (std::optional<int> index = mesh.AxisIndex(axis)) coords[*index] = 0;
  }
  return mesh.DeviceId(coords);
}

// The number of devices a zigzag dimension is split over.
int64_t ZigzagDevices(Type type, const Mesh& mesh) {
  return mesh.GroupSize(type.dim_axes()[type.zigzag_dim()]);
}

}  // namespace

absl::StatusOr<Tensor> ZigzagOrder(const Tensor& x, int64_t dim, int64_t n, bool to_zigzag) {
  if (dim < 0 || dim >= x.rank() || n < 1 || x.shape()[dim] % (2 * n) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot cut dimension %d of %s into %d zigzag chunks", dim, x.DebugTypeString(), 2 * n));
  }
  std::vector<int64_t> start(x.rank(), 0), size = x.shape();
  size[dim] /= 2 * n;
  std::vector<Tensor> chunks;
  chunks.reserve(2 * n);
  for (int64_t slot = 0; slot < 2 * n; ++slot) {
    // The chunk at zigzag slot 2c is chunk c, at slot 2c+1 chunk 2n-1-c.
    int64_t c = slot / 2;
    int64_t zigzag_chunk = slot % 2 == 0 ? c : 2 * n - 1 - c;
    // To zigzag: slot `slot` takes chunk zigzag_chunk. Back: chunk `slot` comes from the
    // slot that holds it.
    int64_t source = slot;
    if (to_zigzag) {
      source = zigzag_chunk;
    } else {
      source = slot < n ? 2 * slot : 2 * (2 * n - 1 - slot) + 1;
    }
    start[dim] = source * size[dim];
    absl::StatusOr<Tensor> chunk = Slice(x, start, size);
    if (!chunk.ok()) return chunk.status();
    chunks.push_back(*std::move(chunk));
  }
  std::vector<const Tensor*> pointers;
  for (const Tensor& chunk : chunks) pointers.push_back(&chunk);
  return Concat(pointers, dim);
}

absl::StatusOr<Tensor> LocalPart(const Tensor& global, Type type, const Mesh* mesh,
                                 int64_t device) {
  if (global.shape() != type.dims()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "value has shape %s but the layout is %s", global.DebugTypeString(), type.ToString()));
  }
  if (mesh == nullptr || !type.has_sharding()) return global;
  if (type.zigzag_dim() >= 0) {
    absl::StatusOr<Tensor> reordered =
        ZigzagOrder(global, type.zigzag_dim(), ZigzagDevices(type, *mesh), /*to_zigzag=*/true);
    if (!reordered.ok()) return reordered.status();
    return LocalPart(*reordered, type.WithZigzag(-1), mesh, device);
  }
  std::vector<int64_t> start(type.rank()), size(type.rank());
  for (int64_t d = 0; d < type.rank(); ++d) {
    int64_t parts = type.dim_axes()[d].empty() ? 1 : mesh->GroupSize(type.dim_axes()[d]);
    size[d] = type.dims()[d] / parts;
    start[d] = BlockOf(type, *mesh, device, d) * size[d];
  }
  absl::StatusOr<Tensor> part = Slice(global, start, size);
  if (!part.ok()) return part.status();
  if (!type.partial().empty() && mesh->GroupCoordinate(device, type.partial()) != 0) {
    return Full(part->element_type(), part->shape(), 0.0);
  }
  return part;
}

absl::StatusOr<Tensor> AssembleGlobal(absl::Span<const Tensor* const> parts, Type type,
                                      const Mesh* mesh) {
  int64_t n = mesh == nullptr ? 1 : mesh->num_devices();
  if (static_cast<int64_t>(parts.size()) != n) {
    return absl::InvalidArgumentError(absl::StrFormat("expected %d parts, got %d", n, parts.size()));
  }
  // Every part must have the per-device type, or the blocks would not tile the value.
  Type local = mesh == nullptr ? type.WithoutSharding() : LocalType(type, mesh);
  for (int64_t device = 0; device < n; ++device) {
    if (parts[device]->element_type() != local.element_type() ||
        parts[device]->shape() != local.dims()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "device %d holds %s but its part of %s is %s", device,
          parts[device]->DebugTypeString(), type.ToString(), local.ToString()));
    }
  }
  if (n == 1) return *parts[0];
  if (type.zigzag_dim() >= 0) {
    absl::StatusOr<Tensor> reordered = AssembleGlobal(parts, type.WithZigzag(-1), mesh);
    if (!reordered.ok()) return reordered.status();
    return ZigzagOrder(*reordered, type.zigzag_dim(), ZigzagDevices(type, *mesh),
                       /*to_zigzag=*/false);
  }
  // Each device's role: which block it holds, whether it is the canonical replica
  // (coordinate 0 on every axis the layout does not mention).
  std::vector<std::string> replica_axes;
  for (const MeshAxis& axis : mesh->axes()) {
    if (!UsesAxis(type, axis.name) && !IsPartialAxis(type, axis.name)) replica_axes.push_back(axis.name);
  }
  // Blocks in row-major block order, each the sum of its partial-axis addends.
  std::vector<int64_t> blocks_per_dim(type.rank(), 1);
  for (int64_t d = 0; d < type.rank(); ++d) {
    if (!type.dim_axes()[d].empty()) blocks_per_dim[d] = mesh->GroupSize(type.dim_axes()[d]);
  }
  int64_t num_blocks = 1;
  for (int64_t b : blocks_per_dim) num_blocks *= b;
  // addends[block][c]: the canonical replica with coordinate c over the partial axes.
  const AxisList& partial = type.partial();
  int64_t num_addends = partial.empty() ? 1 : mesh->GroupSize(partial);
  std::vector<std::vector<const Tensor*>> addends(
      num_blocks, std::vector<const Tensor*>(num_addends, nullptr));
  for (int64_t device = 0; device < n; ++device) {
    bool canonical = replica_axes.empty() || mesh->GroupCoordinate(device, replica_axes) == 0;
    if (!canonical) continue;
    int64_t block = 0;
    for (int64_t d = 0; d < type.rank(); ++d) {
      block = block * blocks_per_dim[d] + BlockOf(type, *mesh, device, d);
    }
    addends[block][partial.empty() ? 0 : mesh->GroupCoordinate(device, partial)] = parts[device];
  }
  // Partial values are summed like all_reduce sums them: in coordinate order over the
  // partial axes (first listed axis major), rounded to the element type once.
  std::vector<Tensor> blocks(num_blocks);
  for (int64_t block = 0; block < num_blocks; ++block) {
    if (num_addends == 1) {
      blocks[block] = *addends[block][0];
      continue;
    }
    blocks[block] = CombineInOrder(addends[block], ReductionFn::kSum);
  }
  // Replicas must agree with the canonical device of their group.
  if (!replica_axes.empty()) {
    for (int64_t device = 0; device < n; ++device) {
      if (mesh->GroupCoordinate(device, replica_axes) == 0) continue;
      int64_t canonical = GroupLeader(*mesh, device, replica_axes);
      if (!parts[device]->BitwiseEqual(*parts[canonical])) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "devices %d and %d should hold the same replica of %s but their values differ",
            canonical, device, type.ToString()));
      }
    }
  }
  // Concatenate blocks, innermost dimension first.
  std::vector<Tensor> level = std::move(blocks);
  for (int64_t d = type.rank() - 1; d >= 0; --d) {
    if (blocks_per_dim[d] == 1) continue;
    std::vector<Tensor> next;
    for (size_t start = 0; start < level.size(); start += blocks_per_dim[d]) {
      std::vector<const Tensor*> group;
      for (int64_t b = 0; b < blocks_per_dim[d]; ++b) group.push_back(&level[start + b]);
      absl::StatusOr<Tensor> joined = Concat(group, d);
      if (!joined.ok()) return joined.status();
      next.push_back(*std::move(joined));
    }
    level = std::move(next);
  }
  return level[0];
}

}  // namespace commir::runtime
