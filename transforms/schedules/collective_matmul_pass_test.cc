// The collective-matmul passes on spmd input: what they leave alone, how they fail, and
// the schedule report's figures.
#include <string>

#include "absl/strings/str_cat.h"
#include "commir/diagnostics.h"
#include "commir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transforms/schedules/pipeline_collective_matmul.h"
#include "transforms/schedules/ring_collective_matmul.h"
#include "transforms/schedules/schedule_report.h"
#include "transforms/test_util.h"

namespace commir::schedules {
namespace {

using ::testing::HasSubstr;

constexpr char kAgMatmul[] = R"(mesh @m(tp=8)

spmd func @f(%a: f32[1024@tp, 256], %b: f32[256, 512@tp]) -> f32[1024, 512@tp] on @m {
  %a_ag = all_gather(%a) {axis = tp, dim = 0} : f32[1024, 256]
  %c = matmul(%a_ag, %b) : f32[1024, 64]
  return %c
}
)";

TEST(PipelineCollectiveMatmulTest, ChunksThatDoNotDivideAreAnErrorAtTheCollective) {
  std::unique_ptr<Module> module = testing::ParseForTest(kAgMatmul);
  ASSERT_NE(module, nullptr);
  std::string before = PrintModule(*module);
  DiagnosticEngine diagnostics;
  absl::StatusOr<int> n = PipelineCollectiveMatmul(*module, 3, 2, &diagnostics);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(n.status().message(), HasSubstr("chunks=3 does not divide the 128 rows"));
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics.Sorted()[0].loc.line, 4);  // the all_gather
  EXPECT_EQ(PrintModule(*module), before);         // nothing changed
}

// Regression (schedule_property_test): with streams=1 the chunk collectives carried no
// stream, so running the pass again took each chunk's all_gather / reduce_scatter for a
// new pair and split it again, or failed when chunks did not divide the chunk
// ("chunks=2 does not divide the 1 rows ..."). They now say `stream = 0` and are left
// alone, by this pass and by ring-collective-matmul.
TEST(PipelineCollectiveMatmulTest, OneStreamScheduleIsLeftAloneWhenRunAgain) {
  constexpr char kBoth[] = R"(mesh @m(tp=2)

spmd func @f(%a: f32[4@tp, 8], %b: f32[8, 4@tp], %x: f32[8, 4@tp], %w: f32[4@tp, 6]) -> (f32[4, 4@tp], f32[8@tp, 6]) on @m {
  %a_ag = all_gather(%a) {axis = tp, dim = 0} : f32[4, 8]
  %c = matmul(%a_ag, %b) : f32[4, 2]
  %p = matmul(%x, %w) : f32[8, 6]
  %y = reduce_scatter(%p) {axis = tp, dim = 0} : f32[4, 6]
  return %c, %y
}
)";
  std::unique_ptr<Module> module = testing::ParseForTest(kBoth);
  ASSERT_NE(module, nullptr);
  absl::StatusOr<int> first = PipelineCollectiveMatmul(*module, 2, 1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, 2);
  const std::string scheduled = PrintModule(*module);
  EXPECT_THAT(scheduled, HasSubstr("all_gather(%a_chunk) {axis = tp, dim = 0, stream = 0}"));
  EXPECT_THAT(scheduled, HasSubstr("reduce_scatter(%p_chunk) {axis = tp, dim = 0, stream = 0}"));
  // Only the collectives name the stream: no `rem`, nothing else on a stream.
  EXPECT_THAT(scheduled, ::testing::Not(HasSubstr("rem(")));
  int streams = 0;
  for (size_t at = scheduled.find("stream"); at != std::string::npos;
       at = scheduled.find("stream", at + 1)) {
    ++streams;
  }
  EXPECT_EQ(streams, 2) << scheduled;

  absl::StatusOr<int> again = PipelineCollectiveMatmul(*module, 2, 1);
  ASSERT_TRUE(again.ok()) << again.status();  // was: chunks=2 does not divide the 1 rows
  EXPECT_EQ(*again, 0);
  absl::StatusOr<int> ring = RingCollectiveMatmul(*module, RingDirection::kUni);
  ASSERT_TRUE(ring.ok()) << ring.status();
  EXPECT_EQ(*ring, 0);
  EXPECT_EQ(PrintModule(*module), scheduled);
}

