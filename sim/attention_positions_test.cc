#include "sim/attention_positions.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "parser/parser.h"

namespace commir::sim {
namespace {

class AttentionPositionsTest : public ::testing::Test {
 protected:
  // Whether the first loop in @f's body prices attention differently per iteration.
  bool Varies(const std::string& body) {
    const std::string source = R"(mesh @m(sp=4)
spmd func @g(%q: f32[1, 2, 8, 4], %p: index) -> f32[1, 2, 8, 4] on @m {
  %o = attention(%q, %q, %q, %p) {causal}
  return %o
}
spmd func @f(%q: f32[1, 2, 8, 4]) -> f32[1, 2, 8, 4] on @m {
  %r = rank() {axis = sp} : index
  %base = mul(%r, 8) : index
)" + body + R"(
  return %out
})";
    absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(source, "test.commir");
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) return false;
    module_ = std::move(*module);
    const Function* f = module_->FindFunction("f");
    for (const Operation* op : *f->body()) {
      if (op->Is(OpKind::kFor)) return AttentionPositionsVaryIn(*op, module_.get());
    }
    ADD_FAILURE() << "no loop";
    return false;
  }
  std::unique_ptr<Module> module_;
};

TEST_F(AttentionPositionsTest, PositionFromTheInductionVariableVaries) {
  EXPECT_TRUE(Varies(R"(  %out = for %i = 0 to 4 step 1 iter(%acc = %q) {
    %d = sub(%r, %i) : index
    %kp = mul(%d, 8) : index
    %o = attention(%q, %acc, %acc, %base, %kp) {causal}
    yield %o
  })"));
}

TEST_F(AttentionPositionsTest, PositionsFixedBeforeTheLoopDoNot) {
  EXPECT_FALSE(Varies(R"(  %out = for %i = 0 to 4 step 1 iter(%acc = %q) {
    %kp = add(%base, 8) : index
    %o = attention(%q, %acc, %acc, %base, %kp) {causal}
    yield %o
  })"));
}

TEST_F(AttentionPositionsTest, NonCausalAttentionNeverVaries) {
  EXPECT_FALSE(Varies(R"(  %out = for %i = 0 to 4 step 1 iter(%acc = %q) {
    %kp = mul(%i, 8) : index
    %o = attention(%q, %acc, %acc, %base, %kp)
    yield %o
  })"));
}

TEST_F(AttentionPositionsTest, AnInnerLoopsVariableRepeatsInEachOuterIteration) {
  EXPECT_FALSE(Varies(R"(  %out = for %i = 0 to 4 step 1 iter(%acc = %q) {
    %in = for %j = 0 to 4 step 1 iter(%a = %acc) {
      %kp = mul(%j, 8) : index
      %o = attention(%q, %a, %a, %base, %kp) {causal}
      yield %o
    }
    yield %in
  })"));
}

TEST_F(AttentionPositionsTest, ACalleesPositionFromItsArgumentVaries) {
  EXPECT_TRUE(Varies(R"(  %out = for %i = 0 to 4 step 1 iter(%acc = %q) {
    %o = call @g(%acc, %base) : f32[1, 2, 8, 4]
    yield %o
  })"));
}

}  // namespace
}  // namespace commir::sim
