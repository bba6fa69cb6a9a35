#include "search/recipe_verifier.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "search/verify.h"

namespace commir::search {

std::function<Verdict(const std::string& function, const Candidate&)> CpuMeshVerifier() {
  return [](const std::string& function, const Candidate& c) {
    VerifyOptions options;
    options.pipeline_is_complete = true;
    // Shrinking keeps each dimension's divisibility by the device count: on 64 devices a
    // GQA attention keeps 32 heads x 64 x 64 per value. The cpu mesh runs that in well
    // under a second.
    options.max_elements_per_value = 1 << 20;
    if (c.global_program == nullptr) {
      return Verdict{Verdict::State::kFailed, "the candidate has no global program"};
    }
    absl::StatusOr<VerifyOutcome> outcome =
        VerifyRecipe(*c.global_program, function, c.PipelineText(), options);
    if (!outcome.ok()) return Verdict{Verdict::State::kFailed, std::string(outcome.status().message())};
    std::string detail = absl::StrCat("checked at sizes ", outcome->sizes, ":\n", outcome->report);
    return Verdict{outcome->matched ? Verdict::State::kMatched : Verdict::State::kMismatched,
                   std::move(detail)};
  };
}

}  // namespace commir::search
