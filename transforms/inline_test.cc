// inline on call graphs that are the hard part (testing/call_programs.h). The work is
// asserted by counts, not time: how many calls were inlined and how many ops the result
// holds, against what the program's shape gives by hand.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/call_programs.h"
#include "transforms/inline.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

using ::testing::HasSubstr;

// Ops of `function`, loop bodies included.
int64_t OpCount(const Function& function) {
  int64_t n = 0;
  WalkOps(function.body(), [&](Operation*) { ++n; });
  return n;
}

// A chain of 10,000 calls: callees first, each call copies its callee once inlined (a
// `neg`), so 10,000 calls are inlined and every function ends as `neg` and `return`. (The
// sweep over each function in turn inlined 10,000 + 9,999 + ... calls: 50 million.)
TEST(InlineTest, ChainInlinesEachCallOnce) {
  std::unique_ptr<Module> module = testing::ParseForTest(testing::DeepChain(10000));
  ASSERT_NE(module, nullptr);
  absl::StatusOr<int64_t> inlined = InlineCalls(*module);
  ASSERT_TRUE(inlined.ok()) << inlined.status();
  EXPECT_EQ(*inlined, 10000);
  for (const Function* f : module->functions()) {
    ASSERT_EQ(OpCount(*f), 2) << f->name();
    EXPECT_TRUE(f->body()->front()->Is(OpKind::kNeg)) << f->name();
  }
}

// One function of the chain, its callees left as they are: one call per level.
TEST(InlineTest, ChainInlinesIntoOneFunctionOnceALevel) {
  std::unique_ptr<Module> module = testing::ParseForTest(testing::DeepChain(10000));
  ASSERT_NE(module, nullptr);
  Function& main = *module->FindFunction("main");
  absl::StatusOr<int64_t> inlined = InlineCalls(main);
  ASSERT_TRUE(inlined.ok()) << inlined.status();
  EXPECT_EQ(*inlined, 10000);
  EXPECT_EQ(OpCount(main), 2);
  EXPECT_TRUE(HasCalls(*module->FindFunction("f0")));
}

// Forty levels of two calls each: 2^40 copies of the last function's `neg`. Refused at
// a call before anything changes. Callees first, @fk's calls bring 2^(39-k) ops each,
// so the copies pass 2^20 at @f20's first call (the calls of @f21 to @f39 copy
// 2^20 - 2 ops; it brings 2^19 more).
TEST(InlineTest, FanOutIsRefusedBeforeAnythingChanges) {
  const std::string text = testing::FanOut(40);
  std::unique_ptr<Module> module = testing::ParseForTest(text);
  ASSERT_NE(module, nullptr);
  const std::string before = PrintModule(*module);
  DiagnosticEngine diagnostics;
  absl::StatusOr<int64_t> inlined = InlineCalls(*module, &diagnostics);
  ASSERT_FALSE(inlined.ok());
  EXPECT_THAT(inlined.status().message(), HasSubstr("inlining would copy more than 1048576 ops"));
  const std::vector<Diagnostic> errors = diagnostics.Sorted();
  ASSERT_EQ(errors.size(), 1u);
  const Diagnostic& error = errors[0];
  // @fk is lines 6 + 6k to 10 + 6k, its first call on line 7 + 6k.
  EXPECT_EQ(error.loc.line, 7 + 6 * 20);
  EXPECT_EQ(error.loc.col, 8);
  EXPECT_THAT(error.message, HasSubstr("this call of @f21 brings 524288 of them"));
  EXPECT_EQ(PrintModule(*module), before);
}

TEST(InlineTest, FanOutIsRefusedForOneFunction) {
  std::unique_ptr<Module> module = testing::ParseForTest(testing::FanOut(40));
  ASSERT_NE(module, nullptr);
  Function& main = *module->FindFunction("main");
  DiagnosticEngine diagnostics;
  absl::StatusOr<int64_t> inlined = InlineCalls(main, &diagnostics);
  ASSERT_FALSE(inlined.ok());
  EXPECT_THAT(inlined.status().message(), HasSubstr("inlining would copy more than 1048576 ops"));
  ASSERT_EQ(diagnostics.Sorted().size(), 1u);
  EXPECT_EQ(diagnostics.Sorted()[0].loc.line, 2);  // @main's only call
  EXPECT_EQ(OpCount(main), 2);
}

// The bound is the size of the result: 2^18 copies of `neg` in @main (and fewer in
// each callee: 2^19 - 2 + 2^18 copied in all) are within it.
TEST(InlineTest, FanOutWithinTheBoundInlines) {
  std::unique_ptr<Module> module = testing::ParseForTest(testing::FanOut(18));
  ASSERT_NE(module, nullptr);
  absl::StatusOr<int64_t> inlined = InlineCalls(*module);
  ASSERT_TRUE(inlined.ok()) << inlined.status();
  EXPECT_EQ(*inlined, 2 * 18 + 1);  // each call once, callees first
  EXPECT_EQ(OpCount(*module->FindFunction("main")), (int64_t{1} << 18) + 1);
}

}  // namespace
}  // namespace commir
