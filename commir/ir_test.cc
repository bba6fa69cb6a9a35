// The SSA graph: attributes, use lists, mutation (RAUW, erase, insertion, operands),
// literal and stream operands, nesting, walks, functions and modules.
#include "commir/ir.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/hash/hash.h"
#include "commir/attribute.h"
#include "commir/builder.h"
#include "commir/op_def.h"
#include "gtest/gtest.h"

namespace commir {
namespace {

using ::testing::Test;

constexpr ElementType kF32 = ElementType::kF32;

// ---- Attributes -----------------------------------------------------------------

TEST(AttributeTest, ToStringOfEveryKind) {
  EXPECT_EQ(Attribute::Int(42).ToString(), "42");
  EXPECT_EQ(Attribute::Int(-7).ToString(), "-7");
  EXPECT_EQ(Attribute::Float(0.25).ToString(), "0.25");
  EXPECT_EQ(Attribute::Float(2).ToString(), "2.0");
  EXPECT_EQ(Attribute::Bool(true).ToString(), "true");
  EXPECT_EQ(Attribute::Bool(false).ToString(), "false");
  EXPECT_EQ(Attribute::String("plain").ToString(), "\"plain\"");
  EXPECT_EQ(Attribute::String("a\"b\\c").ToString(), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(Attribute::Ident("sum").ToString(), "sum");
  EXPECT_EQ(Attribute::IntList({1, 0, 2}).ToString(), "[1, 0, 2]");
  EXPECT_EQ(Attribute::List({}).ToString(), "[]");
  EXPECT_EQ(Attribute::List({Attribute::Int(1), Attribute::Float(1.5), Attribute::Ident("x"),
                             Attribute::List({Attribute::Bool(false)})})
                .ToString(),
            "[1, 1.5, x, [false]]");
  EXPECT_EQ(Attribute::Axes({"dp", "tp"}).ToString(), "(dp, tp)");
  EXPECT_EQ(Attribute::Axes({"tp"}).ToString(), "tp");
}

TEST(AttributeTest, Accessors) {
  EXPECT_TRUE(Attribute::Int(3).is_int());
  EXPECT_TRUE(Attribute::Int(3).is_number());
  EXPECT_TRUE(Attribute::Float(3).is_number());
  EXPECT_FALSE(Attribute::Float(3).is_int());
  EXPECT_FALSE(Attribute::Bool(true).is_number());
  EXPECT_EQ(Attribute::Int(3).number_value(), 3.0);
  EXPECT_EQ(Attribute::Float(0.5).number_value(), 0.5);
  EXPECT_EQ(Attribute::IntList({4, 5}).int_list(), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(Attribute::List({Attribute::Int(1), Attribute::Float(2)}).int_list(), std::nullopt);
  EXPECT_EQ(Attribute::Int(1).int_list(), std::nullopt);
  // A single axis is an identifier, as written; a group keeps its order.
  EXPECT_EQ(Attribute::Axes({"tp"}).kind(), Attribute::Kind::kIdent);
  EXPECT_EQ(Attribute::Axes({"tp", "dp"}).kind(), Attribute::Kind::kAxes);
  EXPECT_EQ(Attribute::Axes({"tp", "dp"}).axes(), (AxisList{"tp", "dp"}));
  EXPECT_EQ(Attribute::Ident("tp").axes(), AxisList{"tp"});
  EXPECT_TRUE(Attribute::Int(1).axes().empty());
}

TEST(AttributeTest, EqualityAndHash) {
  EXPECT_EQ(Attribute::Int(1), Attribute::Int(1));
  EXPECT_NE(Attribute::Int(1), Attribute::Float(1));
  EXPECT_NE(Attribute::Ident("x"), Attribute::String("x"));
  EXPECT_NE(Attribute::Axes({"a", "b"}), Attribute::List({Attribute::Ident("a"), Attribute::Ident("b")}));
  EXPECT_EQ(Attribute::IntList({1, 2}), Attribute::IntList({1, 2}));
  EXPECT_NE(Attribute::IntList({1, 2}), Attribute::IntList({2, 1}));
  EXPECT_EQ(absl::HashOf(Attribute::IntList({1, 2})), absl::HashOf(Attribute::IntList({1, 2})));
}

TEST(FormatFloatTest, SpecialValuesAndIntegers) {
  EXPECT_EQ(FormatFloat(1.0), "1.0");
  EXPECT_EQ(FormatFloat(0.0), "0.0");
  EXPECT_EQ(FormatFloat(-0.0), "-0.0");
  EXPECT_EQ(FormatFloat(-3.0), "-3.0");
  EXPECT_EQ(FormatFloat(1e-05), "1e-05");
  EXPECT_EQ(FormatFloat(1e-6), "1e-06");
  EXPECT_EQ(FormatFloat(0.1), "0.1");
  EXPECT_EQ(FormatFloat(0.125), "0.125");
  EXPECT_EQ(FormatFloat(-2.5e-3), "-0.0025");
  EXPECT_EQ(FormatFloat(1e300), "1e+300");
  EXPECT_EQ(FormatFloat(123456789.0), "123456789.0");
  EXPECT_EQ(FormatFloat(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(FormatFloat(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(FormatFloat(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(FormatFloat(-std::numeric_limits<double>::quiet_NaN()), "nan");
}

// Shortest text that reads back to the same double, and always reads as a float.
TEST(FormatFloatTest, RoundTripsExactly) {
  std::mt19937_64 rng(1234);
  std::vector<double> values = {1e-05,
                                0.1,
                                1.0 / 3.0,
                                2.0 / 3.0,
                                6.02214076e23,
                                std::numeric_limits<double>::min(),
                                std::numeric_limits<double>::denorm_min(),
                                std::numeric_limits<double>::max(),
                                std::numeric_limits<double>::lowest(),
                                std::numeric_limits<double>::epsilon(),
                                9007199254740993.0,
                                1e16,
                                0.3};
  for (int i = 0; i < 2000; ++i) {
    uint64_t bits = rng();
    double d;
    static_assert(sizeof(d) == sizeof(bits));
    std::memcpy(&d, &bits, sizeof(d));
    if (std::isfinite(d)) values.push_back(d);
    values.push_back(std::ldexp(static_cast<double>(rng() % 100000), static_cast<int>(rng() % 80) - 40));
  }
  for (double v : values) {
    std::string text = FormatFloat(v);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), v) << text;
    EXPECT_NE(text.find_first_of(".e"), std::string::npos) << text;
  }
}

TEST(AttrDictTest, SetFindEraseAndGetters) {
  AttrDict d;
  EXPECT_TRUE(d.empty());
  d.Set("dim", Attribute::Int(1));
  d.Set("eps", Attribute::Float(1e-5));
  d.Set("causal", Attribute::Bool(true));
  d.Set("reduce", Attribute::Ident("max"));
  EXPECT_EQ(d.size(), 4u);
  EXPECT_TRUE(d.Has("dim"));
  EXPECT_FALSE(d.Has("perm"));
  EXPECT_EQ(d.Find("perm"), nullptr);
  EXPECT_EQ(d.GetInt("dim", 9), 1);
  EXPECT_EQ(d.GetInt("eps", 9), 9);  // not an integer: the default
  EXPECT_EQ(d.GetInt("missing", -1), -1);
  EXPECT_EQ(d.GetNumber("eps", 0), 1e-5);
  EXPECT_EQ(d.GetNumber("dim", 0), 1.0);
  EXPECT_EQ(d.GetNumber("causal", 7), 7);
  EXPECT_TRUE(d.GetBool("causal", false));
  EXPECT_FALSE(d.GetBool("dim", false));
  EXPECT_EQ(d.GetIdent("reduce", "sum"), "max");
  EXPECT_EQ(d.GetIdent("dim", "sum"), "sum");
  // Set replaces in place and keeps insertion order.
  d.Set("dim", Attribute::Int(-1));
  EXPECT_EQ(d.size(), 4u);
  EXPECT_EQ(d.entries()[0].first, "dim");
  EXPECT_EQ(d.GetInt("dim", 0), -1);
  EXPECT_TRUE(d.Erase("eps"));
  EXPECT_FALSE(d.Erase("eps"));
  EXPECT_EQ(d.size(), 3u);
  EXPECT_EQ(d.entries()[1].first, "causal");
}

TEST(AttrDictTest, EqualityAndHashIgnoreOrder) {
  AttrDict a;
  a.Set("x", Attribute::Int(1));
  a.Set("y", Attribute::Bool(true));
  AttrDict b;
  b.Set("y", Attribute::Bool(true));
  b.Set("x", Attribute::Int(1));
  EXPECT_TRUE(a == b);
  EXPECT_EQ(absl::HashOf(a), absl::HashOf(b));
  b.Set("x", Attribute::Int(2));
  EXPECT_FALSE(a == b);
  AttrDict c;
  c.Set("x", Attribute::Int(1));
  EXPECT_FALSE(a == c);
  EXPECT_FALSE(c == a);
}

// ---- IR construction and mutation ------------------------------------------------

class IrTest : public Test {
 protected:
  IrTest() {
    mesh_ = module_.AddMesh(std::make_unique<Mesh>("m", std::vector<MeshAxis>{{"tp", 4, {}}}));
    Type t = Type::Tensor(kF32, {8});
    Type types[] = {t, t};
    fn_ = AddFunction(module_, "f", /*spmd=*/false, mesh_, types, {t}, {"x", "y"});
    x_ = fn_->body()->argument(0);
    y_ = fn_->body()->argument(1);
  }

  Operation* Binary(OpKind kind, Value* a, Value* b) {
    absl::StatusOr<Operation*> op = OpBuilder(fn_).Create(kind, {a, b});
    EXPECT_TRUE(op.ok()) << op.status();
    return *op;
  }

  static std::vector<Operation*> Ops(const Block* block) {
    std::vector<Operation*> ops;
    for (Operation* op : *block) ops.push_back(op);
    return ops;
  }

  Module module_;
  Mesh* mesh_;
  Function* fn_;
  Value* x_;
  Value* y_;
};

TEST_F(IrTest, ArgumentsAndResults) {
  EXPECT_EQ(x_->kind(), Value::Kind::kBlockArgument);
  EXPECT_EQ(x_->owner_block(), fn_->body());
  EXPECT_EQ(x_->index(), 0);
  EXPECT_EQ(y_->index(), 1);
  EXPECT_EQ(x_->name(), "x");
  EXPECT_EQ(x_->defining_op(), nullptr);
  Operation* add = Binary(OpKind::kAdd, x_, y_);
  Value* r = add->result(0);
  EXPECT_EQ(r->kind(), Value::Kind::kResult);
  EXPECT_EQ(r->defining_op(), add);
  EXPECT_EQ(r->index(), 0);
  EXPECT_EQ(r->type(), Type::Tensor(kF32, {8}));
  EXPECT_EQ(add->results(), std::vector<Value*>{r});
  EXPECT_EQ(add->name(), "add");
  EXPECT_TRUE(add->Is(OpKind::kAdd));
  EXPECT_EQ(add->parent_block(), fn_->body());
  EXPECT_EQ(add->parent_op(), nullptr);
  EXPECT_EQ(add->parent_function(), fn_);
}

TEST_F(IrTest, UseListsCountEveryUse) {
  Operation* twice = Binary(OpKind::kMul, x_, x_);
  Operation* once = Binary(OpKind::kAdd, x_, y_);
  EXPECT_EQ(x_->users(), (std::vector<Operation*>{twice, twice, once}));
  EXPECT_EQ(y_->users(), std::vector<Operation*>{once});
  EXPECT_TRUE(twice->result(0)->use_empty());
  EXPECT_FALSE(x_->use_empty());
}

TEST_F(IrTest, ReplaceAllUsesWithRewritesEverySlot) {
  Operation* twice = Binary(OpKind::kMul, x_, x_);
  Operation* mixed = Binary(OpKind::kAdd, y_, x_);
  x_->ReplaceAllUsesWith(y_);
  EXPECT_TRUE(x_->use_empty());
  EXPECT_EQ(twice->operand(0), y_);
  EXPECT_EQ(twice->operand(1), y_);
  EXPECT_EQ(mixed->operand(0), y_);
  EXPECT_EQ(mixed->operand(1), y_);
  // y had one use and gained three.
  EXPECT_EQ(y_->users().size(), 4u);
  int twice_uses = 0;
  for (Operation* u : y_->users()) twice_uses += u == twice;
  EXPECT_EQ(twice_uses, 2);
  // Replacing with itself changes nothing.
  y_->ReplaceAllUsesWith(y_);
  EXPECT_EQ(y_->users().size(), 4u);
}

TEST_F(IrTest, SetOperandUpdatesUseLists) {
  Operation* add = Binary(OpKind::kAdd, x_, x_);
  add->SetOperand(1, y_);
  EXPECT_EQ(add->operand(1), y_);
  EXPECT_EQ(x_->users(), std::vector<Operation*>{add});
  EXPECT_EQ(y_->users(), std::vector<Operation*>{add});
  Value* both[] = {y_, y_};
  add->SetOperands(both);
  EXPECT_TRUE(x_->use_empty());
  EXPECT_EQ(y_->users().size(), 2u);
}

TEST_F(IrTest, EraseUnlinksAndDropsUses) {
  Operation* a = Binary(OpKind::kAdd, x_, y_);
  Operation* b = Binary(OpKind::kMul, x_, x_);
  Operation* c = Binary(OpKind::kSub, y_, y_);
  EXPECT_EQ(fn_->body()->size(), 3u);
  b->Erase();
  EXPECT_EQ(fn_->body()->size(), 2u);
  EXPECT_EQ(Ops(fn_->body()), (std::vector<Operation*>{a, c}));
  EXPECT_EQ(a->next(), c);
  EXPECT_EQ(c->prev(), a);
  EXPECT_EQ(x_->users(), std::vector<Operation*>{a});
  a->Erase();
  c->Erase();
  EXPECT_TRUE(fn_->body()->empty());
  EXPECT_EQ(fn_->body()->front(), nullptr);
  EXPECT_EQ(fn_->body()->back(), nullptr);
  EXPECT_TRUE(x_->use_empty());
  EXPECT_TRUE(y_->use_empty());
}

TEST_F(IrTest, InsertBeforeAndRemove) {
  Operation* a = Binary(OpKind::kAdd, x_, y_);
  Operation* c = Binary(OpKind::kSub, x_, y_);
  OpBuilder b(fn_);
  b.SetInsertionPoint(c);
  Operation* mid = *b.Create(OpKind::kMul, {x_, y_});
  b.SetInsertionPoint(a);
  Operation* first = *b.Create(OpKind::kMax, {x_, y_});
  EXPECT_EQ(Ops(fn_->body()), (std::vector<Operation*>{first, a, mid, c}));
  EXPECT_EQ(fn_->body()->front(), first);
  EXPECT_EQ(fn_->body()->back(), c);
  EXPECT_EQ(first->prev(), nullptr);
  EXPECT_EQ(mid->prev(), a);
  EXPECT_EQ(mid->next(), c);

  std::unique_ptr<Operation> owned = fn_->body()->Remove(mid);
  EXPECT_EQ(owned->parent_block(), nullptr);
  EXPECT_EQ(Ops(fn_->body()), (std::vector<Operation*>{first, a, c}));
  // A removed op keeps its operands; it can be put back anywhere.
  EXPECT_EQ(owned->operand(0), x_);
  fn_->body()->InsertBefore(nullptr, std::move(owned));
  EXPECT_EQ(fn_->body()->back(), mid);
  EXPECT_EQ(fn_->body()->size(), 4u);
}

// IsBeforeInBlock agrees with the list order through appends, insertions in the
// middle (which renumber the block lazily) and removals.
TEST_F(IrTest, IsBeforeInBlockFollowsTheListOrder) {
  auto check = [&] {
    std::vector<Operation*> ops = Ops(fn_->body());
    for (size_t i = 0; i < ops.size(); ++i) {
      for (size_t j = 0; j < ops.size(); ++j) {
        EXPECT_EQ(ops[i]->IsBeforeInBlock(ops[j]), i < j) << i << " vs " << j;
      }
    }
  };
  Operation* a = Binary(OpKind::kAdd, x_, y_);
  Operation* c = Binary(OpKind::kSub, x_, y_);
  check();
  OpBuilder b(fn_);
  b.SetInsertionPoint(c);
  Operation* mid = *b.Create(OpKind::kMul, {x_, y_});
  check();
  b.SetInsertionPoint(a);
  *b.Create(OpKind::kMax, {x_, y_});
  Binary(OpKind::kMin, x_, y_);  // an append after insertions
  check();
  std::unique_ptr<Operation> owned = fn_->body()->Remove(mid);
  check();
  fn_->body()->InsertBefore(a, std::move(owned));
  check();
  EXPECT_TRUE(mid->IsBeforeInBlock(a));
  EXPECT_FALSE(a->IsBeforeInBlock(a));
}

TEST_F(IrTest, LiteralOperands) {
  OpBuilder b(fn_);
  Operation* mul = *b.CreateWithLiteral(OpKind::kMul, x_, 0.125, /*literal_index=*/1);
  ASSERT_EQ(mul->num_operands(), 2);
  EXPECT_EQ(mul->operand(0), x_);
  Value* lit = mul->operand(1);
  EXPECT_TRUE(lit->is_literal());
  EXPECT_EQ(lit->kind(), Value::Kind::kLiteral);
  EXPECT_EQ(lit->literal_value(), 0.125);
  EXPECT_EQ(lit->type(), Type::Scalar(kF32));
  EXPECT_EQ(lit->defining_op(), mul);
  EXPECT_EQ(lit->users(), std::vector<Operation*>{mul});
  EXPECT_EQ(mul->result(0)->type(), Type::Tensor(kF32, {8}));

  Operation* sub = *b.CreateWithLiteral(OpKind::kSub, x_, 2, /*literal_index=*/0);
  EXPECT_TRUE(sub->operand(0)->is_literal());
  EXPECT_EQ(sub->operand(1), x_);

  // AddLiteralOperand on an op built without operands.
  Type t = Type::Tensor(kF32, {8});
  Operation* raw = b.CreateUnchecked(OpKind::kAdd, {x_}, {t});
  Value* added = raw->AddLiteralOperand(-1.5, Type::Scalar(kF32));
  EXPECT_EQ(raw->num_operands(), 2);
  EXPECT_EQ(raw->operand(1), added);
  EXPECT_EQ(added->literal_value(), -1.5);
  raw->Erase();
  mul->Erase();
  sub->Erase();
  EXPECT_TRUE(x_->use_empty());
}

class SpmdIrTest : public Test {
 protected:
  SpmdIrTest() {
    mesh_ = module_.AddMesh(std::make_unique<Mesh>("m", std::vector<MeshAxis>{{"tp", 4, {}}}));
    Type global = Type::Tensor(kF32, {8, 4}, {{"tp"}, {}});
    fn_ = AddFunction(module_, "s", /*spmd=*/true, mesh_, {global}, {global}, {"x"});
    x_ = fn_->body()->argument(0);
    AttrDict attrs;
    attrs.Set("axis", Attribute::Ident("tp"));
    rank_ = (*OpBuilder(fn_).Create(OpKind::kRank, {}, attrs))->result(0);
  }

  Module module_;
  Mesh* mesh_;
  Function* fn_;
  Value* x_;
  Value* rank_;
};

TEST_F(SpmdIrTest, SpmdArgumentsHaveLocalTypes) {
  EXPECT_EQ(fn_->arg_types()[0], Type::Tensor(kF32, {8, 4}, {{"tp"}, {}}));
  EXPECT_EQ(x_->type(), Type::Tensor(kF32, {2, 4}));
  EXPECT_EQ(rank_->type(), Type::Index());
  // Changing the declared type and refreshing re-derives the local type.
  fn_->SetArgType(0, Type::Tensor(kF32, {8, 4}, {{}, {"tp"}}));
  fn_->RefreshArgumentTypes();
  EXPECT_EQ(x_->type(), Type::Tensor(kF32, {8, 1}));
}

TEST_F(SpmdIrTest, StreamOperandIsSeparateFromOperands) {
  OpBuilder b(fn_);
  AttrDict attrs;
  attrs.Set("axis", Attribute::Ident("tp"));
  Operation* shift = *b.Create(OpKind::kShift, {x_}, attrs);
  shift->SetStreamOperand(rank_);
  EXPECT_EQ(shift->stream_operand(), rank_);
  EXPECT_EQ(shift->num_operands(), 1);
  EXPECT_EQ(shift->operands().size(), 1u);
  EXPECT_EQ(shift->all_operands().size(), 2u);
  EXPECT_EQ(shift->all_operands()[1], rank_);
  EXPECT_EQ(rank_->users(), std::vector<Operation*>{shift});
  // Regular operands go before the stream operand.
  shift->AddOperand(x_);
  EXPECT_EQ(shift->num_operands(), 2);
  EXPECT_EQ(shift->operand(1), x_);
  EXPECT_EQ(shift->stream_operand(), rank_);
  // SetOperands keeps the stream.
  Value* one[] = {x_};
  shift->SetOperands(one);
  EXPECT_EQ(shift->num_operands(), 1);
  EXPECT_EQ(shift->stream_operand(), rank_);
  EXPECT_EQ(rank_->users(), std::vector<Operation*>{shift});
  // Replacing and removing the stream.
  Value* other = (*b.Create(OpKind::kAdd, {rank_, rank_}))->result(0);
  shift->SetStreamOperand(other);
  EXPECT_EQ(shift->stream_operand(), other);
  EXPECT_EQ(rank_->users().size(), 2u);  // only the add
  EXPECT_EQ(other->users(), std::vector<Operation*>{shift});
  rank_->ReplaceAllUsesWith(rank_);
  other->ReplaceAllUsesWith(rank_);
  EXPECT_EQ(shift->stream_operand(), rank_);
  shift->SetStreamOperand(nullptr);
  EXPECT_EQ(shift->stream_operand(), nullptr);
  EXPECT_EQ(shift->all_operands().size(), 1u);
  EXPECT_EQ(rank_->users().size(), 2u);
}

TEST_F(SpmdIrTest, NestedRegionsParentsAndWalk) {
  OpBuilder b(fn_);
  AttrDict bounds;
  bounds.Set("lower", Attribute::Int(0));
  bounds.Set("upper", Attribute::Int(4));
  Type local = x_->type();
  Value* inits[] = {x_};
  Type types[] = {local};
  Operation* loop = b.CreateUnchecked(OpKind::kFor, inits, types, bounds, /*num_regions=*/1);
  ASSERT_EQ(loop->num_regions(), 1);
  Block* body = loop->region(0);
  EXPECT_EQ(body->parent_op(), loop);
  Value* iv = body->AddArgument(Type::Index(), "i");
  Value* carried = body->AddArgument(local, "a");
  EXPECT_EQ(iv->owner_block(), body);
  OpBuilder inner(fn_);
  inner.SetInsertionPointToEnd(body);
  Operation* neg = *inner.Create(OpKind::kNeg, {carried});
  Operation* yield = inner.CreateUnchecked(OpKind::kYield, {neg->result(0)}, {});
  EXPECT_EQ(body->terminator(), yield);
  EXPECT_EQ(neg->parent_op(), loop);
  EXPECT_EQ(neg->parent_function(), fn_);
  EXPECT_TRUE(neg->IsNestedIn(loop));
  EXPECT_TRUE(loop->IsNestedIn(loop));
  EXPECT_FALSE(loop->IsNestedIn(neg));
  b.Return({loop->result(0)});
  EXPECT_NE(fn_->body()->terminator(), nullptr);

  // WalkOps visits an op after the ops nested in it, so the callback may erase it.
  std::vector<std::string> order;
  WalkOps(fn_->body(), [&](Operation* op) { order.emplace_back(op->name()); });
  EXPECT_EQ(order, (std::vector<std::string>{"rank", "neg", "yield", "for", "return"}));

  // Erasing every op from the inside out through a walk leaves nothing behind.
  WalkOps(fn_->body(), [](Operation* op) {
    op->DropAllUses();
    for (Value* r : op->results()) {
      while (!r->use_empty()) r->users().front()->DropAllUses();
    }
    op->Erase();
  });
  EXPECT_TRUE(fn_->body()->empty());
  EXPECT_TRUE(x_->use_empty());
}

TEST_F(SpmdIrTest, DestroyingAModuleWithCrossReferencesIsSafe) {
  // Ops that use each other's results and nested ops that use outer values are torn
  // down in any order (checked under ASan).
  OpBuilder b(fn_);
  Value* a = *b.Binary(OpKind::kAdd, rank_, rank_);
  Value* c = *b.Binary(OpKind::kMul, a, rank_);
  (void)c;
  b.Return({x_});
}

TEST(ModuleTest, DeclarationsLookupAndMeshResolution) {
  Module module;
  Function* f = module.AddFunction(std::make_unique<Function>("f", false));
  Mesh* m = module.AddMesh(std::make_unique<Mesh>("m", std::vector<MeshAxis>{{"x", 2, {}}}));
  Function* g = module.AddFunction(std::make_unique<Function>("g", true));
  Function* h = module.InsertFunctionAfter(f, std::make_unique<Function>("h", false));
  ASSERT_EQ(module.decls().size(), 4u);
  EXPECT_EQ(module.decls()[0].function, f);
  EXPECT_EQ(module.decls()[1].function, h);
  EXPECT_EQ(module.decls()[2].mesh, m);
  EXPECT_EQ(module.decls()[3].function, g);
  EXPECT_EQ(module.functions(), (std::vector<Function*>{f, h, g}));
  EXPECT_EQ(module.meshes(), std::vector<Mesh*>{m});
  EXPECT_EQ(module.FindFunction("g"), g);
  EXPECT_EQ(module.FindFunction("m"), nullptr);
  EXPECT_EQ(module.FindMesh("m"), m);
  EXPECT_EQ(module.FindMesh("f"), nullptr);

  // With one mesh, functions without `on` use it.
  EXPECT_TRUE(module.ResolveMeshes());
  EXPECT_EQ(f->mesh(), m);
  EXPECT_EQ(g->mesh(), m);
  g->set_mesh_name("nope");
  EXPECT_FALSE(module.ResolveMeshes());
  EXPECT_EQ(g->mesh(), nullptr);
  EXPECT_EQ(f->mesh(), m);

  // With two meshes, a function must name one.
  Mesh* n = module.AddMesh(std::make_unique<Mesh>("n", std::vector<MeshAxis>{}));
  g->set_mesh_name("n");
  EXPECT_TRUE(module.ResolveMeshes());
  EXPECT_EQ(g->mesh(), n);
  EXPECT_EQ(f->mesh(), nullptr);
}

TEST(ModuleTest, InsertFunctionAfterAnUnknownFunctionAppends) {
  Module module;
  Function* f = module.AddFunction(std::make_unique<Function>("f", false));
  Function* g = module.InsertFunctionAfter(nullptr, std::make_unique<Function>("g", false));
  EXPECT_EQ(module.functions(), (std::vector<Function*>{f, g}));
}

TEST(ModuleTest, FunctionsWithoutMeshesResolveToNone) {
  Module module;
  Function* f = module.AddFunction(std::make_unique<Function>("f", false));
  EXPECT_TRUE(module.ResolveMeshes());
  EXPECT_EQ(f->mesh(), nullptr);
}

}  // namespace
}  // namespace commir
