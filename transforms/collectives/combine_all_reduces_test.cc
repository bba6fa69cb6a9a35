// combine-all-reduces on hand-written spmd functions: which all_reduces share a bucket,
// what the combined all_reduce reduces, and what the rewrite leaves alone.
#include "transforms/collectives/combine_all_reduces.h"

#include <memory>
#include <string>
#include <vector>

#include "commir/ir.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transforms/test_util.h"

namespace commir::collectives {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<Operation*> AllReduces(const Function& f) {
  std::vector<Operation*> found;
  WalkOps(f.body(), [&](Operation* op) {
    if (op->Is(OpKind::kAllReduce)) found.push_back(op);
  });
  return found;
}

struct Combined {
  std::unique_ptr<Module> module;
  CombineCounts counts;
  std::string text;
};

// Parses `text`, combines the all_reduces of @f with `threshold`, verifies the result.
Combined Combine(const std::string& text, int64_t threshold = kDefaultThresholdBytes) {
  Combined c;
  c.module = testing::ParseForTest(text);
  if (c.module == nullptr) return c;
  absl::StatusOr<CombineCounts> counts =
      CombineAllReduces(*c.module->FindFunction("f"), threshold);
  EXPECT_TRUE(counts.ok()) << counts.status();
  if (counts.ok()) c.counts = *counts;
  absl::Status verified = VerifyModule(*c.module);
  c.text = PrintModule(*c.module);
  EXPECT_TRUE(verified.ok()) << verified.message() << "\n" << c.text;
  return c;
}

// A backward pass's four gradients (of different shapes, a scalar among them), each
// all-reduced over dp and first read by the updates after the last one.
constexpr char kFourGradients[] = R"(
mesh @m(dp=4)

spmd func @f(%a: f32[8, 4], %b: f32[16], %c: f32[2, 3, 4], %d: f32[]) -> (f32[8, 4], f32[16], f32[2, 3, 4], f32[]) on @m {
  %ga = mul(%a, 2.0) : f32[8, 4]
  %ra = all_reduce(%ga) {axis = dp} : f32[8, 4]
  %gb = mul(%b, 3.0) : f32[16]
  %rb = all_reduce(%gb) {axis = dp} : f32[16]
  %gc = mul(%c, 4.0) : f32[2, 3, 4]
  %rc = all_reduce(%gc) {axis = dp, reduce = sum} : f32[2, 3, 4]
  %gd = mul(%d, 5.0) : f32[]
  %rd = all_reduce(%gd) {axis = dp} : f32[]
  %ua = sub(%a, %ra) : f32[8, 4]
  %ub = sub(%b, %rb) : f32[16]
  %uc = sub(%c, %rc) : f32[2, 3, 4]
  %ud = sub(%d, %rd) : f32[]
  return %ua, %ub, %uc, %ud
}
)";

TEST(CombineAllReducesTest, FourGradientsReadLateBecomeOneAllReduceOfTheirSum) {
  Combined c = Combine(kFourGradients);
  EXPECT_EQ(c.counts.buckets, 1);
  EXPECT_EQ(c.counts.combined, 4);
  std::vector<Operation*> ars = AllReduces(*c.module->FindFunction("f"));
  ASSERT_EQ(ars.size(), 1u) << c.text;
  // 8*4 + 16 + 2*3*4 + 1 elements, in one 1-D buffer.
  EXPECT_EQ(ars[0]->operand(0)->type(), Type::Tensor(ElementType::kF32, {73}));
  EXPECT_TRUE(ars[0]->operand(0)->defining_op()->Is(OpKind::kConcat));
  EXPECT_EQ(ars[0]->attrs().Find("axis")->axes(), AxisList{"dp"});
  // Each member's range comes back under its own name, in its own shape.
  EXPECT_THAT(c.text, HasSubstr("%ra_bucket = concat(%ga_flat, %gb, %gc_flat, %gd_flat) {dim = 0} : f32[73]"));
  EXPECT_THAT(c.text, HasSubstr("%ra_bucket_ar = all_reduce(%ra_bucket) {axis = dp} : f32[73]"));
  EXPECT_THAT(c.text, HasSubstr("%rb = slice(%ra_bucket_ar) {start = [32], size = [16]} : f32[16]"));
  EXPECT_THAT(c.text, HasSubstr("%rc = reshape(%rc_part) : f32[2, 3, 4]"));
  EXPECT_THAT(c.text, HasSubstr("%rd_part = slice(%ra_bucket_ar) {start = [72], size = [1]} : f32[1]"));
}

