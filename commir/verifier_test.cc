// The verifier on IR built in memory: rules that parsed text cannot break (the parser
// already resolves names), such as SSA dominance after passes move or create ops, and
// malformed loops. Rules reachable from text are tested, with rendered messages and
// locations, in //parser:verifier_test.
#include "commir/verifier.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "commir/builder.h"
#include "commir/ir.h"
#include "gtest/gtest.h"

namespace commir {
namespace {

constexpr ElementType kF32 = ElementType::kF32;

Type T(std::vector<int64_t> dims) { return Type::Tensor(kF32, std::move(dims)); }

AttrDict Bounds(int64_t lower, int64_t upper) {
  AttrDict d;
  d.Set("lower", Attribute::Int(lower));
  d.Set("upper", Attribute::Int(upper));
  return d;
}

std::string Verify(Module& module) {
  absl::Status s = VerifyModule(module);
  return s.ok() ? "OK" : std::string(s.message());
}

class VerifierTest : public ::testing::Test {
 protected:
  VerifierTest() {
    mesh_ = module_.AddMesh(std::make_unique<Mesh>("m", std::vector<MeshAxis>{{"tp", 2, {}}}));
    fn_ = AddFunction(module_, "s", true, mesh_, {T({4})}, {T({4})}, {"x"});
    fn_->body()->argument(0)->set_loc({1, 20});
    x_ = fn_->body()->argument(0);
  }

  // A loop carrying x, with body `%n = neg(%a); yield %n`, at line `line`.
  Operation* Loop(int line, Value* init) {
    Value* inits[] = {init};
    Type types[] = {init->type()};
    Operation* loop =
        OpBuilder(fn_).CreateUnchecked(OpKind::kFor, inits, types, Bounds(0, 2), 1, {line, 8});
    Block* body = loop->region(0);
    body->AddArgument(Type::Index(), "i");
    Value* a = body->AddArgument(init->type(), "a");
    OpBuilder inner(fn_);
    inner.SetInsertionPointToEnd(body);
    inner_ = *inner.Create(OpKind::kNeg, {a}, {}, {}, 1, {line + 1, 10});
    inner.CreateUnchecked(OpKind::kYield, {inner_->result(0)}, {}, {}, 0, {line + 2, 5});
    return loop;
  }

