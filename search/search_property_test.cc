// Property: every candidate the search reports matches the one-device program on the
// cpu mesh. Random global programs (the partitioner's property-test generator, with the
// patterns the schedules rewrite) are searched on 2 and 4 devices; the search keeps
// none of the generator's layouts except as pins, and proves its top candidates.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "search/recipe_verifier.h"
#include "search/search.h"
#include "sim/hardware.h"
#include "transforms/sharding/random_program.h"

namespace commir::search {
namespace {

TEST(SearchProperty, EveryReportedCandidateVerifies) {
  int searched = 0, candidates = 0;
  for (uint64_t seed = 0; seed < 32; ++seed) {
    sharding::RandomProgramOptions generate;
    generate.p_schedule_pattern = 0.5;
    std::string text = sharding::GenerateRandomProgram(seed, generate);
    absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "random.commir");
    ASSERT_TRUE(module.ok()) << module.status();
    SearchOptions options;
    options.devices = seed % 2 == 0 ? 2 : 4;
    options.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
    options.top = 6;
    options.verify = VerifyMode::kTop;
    options.verifier = CpuMeshVerifier();
    absl::StatusOr<SearchResult> result = Search(**module, options);
    if (!result.ok()) {
      // Only "nothing splits" is an acceptable refusal (odd sizes, or pins the device
      // count cannot meet).
      EXPECT_NE(result.status().message().find("no layout of @f splits"), std::string::npos)
          << "seed " << seed << ": " << result.status() << "\n" << text;
      continue;
    }
    ++searched;
    for (const Candidate& c : result->ranked) {
      ++candidates;
      EXPECT_EQ(c.verdict.state, Verdict::State::kMatched)
          << "seed " << seed << ", rank " << c.rank << ": " << c.layout.description << " | "
          << c.PipelineText() << "\n" << c.verdict.detail << "\n" << c.GlobalText();
    }
  }
  // The generator's programs are mostly searchable.
  EXPECT_GE(searched, 8);
  EXPECT_GE(candidates, 35);
}

}  // namespace
}  // namespace commir::search
