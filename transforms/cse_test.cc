#include "transforms/cse.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "commir/printer.h"
#include "gtest/gtest.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

using testing::ParseForTest;
using testing::TransformText;

std::string RunCse(absl::string_view input) {
  return TransformText(input, [](Module& m) { EliminateCommonSubexpressions(m); });
}

TEST(CseTest, MergesIdenticalOpsAndTheirUsers) {
  EXPECT_EQ(RunCse(R"(func @f(%x: f32[4]) -> f32[4] {
  %a = neg(%x) : f32[4]
  %b = neg(%x) : f32[4]
  %c = exp(%a) : f32[4]
  %d = exp(%b) : f32[4]
  %e = add(%c, %d) : f32[4]
  return %e
}
)"),
            R"(func @f(%x: f32[4]) -> f32[4] {
  %a = neg(%x) : f32[4]
  %c = exp(%a) : f32[4]
  %e = add(%c, %c) : f32[4]
  return %e
}
)");
}

TEST(CseTest, ReturnsTheNumberOfErasedOps) {
  std::unique_ptr<Module> module = ParseForTest(R"(func @f(%x: f32[4]) -> f32[4] {
  %a = full() {value = 1.0} : f32[4]
  %b = full() {value = 1.0} : f32[4]
  %c = full() {value = 1.0} : f32[4]
  %d = add(%a, %b) : f32[4]
  %e = add(%d, %c) : f32[4]
  return %e
}
)");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(EliminateCommonSubexpressions(*module), 2);
}

TEST(CseTest, AttributesMustMatchInAnyOrder) {
  EXPECT_EQ(RunCse(R"(func @f(%x: f32[4, 8]) -> (f32[4, 1], f32[4, 1], f32[4]) {
  %a = reduce_sum(%x) {dims = [1], keepdim} : f32[4, 1]
  %b = reduce_sum(%x) {keepdim = true, dims = [1]} : f32[4, 1]
  %c = reduce_sum(%x) {dims = [1]} : f32[4]
  return %a, %b, %c
}
)"),
            R"(func @f(%x: f32[4, 8]) -> (f32[4, 1], f32[4, 1], f32[4]) {
  %a = reduce_sum(%x) {dims = [1], keepdim} : f32[4, 1]
  %c = reduce_sum(%x) {dims = [1]} : f32[4]
  return %a, %a, %c
}
)");
}

TEST(CseTest, DistinguishesFloatAttributesBitwise) {
  const char* text = R"(func @f() -> (f32[4], f32[4]) {
  %a = full() {value = 0.0} : f32[4]
  %b = full() {value = -0.0} : f32[4]
  return %a, %b
}
)";
  EXPECT_EQ(RunCse(text), text);
}

TEST(CseTest, CommutativeOpsMatchWithSwappedOperands) {
  EXPECT_EQ(RunCse(R"(func @f(%x: f32[4], %y: f32[4]) -> (f32[4], f32[4], f32[4], f32[4]) {
  %a = add(%x, %y) : f32[4]
  %b = add(%y, %x) : f32[4]
  %c = sub(%x, %y) : f32[4]
  %d = sub(%y, %x) : f32[4]
  return %a, %b, %c, %d
}
)"),
            R"(func @f(%x: f32[4], %y: f32[4]) -> (f32[4], f32[4], f32[4], f32[4]) {
  %a = add(%x, %y) : f32[4]
  %c = sub(%x, %y) : f32[4]
  %d = sub(%y, %x) : f32[4]
  return %a, %a, %c, %d
}
)");
}

TEST(CseTest, LiteralsCompareByValueAndType) {
  EXPECT_EQ(RunCse(R"(func @f(%x: f32[4]) -> (f32[4], f32[4], f32[4], f32[4], f32[4]) {
  %a = mul(%x, 0.5) : f32[4]
  %b = mul(%x, 0.5) : f32[4]
  %c = mul(0.5, %x) : f32[4]
  %d = mul(%x, 2.0) : f32[4]
  %e = sub(%x, 0.5) : f32[4]
  return %a, %b, %c, %d, %e
}
)"),
            R"(func @f(%x: f32[4]) -> (f32[4], f32[4], f32[4], f32[4], f32[4]) {
  %a = mul(%x, 0.5) : f32[4]
  %d = mul(%x, 2.0) : f32[4]
  %e = sub(%x, 0.5) : f32[4]
  return %a, %a, %a, %d, %e
}
)");
}

TEST(CseTest, ResultTypesMustMatchIncludingSharding) {
  const char* text = R"(mesh @m(tp=2)

func @f(%x: f32[4]) -> (f32[4@tp], f32[4]) on @m {
  %a = neg(%x) : f32[4@tp]
  %b = neg(%x) : f32[4]
  return %a, %b
}
)";
  EXPECT_EQ(RunCse(text), text);
}

