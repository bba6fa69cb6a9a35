#include "commir/moe_routing.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace commir {

absl::StatusOr<int64_t> MoeCapacity(int64_t tokens, int64_t k, int64_t experts,
                                    double capacity_factor) {
  if (tokens < 1 || k < 1 || experts < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokens (%d), k (%d) and experts (%d) must be positive", tokens, k, experts));
  }
  if (!std::isfinite(capacity_factor) || capacity_factor <= 0 ||
      capacity_factor > static_cast<double>(experts)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("capacity_factor = %g must be in (0, %d], the number of experts",
                        capacity_factor, experts));
  }
  // tokens * k fits: both are dimensions of one verified tensor.
  const double capacity =
      std::ceil(static_cast<double>(tokens * k) * capacity_factor / static_cast<double>(experts));
  // factor <= experts bounds this by tokens * k.
  return static_cast<int64_t>(capacity);
}

absl::StatusOr<std::vector<int64_t>> MoeSlots(absl::Span<const int64_t> experts_of, int64_t tokens,
                                              int64_t k, int64_t experts, int64_t capacity,
                                              int64_t groups) {
  if (static_cast<int64_t>(experts_of.size()) != tokens * k) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the routing has %d choices, not tokens x k = %d x %d", experts_of.size(), tokens, k));
  }
  if (groups < 1 || tokens % groups != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("groups = %d must be positive and divide the %d tokens", groups, tokens));
  }
  const int64_t group_tokens = tokens / groups;
  std::vector<int64_t> filled(experts);
  std::vector<int64_t> slots(experts_of.size(), -1);
  for (int64_t g = 0; g < groups; ++g) {
    std::fill(filled.begin(), filled.end(), 0);
    for (int64_t j = 0; j < k; ++j) {
      for (int64_t t = g * group_tokens; t < (g + 1) * group_tokens; ++t) {
        const int64_t e = experts_of[t * k + j];
        if (e < 0 || e >= experts) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "expert index %d (token %d, choice %d) is out of range [0, %d)", e, t, j, experts));
        }
        const int64_t position = filled[e]++;
        if (position < capacity) slots[t * k + j] = (e * groups + g) * capacity + position;
      }
    }
  }
  return slots;
}

}  // namespace commir
