#include "transforms/dce.h"

#include "absl/strings/str_cat.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "gtest/gtest.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

using testing::ParseForTest;
using testing::TransformText;

std::string RunDce(absl::string_view input) {
  return TransformText(input, [](Module& m) { EliminateDeadCode(m); });
}

TEST(DceTest, ErasesUnusedChains) {
  EXPECT_EQ(RunDce(R"(func @f(%x: f32[4]) -> f32[4] {
  %a = neg(%x) : f32[4]
  %b = exp(%a) : f32[4]
  %c = abs(%x) : f32[4]
  %d = mul(%b, 2.0) : f32[4]
  return %c
}
)"),
            R"(func @f(%x: f32[4]) -> f32[4] {
  %c = abs(%x) : f32[4]
  return %c
}
)");
}

TEST(DceTest, KeepsEverythingReturnedOrFeedingAReturn) {
  const char* text = R"(func @f(%x: f32[4], %y: f32[4]) -> (f32[4], f32[4]) {
  %a = add(%x, %y) : f32[4]
  %b = mul(%a, %a) : f32[4]
  return %b, %a
}
)";
  EXPECT_EQ(RunDce(text), text);
}

TEST(DceTest, ReturnsStatistics) {
  std::unique_ptr<Module> module = ParseForTest(R"(func @f(%x: f32[4]) -> f32[4] {
  %a = neg(%x) : f32[4]
  %b = neg(%a) : f32[4]
  return %x
}
)");
  ASSERT_NE(module, nullptr);
  DceStats stats = EliminateDeadCode(*module);
  EXPECT_EQ(stats.ops_erased, 2);
  EXPECT_EQ(stats.carried_values_dropped, 0);
}

TEST(DceTest, ErasesMultiResultOpOnlyWhenNoResultIsUsed) {
  const char* text = R"(func @f(%q: f32[1, 2, 4, 8], %k: f32[1, 2, 4, 8], %v: f32[1, 2, 4, 8]) -> f32[1, 2, 4] {
  %o, %lse = attention(%q, %k, %v) : (f32[1, 2, 4, 8], f32[1, 2, 4])
  %o2, %lse2 = attention(%q, %k, %v) : (f32[1, 2, 4, 8], f32[1, 2, 4])
  return %lse
}
)";
  EXPECT_EQ(RunDce(text), R"(func @f(%q: f32[1, 2, 4, 8], %k: f32[1, 2, 4, 8], %v: f32[1, 2, 4, 8]) -> f32[1, 2, 4] {
  %o, %lse = attention(%q, %k, %v) : (f32[1, 2, 4, 8], f32[1, 2, 4])
  return %lse
}
)");
}

TEST(DceTest, ErasesUnusedLoopsAndTheirInputs) {
  EXPECT_EQ(RunDce(R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> f32[4] on @m {
  %init = neg(%x) : f32[4]
  %r = for %i = 0 to 4 step 1 iter(%a = %init) {
    %a1 = add(%a, %x) : f32[4]
    yield %a1
  } : f32[4]
  return %x
}
)"),
            R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> f32[4] on @m {
  return %x
}
)");
}

TEST(DceTest, ErasesDeadOpsInsideLiveLoops) {
  EXPECT_EQ(RunDce(R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> f32[4] on @m {
  %r = for %i = 0 to 4 step 1 iter(%a = %x) {
    %dead = exp(%a) : f32[4]
    %j = mul(%i, 2) : index
    %a1 = add(%a, %x) : f32[4]
    yield %a1
  } : f32[4]
  return %r
}
)"),
            R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> f32[4] on @m {
  %r = for %i = 0 to 4 step 1 iter(%a = %x) {
    %a1 = add(%a, %x) : f32[4]
    yield %a1
  } : f32[4]
  return %r
}
)");
}

TEST(DceTest, DropsCarriedValuesNothingReads) {
  // %b's result is unused and only its own update reads it, so %b, %b1 and the
  // initial value's producer all go.
  EXPECT_EQ(RunDce(R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> f32[4] on @m {
  %y = exp(%x) : f32[4]
  %r, %s = for %i = 0 to 4 step 1 iter(%a = %x, %b = %y) {
    %a1 = add(%a, %x) : f32[4]
    %b1 = mul(%b, %b) : f32[4]
    yield %a1, %b1
  } : (f32[4], f32[4])
  return %r
}
)"),
            R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> f32[4] on @m {
  %r = for %i = 0 to 4 step 1 iter(%a = %x) {
    %a1 = add(%a, %x) : f32[4]
    yield %a1
  } : f32[4]
  return %r
}
)");
}

TEST(DceTest, KeepsCarriedValuesThatFeedLiveOnes) {
  // %s is unused after the loop, but %a1 reads %b in every iteration.
  const char* text = R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> f32[4] on @m {
  %r, %s = for %i = 0 to 4 step 1 iter(%a = %x, %b = %x) {
    %a1 = add(%a, %b) : f32[4]
    %b1 = neg(%b) : f32[4]
    yield %a1, %b1
  } : (f32[4], f32[4])
  return %r
}
)";
  EXPECT_EQ(RunDce(text), text);
}

