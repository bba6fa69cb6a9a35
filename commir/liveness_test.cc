#include "commir/liveness.h"

#include <memory>
#include <string>
#include <vector>

#include "commir/diagnostics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"

namespace commir {
namespace {

using ::testing::UnorderedElementsAre;

// Names of `values`, for readable expectations.
std::vector<std::string> Names(absl::Span<const Value* const> values) {
  std::vector<std::string> names;
  for (const Value* v : values) names.push_back(v->name());
  return names;
}

// The op of `block` whose first result is named `name`.
const Operation* Defining(const Block& block, const std::string& name) {
  for (const Operation* op : block) {
    if (op->num_results() > 0 && op->result(0)->name() == name) return op;
  }
  ADD_FAILURE() << "no %" << name;
  return nullptr;
}

TEST(Liveness, NestedUsesKeepOuterValuesUntilTheLoopEnds) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(
      "mesh @m(dp=2)\n"
      "spmd func @f(%x: f32[2]) -> f32[2] {\n"
      "  %w = neg(%x)\n"
      "  %unused = neg(%x)\n"
      "  %r = for %i = 0 to 2 step 1 iter(%a = %x) {\n"
      "    %q = for %j = 0 to 2 step 1 iter(%b = %a) {\n"
      "      %c = add(%b, %w)\n"
      "      yield %c\n"
      "    } : (f32[2])\n"
      "    %s = rank() {axis = dp}\n"
      "    %t = neg(%q) {stream = %s}\n"
      "    yield %t\n"
      "  } : (f32[2])\n"
      "  %z = neg(%r)\n"
      "  return %z\n"
      "}\n",
      diagnostics);
  ASSERT_NE(module, nullptr);
  const Function& f = *module->functions()[0];
  Liveness liveness(f);
  const Block& body = *f.body();
  // %x's last use is the loop's init operand; %w's a use two loops deep.
  EXPECT_THAT(Names(liveness.DeadAfter(*Defining(body, "unused"))),
              UnorderedElementsAre("unused"));
  EXPECT_THAT(Names(liveness.DeadAfter(*Defining(body, "r"))), UnorderedElementsAre("x", "w"));
  EXPECT_THAT(Names(liveness.DeadAfter(*Defining(body, "z"))), UnorderedElementsAre("r"));
  EXPECT_THAT(Names(liveness.ReleasedByOwner(body)), UnorderedElementsAre("z"));

  const Block& outer = *Defining(body, "r")->region(0);
  // %a dies at the inner loop (its init); the stream operand %s at the op it names.
  EXPECT_THAT(Names(liveness.DeadAfter(*Defining(outer, "q"))), UnorderedElementsAre("a"));
  EXPECT_THAT(Names(liveness.DeadAfter(*Defining(outer, "t"))), UnorderedElementsAre("q", "s"));
  // %t is yielded: the loop reads it before releasing it; %i is never used.
  EXPECT_THAT(Names(liveness.ReleasedByOwner(outer)), UnorderedElementsAre("i", "t"));

  const Block& inner = *Defining(outer, "q")->region(0);
  EXPECT_THAT(Names(liveness.DeadAfter(*Defining(inner, "c"))), UnorderedElementsAre("b"));
  EXPECT_THAT(Names(liveness.ReleasedByOwner(inner)), UnorderedElementsAre("j", "c"));
}

}  // namespace
}  // namespace commir
