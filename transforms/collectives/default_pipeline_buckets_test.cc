// The default spmd pipeline ends with combine-all-reduces: what propagate-sharding
// prices as DDP's gradient buckets is what the pipeline emits. On hand-sized
// data-parallel training steps the bucket count follows in closed form from the
// gradients' bytes and the 25 MiB threshold; the count the partitioner prices is
// compared with the all_reduces counted in the default pipeline's output. What must
// not combine (a forward pass's tensor-parallel all_reduces) stays, and the overlap
// schedules run after the default pipeline rewrite what they rewrite after partitioning
// alone.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "gtest/gtest.h"
#include "testing/spmd_check.h"
#include "transforms/collectives/collective_buckets.h"
#include "transforms/sharding/propagate.h"
#include "transforms/test_util.h"

namespace commir::collectives {
namespace {

struct Counts {
  int64_t all_reduces = 0;
  int64_t all_gathers = 0;
  int64_t reduce_scatters = 0;
  int64_t all_reduce_elements = 0;  // summed over the all_reduces' operands
  int64_t largest_all_reduce_bytes = 0;
};

Counts CountCollectives(const Module& module) {
  Counts c;
  for (const Function* f : module.functions()) {
    if (!f->is_spmd()) continue;
    WalkOps(f->body(), [&](Operation* op) {
      if (op->Is(OpKind::kAllGather)) ++c.all_gathers;
      if (op->Is(OpKind::kReduceScatter)) ++c.reduce_scatters;
      if (!op->Is(OpKind::kAllReduce)) return;
      ++c.all_reduces;
      const Type& t = op->operand(0)->type();
      c.all_reduce_elements += t.num_elements();
      c.largest_all_reduce_bytes = std::max<int64_t>(
          c.largest_all_reduce_bytes, t.num_elements() * ElementTypeByteWidth(t.element_type()));
    });
  }
  return c;
}

// A chain of `n` square f32 layers of `width` on a batch split over dp=4 with a mean
// square loss, and its SGD step (@net_step) from the training-step pass.
constexpr int64_t kWidth = 1024;  // a gradient of 1024 x 1024 f32: 4 MiB
std::unique_ptr<Module> DataParallelStep(int n) {
  std::vector<std::string> args, params;
  std::string body;
  std::string x = "%x";
  for (int i = 1; i <= n; ++i) {
    args.push_back(absl::StrCat("%w", i, ": f32[", kWidth, ", ", kWidth, "]"));
    params.push_back(absl::StrCat("w", i));
    absl::StrAppend(&body, "  %h", i, " = matmul(", x, ", %w", i, ")\n");
    x = absl::StrCat("%h", i);
  }
  // 4096 rows: enough work per row that the plan keeps the batch split and all-reduces
  // the gradients rather than gathering the batch onto every device.
  args.push_back(absl::StrCat("%x: f32[4096@dp, ", kWidth, "]"));
  const std::string text = absl::StrCat(
      "mesh @m(dp=4)\n\nfunc @net(", absl::StrJoin(args, ", "), ") -> f32[] {\n", body,
      "  %sq = mul(", x, ", ", x, ")\n  %loss = reduce_mean(%sq) {dims = [0, 1]}\n",
      "  return %loss\n}\n");
  std::unique_ptr<Module> module = testing::ParseForTest(text);
  if (module == nullptr) return nullptr;
  absl::Status s = testing::ApplyPassPipeline(
      absl::StrCat("training-step{func=@net,params=\"", absl::StrJoin(params, ","),
                   "\",lr=0.1}"),
      *module);
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? std::move(module) : nullptr;
}

TEST(DefaultPipelineBucketsTest, DataParallelStepHasOneAllReducePerBucket) {
  const int64_t gradient_bytes = kWidth * kWidth * 4;
  // Closed form: a bucket holds floor(25 MiB / 4 MiB) = 6 gradients, and the loss's
  // 4 bytes fit in the last bucket's slack (25 - 4k MiB >= 1 MiB), so n gradients take
  // ceil(n / 6) all_reduces. @net (the forward alone) keeps its loss's all_reduce.
  const int64_t per_bucket = static_cast<int64_t>(kDefaultBucketBytes) / gradient_bytes;
  ASSERT_EQ(per_bucket, 6);
  for (int n : {1, 2, 6, 7, 12, 13}) {
    SCOPED_TRACE(absl::StrCat(n, " gradients"));
    std::unique_ptr<Module> global = DataParallelStep(n);
    ASSERT_NE(global, nullptr);

    std::unique_ptr<Module> partitioned = global->Clone();
    ASSERT_TRUE(testing::RunPartitionPipeline(*partitioned).ok());
    const Counts apart = CountCollectives(*partitioned);
    // One all_reduce per gradient, one per loss (@net's and @net_step's).
    ASSERT_EQ(apart.all_reduces, n + 2) << PrintModule(*partitioned);

    std::unique_ptr<Module> lowered = global->Clone();
    ASSERT_TRUE(testing::RunDefaultSpmdPipeline(*lowered).ok());
    const Counts combined = CountCollectives(*lowered);
    const int64_t buckets = (n + per_bucket - 1) / per_bucket;
    EXPECT_EQ(combined.all_reduces, buckets + 1) << PrintModule(*lowered);
    // The same elements are summed, none twice, and no buffer exceeds the threshold.
    EXPECT_EQ(combined.all_reduce_elements, apart.all_reduce_elements);
    EXPECT_EQ(combined.all_reduce_elements, n * kWidth * kWidth + 2);
    EXPECT_LE(combined.largest_all_reduce_bytes, kDefaultBucketBytes);

    // What propagate-sharding priced: the same all_reduces, in as many buckets as the
    // pipeline emits all_reduces.
    std::unique_ptr<Module> propagated = global->Clone();
    sharding::PropagationReport report;
    sharding::PropagationOptions options;
    options.report = &report;
    ASSERT_TRUE(sharding::PropagateSharding(*propagated, options).ok());
    EXPECT_EQ(report.priced_all_reduces, apart.all_reduces);
    EXPECT_EQ(report.priced_all_reduce_buckets, combined.all_reduces);
  }
}

// A Megatron MLP's forward on tp=4, twice: each block's second matmul sums over tp, and
// the second block's all_reduce reads the first's result through the gelu and matmul.
// They cannot share a point, so the default pipeline leaves both, as the partitioner
// priced them.
TEST(DefaultPipelineBucketsTest, ForwardTensorParallelAllReducesStay) {
  std::unique_ptr<Module> global = testing::ParseForTest(R"(
mesh @m(tp=4)

func @mlp2(%x: f32[64, 128], %a1: f32[128, 512@tp], %b1: f32[512@tp, 128], %a2: f32[128, 512@tp], %b2: f32[512@tp, 128]) -> f32[64, 128] {
  %h1 = matmul(%x, %a1) : f32[64, 512@tp]
  %g1 = gelu(%h1)
  %y1 = matmul(%g1, %b1) : f32[64, 128]
  %h2 = matmul(%y1, %a2) : f32[64, 512@tp]
  %g2 = gelu(%h2)
  %y2 = matmul(%g2, %b2) : f32[64, 128]
  return %y2
}
)");
  ASSERT_NE(global, nullptr);
  std::unique_ptr<Module> lowered = global->Clone();
  ASSERT_TRUE(testing::RunDefaultSpmdPipeline(*lowered).ok());
  EXPECT_EQ(CountCollectives(*lowered).all_reduces, 2) << PrintModule(*lowered);
  std::unique_ptr<Module> propagated = global->Clone();
  sharding::PropagationReport report;
  sharding::PropagationOptions options;
  options.report = &report;
  ASSERT_TRUE(sharding::PropagateSharding(*propagated, options).ok());
  EXPECT_EQ(report.priced_all_reduces, 2);
  EXPECT_EQ(report.priced_all_reduce_buckets, 2);
}

// A Megatron-SP MLP's training step on dp=2 x tp=2: its all_gathers and reduce_scatters
// over tp (forward and backward) beside the matmuls, and the gradients' all_reduces over
// dp. The collective-matmul schedules run after the default pipeline rewrite as many
// pairs as after partitioning alone: combining moves only readers of all_reduces.
TEST(DefaultPipelineBucketsTest, SchedulesAfterTheDefaultPipelineFindTheirPairs) {
  std::unique_ptr<Module> global = testing::ParseForTest(R"(
mesh @m(dp=2, tp=2)

func @mlp(%w1: f32[64, 256@tp], %w2: f32[256@tp, 64], %x: f32[8@dp, 32@tp, 64], %t: f32[8@dp, 32@tp, 64]) -> f32[] {
  %h = matmul(%x, %w1) : f32[8@dp, 32, 256@tp]
  %a = gelu(%h)
  %y = matmul(%a, %w2) : f32[8@dp, 32@tp, 64]
  %e = sub(%y, %t)
  %sq = mul(%e, %e)
  %loss = reduce_mean(%sq) {dims = [0, 1, 2]}
  return %loss
}
)");
  ASSERT_NE(global, nullptr);
  ASSERT_TRUE(
      testing::ApplyPassPipeline("training-step{func=@mlp,params=\"w1,w2\",lr=0.1}", *global).ok());
  std::unique_ptr<Module> apart = global->Clone();
  ASSERT_TRUE(testing::RunPartitionPipeline(*apart).ok());
  std::unique_ptr<Module> combined = global->Clone();
  ASSERT_TRUE(testing::RunDefaultSpmdPipeline(*combined).ok());
  const Counts before = CountCollectives(*apart);
  ASSERT_GT(before.all_gathers + before.reduce_scatters, 0) << PrintModule(*apart);
  // The two weight gradients share a bucket.
  EXPECT_LT(CountCollectives(*combined).all_reduces, before.all_reduces) << PrintModule(*combined);
  for (const char* schedule : {"ring-collective-matmul", "pipeline-collective-matmul"}) {
    SCOPED_TRACE(schedule);
    std::unique_ptr<Module> a = apart->Clone();
    std::unique_ptr<Module> c = combined->Clone();
    ASSERT_TRUE(testing::ApplyPassPipeline(schedule, *a).ok());
    ASSERT_TRUE(testing::ApplyPassPipeline(schedule, *c).ok());
    // The schedule rewrote something in both, and the same collectives are left (the
    // pipelined schedule's chunked ones among them, in its loops).
    EXPECT_NE(PrintModule(*a), PrintModule(*apart));
    EXPECT_NE(PrintModule(*c), PrintModule(*combined));
    const Counts left_apart = CountCollectives(*a);
    const Counts left_combined = CountCollectives(*c);
    EXPECT_EQ(left_combined.all_gathers, left_apart.all_gathers) << PrintModule(*c);
    EXPECT_EQ(left_combined.reduce_scatters, left_apart.reduce_scatters) << PrintModule(*c);
  }
}

}  // namespace
}  // namespace commir::collectives