// Four gradients of 64 bytes: a 128-byte threshold holds two per bucket; a threshold
// below one gradient leaves each alone.
TEST(CombineAllReducesTest, TheThresholdBoundsEachBucket) {
  const std::string text = R"(
mesh @m(dp=2)

spmd func @f(%a: f32[16], %b: f32[16], %c: f32[16], %d: f32[16]) -> f32[16] on @m {
  %ra = all_reduce(%a) {axis = dp} : f32[16]
  %rb = all_reduce(%b) {axis = dp} : f32[16]
  %rc = all_reduce(%c) {axis = dp} : f32[16]
  %rd = all_reduce(%d) {axis = dp} : f32[16]
  %s1 = add(%ra, %rb) : f32[16]
  %s2 = add(%rc, %rd) : f32[16]
  %s = add(%s1, %s2) : f32[16]
  return %s
}
)";
  Combined two = Combine(text, 128);
  EXPECT_EQ(two.counts.buckets, 2);
  std::vector<Operation*> ars = AllReduces(*two.module->FindFunction("f"));
  ASSERT_EQ(ars.size(), 2u) << two.text;
  for (Operation* ar : ars) EXPECT_EQ(ar->operand(0)->type().num_elements(), 32);

  Combined none = Combine(text, 63);
  EXPECT_EQ(none.counts.buckets, 0);
  EXPECT_EQ(AllReduces(*none.module->FindFunction("f")).size(), 4u);

  Combined all = Combine(text, 256);
  EXPECT_EQ(AllReduces(*all.module->FindFunction("f")).size(), 1u);
}

// Another axis, another element type or another reduction: another collective. Each
// all_reduce here differs from the others in one of them: nothing is combined and the
// function is printed as it was.
TEST(CombineAllReducesTest, DifferentAxesElementTypesOrReductionsAreNotCombined) {
  const std::string text = R"(mesh @m(dp=2, tp=2)

spmd func @f(%a: f32[16], %b: f32[16], %c: bf16[16], %d: f32[16], %e: f32[16]) -> (f32[16], f32[16], bf16[16], f32[16], f32[16]) on @m {
  %ra = all_reduce(%a) {axis = dp} : f32[16]
  %rb = all_reduce(%b) {axis = tp} : f32[16]
  %rc = all_reduce(%c) {axis = dp} : bf16[16]
  %rd = all_reduce(%d) {axis = dp, reduce = max} : f32[16]
  %re = all_reduce(%e) {axis = (dp, tp)} : f32[16]
  return %ra, %rb, %rc, %rd, %re
}
)";
  Combined c = Combine(text);
  EXPECT_EQ(c.counts.buckets, 0);
  EXPECT_EQ(c.text, PrintModule(*testing::ParseForTest(text)));
}

// A forward pass's tensor-parallel all_reduces: the second one's operand is made from
// the first one's result, so no point has both operands ready and neither result read.
TEST(CombineAllReducesTest, AnAllReduceReadBeforeTheNextIsReadyStaysAlone) {
  const std::string text = R"(mesh @m(tp=2)

spmd func @f(%x: f32[4, 8], %w1: f32[8, 8], %w2: f32[8, 8]) -> f32[4, 8] on @m {
  %h = matmul(%x, %w1) : f32[4, 8]
  %h_ar = all_reduce(%h) {axis = tp} : f32[4, 8]
  %a = tanh(%h_ar) : f32[4, 8]
  %y = matmul(%a, %w2) : f32[4, 8]
  %y_ar = all_reduce(%y) {axis = tp} : f32[4, 8]
  return %y_ar
}
)";
  Combined c = Combine(text);
  EXPECT_EQ(c.counts.buckets, 0);
  EXPECT_EQ(AllReduces(*c.module->FindFunction("f")).size(), 2u);
  EXPECT_EQ(c.text, PrintModule(*testing::ParseForTest(text)));
}

