// Where a dropout block's elements lie in the whole tensor: the global linear index of
// each of its elements, from the op's offsets and global_shape (both absent for a tensor
// that is whole). Both backends' kernels take their Philox counters from it.
#ifndef COMMIR_COMMIR_DROPOUT_INDEXING_H_
#define COMMIR_COMMIR_DROPOUT_INDEXING_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace commir {

struct DropoutIndexing {
  // The global index of the block's first element.
  uint64_t base = 0;
  // Per dimension of the block: how far one step along it moves in the whole tensor
  // (the whole tensor's row-major strides).
  std::vector<uint64_t> strides;
  // Keep where the draw is >= threshold (philox::DropoutThreshold), scale kept values.
  uint64_t threshold = 0;
  double scale = 1;
};

// The indexing of a block of `block_dims` at `offsets` (empty: the whole tensor) of a
// tensor of `global_shape` (unset: the block's own dims). An error, naming the
// dimension, when the block does not lie inside the tensor.
absl::StatusOr<DropoutIndexing> DropoutIndexingOf(absl::Span<const int64_t> block_dims,
                                                  const std::optional<std::vector<int64_t>>& global_shape,
                                                  absl::Span<const int64_t> offsets, double rate);

}  // namespace commir

#endif  // COMMIR_COMMIR_DROPOUT_INDEXING_H_
