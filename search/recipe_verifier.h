// The proof behind each reported candidate: its recipe (laid-out global program and pass
// pipeline) run on the cpu mesh against the one-device program (search.h's verifier).
#ifndef COMMIR_SEARCH_RECIPE_VERIFIER_H_
#define COMMIR_SEARCH_RECIPE_VERIFIER_H_

#include <cstdint>
#include <functional>

#include "search/search.h"

namespace commir::search {

// A verifier for Search(): checks each candidate on the cpu backend.
std::function<Verdict(const Candidate&)> CpuMeshVerifier(int64_t devices);

}  // namespace commir::search

#endif  // COMMIR_SEARCH_RECIPE_VERIFIER_H_