  Module module_;
  Mesh* mesh_;
  Function* fn_;
  Value* x_;
  Operation* inner_ = nullptr;
};

TEST_F(VerifierTest, ValidLoopVerifies) {
  Operation* loop = Loop(3, x_);
  OpBuilder(fn_).CreateUnchecked(OpKind::kReturn, {loop->result(0)}, {}, {}, 0, {6, 3});
  EXPECT_EQ(Verify(module_), "OK");
}

TEST_F(VerifierTest, UseOfALoopBodyValueAfterTheLoop) {
  Loop(3, x_);
  OpBuilder b(fn_);
  Value* leaked = (*b.Create(OpKind::kExp, {inner_->result(0)}, {}, {}, 1, {6, 8}))->result(0);
  leaked->set_name("late");
  inner_->result(0)->set_name("n");
  b.CreateUnchecked(OpKind::kReturn, {leaked}, {}, {}, 0, {7, 3});
  EXPECT_EQ(Verify(module_), "6:8: error: operand %n of 'exp' does not dominate its use\n");
}

TEST_F(VerifierTest, UseBeforeDefinition) {
  OpBuilder b(fn_);
  Operation* first = *b.Create(OpKind::kNeg, {x_}, {}, {}, 1, {2, 8});
  first->result(0)->set_name("a");
  Operation* second = *b.Create(OpKind::kExp, {first->result(0)}, {}, {}, 1, {3, 8});
  b.CreateUnchecked(OpKind::kReturn, {second->result(0)}, {}, {}, 0, {4, 3});
  EXPECT_EQ(Verify(module_), "OK");
  // A pass moves the user above its operand's definition.
  std::unique_ptr<Operation> moved = fn_->body()->Remove(second);
  fn_->body()->InsertBefore(first, std::move(moved));
  EXPECT_EQ(Verify(module_), "3:8: error: operand %a of 'exp' does not dominate its use\n");
}

TEST_F(VerifierTest, OpUsingItsOwnResult) {
  OpBuilder b(fn_);
  Operation* op = *b.Create(OpKind::kNeg, {x_}, {}, {}, 1, {2, 8});
  op->result(0)->set_name("self");
  op->SetOperand(0, op->result(0));
  b.CreateUnchecked(OpKind::kReturn, {x_}, {}, {}, 0, {3, 3});
  EXPECT_EQ(Verify(module_), "2:8: error: operand %self of 'neg' does not dominate its use\n");
}

TEST_F(VerifierTest, ValueOfAnotherFunction) {
  Function* other = AddFunction(module_, "t", true, mesh_, {T({4})}, {T({4})}, {"y"});
  OpBuilder(other).CreateUnchecked(OpKind::kReturn, {other->body()->argument(0)}, {}, {}, 0,
                                   {9, 3});
  OpBuilder(fn_).CreateUnchecked(OpKind::kReturn, {other->body()->argument(0)}, {}, {}, 0,
                                 {2, 3});
  EXPECT_EQ(Verify(module_), "2:3: error: operand %y of 'return' does not dominate its use\n");
}

TEST_F(VerifierTest, StreamOperandMustDominateAndBeAnIndex) {
  OpBuilder b(fn_);
  AttrDict axis;
  axis.Set("axis", Attribute::Ident("tp"));
  Operation* shift = *b.Create(OpKind::kShift, {x_}, axis, {}, 1, {2, 8});
  Operation* rank = *b.Create(OpKind::kRank, {}, axis, {}, 1, {3, 8});
  rank->result(0)->set_name("r");
  shift->SetStreamOperand(rank->result(0));
  b.CreateUnchecked(OpKind::kReturn, {x_}, {}, {}, 0, {4, 3});
  EXPECT_EQ(Verify(module_), "2:8: error: operand %r of 'shift' does not dominate its use\n");
  shift->SetStreamOperand(x_);
  EXPECT_EQ(Verify(module_), "2:8: error: 'stream' must be a non-negative integer or an index value\n");
}

TEST_F(VerifierTest, MalformedLoops) {
  Value* inits[] = {x_};
  Type types[] = {T({4})};
  OpBuilder b(fn_);
  // No body arguments at all.
  Operation* bare = b.CreateUnchecked(OpKind::kFor, inits, types, Bounds(0, 1), 1, {2, 8});
  OpBuilder inner(fn_);
  inner.SetInsertionPointToEnd(bare->region(0));
  inner.CreateUnchecked(OpKind::kYield, {x_}, {}, {}, 0, {3, 5});
  // The induction variable is not an index, and the carried value changes type.
  Operation* wrong = b.CreateUnchecked(OpKind::kFor, inits, types, Bounds(0, 1), 1, {5, 8});
  wrong->region(0)->AddArgument(T({4}), "i");
  wrong->region(0)->AddArgument(T({2}), "a");
  inner.SetInsertionPointToEnd(wrong->region(0));
  inner.CreateUnchecked(OpKind::kYield, {x_}, {}, {}, 0, {6, 5});
  // No body op at all.
  Operation* empty = b.CreateUnchecked(OpKind::kFor, {}, {}, Bounds(0, 1), 1, {8, 3});
  empty->region(0)->AddArgument(Type::Index(), "k");
  b.CreateUnchecked(OpKind::kReturn, {x_}, {}, {}, 0, {9, 3});
  EXPECT_EQ(Verify(module_),
            "2:8: error: the loop body must take the induction variable and each carried value\n"
            "5:8: error: the induction variable must be an index\n"
            "5:8: error: carried value 0 must keep its type f32[4]\n"
            "8:3: error: the loop body must end with 'yield'\n");
}

TEST_F(VerifierTest, TerminatorsInTheWrongPlace) {
  OpBuilder b(fn_);
  b.CreateUnchecked(OpKind::kYield, {x_}, {}, {}, 0, {2, 3});
  b.CreateUnchecked(OpKind::kReturn, {x_}, {}, {}, 0, {3, 3});
  EXPECT_EQ(Verify(module_),
            "2:3: error: 'yield' is only valid in a loop body\n"
            "2:3: error: 'yield' must be the last op of its block\n");
}

TEST_F(VerifierTest, LiteralsWhereNotAllowed) {
  OpBuilder b(fn_);
  AttrDict axis;
  axis.Set("axis", Attribute::Ident("tp"));
  Operation* rank = b.CreateUnchecked(OpKind::kRank, {}, {Type::Index()}, axis, 0, {1, 8});
  Operation* exp = b.CreateUnchecked(OpKind::kExp, {}, {T({})}, {}, 0, {2, 8});
  exp->AddLiteralOperand(1.0, T({}));
  Operation* add = b.CreateUnchecked(OpKind::kAdd, {}, {T({})}, {}, 0, {3, 8});
  add->AddLiteralOperand(1.0, T({}));
  add->AddLiteralOperand(2.0, T({}));
  Operation* literal_at = b.CreateUnchecked(OpKind::kAdd, {}, {Type::Index()}, {}, 0, {4, 8});
  literal_at->AddOperand(rank->result(0));
  Value* lit = literal_at->AddLiteralOperand(0.5, Type::Index());
  lit->set_loc({4, 20});
  b.CreateUnchecked(OpKind::kReturn, {x_}, {}, {}, 0, {5, 3});
  EXPECT_EQ(Verify(module_),
            "2:8: error: 'exp' does not take number literals\n"
            "3:8: error: 'add' needs at least one operand that is a value\n"
            "4:20: error: literal 0.5 is not a valid index value\n");
}

TEST_F(VerifierTest, ErrorsWithoutLocationsUseTheFunctions) {
  Module module;
  Function* f = module.AddFunction(std::make_unique<Function>("f", false, Location{4, 1}));
  (void)f;
  EXPECT_EQ(Verify(module), "4:1: error: the function body must end with 'return'\n");
}

TEST_F(VerifierTest, ResultTypesMustMatchInference) {
  OpBuilder b(fn_);
  Operation* neg = b.CreateUnchecked(OpKind::kNeg, {x_}, {T({5})}, {}, 0, {2, 8});
  b.CreateUnchecked(OpKind::kReturn, {neg->result(0)}, {}, {}, 0, {3, 3});
  EXPECT_EQ(Verify(module_),
            "2:8: error: result type f32[5] does not match the inferred type f32[4]\n"
            "3:3: error: result 0: each device must return f32[4] (its part of f32[4]), got "
            "f32[5]\n");
}

}  // namespace
}  // namespace commir