TEST(DceTest, KeepsCarriedValuesWhoseResultIsUsed) {
  // Only the second carried value is returned; the first is read by nothing.
  EXPECT_EQ(RunDce(R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> f32[4] on @m {
  %r, %s = for %i = 0 to 4 step 1 iter(%a = %x, %b = %x) {
    %a1 = neg(%a) : f32[4]
    %b1 = shift(%b) {axis = tp, stream = 1} : f32[4]
    yield %a1, %b1
  } : (f32[4], f32[4])
  return %s
}
)"),
            R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> f32[4] on @m {
  %s = for %i = 0 to 4 step 1 iter(%b = %x) {
    %b1 = shift(%b) {axis = tp, stream = 1} : f32[4]
    yield %b1
  } : f32[4]
  return %s
}
)");
}

TEST(DceTest, RebuiltLoopKeepsItsStreamOperand) {
  std::unique_ptr<Module> module = ParseForTest(R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> f32[4] on @m {
  %c = rank() {axis = tp} : index
  %r, %s = for %i = 0 to 4 step 1 iter(%a = %x, %b = %x) {stream = %c} {
    %a1 = neg(%a) : f32[4]
    yield %a1, %b
  } : (f32[4], f32[4])
  return %r
}
)");
  ASSERT_NE(module, nullptr);
  DceStats stats = EliminateDeadCode(*module);
  EXPECT_EQ(stats.carried_values_dropped, 1);
  EXPECT_EQ(stats.ops_erased, 0);
  EXPECT_TRUE(VerifyModule(*module).ok());
  EXPECT_EQ(PrintModule(*module), R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> f32[4] on @m {
  %c = rank() {axis = tp} : index
  %r = for %i = 0 to 4 step 1 iter(%a = %x) {stream = %c} {
    %a1 = neg(%a) : f32[4]
    yield %a1
  } : f32[4]
  return %r
}
)");
}

TEST(DceTest, StreamOperandsKeepTheirProducers) {
  const char* text = R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> f32[4] on @m {
  %r = rank() {axis = tp} : index
  %s = rem(%r, 2) : index
  %y = neg(%x) {stream = %s} : f32[4]
  return %y
}
)";
  EXPECT_EQ(RunDce(text), text);
}

TEST(DceTest, HandlesNestedLoops) {
  EXPECT_EQ(RunDce(R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> f32[4] on @m {
  %r = for %i = 0 to 2 step 1 iter(%a = %x) {
    %inner, %unused = for %j = 0 to 2 step 1 iter(%p = %a, %q = %a) {
      %p1 = add(%p, %x) : f32[4]
      %q1 = exp(%q) : f32[4]
      yield %p1, %q1
    } : (f32[4], f32[4])
    %dead = for %k = 0 to 2 step 1 iter(%z = %a) {
      yield %z
    } : f32[4]
    yield %inner
  } : f32[4]
  return %r
}
)"),
            R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> f32[4] on @m {
  %r = for %i = 0 to 2 step 1 iter(%a = %x) {
    %inner = for %j = 0 to 2 step 1 iter(%p = %a) {
      %p1 = add(%p, %x) : f32[4]
      yield %p1
    } : f32[4]
    yield %inner
  } : f32[4]
  return %r
}
)");
}

TEST(DceTest, ProcessesEveryFunction) {
  EXPECT_EQ(RunDce(R"(func @f(%x: f32[4]) -> f32[4] {
  %a = neg(%x) : f32[4]
  return %x
}

func @g(%x: f32[4]) -> f32[4] {
  %b = neg(%x) : f32[4]
  return %x
}
)"),
            R"(func @f(%x: f32[4]) -> f32[4] {
  return %x
}

func @g(%x: f32[4]) -> f32[4] {
  return %x
}
)");
}

TEST(DceTest, ScalesLinearlyWhenDeadAndLiveOpsShareAnOperand) {
  // 50k dead ops interleaved with 50k live ones, all reading %c: erasing the dead ones
  // one at a time would search %c's long user list each time.
  std::string text =
      "func @f(%x: f32[4]) -> f32[4] {\n  %c = full() {value = 2.0} : f32[4]\n"
      "  %v0 = neg(%x) : f32[4]\n";
  constexpr int kSteps = 50000;
  for (int i = 1; i <= kSteps; ++i) {
    absl::StrAppend(&text, "  %d", i, " = mul(%x, %c) : f32[4]\n");
    absl::StrAppend(&text, "  %v", i, " = mul(%v", i - 1, ", %c) : f32[4]\n");
  }
  absl::StrAppend(&text, "  return %v", kSteps, "\n}\n");
  std::unique_ptr<Module> module = ParseForTest(text);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(EliminateDeadCode(*module).ops_erased, kSteps);
  EXPECT_EQ(module->functions()[0]->body()->size(), static_cast<size_t>(kSteps + 3));
}

}  // namespace
}  // namespace commir