// What lower-to-spmd emits for a training step: each gradient's all_reduce right before
// its update, the next gradient scaled by the learning rate only after that update. The
// updates depend on one gradient each, so the three all_reduces still combine: the
// updates placed before the last scaled gradient move after the combined all_reduce
// (in their order), and nothing else moves.
TEST(CombineAllReducesTest, UpdatesInterleavedWithTheGradientsMoveAfterTheBucket) {
  const std::string text = R"(mesh @m(dp=2)

spmd func @f(%w1: f32[4, 4], %w2: f32[4], %w3: f32[4, 2], %g1: f32[4, 4], %g2: f32[4], %g3: f32[4, 2]) -> (f32[4, 4], f32[4], f32[4, 2]) on @m {
  %s1 = mul(%g1, 0.1) : f32[4, 4]
  %r1 = all_reduce(%s1) {axis = dp} : f32[4, 4]
  %new_w1 = sub(%w1, %r1) : f32[4, 4]
  %s2 = mul(%g2, 0.1) : f32[4]
  %r2 = all_reduce(%s2) {axis = dp} : f32[4]
  %new_w2 = sub(%w2, %r2) : f32[4]
  %s3 = mul(%g3, 0.1) : f32[4, 2]
  %r3 = all_reduce(%s3) {axis = dp} : f32[4, 2]
  %new_w3 = sub(%w3, %r3) : f32[4, 2]
  return %new_w1, %new_w2, %new_w3
}
)";
  Combined c = Combine(text);
  EXPECT_EQ(c.counts.buckets, 1);
  EXPECT_EQ(c.counts.combined, 3);
  const Function& f = *c.module->FindFunction("f");
  std::vector<Operation*> ars = AllReduces(f);
  ASSERT_EQ(ars.size(), 1u) << c.text;
  EXPECT_EQ(ars[0]->operand(0)->type().num_elements(), 16 + 4 + 8);
  // The program order now: the three scaled gradients, the bucket, the three updates.
  std::vector<std::string> order;
  for (Operation* op : *f.body()) {
    if (op->num_results() == 1 && !op->result(0)->name().empty()) {
      order.push_back(op->result(0)->name());
    }
  }
  EXPECT_THAT(order, ::testing::ElementsAre("s1", "s2", "s3", "s1_flat", "s3_flat", "r1_bucket",
                                            "r1_bucket_ar", "r1_part", "r1", "r2", "r3_part",
                                            "r3", "new_w1", "new_w2", "new_w3"));
}

// All_reduces of all-reduced values (a second round): the first round's bucket, then
// the second's, which reads the first's slices.
TEST(CombineAllReducesTest, ASecondRoundReadsTheFirstRoundsBucket) {
  const std::string text = R"(mesh @m(dp=2)

spmd func @f(%a: f32[4], %b: f32[2, 2]) -> (f32[4], f32[2, 2]) on @m {
  %ra = all_reduce(%a) {axis = dp} : f32[4]
  %rra = all_reduce(%ra) {axis = dp} : f32[4]
  %rb = all_reduce(%b) {axis = dp} : f32[2, 2]
  %rrb = all_reduce(%rb) {axis = dp} : f32[2, 2]
  return %rra, %rrb
}
)";
  Combined c = Combine(text);
  EXPECT_EQ(c.counts.buckets, 2);
  std::vector<Operation*> ars = AllReduces(*c.module->FindFunction("f"));
  ASSERT_EQ(ars.size(), 2u) << c.text;
  EXPECT_THAT(c.text, HasSubstr("%ra_bucket_ar = all_reduce(%ra_bucket) {axis = dp} : f32[8]"));
  EXPECT_THAT(c.text, HasSubstr("%rra_bucket = concat(%ra, %rb_flat) {dim = 0} : f32[8]"));
}

