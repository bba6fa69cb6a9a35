#include "commir/dropout_indexing.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commir/philox.h"

namespace commir {

absl::StatusOr<DropoutIndexing> DropoutIndexingOf(absl::Span<const int64_t> block_dims,
                                                  const std::optional<std::vector<int64_t>>& global_shape,
                                                  absl::Span<const int64_t> offsets, double rate) {
  const size_t rank = block_dims.size();
  const std::vector<int64_t> global =
      global_shape.has_value() ? *global_shape : std::vector<int64_t>(block_dims.begin(), block_dims.end());
  if (global.size() != rank || (!offsets.empty() && offsets.size() != rank)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "dropout: a block of rank %d needs %d offsets and global dimensions, got %d and %d", rank,
        rank, offsets.size(), global.size()));
  }
  if (!(rate >= 0 && rate < 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("dropout: rate must be in [0, 1), got %g", rate));
  }
  DropoutIndexing indexing;
  indexing.strides.assign(rank, 0);
  // Global sizes are verified to multiply without overflow (dropout's inference), so the
  // strides and the base fit in 64 bits.
  uint64_t stride = 1;
  for (size_t d = rank; d-- > 0;) {
    const int64_t offset = offsets.empty() ? 0 : offsets[d];
    if (offset < 0 || block_dims[d] > global[d] || offset > global[d] - block_dims[d]) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "dropout: the block [%s] at offsets [%s] leaves the tensor [%s] in dimension %d",
          absl::StrJoin(block_dims, ", "), absl::StrJoin(offsets, ", "), absl::StrJoin(global, ", "), d));
    }
    indexing.strides[d] = stride;
    indexing.base += static_cast<uint64_t>(offset) * stride;
    stride *= static_cast<uint64_t>(global[d]);
  }
  indexing.threshold = philox::DropoutThreshold(rate);
  indexing.scale = 1.0 / (1.0 - rate);
  return indexing;
}

}  // namespace commir
