#include "backend_cpu/collectives.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "backend_cpu/kernels.h"
#include "backend_cpu/shape_util.h"
#include "commir/element_type.h"
#include "runtime/host_ops.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

absl::Status CheckGroup(std::string_view op_name, absl::Span<const Tensor* const> parts) {
  if (parts.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: the group has no members", op_name));
  }
  for (size_t c = 1; c < parts.size(); ++c) {
    if (parts[c]->element_type() != parts[0]->element_type() ||
        parts[c]->shape() != parts[0]->shape()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: member %d holds %s but member 0 holds %s; all members need the same type", op_name,
          c, parts[c]->DebugTypeString(), parts[0]->DebugTypeString()));
    }
  }
  return absl::OkStatus();
}

// Normalises `dim` and checks that it splits into one equal block per member.
absl::StatusOr<int64_t> CheckSplitDim(std::string_view op_name, const Tensor& part, int64_t dim,
                                      int64_t members) {
  absl::StatusOr<int64_t> split_dim = NormalizeDim(op_name, dim, part.rank());
  if (!split_dim.ok()) return split_dim.status();
  if (part.dim(*split_dim) % members != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: dimension %d of %s (extent %d) does not split into %d equal blocks", op_name,
        *split_dim, part.DebugTypeString(), part.dim(*split_dim), members));
  }
  return split_dim;
}

// The n blocks of `dim` (already checked to divide evenly).
std::vector<Tensor> SplitIntoBlocks(const Tensor& x, int64_t dim, int64_t blocks) {
  const int64_t block_size = x.dim(dim) / blocks;
  std::vector<Tensor> result;
  result.reserve(blocks);
  for (int64_t j = 0; j < blocks; ++j) {
    result.push_back(*DynamicSlice(x, dim, j * block_size, block_size));
  }
  return result;
}

}  // namespace

absl::StatusOr<Tensor> AllGather(absl::Span<const Tensor* const> parts, int64_t dim) {
  if (absl::Status status = CheckGroup("all_gather", parts); !status.ok()) return status;
  return Concat(parts, dim);
}

absl::StatusOr<Tensor> AllReduce(absl::Span<const Tensor* const> parts, ReduceOp op) {
  if (absl::Status status = CheckGroup("all_reduce", parts); !status.ok()) return status;
  if (op == ReduceOp::kMean) {
    return absl::InvalidArgumentError("all_reduce: the reduction must be sum, max or min");
  }
  // The fold itself is the runtime's, so host-side assembly of partial results sums
  // exactly as this collective does.
  return runtime::CombineInOrder(parts, op == ReduceOp::kSum   ? runtime::HostCombine::kSum
                                        : op == ReduceOp::kMax ? runtime::HostCombine::kMax
                                                               : runtime::HostCombine::kMin);
}

absl::StatusOr<std::vector<Tensor>> ReduceScatter(absl::Span<const Tensor* const> parts,
                                                  int64_t dim, ReduceOp op) {
  if (absl::Status status = CheckGroup("reduce_scatter", parts); !status.ok()) return status;
  const int64_t members = static_cast<int64_t>(parts.size());
  absl::StatusOr<int64_t> scatter_dim = CheckSplitDim("reduce_scatter", *parts[0], dim, members);
  if (!scatter_dim.ok()) return scatter_dim.status();
  absl::StatusOr<Tensor> reduced = AllReduce(parts, op);
  if (!reduced.ok()) return reduced.status();
  return SplitIntoBlocks(*reduced, *scatter_dim, members);
}

absl::StatusOr<std::vector<Tensor>> AllToAll(absl::Span<const Tensor* const> parts,
                                             int64_t split_dim, int64_t concat_dim) {
  if (absl::Status status = CheckGroup("all_to_all", parts); !status.ok()) return status;
  const int64_t members = static_cast<int64_t>(parts.size());
  absl::StatusOr<int64_t> split = CheckSplitDim("all_to_all", *parts[0], split_dim, members);
  if (!split.ok()) return split.status();
  absl::StatusOr<int64_t> concat = NormalizeDim("all_to_all", concat_dim, parts[0]->rank());
  if (!concat.ok()) return concat.status();

  // sent[i][j]: the block member i sends to member j.
  std::vector<std::vector<Tensor>> sent;
  sent.reserve(members);
  for (const Tensor* part : parts) sent.push_back(SplitIntoBlocks(*part, *split, members));
  std::vector<Tensor> received;
  received.reserve(members);
  std::vector<const Tensor*> blocks(members);
  for (int64_t j = 0; j < members; ++j) {
    for (int64_t i = 0; i < members; ++i) blocks[i] = &sent[i][j];
    absl::StatusOr<Tensor> gathered = Concat(blocks, *concat);
    if (!gathered.ok()) return gathered.status();
    received.push_back(*std::move(gathered));
  }
  return received;
}

std::vector<Tensor> Shift(absl::Span<const Tensor* const> parts, int64_t offset) {
  const int64_t members = static_cast<int64_t>(parts.size());
  std::vector<Tensor> received;
  received.reserve(members);
  for (int64_t c = 0; c < members; ++c) {
    // (c - offset) mod n, kept non-negative (C++ % keeps the dividend's sign) and free of
    // overflow for any int64 offset.
    const int64_t source = (c + members - offset % members) % members;
    received.push_back(*parts[source]);
  }
  return received;
}

}  // namespace commir::cpu
