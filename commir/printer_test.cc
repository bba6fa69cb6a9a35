// The canonical printer on IR built in memory: naming, attribute order, literals,
// loops, declarations. (Printing parsed text and round trips: //parser:parser_test.)
#include "commir/printer.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "commir/builder.h"
#include "commir/ir.h"
#include "gtest/gtest.h"

namespace commir {
namespace {

constexpr ElementType kF32 = ElementType::kF32;

Type T(std::vector<int64_t> dims, ElementType et = kF32) { return Type::Tensor(et, std::move(dims)); }

TEST(PrinterTest, UnnamedValuesAreNumberedAndClashesRenamed) {
  Module module;
  Function* f = AddFunction(module, "f", false, nullptr, {T({4}), T({4})}, {T({4})}, {"x", "0"});
  OpBuilder b(f);
  Value* a = *b.Binary(OpKind::kAdd, f->body()->argument(0), f->body()->argument(1));
  Value* c = *b.Unary(OpKind::kNeg, a);
  c->set_name("x");  // clashes with the argument
  Value* d = *b.Unary(OpKind::kExp, c);
  d->set_name("x_1");  // clashes with the renamed value
  b.Return({d});
  EXPECT_EQ(PrintModule(module),
            "func @f(%x: f32[4], %0: f32[4]) -> f32[4] {\n"
            "  %1 = add(%x, %0) : f32[4]\n"
            "  %x_1 = neg(%1) : f32[4]\n"
            "  %x_1_1 = exp(%x_1) : f32[4]\n"
            "  return %x_1_1\n"
            "}\n");
}

TEST(PrinterTest, AttributesInSchemaOrderWithFlagsAsBareKeys) {
  Module module;
  Function* f = AddFunction(module, "f", false, nullptr, {T({4, 8})}, {});
  OpBuilder b(f);
  AttrDict attrs;
  attrs.Set("keepdim", Attribute::Bool(true));
  attrs.Set("dims", Attribute::IntList({0}));
  b.CreateUnchecked(OpKind::kReduceSum, {f->body()->argument(0)}, {T({1, 8})}, attrs);
  AttrDict off;
  off.Set("transpose_b", Attribute::Bool(false));
  off.Set("transpose_a", Attribute::Bool(true));
  b.CreateUnchecked(OpKind::kMatmul, {f->body()->argument(0), f->body()->argument(0)},
                    {T({8, 8})}, off);
  // Keys the schema does not know print after the known ones, sorted.
  AttrDict unknown;
  unknown.Set("zeta", Attribute::String("q\"uote"));
  unknown.Set("alpha", Attribute::Axes({"a", "b"}));
  unknown.Set("eps", Attribute::Float(1e-5));
  b.CreateUnchecked(OpKind::kLayerNorm, {f->body()->argument(0)}, {T({4, 8})}, unknown);
  b.Return({});
  EXPECT_EQ(PrintFunction(*f),
            "func @f(%0: f32[4, 8]) -> () {\n"
            "  %1 = reduce_sum(%0) {dims = [0], keepdim} : f32[1, 8]\n"
            "  %2 = matmul(%0, %0) {transpose_a, transpose_b = false} : f32[8, 8]\n"
            "  %3 = layernorm(%0) {eps = 1e-05, alpha = (a, b), zeta = \"q\\\"uote\"} : f32[4, 8]\n"
            "  return\n"
            "}\n");
}

TEST(PrinterTest, LiteralOperands) {
  Module module;
  auto mesh = std::make_unique<Mesh>("m", std::vector<MeshAxis>{{"tp", 2, {}}});
  const Mesh* m = module.AddMesh(std::move(mesh));
  Function* f = AddFunction(module, "f", true, m, {T({4}), T({4}, ElementType::kI32)}, {});
  OpBuilder b(f);
  Value* x = f->body()->argument(0);
  Value* i = f->body()->argument(1);
  AttrDict axis;
  axis.Set("axis", Attribute::Ident("tp"));
  Value* r = (*b.Create(OpKind::kRank, {}, axis))->result(0);
  b.CreateWithLiteral(OpKind::kMul, x, 2, 1).IgnoreError();
  b.CreateWithLiteral(OpKind::kSub, x, 0.1, 0).IgnoreError();
  b.CreateWithLiteral(OpKind::kMax, x, -std::numeric_limits<double>::infinity(), 1).IgnoreError();
  b.CreateWithLiteral(OpKind::kAdd, x, std::nan(""), 1).IgnoreError();
  b.CreateWithLiteral(OpKind::kAdd, r, 128, 1).IgnoreError();
  b.CreateWithLiteral(OpKind::kAdd, i, -3, 1).IgnoreError();
  // Not valid (the verifier rejects them), but printed exactly rather than truncated.
  b.CreateWithLiteral(OpKind::kAdd, r, 2.5, 1).IgnoreError();
  b.CreateWithLiteral(OpKind::kAdd, r, 1e30, 1).IgnoreError();
  b.Return({});
  EXPECT_EQ(PrintFunction(*f),
            "spmd func @f(%0: f32[4], %1: i32[4]) -> () on @m {\n"
            "  %2 = rank() {axis = tp} : index\n"
            "  %3 = mul(%0, 2.0) : f32[4]\n"
            "  %4 = sub(0.1, %0) : f32[4]\n"
            "  %5 = max(%0, -inf) : f32[4]\n"
            "  %6 = add(%0, nan) : f32[4]\n"
            "  %7 = add(%2, 128) : index\n"
            "  %8 = add(%1, -3) : i32[4]\n"
            "  %9 = add(%2, 2.5) : index\n"
            "  %10 = add(%2, 1e+30) : index\n"
            "  return\n"
            "}\n");
}

TEST(PrinterTest, LoopsWithStreamsAndMultipleResults) {
  Module module;
  const Mesh* m = module.AddMesh(std::make_unique<Mesh>("m", std::vector<MeshAxis>{{"tp", 2, {}}}));
  Type global = Type::Tensor(kF32, {8}, {{"tp"}});
  Function* f = AddFunction(module, "f", true, m, {global}, {global, global}, {"x"});
  OpBuilder b(f);
  Value* x = f->body()->argument(0);
  AttrDict axis;
  axis.Set("axis", Attribute::Ident("tp"));
  Value* r = (*b.Create(OpKind::kRank, {}, axis))->result(0);
  AttrDict bounds;
  bounds.Set("upper", Attribute::Int(8));
  bounds.Set("lower", Attribute::Int(2));
  bounds.Set("step", Attribute::Int(3));
  Value* inits[] = {x, x};
  Type types[] = {x->type(), x->type()};
  Operation* loop = b.CreateUnchecked(OpKind::kFor, inits, types, bounds, 1);
  loop->SetStreamOperand(r);
  Block* body = loop->region(0);
  body->AddArgument(Type::Index(), "i");
  Value* a = body->AddArgument(x->type(), "a");
  Value* c = body->AddArgument(x->type(), "");  // numbered before the loop's results
  OpBuilder inner(f);
  inner.SetInsertionPointToEnd(body);
  inner.CreateUnchecked(OpKind::kYield, {c, a}, {});
  // A loop without carried values or results, with an integer stream.
  AttrDict plain;
  plain.Set("lower", Attribute::Int(0));
  plain.Set("upper", Attribute::Int(1));
  plain.Set("stream", Attribute::Int(2));
  Operation* empty = b.CreateUnchecked(OpKind::kFor, {}, {}, plain, 1);
  empty->region(0)->AddArgument(Type::Index(), "j");
  inner.SetInsertionPointToEnd(empty->region(0));
  inner.CreateUnchecked(OpKind::kYield, {}, {});
  b.Return({loop->result(0), loop->result(1)});
  EXPECT_EQ(PrintModule(module),
            "mesh @m(tp=2)\n"
            "\n"
            "spmd func @f(%x: f32[8@tp]) -> (f32[8@tp], f32[8@tp]) on @m {\n"
            "  %0 = rank() {axis = tp} : index\n"
            "  %2, %3 = for %i = 2 to 8 step 3 iter(%a = %x, %1 = %x) {stream = %0} {\n"
            "    yield %1, %a\n"
            "  } : (f32[4], f32[4])\n"
            "  for %j = 0 to 1 step 1 {stream = 2} {\n"
            "    yield\n"
            "  }\n"
            "  return %2, %3\n"
            "}\n");
}

TEST(PrinterTest, DeclarationsInOrderWithMeshesGrouped) {
  Module module;
  module.AddMesh(std::make_unique<Mesh>("a", std::vector<MeshAxis>{{"x", 2, {}}, {"y", 1, {}}}));
  module.AddMesh(std::make_unique<Mesh>("b", std::vector<MeshAxis>{}));
  Function* f = AddFunction(module, "f", false, nullptr, {}, {});
  OpBuilder(f).Return({});
  module.AddMesh(std::make_unique<Mesh>("c", std::vector<MeshAxis>{{"z", 3, {}}}));
  Function* g = AddFunction(module, "g", false, nullptr, {}, {T({})});
  g->set_mesh_name("unresolved");
  EXPECT_EQ(PrintModule(module),
            "mesh @a(x=2, y=1)\n"
            "mesh @b()\n"
            "\n"
            "func @f() -> () {\n"
            "  return\n"
            "}\n"
            "\n"
            "mesh @c(z=3)\n"
            "\n"
            "func @g() -> f32[] on @unresolved {\n"
            "}\n");
  EXPECT_EQ(PrintModule(Module()), "");
}

TEST(PrinterTest, PrintingIsDeterministic) {
  Module module;
  Function* f = AddFunction(module, "f", false, nullptr, {T({2})}, {T({2})});
  OpBuilder b(f);
  Value* v = f->body()->argument(0);
  for (int i = 0; i < 50; ++i) v = *b.Unary(i % 2 ? OpKind::kNeg : OpKind::kAbs, v);
  b.Return({v});
  std::string first = PrintModule(module);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(PrintModule(module), first);
}

}  // namespace
}  // namespace commir