// A loop body is a block of its own: its independent all_reduces combine inside it,
// and the all_reduce outside the loop, read after it, is left to the function's block.
TEST(CombineAllReducesTest, AllReducesInALoopBodyCombineInTheBody) {
  const std::string text = R"(mesh @m(dp=2)

spmd func @f(%a: f32[4], %b: f32[2, 2]) -> (f32[4], f32[2, 2]) on @m {
  %x, %y = for %i = 0 to 3 iter(%p = %a, %q = %b) {
    %rp = all_reduce(%p) {axis = dp} : f32[4]
    %rq = all_reduce(%q) {axis = dp} : f32[2, 2]
    %p1 = mul(%rp, 0.5) : f32[4]
    %q1 = mul(%rq, 0.5) : f32[2, 2]
    yield %p1, %q1
  } : (f32[4], f32[2, 2])
  return %x, %y
}
)";
  Combined c = Combine(text);
  EXPECT_EQ(c.counts.buckets, 1);
  std::vector<Operation*> ars = AllReduces(*c.module->FindFunction("f"));
  ASSERT_EQ(ars.size(), 1u) << c.text;
  EXPECT_NE(ars[0]->parent_op(), nullptr);  // still in the loop
  EXPECT_EQ(ars[0]->operand(0)->type().num_elements(), 8);
}

// An all_reduce whose stream is an index value, or whose result nobody reads, is no
// candidate; one with a constant stream combines only with others on that stream.
TEST(CombineAllReducesTest, StreamsAndDeadAllReduces) {
  const std::string text = R"(mesh @m(dp=2)

spmd func @f(%a: f32[4], %b: f32[4], %c: f32[4], %d: f32[4], %e: f32[4]) -> f32[4] on @m {
  %st = full() {value = 1} : index
  %ra = all_reduce(%a) {axis = dp, stream = %st} : f32[4]
  %rb = all_reduce(%b) {axis = dp} : f32[4]
  %rc = all_reduce(%c) {axis = dp, stream = 1} : f32[4]
  %rd = all_reduce(%d) {axis = dp, stream = 1} : f32[4]
  %re = all_reduce(%e) {axis = dp} : f32[4]
  %s1 = add(%ra, %rb) : f32[4]
  %s2 = add(%rc, %rd) : f32[4]
  %s = add(%s1, %s2) : f32[4]
  return %s
}
)";
  Combined c = Combine(text);
  EXPECT_EQ(c.counts.buckets, 1);
  EXPECT_THAT(c.text, HasSubstr("all_reduce(%rc_bucket) {axis = dp, stream = 1} : f32[8]"));
  EXPECT_THAT(c.text, HasSubstr("%ra = all_reduce(%a) {axis = dp, stream = %st}"));
  EXPECT_THAT(c.text, HasSubstr("%rb = all_reduce(%b) {axis = dp}"));
  EXPECT_THAT(c.text, HasSubstr("%re = all_reduce(%e) {axis = dp}"));
}

// 20000 gradients, each all-reduced before its update as lower-to-spmd emits them, in
// 10000 buckets of two: the block is relinked once, not once per bucket (a renumbering
// of the block per bucket took 40 s here).
TEST(CombineAllReducesTest, TenThousandBucketsRelinkTheBlockOnce) {
  constexpr int kGradients = 20000;
  std::string args, results, body, returns;
  for (int i = 0; i < kGradients; ++i) {
    const std::string n = std::to_string(i);
    const std::string sep = i == 0 ? "" : ", ";
    args += sep + "%w" + n + ": f32[16], %g" + n + ": f32[16]";
    results += sep + "f32[16]";
    body += "  %s" + n + " = mul(%g" + n + ", 0.1) : f32[16]\n  %r" + n + " = all_reduce(%s" + n +
            ") {axis = dp} : f32[16]\n  %u" + n + " = sub(%w" + n + ", %r" + n + ") : f32[16]\n";
    returns += sep + "%u" + n;
  }
  Combined c = Combine("mesh @m(dp=2)\n\nspmd func @f(" + args + ") -> (" + results +
                           ") on @m {\n" + body + "  return " + returns + "\n}\n",
                       128);
  EXPECT_EQ(c.counts.buckets, kGradients / 2);
  EXPECT_EQ(AllReduces(*c.module->FindFunction("f")).size(), static_cast<size_t>(kGradients / 2));
}

TEST(CombineAllReducesTest, GlobalFunctionsAndBadThresholdsAreRefused) {
  std::unique_ptr<Module> m = testing::ParseForTest(kFourGradients);
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(CombineAllReduces(*m, -1).ok());
  EXPECT_FALSE(CombineAllReduces(*m, kMaxThresholdBytes + 1).ok());
  EXPECT_THAT(PrintModule(*m), Not(HasSubstr("concat")));
}

}  // namespace
}  // namespace commir::collectives