TEST(CseTest, DifferentStreamsAreDifferentOps) {
  EXPECT_EQ(RunCse(R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> (f32[4], f32[4], f32[4], f32[4], f32[4]) on @m {
  %r = rank() {axis = tp} : index
  %a = all_reduce(%x) {axis = tp, stream = 1} : f32[4]
  %b = all_reduce(%x) {axis = tp, stream = 2} : f32[4]
  %c = all_reduce(%x) {axis = tp, stream = 1} : f32[4]
  %d = all_reduce(%x) {axis = tp, stream = %r} : f32[4]
  %e = all_reduce(%x) {axis = tp, stream = %r} : f32[4]
  return %a, %b, %c, %d, %e
}
)"),
            R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> (f32[4], f32[4], f32[4], f32[4], f32[4]) on @m {
  %r = rank() {axis = tp} : index
  %a = all_reduce(%x) {axis = tp, stream = 1} : f32[4]
  %b = all_reduce(%x) {axis = tp, stream = 2} : f32[4]
  %d = all_reduce(%x) {axis = tp, stream = %r} : f32[4]
  return %a, %b, %a, %d, %d
}
)");
}

TEST(CseTest, MergesOpsWithSeveralResults) {
  EXPECT_EQ(RunCse(R"(func @f(%q: f32[1, 2, 4, 8]) -> (f32[1, 2, 4, 8], f32[1, 2, 4]) {
  %o, %l = attention(%q, %q, %q) : (f32[1, 2, 4, 8], f32[1, 2, 4])
  %o2, %l2 = attention(%q, %q, %q) : (f32[1, 2, 4, 8], f32[1, 2, 4])
  return %o2, %l2
}
)"),
            R"(func @f(%q: f32[1, 2, 4, 8]) -> (f32[1, 2, 4, 8], f32[1, 2, 4]) {
  %o, %l = attention(%q, %q, %q) : (f32[1, 2, 4, 8], f32[1, 2, 4])
  return %o, %l
}
)");
}

TEST(CseTest, LoopBodiesReuseDominatingOpsButNothingLeavesALoop) {
  EXPECT_EQ(RunCse(R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> (f32[4], f32[4], f32[4]) on @m {
  %n = neg(%x) : f32[4]
  %r = for %i = 0 to 4 step 1 iter(%a = %x) {
    %n2 = neg(%x) : f32[4]
    %e = exp(%x) : f32[4]
    %e2 = exp(%x) : f32[4]
    %s = add(%n2, %e) : f32[4]
    %s2 = add(%s, %e2) : f32[4]
    yield %s2
  } : f32[4]
  %r2 = for %j = 0 to 4 step 1 iter(%b = %x) {
    %e3 = exp(%x) : f32[4]
    yield %e3
  } : f32[4]
  %e4 = exp(%x) : f32[4]
  return %r, %r2, %e4
}
)"),
            R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> (f32[4], f32[4], f32[4]) on @m {
  %n = neg(%x) : f32[4]
  %r = for %i = 0 to 4 step 1 iter(%a = %x) {
    %e = exp(%x) : f32[4]
    %s = add(%n, %e) : f32[4]
    %s2 = add(%s, %e) : f32[4]
    yield %s2
  } : f32[4]
  %r2 = for %j = 0 to 4 step 1 iter(%b = %x) {
    %e3 = exp(%x) : f32[4]
    yield %e3
  } : f32[4]
  %e4 = exp(%x) : f32[4]
  return %r, %r2, %e4
}
)");
}

TEST(CseTest, NeverMergesLoops) {
  const char* text = R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> (f32[4], f32[4]) on @m {
  %r = for %i = 0 to 4 step 1 iter(%a = %x) {
    yield %a
  } : f32[4]
  %r2 = for %j = 0 to 4 step 1 iter(%b = %x) {
    yield %b
  } : f32[4]
  return %r, %r2
}
)";
  EXPECT_EQ(RunCse(text), text);
}

TEST(CseTest, ScalesLinearlyOnLongPrograms) {
  // 100k ops of which half duplicate the other half and all read %x: the merged ops'
  // uses of %x are interleaved with the survivors', which erasing one op at a time
  // would make quadratic.
  std::string text = "func @f(%x: f32[4]) -> f32[4] {\n  %v0 = neg(%x) : f32[4]\n";
  constexpr int kSteps = 50000;
  for (int i = 1; i <= kSteps; ++i) {
    absl::StrAppend(&text, "  %v", i, " = add(%v", i - 1, ", %x) : f32[4]\n");
    absl::StrAppend(&text, "  %w", i, " = add(%x, %v", i - 1, ") : f32[4]\n");
  }
  absl::StrAppend(&text, "  return %w", kSteps, "\n}\n");
  std::unique_ptr<Module> module = ParseForTest(text);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(EliminateCommonSubexpressions(*module), kSteps);
  Function* f = module->functions()[0];
  EXPECT_EQ(f->body()->size(), static_cast<size_t>(kSteps + 2));
  EXPECT_EQ(f->body()->argument(0)->users().size(), static_cast<size_t>(kSteps + 1));
}

}  // namespace
}  // namespace commir
