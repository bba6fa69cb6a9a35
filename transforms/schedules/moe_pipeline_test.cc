// moe-pipeline on an expert-parallel top-2 layer (the partitioner's ep lowering), forward
// and gradient, on the cpu mesh against the one-device program: ep = 2, 4, 8 and
// ep x tp = 2 x 2, several chunk counts. The one-device program routes the same groups,
// so the same choices are dropped on one device and in every chunked schedule.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/spmd_check.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/schedules/moe_pipeline.h"
#include "transforms/test_util.h"

namespace commir::schedules {
namespace {

struct EpCase {
  const char* mesh;
  int groups;       // routing groups: the ep size
  const char* ffn;     // the expert FFN width's layout
  const char* buffer;  // the dispatched buffer's layout, when written
};

constexpr EpCase kCases[] = {
    {"ep=2", 2, "", ""},
    {"ep=4", 4, "", ""},
    {"ep=8", 8, "", ""},
    {"ep=2, tp=2", 2, "@tp", " : f32[8@ep, 16, 8]"},
};

// 128 tokens of hidden 8, top-2 over 8 experts of width 12, capacity factor 0.5: each
// device's group of 128 / G tokens has C = ceil(128 / G * 2 * 0.5 / 8) = 16 / G slots per
// expert, half its choices, so every case drops choices. With tp the buffer's layout is
// written: at these tiny widths propagation would rather gather the experts' weights over
// ep than exchange the tokens (docs/language.md, "Expert parallelism").
std::string Layer(const EpCase& c) {
  return absl::Substitute(R"(mesh @m($0)

func @f(%x: f32[128@ep, 8], %wr: f32[8, 8], %w1: f32[8@ep, 8, 12$2], %w2: f32[8@ep, 12$2, 8]) -> f32[128@ep, 8] {
  %logits = matmul(%x, %wr)
  %probs = softmax(%logits) {dim = 1}
  %top, %experts = top_k(%probs) {k = 2}
  %buf = moe_dispatch(%x, %experts) {experts = 8, capacity_factor = 0.5, groups = $1}$3
  %a = matmul(%buf, %w1)
  %act = silu(%a)
  %out = matmul(%act, %w2)
  %back = moe_collect(%out, %experts) {groups = $1}
  %g3 = reshape(%top) : f32[128, 2, 1]
  %weighted = mul(%back, %g3)
  %moe = reduce_sum(%weighted) {dims = [1]}
  %y = add(%x, %moe)
  return %y
}
)",
                          c.mesh, c.groups, c.ffn, c.buffer);
}

int64_t Capacity(const EpCase& c) {
  return static_cast<int64_t>(std::ceil(128.0 / c.groups * 2 * 0.5 / 8));
}

// all_to_alls of `function` (at the top and in loops) by their stream (-1: none).
std::vector<int64_t> AllToAllStreams(const Block& block) {
  std::vector<int64_t> streams;
  for (const Operation* op : block) {
    if (op->Is(OpKind::kAllToAll)) streams.push_back(op->attrs().GetInt("stream", -1));
    for (int r = 0; r < op->num_regions(); ++r) {
      std::vector<int64_t> inner = AllToAllStreams(*op->region(r));
      streams.insert(streams.end(), inner.begin(), inner.end());
    }
  }
  return streams;
}

// The exchanges in program order: 'd' a dispatch (split_dim 0), 'c' a combine.
std::string ExchangeOrder(const Block& block) {
  std::string order;
  for (const Operation* op : block) {
    if (op->Is(OpKind::kAllToAll)) order += op->attrs().GetInt("split_dim", -1) == 0 ? 'd' : 'c';
  }
  return order;
}

// dispatch 0, then per chunk i: dispatch i+1 (if any), then combine i.
std::string PipelinedOrder(int64_t chunks) {
  std::string order = "d";
  for (int64_t i = 0; i < chunks; ++i) order += i + 1 < chunks ? "dc" : "c";
  return order;
}

int CountLoops(const Block& block) {
  int n = 0;
  for (const Operation* op : block) n += op->Is(OpKind::kFor);
  return n;
}

TEST(MoePipeline, ForwardMatchesOneDeviceInEveryChunking) {
  for (const EpCase& c : kCases) {
    for (int64_t chunks = 2; chunks <= Capacity(c); chunks *= 2) {
      SCOPED_TRACE(absl::StrCat(c.mesh, " chunks=", chunks));
      absl::StatusOr<testing::SpmdCheck> check = testing::CheckSpmd(
          Layer(c), "f", {.seed = 1, .pipeline = absl::StrCat("moe-pipeline{chunks=", chunks, "}")});
      ASSERT_TRUE(check.ok()) << check.status();
      EXPECT_TRUE(check->pass) << check->report << check->lowered;
      const Function& f = *check->module->FindFunction("f");
      // A dispatch and a combine per chunk, all on the exchange stream, and no
      // whole-buffer exchange left.
      EXPECT_EQ(CountLoops(*f.body()), 0) << check->lowered;
      EXPECT_EQ(AllToAllStreams(*f.body()),
                std::vector<int64_t>(2 * chunks, kMoeExchangeStream))
          << check->lowered;
      EXPECT_EQ(ExchangeOrder(*f.body()), PipelinedOrder(chunks)) << check->lowered;
    }
  }
}

TEST(MoePipeline, GradientMatchesOneDevice) {
  for (const EpCase& c : kCases) {
    SCOPED_TRACE(c.mesh);
    std::unique_ptr<Module> module = testing::ParseForTest(Layer(c));
    ASSERT_NE(module, nullptr);
    AutodiffOptions options;
    options.seed_cotangents = true;
    absl::StatusOr<Function*> grad = Differentiate(*module, *module->FindFunction("f"), options);
    ASSERT_TRUE(grad.ok()) << grad.status();
    const std::string name = (*grad)->name();
    // Partitioned without combine-all-reduces: at ep x tp the forward's expert-output
    // all_reduce over tp and the backward's are independent, and the pass combines them,
    // before the schedule (no layer left to match) or after it (the forward's chunks then
    // wait for the backward's bucket). docs/commir-opt.md says so.
    absl::StatusOr<testing::SpmdCheck> check = testing::CheckSpmd(
        *module, name,
        {.seed = 3, .combine_all_reduces = false, .pipeline = "moe-pipeline{chunks=2}"});
    ASSERT_TRUE(check.ok()) << check.status();
    const std::string lowered = PrintModule(*check->module);
    EXPECT_TRUE(check->pass) << check->report << lowered;
    // The forward's and the backward's exchanges, each layer in two chunks.
    const Function& g = *check->module->FindFunction(name);
    EXPECT_EQ(AllToAllStreams(*g.body()), std::vector<int64_t>(8, kMoeExchangeStream)) << lowered;
    EXPECT_EQ(ExchangeOrder(*g.body()), PipelinedOrder(2) + PipelinedOrder(2)) << lowered;
  }
}

TEST(MoePipeline, OneChunkAndAScheduledLayerAreLeftAlone) {
  const EpCase c = kCases[1];
  absl::StatusOr<testing::SpmdCheck> once =
      testing::CheckSpmd(Layer(c), "f", {.pipeline = "moe-pipeline{chunks=2}"});
  ASSERT_TRUE(once.ok()) << once.status();
  absl::StatusOr<testing::SpmdCheck> twice = testing::CheckSpmd(
      Layer(c), "f", {.pipeline = "moe-pipeline{chunks=2},moe-pipeline{chunks=2}"});
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_EQ(once->lowered, twice->lowered);
  absl::StatusOr<testing::SpmdCheck> plain = testing::CheckSpmd(Layer(c), "f", {});
  absl::StatusOr<testing::SpmdCheck> one =
      testing::CheckSpmd(Layer(c), "f", {.pipeline = "moe-pipeline{chunks=1}"});
  ASSERT_TRUE(plain.ok() && one.ok());
  EXPECT_EQ(plain->lowered, one->lowered);
}

// A softmax over the slots mixes the rows of an expert: chunks would change it, so the
// layer is left alone and the reason names the op.
TEST(MoePipeline, ALayerThatMixesRowsIsLeftAloneWithTheReason) {
  std::unique_ptr<Module> module = testing::ParseForTest(R"(mesh @m(ep=2)

spmd func @f(%buf: f32[4, 4, 8], %w: f32[2, 8, 8]) -> f32[4, 4, 8] on @m {
  %d = all_to_all(%buf) {axis = ep, split_dim = 0, concat_dim = 1} : f32[2, 8, 8]
  %h = matmul(%d, %w) : f32[2, 8, 8]
  %s = softmax(%h) {dim = 1} : f32[2, 8, 8]
  %c = all_to_all(%s) {axis = ep, split_dim = 1, concat_dim = 0} : f32[4, 4, 8]
  return %c
}
)");
  ASSERT_NE(module, nullptr);
  const std::string before = PrintModule(*module);
  std::vector<std::string> skipped;
  absl::StatusOr<int> n = MoePipeline(*module, 2, &skipped);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0);
  EXPECT_EQ(PrintModule(*module), before);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], ::testing::HasSubstr("softmax at 6:"));
  EXPECT_THAT(skipped[0], ::testing::HasSubstr("does not keep them independent"));
}

TEST(MoePipeline, ChunkCountsOutOfRangeAreAnError) {
  for (const char* chunks : {"0", "65"}) {
    absl::StatusOr<testing::SpmdCheck> check = testing::CheckSpmd(
        Layer(kCases[1]), "f", {.pipeline = absl::StrCat("moe-pipeline{chunks=", chunks, "}")});
    ASSERT_FALSE(check.ok()) << chunks;
    EXPECT_THAT(check.status().message(), ::testing::HasSubstr("chunks")) << check.status();
  }
}

TEST(MoePipeline, ChunksThatDoNotDivideTheCapacityAreAnError) {
  // ep = 4: C = 4 slots per expert and device.
  absl::StatusOr<testing::SpmdCheck> check =
      testing::CheckSpmd(Layer(kCases[1]), "f", {.pipeline = "moe-pipeline{chunks=3}"});
  ASSERT_FALSE(check.ok());
  EXPECT_THAT(check.status().message(),
              ::testing::HasSubstr("chunks=3 does not divide the capacity 4"));
}

}  // namespace
}  // namespace commir::schedules