TEST(PipelineCollectiveMatmulTest, InvalidOptionsAreErrors) {
  std::unique_ptr<Module> module = testing::ParseForTest(kAgMatmul);
  ASSERT_NE(module, nullptr);
  std::string before = PrintModule(*module);
  absl::Status chunks = PipelineCollectiveMatmul(*module, 0, 2).status();
  EXPECT_EQ(chunks.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(chunks.message(), "option 'chunks' must be at least 1, got 0");
  absl::Status streams = PipelineCollectiveMatmul(*module, 2, -1).status();
  EXPECT_EQ(streams.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(streams.message(), "option 'streams' must be at least 1, got -1");
  EXPECT_EQ(PrintModule(*module), before);
}

TEST(PipelineCollectiveMatmulTest, OneChunkLeavesTheProgramAlone) {
  std::unique_ptr<Module> module = testing::ParseForTest(kAgMatmul);
  ASSERT_NE(module, nullptr);
  std::string before = PrintModule(*module);
  absl::StatusOr<int> n = PipelineCollectiveMatmul(*module, 1, 2);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);
  EXPECT_EQ(PrintModule(*module), before);
}

// Patterns the passes do not rewrite: a gather along the contracted dimension, a
// matmul whose result is used besides the reduce_scatter, a gather over one device, a
// collective already on a stream.
constexpr char kUnmatched[] = R"(mesh @m(tp=4, one=1)

spmd func @k_gather(%a: f32[64, 32], %b: f32[32@tp, 16]) -> f32[64, 16] on @m {
  %b_ag = all_gather(%b) {axis = tp, dim = 0} : f32[32, 16]
  %c = matmul(%a, %b_ag) : f32[64, 16]
  return %c
}

spmd func @shared_product(%x: f32[64, 32], %w: f32[32, 16]) -> (f32[64@tp, 16], f32[64, 16] partial(tp)) on @m {
  %y = matmul(%x, %w) : f32[64, 16]
  %y_rs = reduce_scatter(%y) {axis = tp, dim = 0} : f32[16, 16]
  return %y_rs, %y
}

spmd func @one_device(%a: f32[64, 32], %b: f32[32, 16]) -> f32[64, 16] on @m {
  %a_ag = all_gather(%a) {axis = one, dim = 0} : f32[64, 32]
  %c = matmul(%a_ag, %b) : f32[64, 16]
  return %c
}

spmd func @on_stream(%a: f32[64@tp, 32], %b: f32[32, 16]) -> f32[64, 16] on @m {
  %a_ag = all_gather(%a) {axis = tp, dim = 0, stream = 1} : f32[64, 32]
  %c = matmul(%a_ag, %b) : f32[64, 16]
  return %c
}
)";

TEST(CollectiveMatmulTest, UnmatchedPatternsAreLeftAlone) {
  for (int pass = 0; pass < 3; ++pass) {
    SCOPED_TRACE(pass);
    std::unique_ptr<Module> module = testing::ParseForTest(kUnmatched);
    ASSERT_NE(module, nullptr);
    std::string before = PrintModule(*module);
    absl::StatusOr<int> n = pass == 0   ? PipelineCollectiveMatmul(*module, 2, 2)
                            : pass == 1 ? RingCollectiveMatmul(*module, RingDirection::kUni)
                                        : RingCollectiveMatmul(*module, RingDirection::kBi);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(*n, 0);
    EXPECT_EQ(PrintModule(*module), before);
  }
}

ScheduleStats StatsAfter(absl::string_view text, const std::function<void(Module&)>& schedule) {
  std::unique_ptr<Module> module = testing::ParseForTest(text);
  if (module == nullptr) return {};
  schedule(*module);
  return ComputeScheduleStats(*module->FindFunction("f"));
}

