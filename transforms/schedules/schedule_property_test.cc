// Property test of the communication schedules: random global programs (the
// partitioner's generator, biased towards the patterns the schedules rewrite: matmuls
// of sharded activations that lower to all_gather -> matmul or matmul ->
// reduce_scatter, and attention with q, k and v split along the sequence) on meshes of
// 2, 4 and 8 devices and a 2-D mesh are lowered with the default pipeline; then every
// schedule pass, with several option values, and pipelines combining them, is applied
// to a fresh copy of the lowered program. For each:
//  - the IR verifies after every pass (PassManager's verify-each);
//  - the scheduled program's run on the cpu backend equals the one-device run of the
//    global program at the default tolerances (commir-run --check);
//  - applying the same pipeline again to the scheduled program gives valid IR whose run
//    equals the first (the passes are safe to repeat);
//  - the printed module parses back and prints the same text.
// A pipeline-collective-matmul whose chunk count does not divide a block must fail with
// that error and leave the module unchanged. The generator is seeded; a failure names
// the seed, the pipeline and the program.
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "runtime/tensor.h"
#include "transforms/sharding/random_program.h"
#include "testing/spmd_check.h"

namespace commir::schedules {
namespace {

using runtime::Tensor;

// Seeds kFirstSeed, kFirstSeed + 1, ... per mesh (MeshCase::programs of them: fewer on
// 8 devices, whose runs cost most). To replay or explore, set COMMIR_PROPERTY_FIRST_SEED
// and COMMIR_PROPERTY_PROGRAMS (per mesh; bazel test --test_env=...).
constexpr uint64_t kFirstSeed = 5000;

int64_t EnvOr(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  int64_t parsed = 0;
  return value != nullptr && absl::SimpleAtoi(value, &parsed) ? parsed : fallback;
}

// Every schedule with several option values, and combinations.
const std::vector<std::string>& Pipelines() {
  static const auto* pipelines = new std::vector<std::string>{
      "pipeline-collective-matmul",
      "pipeline-collective-matmul{chunks=2,streams=1}",
      "pipeline-collective-matmul{chunks=4,streams=3}",
      "ring-collective-matmul{direction=uni}",
      "ring-collective-matmul{direction=bi}",
      "ring-attention",
      "ring-attention{zigzag=true}",
      "ulysses-attention",
      "ring-attention{zigzag=true},ring-collective-matmul{direction=bi}",
      "ulysses-attention,pipeline-collective-matmul{chunks=2,streams=2}",
      "ring-collective-matmul,pipeline-collective-matmul{chunks=2}",
  };
  return *pipelines;
}

struct MeshCase {
  std::string name;
  std::vector<std::pair<std::string, int64_t>> axes;
  int programs = 0;
  // Pipelines naming this mesh's axes (axes=), drawn after Pipelines().
  std::vector<std::string> axis_pipelines = {};

