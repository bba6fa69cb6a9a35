// Every split of a layer count over pipeline ranks, for the brute forces that
// plan_search_test and stage_split_test check the split search against.
#ifndef COMMIR_SEARCH_PLAN_COMPOSITIONS_FOR_TEST_H_
#define COMMIR_SEARCH_PLAN_COMPOSITIONS_FOR_TEST_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace commir::search::plan {

// Every composition of `layers` into `parts` positive counts, rank 0 first.
inline std::vector<std::vector<int64_t>> Compositions(int64_t layers, int64_t parts) {
  if (parts == 1) return {{layers}};
  std::vector<std::vector<int64_t>> out;
  for (int64_t first = 1; first <= layers - (parts - 1); ++first) {
    for (std::vector<int64_t>& rest : Compositions(layers - first, parts - 1)) {
      rest.insert(rest.begin(), first);
      out.push_back(std::move(rest));
    }
  }
  return out;
}

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_COMPOSITIONS_FOR_TEST_H_
