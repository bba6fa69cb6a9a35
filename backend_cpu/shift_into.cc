#include "backend_cpu/shift_into.h"

#include <optional>
#include <vector>

#include "commir/element_type.h"
#include "runtime/in_place.h"
#include "runtime/strided_copy.h"

namespace commir::cpu {

using runtime::BlockRows;
using runtime::Tensor;

bool ShiftInto(absl::Span<const Tensor* const> parts, int64_t offset, int64_t dim,
               absl::Span<const int64_t> offsets, absl::Span<Tensor* const> destinations,
               absl::Span<const runtime::SlicedOperand* const> sliced) {
  const int64_t members = static_cast<int64_t>(parts.size());
  if (members == 0 || offsets.size() != parts.size() || destinations.size() != parts.size() ||
      (!sliced.empty() && sliced.size() != parts.size())) {
    return false;
  }
  // Every slot is checked before any is written.
  std::vector<BlockRows> slots;
  std::vector<BlockRows> sent;  // where each source's block lies in its part
  std::vector<int64_t> sources;
  slots.reserve(members);
  sent.reserve(members);
  sources.reserve(members);
  for (int64_t c = 0; c < members; ++c) {
    const Tensor& whole = *parts[c];
    const runtime::SlicedOperand* view = sliced.empty() ? nullptr : sliced[c];
    const absl::Span<const int64_t> shape = view != nullptr ? view->shape : whole.shape();
    const int64_t rank = static_cast<int64_t>(shape.size());
    const int64_t d = dim < 0 ? dim + rank : dim;
    if (d < 0 || d >= rank) return false;
    std::optional<BlockRows> rows =
        view != nullptr ? runtime::SliceAsRows(whole.shape(), view->dim, view->offset, shape[d])
                        : runtime::SliceAsRows(shape, d, 0, shape[d]);
    if (!rows.has_value() || (view != nullptr && view->dim != d)) return false;
    sent.push_back(*rows);
  }
  for (int64_t c = 0; c < members; ++c) {
    // (c - offset) mod n, as Shift (collectives.h) takes it.
    sources.push_back((c + members - offset % members) % members);
    const Tensor& part = *parts[sources.back()];
    const runtime::SlicedOperand* view = sliced.empty() ? nullptr : sliced[sources.back()];
    const absl::Span<const int64_t> shape = view != nullptr ? view->shape : part.shape();
    const Tensor& destination = *destinations[c];
    const int64_t rank = destination.rank();
    const int64_t d = dim < 0 ? dim + rank : dim;
    if (part.element_type() != destination.element_type() ||
        static_cast<int64_t>(shape.size()) != rank || d < 0 || d >= rank || part.on_device() ||
        destination.on_device()) {
      return false;
    }
    for (int64_t k = 0; k < rank; ++k) {
      if (k != d && shape[k] != destination.dim(k)) return false;
    }
    const std::optional<BlockRows> slot =
        runtime::SliceAsRows(destination.shape(), d, offsets[c], shape[d]);
    if (!slot.has_value() || slot->rows != sent[sources.back()].rows ||
        slot->width != sent[sources.back()].width) {
      return false;
    }
    slots.push_back(*slot);
  }
  for (int64_t c = 0; c < members; ++c) {
    const Tensor& part = *parts[sources[c]];
    const BlockRows& from_rows = sent[sources[c]];
    const BlockRows& slot = slots[c];
    const int64_t extent[] = {slot.rows, slot.width};
    const int64_t from[] = {from_rows.pitch, 1};
    const int64_t to[] = {slot.pitch, 1};
    runtime::CopyStrided(extent, ElementTypeByteWidth(part.element_type()),
                         runtime::ConstStridedView{part.raw_data(), from_rows.first, from},
                         runtime::StridedView{destinations[c]->raw_data(), slot.first, to});
  }
  return true;
}

}  // namespace commir::cpu
