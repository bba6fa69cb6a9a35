// The proof behind each reported candidate (search.h's verifier): its recipe, the
// laid-out global program and the whole pass pipeline, checked on the cpu mesh against
// the one-device program on a shrunken copy with the same divisibility (verify.h).
#ifndef COMMIR_SEARCH_RECIPE_VERIFIER_H_
#define COMMIR_SEARCH_RECIPE_VERIFIER_H_

#include <functional>
#include <string>

#include "search/search.h"

namespace commir::search {

// A verifier for Search(). A recipe that cannot be checked (a program that cannot be
// shrunk, say) is kFailed with the reason.
std::function<Verdict(const std::string& function, const Candidate&)> CpuMeshVerifier();

}  // namespace commir::search

#endif  // COMMIR_SEARCH_RECIPE_VERIFIER_H_
