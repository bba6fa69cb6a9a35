// Property test of the partitioner: random well-typed global programs (random ops,
// shapes, shardings, annotations and result layouts on random 1-D and 2-D meshes) are
// lowered and their multi-device run on the cpu backend is compared with the one-device
// run of the global function, with the default tolerances of commir-run --check.
//
// Each program is checked twice: with the default pipeline (propagate-sharding first)
// and with lower-to-spmd alone, which then takes the layouts exactly as the parser left
// them. The generator is seeded; a failure prints the seed and the program text.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "transforms/sharding/random_program.h"
#include "testing/spmd_check.h"

namespace commir::sharding {
namespace {

// The programs checked: seeds kFirstSeed, kFirstSeed + 1, ... To replay or explore, set
// COMMIR_PROPERTY_FIRST_SEED and COMMIR_PROPERTY_PROGRAMS in the environment
// (bazel test --test_env=...).
constexpr uint64_t kFirstSeed = 1000;
constexpr int kPrograms = 400;

int64_t EnvOr(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  int64_t parsed = 0;
  return value != nullptr && absl::SimpleAtoi(value, &parsed) ? parsed : fallback;
}

TEST(PartitionerProperty, RandomProgramsMatchTheReference) {
  auto start = std::chrono::steady_clock::now();
  int checked = 0;
  // How often each spmd op appears in the lowered programs: the test should exercise
  // every kind of reshard (and select, the one three-operand elementwise op).
  std::vector<std::pair<std::string, int>> op_counts = {
      {"all_gather", 0}, {"reduce_scatter", 0}, {"all_reduce", 0},
      {"all_to_all", 0}, {"dynamic_slice", 0},  {"rank", 0}, {"select", 0}};
  const uint64_t first = static_cast<uint64_t>(EnvOr("COMMIR_PROPERTY_FIRST_SEED", kFirstSeed));
  const int programs = static_cast<int>(EnvOr("COMMIR_PROPERTY_PROGRAMS", kPrograms));
  for (int i = 0; i < programs; ++i) {
    uint64_t seed = first + static_cast<uint64_t>(i);
    std::string program = GenerateRandomProgram(seed);
    for (bool propagate : {true, false}) {
      absl::StatusOr<testing::SpmdCheck> check = testing::CheckPartitioned(program, "f", seed, propagate);
      ASSERT_TRUE(check.ok()) << "seed " << seed << (propagate ? "" : " (lower-to-spmd only)")
                              << ": " << check.status().message() << "\nprogram:\n"
                              << program;
      ASSERT_TRUE(check->pass) << "seed " << seed << (propagate ? "" : " (lower-to-spmd only)")
                               << ":\n"
                               << check->report << "program:\n"
                               << program << "lowered:\n"
                               << check->lowered;
      ++checked;
      for (auto& [op, count] : op_counts) {
        for (size_t at = check->lowered.find(absl::StrCat(" ", op, "(")); at != std::string::npos;
             at = check->lowered.find(absl::StrCat(" ", op, "("), at + 1)) {
          ++count;
        }
      }
    }
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << checked << " lowerings of " << programs << " random programs checked in "
            << seconds << " s\nops in the lowered programs:";
  for (const auto& [op, count] : op_counts) std::cout << " " << op << " " << count;
  std::cout << "\n";
}

}  // namespace
}  // namespace commir::sharding