  std::vector<std::string> AllPipelines() const {
    std::vector<std::string> all = Pipelines();
    all.insert(all.end(), axis_pipelines.begin(), axis_pipelines.end());
    return all;
  }
};

// The 2-D attention schedules (USP's hybrid, the double ring) and a 1-D ring over one
// axis of the 2-D mesh.
const std::vector<std::string> kAxisPipelines2D = {
    "ulysses-attention{axes=b},ring-attention{axes=a}",
    "ring-attention{axes=a},ring-attention{axes=b}",
    "ring-attention{axes=a,zigzag=true}",
};

// "" if every result of `actual` is within the default tolerance of `expected`, else
// the comparison report.
std::string Compare(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected) {
  if (actual.size() != expected.size()) {
    return absl::StrCat(actual.size(), " results, expected ", expected.size(), "\n");
  }
  std::string report;
  return commir::testing::CompareResults(actual, expected, &report) ? "" : report;
}

absl::StatusOr<std::vector<Tensor>> RunSpmd(const Module& module,
                                            const std::vector<Tensor>& inputs) {
  const Function* f = module.FindFunction("f");
  if (f == nullptr) return absl::NotFoundError("no @f");
  return commir::testing::RunWithGlobalInputs(*f, inputs);
}

// How often each pass changed a program, and the chunk-count refusals: the test is only
// as good as the rewrites it sees.
struct Tally {
  std::map<std::string, int> rewritten;
  int refused_chunks = 0;
  int changed_again = 0;  // second applications that rewrote something more
  int checked = 0;
};

class ScheduleProperty : public ::testing::TestWithParam<MeshCase> {};

TEST_P(ScheduleProperty, SchedulesMatchTheReference) {
  const MeshCase& mesh = GetParam();
  sharding::RandomProgramOptions options;
  options.mesh = mesh.axes;
  options.p_schedule_pattern = 0.6;
  const uint64_t first = static_cast<uint64_t>(EnvOr("COMMIR_PROPERTY_FIRST_SEED", kFirstSeed));
  const int programs = static_cast<int>(EnvOr("COMMIR_PROPERTY_PROGRAMS", mesh.programs));
  Tally tally;
  for (int i = 0; i < programs; ++i) {
    const uint64_t seed = first + static_cast<uint64_t>(i);
    const std::string program = sharding::GenerateRandomProgram(seed, options);
    SCOPED_TRACE(absl::StrCat("seed ", seed, " on ", mesh.name, "\nprogram:\n", program));

    // The reference: the global function on one device.
    absl::StatusOr<std::unique_ptr<Module>> global = ParseModuleOrError(program, "input.commir");
    ASSERT_TRUE(global.ok()) << global.status();
    const Function* global_f = (*global)->FindFunction("f");
    ASSERT_NE(global_f, nullptr);
    const std::vector<Tensor> inputs = commir::testing::RandomGlobalInputs(*global_f, seed);
    absl::StatusOr<std::vector<Tensor>> expected = commir::testing::RunWithGlobalInputs(*global_f, inputs);
    ASSERT_TRUE(expected.ok()) << expected.status();

    absl::StatusOr<std::unique_ptr<Module>> lowered_module =
        ParseModuleOrError(program, "input.commir");
    ASSERT_TRUE(lowered_module.ok()) << lowered_module.status();
    absl::Status lowered_status = commir::testing::RunDefaultSpmdPipeline(**lowered_module);
    ASSERT_TRUE(lowered_status.ok()) << lowered_status;
    const std::string lowered = PrintModule(**lowered_module);

    for (const std::string& pipeline : mesh.AllPipelines()) {
      SCOPED_TRACE(absl::StrCat("pipeline ", pipeline, "\nlowered:\n", lowered));
      absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(lowered, "lowered.commir");
      ASSERT_TRUE(module.ok()) << module.status();
      absl::Status applied = commir::testing::ApplyPassPipeline(pipeline, **module);
      if (!applied.ok() && absl::StrContains(applied.message(), "does not divide") &&
          absl::StrContains(pipeline, "pipeline-collective-matmul")) {
        // A chunk count the blocks cannot honour: an error at the collective, and the
        // failing pass changes nothing. (In a combined pipeline, earlier passes ran.)
        if (pipeline.find(',') == std::string::npos) {
          EXPECT_EQ(PrintModule(**module), lowered) << "a refused pipeline changed the module";
        }
        ++tally.refused_chunks;
        continue;
      }
      ASSERT_TRUE(applied.ok()) << applied;
      const std::string scheduled = PrintModule(**module);
      if (scheduled != lowered) ++tally.rewritten[pipeline];

      absl::StatusOr<std::vector<Tensor>> actual = RunSpmd(**module, inputs);
      ASSERT_TRUE(actual.ok()) << actual.status() << "\nscheduled:\n" << scheduled;
      std::string mismatch = Compare(*actual, *expected);
      ASSERT_EQ(mismatch, "") << "scheduled:\n" << scheduled;

      // The printed schedule parses back to the same module.
      absl::StatusOr<std::unique_ptr<Module>> reparsed = ParseModuleOrError(scheduled, "scheduled.commir");
      ASSERT_TRUE(reparsed.ok()) << reparsed.status() << "\nscheduled:\n" << scheduled;
      ASSERT_TRUE(VerifyModule(**reparsed).ok()) << "scheduled:\n" << scheduled;
      ASSERT_EQ(PrintModule(**reparsed), scheduled);

      // Again on its own output: valid IR, the same numbers.
      absl::Status again = commir::testing::ApplyPassPipeline(pipeline, **reparsed);
      ASSERT_TRUE(again.ok()) << again << "\nscheduled:\n" << scheduled;
      const std::string twice = PrintModule(**reparsed);
      if (twice != scheduled) {
        ++tally.changed_again;
        absl::StatusOr<std::vector<Tensor>> actual_twice = RunSpmd(**reparsed, inputs);
        ASSERT_TRUE(actual_twice.ok()) << actual_twice.status() << "\ntwice:\n" << twice;
        ASSERT_EQ(Compare(*actual_twice, *actual), "") << "twice:\n" << twice;
        ASSERT_EQ(Compare(*actual_twice, *expected), "") << "twice:\n" << twice;
        absl::StatusOr<std::unique_ptr<Module>> reparsed_twice =
            ParseModuleOrError(twice, "twice.commir");
        ASSERT_TRUE(reparsed_twice.ok()) << reparsed_twice.status() << "\ntwice:\n" << twice;
        ASSERT_EQ(PrintModule(**reparsed_twice), twice);
      }
      ++tally.checked;
    }
  }
  std::cout << mesh.name << ": " << tally.checked << " schedules of " << programs
            << " programs checked, " << tally.refused_chunks << " chunk counts refused, "
            << tally.changed_again << " changed again by a second application\n";
  for (const std::string& pipeline : mesh.AllPipelines()) {
    std::cout << "  " << pipeline << ": rewrote " << tally.rewritten[pipeline] << "\n";
  }
  // Every schedule must have found something to rewrite on this mesh, or the test
  // checks nothing for it.
  for (const std::string& pipeline : mesh.AllPipelines()) {
    EXPECT_GT(tally.rewritten[pipeline], 0) << pipeline << " rewrote no program on " << mesh.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, ScheduleProperty,
    ::testing::Values(MeshCase{"x2", {{"x", 2}}, 80}, MeshCase{"x4", {{"x", 4}}, 60},
                      MeshCase{"x8", {{"x", 8}}, 30}, MeshCase{"a2b4", {{"a", 2}, {"b", 4}}, 30, kAxisPipelines2D}),
    [](const ::testing::TestParamInfo<MeshCase>& info) { return info.param.name; });

}  // namespace
}  // namespace commir::schedules