// The figures of the shared ag_matmul example (8 devices, a: 128 x 256 f32 per device,
// c: 1024 x 64 per device): block = 128 KiB, gathered a = 1 MiB, c block = 32 KiB.
TEST(ScheduleReportTest, AgMatmulFigures) {
  constexpr double kBlock = 128 * 256 * 4;
  constexpr double kPart = 128 * 64 * 4;
  ScheduleStats plain = StatsAfter(kAgMatmul, [](Module&) {});
  EXPECT_EQ(plain.collectives, 1);
  EXPECT_EQ(plain.gemms, 1);
  EXPECT_DOUBLE_EQ(plain.bytes_per_device, 7 * kBlock);
  EXPECT_DOUBLE_EQ(plain.peak_extra_bytes, 8 * kBlock);  // the gathered a

  ScheduleStats uni = StatsAfter(
      kAgMatmul, [](Module& m) { ASSERT_TRUE(RingCollectiveMatmul(m, RingDirection::kUni).ok()); });
  EXPECT_EQ(uni.collectives, 0);
  EXPECT_EQ(uni.shifts, 7);
  EXPECT_EQ(uni.ring_steps, 7);
  EXPECT_DOUBLE_EQ(uni.ring_bytes, 7 * kBlock);
  EXPECT_EQ(uni.gemms, 8);
  EXPECT_DOUBLE_EQ(uni.bytes_per_device, 7 * kBlock);
  // The block held, the block arriving and one block product (the output accumulates
  // in place in the result buffer).
  EXPECT_DOUBLE_EQ(uni.peak_extra_bytes, 2 * kBlock + kPart);

  ScheduleStats bi = StatsAfter(
      kAgMatmul, [](Module& m) { ASSERT_TRUE(RingCollectiveMatmul(m, RingDirection::kBi).ok()); });
  // Half-blocks both ways: 7 transfers of half a block on each stream, so the busiest
  // stream carries 3.5 blocks instead of 7; two half-block GEMMs per step.
  EXPECT_EQ(bi.shifts, 14);
  EXPECT_EQ(bi.ring_steps, 7);
  EXPECT_DOUBLE_EQ(bi.ring_bytes, 3.5 * kBlock);  // half of uni's
  EXPECT_EQ(bi.gemms, 16);
  EXPECT_DOUBLE_EQ(bi.bytes_per_device, 7 * kBlock);
  // The two halves held, the two arriving, and one half-block product.
  EXPECT_DOUBLE_EQ(bi.peak_extra_bytes, 2 * kBlock + kPart / 2);

  ScheduleStats pipelined =
      StatsAfter(kAgMatmul, [](Module& m) { ASSERT_TRUE(PipelineCollectiveMatmul(m, 4, 2).ok()); });
  EXPECT_EQ(pipelined.collectives, 4);
  EXPECT_EQ(pipelined.gemms, 4);
  EXPECT_DOUBLE_EQ(pipelined.bytes_per_device, 7 * kBlock);
  // A chunk's gathered rows (2 blocks) and their product.
  EXPECT_DOUBLE_EQ(pipelined.peak_extra_bytes, 2 * kBlock + 2 * kPart);
}

// A block with an odd number of rows cannot be halved: bi sends whole blocks both ways
// instead, ceil((n-1)/2) rounds with the last one forward only when n is even.
TEST(ScheduleReportTest, OddBlocksGoBothWaysWhole) {
  constexpr char kOdd[] = R"(mesh @m(tp=8)

spmd func @f(%a: f32[24@tp, 16], %b: f32[16, 8], %w: f32[8, 16]) -> f32[24@tp, 16] on @m {
  %a_ag = all_gather(%a) {axis = tp, dim = 0} : f32[24, 16]
  %c = matmul(%a_ag, %b) : f32[24, 8]
  %d = matmul(%c, %w) : f32[24, 16]
  %y = reduce_scatter(%d) {axis = tp, dim = 0} : f32[3, 16]
  return %y
}
)";
  ScheduleStats bi = StatsAfter(kOdd, [](Module& m) {
    ASSERT_TRUE(RingCollectiveMatmul(m, RingDirection::kBi, ScatterForm::kRing).ok());
  });
  EXPECT_EQ(bi.collectives, 0);
  EXPECT_EQ(bi.shifts, 14);     // 7 blocks for the gather, 7 accumulators for the scatter
  EXPECT_EQ(bi.ring_steps, 8);  // 4 rounds each
  // The owner form's scatter sends its 7 addends straight to their owners, all on stream
  // 1, after the gather's 4 forward rounds there: 11 sequential steps on that stream.
  ScheduleStats owner = StatsAfter(
      kOdd, [](Module& m) { ASSERT_TRUE(RingCollectiveMatmul(m, RingDirection::kBi).ok()); });
  EXPECT_EQ(owner.collectives, 0);
  EXPECT_EQ(owner.shifts, 14);
  EXPECT_EQ(owner.ring_steps, 11);
}

TEST(ScheduleReportTest, FormatsOneLinePerFunction) {
  std::unique_ptr<Module> module = testing::ParseForTest(kAgMatmul);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(FormatScheduleReport(*module),
            "// schedule-report @f: collectives 1  shifts 0  ring-steps 0  ring-bytes 0  "
            "gemms 1  attentions 0  bytes/device 917504  peak-extra/device 1048576\n");
}

}  // namespace
}  // namespace commir::schedules
