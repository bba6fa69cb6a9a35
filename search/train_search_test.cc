// `--train`: the search of the forward with its backward, and what a forward-only search
// says training would add. Gradient traffic is checked against closed forms of ring
// collectives: an all_reduce of B bytes over n devices sends 2 (n - 1) / n x B per
// device (the NCCL ring; schedule-report counts it so).
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "search/recipe_verifier.h"
#include "search/search.h"
#include "search/search_report.h"
#include "search/test_programs.h"
#include "sim/hardware.h"

namespace commir::search {
namespace {

constexpr double kF32 = 4;
constexpr double kActivationBytes = 64 * 32 * kF32;  // x, d, y and their gradients
constexpr double kWeightBytes = (32 * 128 + 128 * 32) * kF32;

double RingAllReduceBytes(double bytes, int64_t n) { return 2.0 * (n - 1) / n * bytes; }

std::unique_ptr<Module> Parse(const std::string& text) {
  absl::StatusOr<std::unique_ptr<Module>> m = ParseModuleOrError(text, "test.commir");
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

SearchOptions Options(int64_t devices, bool train) {
  SearchOptions options;
  options.devices = devices;
  options.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
  options.predict.gpus_per_node = options.predict.hardware.gpus_per_node;
  options.top = 0;
  options.verify = VerifyMode::kNone;
  options.train = train;
  return options;
}

bool Split(Type type) { return type.is_tensor() && type.has_sharding(); }

TEST(TrainSearch, TheBestTrainingPlanShardsTheWeightsAndItsTrafficIsMegatrons) {
  std::unique_ptr<Module> m = Parse(kResidualMlp);
  SearchOptions options = Options(4, /*train=*/true);
  options.top = 2;
  options.verify = VerifyMode::kTop;
  options.verifier = CpuMeshVerifier();
  absl::StatusOr<SearchResult> r = Search(*m, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->trained_function, "mlp_grad");
  EXPECT_THAT(FormatSummary(*r, ReportContext{"h100-sxm", 4, 8}),
              ::testing::HasSubstr("searched training @mlp (forward and backward @mlp_grad)"));
  EXPECT_FALSE(r->training_addition.has_value());
  ASSERT_FALSE(r->ranked.empty());
  const Candidate& best = r->ranked.front();
  const Function& f = *best.global_program->FindFunction("mlp");
  // Both weights split (Megatron: w1 by columns, w2 by rows), the activations whole.
  EXPECT_EQ(best.layout.mesh.ToString(), "4");
  EXPECT_TRUE(Split(f.arg_types()[1])) << f.arg_types()[1].ToString();
  EXPECT_TRUE(Split(f.arg_types()[2])) << f.arg_types()[2].ToString();
  EXPECT_FALSE(Split(f.arg_types()[0])) << f.arg_types()[0].ToString();
  // Megatron's MLP communicates one all_reduce of the activation in the forward (after
  // the row-split matmul) and one in the backward (the input's gradient after the
  // column-split one): Shoeybi et al. 2019, section 3, figure 3 (f and g).
  EXPECT_DOUBLE_EQ(best.bytes_per_device, 2 * RingAllReduceBytes(kActivationBytes, 4));
  EXPECT_DOUBLE_EQ(best.time_s, best.forward_time_s + best.backward_time_s);
  EXPECT_GT(best.backward_time_s, 0);
  // The training step holds the gradients too: more than the forward's weights and
  // activations alone.
  EXPECT_GT(best.peak_memory_bytes, 0);
  // The training step (@mlp_grad) was checked on the cpu mesh against one device.
  for (const Candidate& c : r->ranked) {
    EXPECT_EQ(c.verdict.state, Verdict::State::kMatched) << c.PipelineText() << "\n" << c.verdict.detail;
  }
  // Ranked by the step's time.
  for (size_t i = 1; i < r->ranked.size(); ++i) EXPECT_LE(r->ranked[i - 1].time_s, r->ranked[i].time_s);
}

TEST(TrainSearch, DataParallelPaysTheWeightGradientAllReduce) {
  std::unique_ptr<Module> m = Parse(kResidualMlp);
  absl::StatusOr<SearchResult> r = Search(*m, Options(4, /*train=*/true));
  ASSERT_TRUE(r.ok()) << r.status();
  bool found = false;
  for (const Candidate& c : r->ranked) {
    if (c.layout.mesh.ToString() != "4" || c.layout.description != "x.0@a") continue;
    found = true;
    // The batch split, both weights replicated: their gradients are summed over the 4
    // devices, and nothing else moves.
    EXPECT_DOUBLE_EQ(c.bytes_per_device, RingAllReduceBytes(kWeightBytes, 4));
    EXPECT_GT(c.peak_memory_bytes, kWeightBytes * 2);  // the weights and their gradients
  }
  EXPECT_TRUE(found);
}

TEST(TrainSearch, AForwardOnlySearchSaysWhatTrainingWouldAdd) {
  std::unique_ptr<Module> m = Parse(kResidualMlp);
  absl::StatusOr<SearchResult> r = Search(*m, Options(4, /*train=*/false));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->trained_function.empty());
  EXPECT_GT(r->stats.renamed_meshes, 0);  // 2x2's layouts with a and b swapped
  ASSERT_FALSE(r->ranked.empty());
  // Forward only, data parallelism communicates nothing and wins.
  EXPECT_EQ(r->ranked.front().layout.description, "x.0@a");
  EXPECT_EQ(r->ranked.front().bytes_per_device, 0);
  ASSERT_TRUE(r->training_addition.has_value());
  const TrainingAddition& t = *r->training_addition;
  EXPECT_THAT(t.replicated_arguments, ::testing::ElementsAre("w1", "w2"));
  EXPECT_THAT(t.axes, ::testing::ElementsAre("a"));
  EXPECT_DOUBLE_EQ(t.added_bytes_per_device, RingAllReduceBytes(kWeightBytes, 4));
  EXPECT_GT(t.added_communication_s, 0);
  EXPECT_GT(t.backward_s, t.added_communication_s / 2);
  // The summary line says it searched the forward only, and what training would add.
  const std::string summary = FormatSummary(*r, ReportContext{"h100-sxm", 4, 8});
  EXPECT_THAT(summary, ::testing::HasSubstr("searched @mlp forward only on 4 devices"));
  EXPECT_THAT(summary, ::testing::HasSubstr(
                           "the best plan replicates %w1, %w2, and training would add 48.0 KiB "
                           "per device of gradient all_reduce over a ("));
  // The same figures as the training search's data-parallel candidate.
  absl::StatusOr<SearchResult> train = Search(*m, Options(4, /*train=*/true));
  ASSERT_TRUE(train.ok());
  for (const Candidate& c : train->ranked) {
    if (c.layout.mesh.ToString() == "4" && c.layout.description == "x.0@a") {
      EXPECT_NEAR(c.backward_time_s, t.backward_s, 1e-12);
    }
  }
}

TEST(TrainSearch, AFunctionWithoutABackwardIsRefusedWithItsLocation) {
  std::unique_ptr<Module> m = Parse(R"(mesh @m(d=1)
func @f(%x: f32[64, 32]) -> f32[64, 32] {
  %i = convert(%x) : i32[64, 32]
  %y = convert(%i) : f32[64, 32]
  return %y
}
)");
  absl::StatusOr<SearchResult> r = Search(*m, Options(4, /*train=*/true));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("convert"));
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("3:8"));
  // Forward only, the same function is searched.
  EXPECT_TRUE(Search(*m, Options(4, /*train=*/false)).ok());
}

}  // namespace
}  // namespace commir::search
