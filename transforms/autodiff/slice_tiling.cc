#include "transforms/autodiff/slice_tiling.h"

#include <algorithm>
#include <utility>

namespace commir {
namespace {

struct Cut {
  int64_t dim = -1;
  int64_t start = 0;
  int64_t size = 0;
};

// The one dimension a static slice cuts, or empty.
std::optional<Cut> CutOf(const Operation& slice) {
  if (!slice.Is(OpKind::kSlice) || slice.num_operands() != 1) return std::nullopt;
  const Attribute* start_attr = slice.attrs().Find("start");
  const Attribute* size_attr = slice.attrs().Find("size");
  if (start_attr == nullptr || size_attr == nullptr) return std::nullopt;
  const std::optional<std::vector<int64_t>> start = start_attr->int_list();
  const std::optional<std::vector<int64_t>> size = size_attr->int_list();
  const std::vector<int64_t>& dims = slice.operand(0)->type().dims();
  if (!start.has_value() || !size.has_value() || start->size() != dims.size() ||
      size->size() != dims.size()) {
    return std::nullopt;
  }
  std::optional<Cut> cut;
  for (size_t d = 0; d < dims.size(); ++d) {
    if ((*start)[d] == 0 && (*size)[d] == dims[d]) continue;
    if (cut.has_value()) return std::nullopt;
    cut = Cut{static_cast<int64_t>(d), (*start)[d], (*size)[d]};
  }
  return cut;
}

}  // namespace

std::optional<SliceTiling> TilingSlices(const Value& value) {
  if (!value.type().is_tensor() || value.use_empty()) return std::nullopt;
  std::vector<std::pair<Cut, const Operation*>> blocks;
  for (const Operation* user : value.users()) {
    std::optional<Cut> cut = CutOf(*user);
    if (!cut.has_value() || user->operand(0) != &value) return std::nullopt;
    if (!blocks.empty() && blocks.front().first.dim != cut->dim) return std::nullopt;
    // An op using the value twice is listed once per use: one block each.
    if (std::any_of(blocks.begin(), blocks.end(), [&](const auto& b) { return b.second == user; })) {
      continue;
    }
    blocks.push_back({*cut, user});
  }
  if (blocks.size() < 2) return std::nullopt;
  std::sort(blocks.begin(), blocks.end(),
            [](const auto& a, const auto& b) { return a.first.start < b.first.start; });
  SliceTiling tiling;
  tiling.dim = blocks.front().first.dim;
  int64_t next = 0;
  for (const auto& [block, slice] : blocks) {
    if (block.start != next) return std::nullopt;
    next = block.start + block.size;
    tiling.slices.push_back(slice);
  }
  if (next != value.type().dims()[tiling.dim]) return std::nullopt;
  return tiling;
}

}  // namespace commir
