// The parser: every syntax form of the spec, type inference for omitted result types,
// error recovery (all errors, no cascades), limits, and the print/parse round trip.
#include "parser/parser.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "commir/attribute.h"
#include "commir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace commir {
namespace {

using ::testing::HasSubstr;

struct Parsed {
  std::unique_ptr<Module> module;
  std::string errors;  // rendered diagnostics
};

Parsed Parse(absl::string_view source, bool verify = true) {
  DiagnosticEngine diagnostics;
  ParseOptions options;
  options.verify = verify;
  Parsed p;
  p.module = ParseModule(source, diagnostics, options);
  p.errors = diagnostics.Render("t.commir", source);
  EXPECT_EQ(p.module == nullptr, diagnostics.has_errors());
  return p;
}

// The canonical form of `source`, which must parse and verify.
std::string Print(absl::string_view source) {
  Parsed p = Parse(source);
  EXPECT_EQ(p.errors, "");
  return p.module == nullptr ? "<error>" : PrintModule(*p.module);
}

// The rendered errors of `source`, which must not parse.
std::string Errors(absl::string_view source, bool verify = true) {
  Parsed p = Parse(source, verify);
  EXPECT_EQ(p.module, nullptr);
  return p.errors;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// ---- Syntax forms -----------------------------------------------------------------

TEST(ParserTest, EmptyModule) {
  EXPECT_EQ(Print(""), "");
  EXPECT_EQ(Print("// nothing but a comment\n\n"), "");
}

TEST(ParserTest, CommentsAndWhitespace) {
  EXPECT_EQ(Print("// leading\n"
                  "func @f(%x: f32[2]) -> f32[2] { // after the brace\n"
                  "  // a line comment\n"
                  "\t%y   =   neg( %x )// no space before the comment\n"
                  "  return %y // trailing\n"
                  "}\n"
                  "// at the end"),
            "func @f(%x: f32[2]) -> f32[2] {\n"
            "  %y = neg(%x) : f32[2]\n"
            "  return %y\n"
            "}\n");
}

TEST(ParserTest, ValueNamesWithDotsDollarsAndDashes) {
  EXPECT_EQ(Print("func @f(%x.1: f32[2], %y$2: f32[2], %z-3: f32[2], %0: f32[2]) -> f32[2] {\n"
                  "  %h.1 = add(%x.1, %y$2)\n"
                  "  %a-b$c.d = mul(%h.1, %z-3)\n"
                  "  %1 = sub(%a-b$c.d, %0)\n"
                  "  return %1\n"
                  "}\n"),
            "func @f(%x.1: f32[2], %y$2: f32[2], %z-3: f32[2], %0: f32[2]) -> f32[2] {\n"
            "  %h.1 = add(%x.1, %y$2) : f32[2]\n"
            "  %a-b$c.d = mul(%h.1, %z-3) : f32[2]\n"
            "  %1 = sub(%a-b$c.d, %0) : f32[2]\n"
            "  return %1\n"
            "}\n");
}

TEST(ParserTest, NumberLiteralOperands) {
  EXPECT_EQ(Print("func @f(%x: f32[2]) -> f32[2] {\n"
                  "  %a = mul(%x, -2.5e-3)\n"
                  "  %b = add(%a, 1)\n"
                  "  %c = max(%b, -inf)\n"
                  "  %d = min(inf, %c)\n"
                  "  %e = add(%d, nan)\n"
                  "  %f = mul(+2.0, %e)\n"
                  "  %g = div(%f, 1e-05)\n"
                  "  %h = sub(%g, +inf)\n"
                  "  %i = pow(%h, 1.)\n"
                  "  return %i\n"
                  "}\n"),
            "func @f(%x: f32[2]) -> f32[2] {\n"
            "  %a = mul(%x, -0.0025) : f32[2]\n"
            "  %b = add(%a, 1.0) : f32[2]\n"
            "  %c = max(%b, -inf) : f32[2]\n"
            "  %d = min(inf, %c) : f32[2]\n"
            "  %e = add(%d, nan) : f32[2]\n"
            "  %f = mul(2.0, %e) : f32[2]\n"
            "  %g = div(%f, 1e-05) : f32[2]\n"
            "  %h = sub(%g, inf) : f32[2]\n"
            "  %i = pow(%h, 1.0) : f32[2]\n"
            "  return %i\n"
            "}\n");
}

TEST(ParserTest, LiteralsTakeTheOtherOperandsType) {
  Parsed p = Parse(
      "mesh @m(tp=2)\n"
      "spmd func @f(%x: bf16[2], %i: i32[2]) -> () {\n"
      "  %r = rank() {axis = tp}\n"
      "  %a = mul(%x, 0.5)\n"
      "  %b = add(%i, -4)\n"
      "  %c = mul(%r, 128)\n"
      "  %d = sub(3, %r)\n"
      "  return\n"
      "}\n");
  ASSERT_NE(p.module, nullptr) << p.errors;
  std::vector<Type> literal_types;
  for (Operation* op : *p.module->functions()[0]->body()) {
    for (Value* v : op->operands()) {
      if (v->is_literal()) literal_types.push_back(v->type());
    }
  }
  EXPECT_EQ(literal_types,
            (std::vector<Type>{Type::Scalar(ElementType::kBF16), Type::Scalar(ElementType::kI32),
                               Type::Index(), Type::Index()}));
  EXPECT_THAT(PrintModule(*p.module), HasSubstr("  %b = add(%i, -4) : i32[2]\n"
                                                "  %c = mul(%r, 128) : index\n"
                                                "  %d = sub(3, %r) : index\n"));
}

TEST(ParserTest, TypesOfEveryForm) {
  EXPECT_EQ(Print("mesh @m(dp=2, tp=4)\n"
                  "func @f(%a: f32[], %b: f64[1], %c: f16[2, 3], %d: bf16[4096@tp, 8],\n"
                  "        %e: i64[16@(dp, tp)], %f: i32[64, 32] partial(tp),\n"
                  "        %g: i1[8@(tp)] partial(dp), %h: f32[0], %i: index) -> () {\n"
                  "  return\n"
                  "}\n"),
            "mesh @m(dp=2, tp=4)\n"
            "\n"
            "func @f(%a: f32[], %b: f64[1], %c: f16[2, 3], %d: bf16[4096@tp, 8], %e: "
            "i64[16@(dp, tp)], %f: i32[64, 32] partial(tp), %g: i1[8@tp] partial(dp), %h: "
            "f32[0], %i: index) -> () on @m {\n"
            "  return\n"
            "}\n");
}

TEST(ParserTest, FunctionSignatures) {
  EXPECT_EQ(Print("func @none() {\n  return\n}\n"
                  "func @empty() -> () {\n  return\n}\n"
                  "func @one(%x: f32[1]) -> (f32[1]) {\n  return %x\n}\n"
                  "func @two(%x: f32[1]) -> (f32[1], f32[1]) {\n  return %x, %x\n}\n"),
            "func @none() -> () {\n  return\n}\n\n"
            "func @empty() -> () {\n  return\n}\n\n"
            "func @one(%x: f32[1]) -> f32[1] {\n  return %x\n}\n\n"
            "func @two(%x: f32[1]) -> (f32[1], f32[1]) {\n  return %x, %x\n}\n");
}

TEST(ParserTest, OnMeshMayBeOmittedWithOneMeshOrNone) {
  // One mesh: it is used (and printed).
  EXPECT_EQ(Print("mesh @m(tp=2)\n"
                  "func @f(%x: f32[4@tp]) -> f32[4@tp] {\n  return %x\n}\n"),
            "mesh @m(tp=2)\n\n"
            "func @f(%x: f32[4@tp]) -> f32[4@tp] on @m {\n  return %x\n}\n");
  // No mesh: none, and nothing is printed.
  Parsed p = Parse("func @f(%x: f32[4]) -> f32[4] {\n  return %x\n}\n");
  ASSERT_NE(p.module, nullptr);
  EXPECT_EQ(p.module->functions()[0]->mesh(), nullptr);
  // Named explicitly.
  EXPECT_EQ(Print("mesh @a(x=2)\nmesh @b(y=4)\n"
                  "spmd func @f(%v: f32[8@y]) -> f32[8@y] on @b {\n  return %v\n}\n"),
            "mesh @a(x=2)\nmesh @b(y=4)\n\n"
            "spmd func @f(%v: f32[8@y]) -> f32[8@y] on @b {\n  return %v\n}\n");
}

TEST(ParserTest, MeshDeclaredAfterTheFunctionThatUsesIt) {
  // The spmd argument's local type needs the mesh, declared later.
  Parsed p = Parse("spmd func @f(%x: f32[8@tp]) -> f32[8@tp] on @m {\n"
                   "  %y = neg(%x)\n"
                   "  return %y\n"
                   "}\n"
                   "mesh @m(tp=4)\n");
  ASSERT_NE(p.module, nullptr) << p.errors;
  EXPECT_EQ(PrintModule(*p.module),
            "spmd func @f(%x: f32[8@tp]) -> f32[8@tp] on @m {\n"
            "  %y = neg(%x) : f32[2]\n"
            "  return %y\n"
            "}\n"
            "\n"
            "mesh @m(tp=4)\n");
  // Also when `on` is left out.
  EXPECT_THAT(Print("spmd func @f(%x: f32[8@tp]) -> f32[8@tp] {\n  return %x\n}\n"
                    "mesh @m(tp=4)\n"),
              HasSubstr("-> f32[8@tp] on @m {"));
}

TEST(ParserTest, MultiResultOps) {
  EXPECT_EQ(Print("func @f(%q: f32[1, 4, 8, 16], %k: f32[1, 2, 8, 16]) -> f32[1, 4, 8] {\n"
                  "  %o, %lse = attention(%q, %k, %k) {causal}\n"
                  "  %o2, %lse2 = attention(%q, %k, %k) : (f32[1, 4, 8, 16], f32[1, 4, 8])\n"
                  "  return %lse2\n"
                  "}\n"),
            "func @f(%q: f32[1, 4, 8, 16], %k: f32[1, 2, 8, 16]) -> f32[1, 4, 8] {\n"
            "  %o, %lse = attention(%q, %k, %k) {causal} : (f32[1, 4, 8, 16], f32[1, 4, 8])\n"
            "  %o2, %lse2 = attention(%q, %k, %k) : (f32[1, 4, 8, 16], f32[1, 4, 8])\n"
            "  return %lse2\n"
            "}\n");
}

TEST(ParserTest, LoopsWithAndWithoutIterAndStep) {
  EXPECT_EQ(Print("mesh @m(tp=2)\n"
                  "spmd func @f(%x: f32[4], %y: f32[2]) -> f32[4] {\n"
                  "  for %i = 0 to 4 {\n"
                  "    yield\n"
                  "  }\n"
                  "  %a = for %j = 1 to 9 step 4 iter(%acc = %x) {\n"
                  "    %n = add(%acc, 1.0)\n"
                  "    yield %n\n"
                  "  }\n"
                  "  %b, %c = for %k = -2 to 2 iter(%p = %a, %q = %y) {\n"
                  "    %inner = for %l = 0 to 1 iter(%r = %p) { yield %r }\n"
                  "    yield %inner, %q\n"
                  "  } : (f32[4], f32[2])\n"
                  "  return %b\n"
                  "}\n"),
            "mesh @m(tp=2)\n"
            "\n"
            "spmd func @f(%x: f32[4], %y: f32[2]) -> f32[4] on @m {\n"
            "  for %i = 0 to 4 step 1 {\n"
            "    yield\n"
            "  }\n"
            "  %a = for %j = 1 to 9 step 4 iter(%acc = %x) {\n"
            "    %n = add(%acc, 1.0) : f32[4]\n"
            "    yield %n\n"
            "  } : f32[4]\n"
            "  %b, %c = for %k = -2 to 2 step 1 iter(%p = %a, %q = %y) {\n"
            "    %inner = for %l = 0 to 1 step 1 iter(%r = %p) {\n"
            "      yield %r\n"
            "    } : f32[4]\n"
            "    yield %inner, %q\n"
            "  } : (f32[4], f32[2])\n"
            "  return %b\n"
            "}\n");
}

TEST(ParserTest, LoopBodiesSeeOuterValuesAndNamesAreScoped) {
  // The loop body uses %w from outside; %t is defined in two sibling loops (the
  // printer keeps names unique within a function).
  EXPECT_EQ(Print("mesh @m(tp=2)\n"
                  "spmd func @f(%x: f32[4], %w: f32[4]) -> f32[4] {\n"
                  "  %a = for %i = 0 to 2 iter(%c = %x) {\n"
                  "    %t = mul(%c, %w)\n"
                  "    yield %t\n"
                  "  }\n"
                  "  %b = for %i = 0 to 2 iter(%c = %a) {\n"
                  "    %t = add(%c, %w)\n"
                  "    yield %t\n"
                  "  }\n"
                  "  return %b\n"
                  "}\n"),
            "mesh @m(tp=2)\n"
            "\n"
            "spmd func @f(%x: f32[4], %w: f32[4]) -> f32[4] on @m {\n"
            "  %a = for %i = 0 to 2 step 1 iter(%c = %x) {\n"
            "    %t = mul(%c, %w) : f32[4]\n"
            "    yield %t\n"
            "  } : f32[4]\n"
            "  %b = for %i_1 = 0 to 2 step 1 iter(%c_1 = %a) {\n"
            "    %t_1 = add(%c_1, %w) : f32[4]\n"
            "    yield %t_1\n"
            "  } : f32[4]\n"
            "  return %b\n"
            "}\n");
}

TEST(ParserTest, AttributeForms) {
  EXPECT_EQ(Print("mesh @m(dp=2, tp=2)\n"
                  "spmd func @f(%x: f32[4, 8], %w: f32[8], %q: f32[1, 2, 4, 8]) -> () {\n"
                  "  %r = rank() {axis = (dp, tp), stream = 0}\n"
                  "  %s = rank() {axis = (tp)}\n"
                  "  %a = all_reduce(%x) {stream = %r, reduce = max, axis = tp}\n"
                  "  %b = reduce_sum(%x) {dims = [0, -1], keepdim}\n"
                  "  %c = reduce_sum(%x) {keepdim = false, dims = []}\n"
                  "  %d = attention(%q, %q, %q) {scale = 2, causal = true}\n"
                  "  %e = attention(%q, %q, %q) {scale = 0.5, causal = false}\n"
                  "  %f = layernorm(%x, %w, %w) {eps = 1e-5}\n"
                  "  %g = gelu(%x) {approximate = tanh}\n"
                  "  %h = neg(%x) {}\n"
                  "  return\n"
                  "}\n"),
            "mesh @m(dp=2, tp=2)\n"
            "\n"
            "spmd func @f(%x: f32[4, 8], %w: f32[8], %q: f32[1, 2, 4, 8]) -> () on @m {\n"
            "  %r = rank() {axis = (dp, tp), stream = 0} : index\n"
            "  %s = rank() {axis = tp} : index\n"
            "  %a = all_reduce(%x) {axis = tp, reduce = max, stream = %r} : f32[4, 8]\n"
            "  %b = reduce_sum(%x) {dims = [0, -1], keepdim} : f32[1, 1]\n"
            "  %c = reduce_sum(%x) {dims = [], keepdim = false} : f32[4, 8]\n"
            "  %d = attention(%q, %q, %q) {causal, scale = 2} : f32[1, 2, 4, 8]\n"
            "  %e = attention(%q, %q, %q) {causal = false, scale = 0.5} : f32[1, 2, 4, 8]\n"
            "  %f = layernorm(%x, %w, %w) {eps = 1e-05} : f32[4, 8]\n"
            "  %g = gelu(%x) {approximate = tanh} : f32[4, 8]\n"
            "  %h = neg(%x) : f32[4, 8]\n"
            "  return\n"
            "}\n");
}

TEST(ParserTest, StreamsOnLoops) {
  EXPECT_EQ(Print("mesh @m(tp=2)\n"
                  "spmd func @f(%x: f32[4]) -> f32[4] {\n"
                  "  %r = rank() {axis = tp}\n"
                  "  %y = for %i = 0 to 2 iter(%a = %x) {stream = %r} {\n"
                  "    %n = shift(%a) {axis = tp, stream = %i}\n"
                  "    yield %n\n"
                  "  }\n"
                  "  for %j = 0 to 1 {stream = 3} { yield }\n"
                  "  return %y\n"
                  "}\n"),
            "mesh @m(tp=2)\n"
            "\n"
            "spmd func @f(%x: f32[4]) -> f32[4] on @m {\n"
            "  %r = rank() {axis = tp} : index\n"
            "  %y = for %i = 0 to 2 step 1 iter(%a = %x) {stream = %r} {\n"
            "    %n = shift(%a) {axis = tp, stream = %i} : f32[4]\n"
            "    yield %n\n"
            "  } : f32[4]\n"
            "  for %j = 0 to 1 step 1 {stream = 3} {\n"
            "    yield\n"
            "  }\n"
            "  return %y\n"
            "}\n");
}

TEST(ParserTest, StringAttributesUndoEscapes) {
  // No op takes a string, so strings only show up in messages, re-escaped.
  EXPECT_EQ(Errors("func @f(%x: f32[2]) -> f32[2] {\n"
                   "  %y = gelu(%x) {approximate = \"a\\\"b\\\\c\\q\"}\n"
                   "  return %y\n"
                   "}\n"),
            "t.commir:2:8: error: attribute 'approximate' must be one of none, tanh, got "
            "\"a\\\"b\\\\cq\"\n"
            "  %y = gelu(%x) {approximate = \"a\\\"b\\\\c\\q\"}\n"
            "       ^\n");
}

// ---- Type inference -----------------------------------------------------------------

TEST(ParserTest, OmittedResultTypesAreInferred) {
  EXPECT_EQ(Print("func @f(%a: f32[2, 3], %b: f32[3, 5], %c: f32[5], %i: i32[2]) -> () {\n"
                  "  %m = matmul(%a, %b)\n"
                  "  %t = transpose(%m) {perm = [1, 0]}\n"
                  "  %s = add(%m, %c)\n"
                  "  %r = reduce_max(%s) {dims = [1]}\n"
                  "  %k = reduce_mean(%s) {dims = [0], keepdim}\n"
                  "  %x = softmax(%t)\n"
                  "  %l = slice(%t) {start = [1, 0], size = [2, 2]}\n"
                  "  %j = concat(%t, %t) {dim = 1}\n"
                  "  %n = abs(%i)\n"
                  "  return\n"
                  "}\n"),
            "func @f(%a: f32[2, 3], %b: f32[3, 5], %c: f32[5], %i: i32[2]) -> () {\n"
            "  %m = matmul(%a, %b) : f32[2, 5]\n"
            "  %t = transpose(%m) {perm = [1, 0]} : f32[5, 2]\n"
            "  %s = add(%m, %c) : f32[2, 5]\n"
            "  %r = reduce_max(%s) {dims = [1]} : f32[2]\n"
            "  %k = reduce_mean(%s) {dims = [0], keepdim} : f32[1, 5]\n"
            "  %x = softmax(%t) : f32[5, 2]\n"
            "  %l = slice(%t) {start = [1, 0], size = [2, 2]} : f32[2, 2]\n"
            "  %j = concat(%t, %t) {dim = 1} : f32[5, 4]\n"
            "  %n = abs(%i) : i32[2]\n"
            "  return\n"
            "}\n");
}

TEST(ParserTest, WrittenTypesWinAndCarryShardingConstraints) {
  EXPECT_EQ(Print("mesh @m(tp=4)\n"
                  "func @f(%a: f32[8, 4], %b: bf16[4, 8]) -> () {\n"
                  "  %x = neg(%a) : f32[8@tp, 4]\n"
                  "  %y = matmul(%b, %b) {transpose_a} : f32[8@tp, 8] \n"
                  "  return\n"
                  "}\n"),
            "mesh @m(tp=4)\n"
            "\n"
            "func @f(%a: f32[8, 4], %b: bf16[4, 8]) -> () on @m {\n"
            "  %x = neg(%a) : f32[8@tp, 4]\n"
            "  %y = matmul(%b, %b) {transpose_a} : f32[8@tp, 8]\n"
            "  return\n"
            "}\n");
}

// Elementwise ops propagate layouts in global functions (ops/elementwise_ops.cc):
// each result dim takes a non-broadcast operand dim's axes (first operand first,
// never reusing an axis); add/sub keep an equal `partial`, mul keeps the partial of
// one partial operand, div keeps a partial numerator, nonlinear ops drop partial.
TEST(ParserTest, ElementwiseShardingInference) {
  std::string printed = Print(
      "mesh @m(dp=2, tp=2)\n"
      "func @f(%p: f32[8, 4@tp] partial(dp), %q: f32[8, 4] partial(dp), %w: f32[4@dp],\n"
      "        %n: f32[8, 4], %s: f32[8@tp, 4], %t: f32[8@dp, 4@tp], %r: f32[8, 4] partial(tp),\n"
      "        %pq: f32[8, 4] partial(dp, tp)) -> () {\n"
      "  %a = add(%p, %q)\n"
      "  %b = add(%p, %n)\n"
      "  %c = mul(%p, %n)\n"
      "  %d = mul(%n, %q)\n"
      "  %e = mul(%p, %q)\n"
      "  %f = div(%p, %n)\n"
      "  %g = div(%n, %p)\n"
      "  %h = neg(%p)\n"
      "  %i = relu(%p)\n"
      "  %j = exp(%q)\n"
      "  %k = sub(%p, %q)\n"
      "  %l = add(%n, %w)\n"
      "  %o = add(%s, %t)\n"
      "  %u = add(%t, %s)\n"
      "  %v = max(%p, %q)\n"
      "  %x = add(%q, %r)\n"
      "  %y = mul(%w, %q)\n"
      "  %z = add(%pq, %pq)\n"
      "  %cv = convert(%p) : f16[8, 4@tp] partial(dp)\n"
      "  %sc = mul(%p, 2.0)\n"
      "  return\n"
      "}\n");
  EXPECT_THAT(printed, HasSubstr("  %a = add(%p, %q) : f32[8, 4@tp] partial(dp)\n"
                                 "  %b = add(%p, %n) : f32[8, 4@tp]\n"
                                 "  %c = mul(%p, %n) : f32[8, 4@tp] partial(dp)\n"
                                 "  %d = mul(%n, %q) : f32[8, 4] partial(dp)\n"
                                 "  %e = mul(%p, %q) : f32[8, 4@tp]\n"
                                 "  %f = div(%p, %n) : f32[8, 4@tp] partial(dp)\n"
                                 "  %g = div(%n, %p) : f32[8, 4@tp]\n"
                                 "  %h = neg(%p) : f32[8, 4@tp] partial(dp)\n"
                                 "  %i = relu(%p) : f32[8, 4@tp]\n"
                                 "  %j = exp(%q) : f32[8, 4]\n"
                                 "  %k = sub(%p, %q) : f32[8, 4@tp] partial(dp)\n"
                                 "  %l = add(%n, %w) : f32[8, 4@dp]\n"
                                 "  %o = add(%s, %t) : f32[8@tp, 4]\n"
                                 "  %u = add(%t, %s) : f32[8@dp, 4@tp]\n"
                                 "  %v = max(%p, %q) : f32[8, 4@tp]\n"
                                 "  %x = add(%q, %r) : f32[8, 4]\n"
                                 "  %y = mul(%w, %q) : f32[8, 4@dp]\n"
                                 "  %z = add(%pq, %pq) : f32[8, 4] partial(dp, tp)\n"
                                 "  %cv = convert(%p) : f16[8, 4@tp] partial(dp)\n"
                                 "  %sc = mul(%p, 2.0) : f32[8, 4@tp] partial(dp)\n"));
}

TEST(ParserTest, SpmdBodiesInferLocalTypesWithoutSharding) {
  EXPECT_EQ(Print("mesh @m(dp=2, tp=4)\n"
                  "spmd func @f(%x: f32[8@tp, 6] partial(dp), %y: f32[12@dp]) -> f32[2, 6] {\n"
                  "  %a = add(%x, %y)\n"
                  "  %g = all_gather(%a) {axis = (dp, tp), dim = 0}\n"
                  "  %s = reduce_scatter(%g) {axis = tp, dim = 0}\n"
                  "  %t = all_to_all(%s) {axis = dp, split_dim = 1, concat_dim = 0}\n"
                  "  %r = all_reduce(%x) {axis = dp}\n"
                  "  return %r\n"
                  "}\n"),
            "mesh @m(dp=2, tp=4)\n"
            "\n"
            "spmd func @f(%x: f32[8@tp, 6] partial(dp), %y: f32[12@dp]) -> f32[2, 6] on @m {\n"
            "  %a = add(%x, %y) : f32[2, 6]\n"
            "  %g = all_gather(%a) {axis = (dp, tp), dim = 0} : f32[16, 6]\n"
            "  %s = reduce_scatter(%g) {axis = tp, dim = 0} : f32[4, 6]\n"
            "  %t = all_to_all(%s) {axis = dp, split_dim = 1, concat_dim = 0} : f32[8, 3]\n"
            "  %r = all_reduce(%x) {axis = dp} : f32[2, 6]\n"
            "  return %r\n"
            "}\n");
}

// ---- Errors and recovery ------------------------------------------------------------

TEST(ParserErrorTest, SeveralIndependentErrorsAreAllReported) {
  const char* source =
      "mesh @m(tp=4)\n"                              // 1
      "func @f(%x: f32[8@tp], %w: f32[3, 5]) -> f32[8] {\n"  // 2
      "  %a = add(%x, )\n"                           // 3
      "  %b = neg(%a)\n"                             // 4: %a is not reported again
      "  %c = bogus(%x)\n"                           // 5
      "  %d = matmul(%x, %w)\n"                      // 6
      "  %e = exp(%undefined)\n"                     // 7
      "  %f = relu(%e)\n"                            // 8: no cascade from %e
      "  return %x\n"                                // 9
      "}\n"                                          // 10
      "func @g(%y: f32[6@tp], %v: f32[2]) -> f32[6] {\n"  // 11
      "  %z = reshape(%v)\n"                         // 12
      "  return %y, %y\n"                            // 13
      "}\n";
  EXPECT_EQ(Errors(source),
            "t.commir:3:16: error: expected an operand (%value or number), got ')'\n"
            "  %a = add(%x, )\n"
            "               ^\n"
            "t.commir:5:8: error: unknown op 'bogus'\n"
            "  %c = bogus(%x)\n"
            "       ^\n"
            "t.commir:6:8: error: matmul operands need rank >= 2, got f32[8@tp] and f32[3, 5]\n"
            "  %d = matmul(%x, %w)\n"
            "       ^\n"
            "t.commir:7:12: error: use of undefined value %undefined\n"
            "  %e = exp(%undefined)\n"
            "           ^\n"
            "t.commir:11:13: error: type f32[6@tp]: dimension 0 of size 6 is not divisible by 4, "
            "the number of devices along tp\n"
            "func @g(%y: f32[6@tp], %v: f32[2]) -> f32[6] {\n"
            "            ^\n"
            "t.commir:12:8: error: 'reshape' needs its result type written (': TYPE')\n"
            "  %z = reshape(%v)\n"
            "       ^\n"
            "t.commir:13:3: error: return has 2 values but @g declares 1 result\n"
            "  return %y, %y\n"
            "  ^\n");
}

TEST(ParserErrorTest, ABrokenStatementDoesNotHideTheNextOne) {
  // The parser stops at the first token of the next line: nothing is skipped.
  EXPECT_EQ(Errors("func @f(%x: f32[2]) -> f32[2] {\n"
                   "  %y = add(%x, %x\n"
                   "  %z = bogus(%y)\n"
                   "  return %x\n"
                   "}\n"),
            "t.commir:3:3: error: expected ',' or ')' in the operands, got '%z'\n"
            "  %z = bogus(%y)\n"
            "  ^\n"
            "t.commir:3:8: error: unknown op 'bogus'\n"
            "  %z = bogus(%y)\n"
            "       ^\n");
  // A semantic error leaves the statement read; the return on the next line counts.
  EXPECT_EQ(Errors("func @f(%x: f32[2]) -> f32[2] {\n"
                   "  %y, %z = neg(%x)\n"
                   "  return %y\n"
                   "}\n"),
            "t.commir:2:12: error: 'neg' produces 1 result, but 2 names are given\n"
            "  %y, %z = neg(%x)\n"
            "           ^\n");
}

TEST(ParserErrorTest, UnclosedAttributeDictionaryEndsWithItsLine) {
  EXPECT_EQ(Errors("func @f(%x: f32[4]) -> f32[4] {\n"
                   "  %y = full() {value = 1.0 : f32[4]\n"
                   "  %z = add(%x, %y)\n"
                   "  return %z\n"
                   "}\n"),
            "t.commir:2:28: error: expected ',' or '}' in the attributes, got ':'\n"
            "  %y = full() {value = 1.0 : f32[4]\n"
            "                           ^\n");
}

TEST(ParserErrorTest, BrokenLoopHeaderSkipsTheWholeLoop) {
  EXPECT_EQ(Errors("mesh @m(tp=2)\n"
                   "spmd func @f(%x: f32[4]) -> f32[4] {\n"
                   "  %y = for %i = 0 to %x iter(%a = %x) {\n"
                   "    %q = bogus(%a)\n"
                   "    yield %q\n"
                   "  } : f32[4]\n"
                   "  %z = neg(%y)\n"
                   "  return %z\n"
                   "}\n"),
            "t.commir:3:22: error: expected the upper bound (an integer), got '%x'\n"
            "  %y = for %i = 0 to %x iter(%a = %x) {\n"
            "                     ^\n");
}

TEST(ParserErrorTest, ErrorsInsideLoopBodiesRecoverThere) {
  EXPECT_EQ(Errors("mesh @m(tp=2)\n"
                   "spmd func @f(%x: f32[4]) -> f32[4] {\n"
                   "  %y = for %i = 0 to 3 iter(%a = %x) {\n"
                   "    %q = neg(%a\n"
                   "    %r = neg(%q)\n"
                   "    yield %r\n"
                   "  } : f32[4]\n"
                   "  %z = exp(%y, %y)\n"
                   "  return %z\n"
                   "}\n"),
            "t.commir:5:5: error: expected ',' or ')' in the operands, got '%r'\n"
            "    %r = neg(%q)\n"
            "    ^\n"
            "t.commir:8:8: error: 'exp' takes 1 operand, got 2\n"
            "  %z = exp(%y, %y)\n"
            "       ^\n");
}

TEST(ParserErrorTest, UnterminatedBlocksStopAtTheNextDeclaration) {
  EXPECT_EQ(Errors("func @f(%x: f32[4]) -> f32[4] {\n"
                   "  %y = neg(%x)\n"
                   "mesh @m(tp=2)\n"
                   "spmd func @g(%x: f32[4@tp]) -> f32[4] {\n"
                   "  %z = reshard(%x) : f32[2]\n"
                   "  %w = for %i = 0 to 1 iter(%a = %x) {\n"
                   "    yield %a\n"
                   "func @h() -> () {\n"
                   "  %u = bogus()\n"
                   "  return\n"
                   "}\n"
                   "func @k() -> () {\n"),
            "t.commir:3:1: error: expected '}' to close the block, got 'mesh'\n"
            "mesh @m(tp=2)\n"
            "^\n"
            "t.commir:5:8: error: 'reshard' is only valid in global functions\n"
            "  %z = reshard(%x) : f32[2]\n"
            "       ^\n"
            "t.commir:8:1: error: expected '}' to close the block, got 'func'\n"
            "func @h() -> () {\n"
            "^\n"
            "t.commir:9:8: error: unknown op 'bogus'\n"
            "  %u = bogus()\n"
            "       ^\n"
            "t.commir:13:1: error: expected '}' to close the block, got end of file\n"
            "\n"
            "^\n");
}

TEST(ParserErrorTest, BadTokens) {
  EXPECT_EQ(Errors("func @f(%x: f32[4]) -> f32[4] { # junk\n"
                   "  %y = neg(%x) {a = \"unterminated}\n"
                   "  %z = neg(%y) {b = 1 ^ 2}\n"
                   "  return %z $\n"
                   "}\n"
                   "~ stray\n"),
            "t.commir:1:33: error: expected an op name, got invalid character '#'\n"
            "func @f(%x: f32[4]) -> f32[4] { # junk\n"
            "                                ^\n"
            "t.commir:2:21: error: expected an attribute value, got an unterminated string\n"
            "  %y = neg(%x) {a = \"unterminated}\n"
            "                    ^\n"
            "t.commir:3:23: error: expected ',' or '}' in the attributes, got invalid character "
            "'^'\n"
            "  %z = neg(%y) {b = 1 ^ 2}\n"
            "                      ^\n"
            "t.commir:4:13: error: expected an op name, got invalid character '$'\n"
            "  return %z $\n"
            "            ^\n"
            "t.commir:6:1: error: expected 'mesh', 'func' or 'spmd func', got invalid character "
            "'~'\n"
            "~ stray\n"
            "^\n");
}

TEST(ParserErrorTest, TopLevelAndSignatureErrors) {
  EXPECT_EQ(Errors("mesh m(tp=2)\n"
                   "mesh @n(tp 2)\n"
                   "mesh @o(tp=x)\n"
                   "func f() -> () {\n  return\n}\n"
                   "spmd @g() -> () {\n  return\n}\n"
                   "func @h(x: f32[2]) -> () {\n  return\n}\n"
                   "func @i(%x: f33[2]) -> () {\n  return\n}\n"
                   "func @j(%x: f32[2) -> () {\n  return\n}\n"
                   "func @k(%x: f32[-2]) -> () {\n  return\n}\n"
                   "func @l() -> () on m {\n  return\n}\n"
                   "func @ok() -> () {\n  return\n}\n"),
            "t.commir:1:6: error: expected a mesh name like @m, got 'm'\n"
            "mesh m(tp=2)\n"
            "     ^\n"
            "t.commir:2:12: error: expected '=' after the axis name, got '2'\n"
            "mesh @n(tp 2)\n"
            "           ^\n"
            "t.commir:3:12: error: expected an axis size (an integer), got 'x'\n"
            "mesh @o(tp=x)\n"
            "           ^\n"
            "t.commir:4:6: error: expected a function name like @f, got 'f'\n"
            "func f() -> () {\n"
            "     ^\n"
            "t.commir:7:6: error: expected 'func' after 'spmd', got '@g'\n"
            "spmd @g() -> () {\n"
            "     ^\n"
            "t.commir:10:9: error: expected an argument name like %x, got 'x'\n"
            "func @h(x: f32[2]) -> () {\n"
            "        ^\n"
            "t.commir:13:13: error: unknown element type 'f33' (expected f64, f32, f16, bf16, "
            "i64, i32, i1 or index)\n"
            "func @i(%x: f33[2]) -> () {\n"
            "            ^\n"
            "t.commir:16:18: error: expected ',' or ']' in the shape, got ')'\n"
            "func @j(%x: f32[2) -> () {\n"
            "                 ^\n"
            "t.commir:19:17: error: dimension sizes cannot be negative, got -2\n"
            "func @k(%x: f32[-2]) -> () {\n"
            "                ^\n"
            "t.commir:22:20: error: expected a mesh name after 'on', got 'm'\n"
            "func @l() -> () on m {\n"
            "                   ^\n");
}

TEST(ParserErrorTest, ABrokenMeshDoesNotCascadeIntoItsFunctions) {
  // The functions that would use the broken mesh are checked for syntax only.
  EXPECT_EQ(Errors("mesh @m(tp=)\n"
                   "mesh @ok(x=2)\n"
                   "spmd func @f(%x: f32[8@tp]) -> f32[8@tp] on @m {\n"
                   "  %y = all_gather(%x) {axis = tp, dim = 0}\n"
                   "  %z = bogus(%y)\n"
                   "  return %y\n"
                   "}\n"
                   "spmd func @g(%x: f32[8@tp]) -> f32[8@tp] {\n"
                   "  %y = shift(%x) {axis = tp}\n"
                   "  return %y\n"
                   "}\n"
                   "func @h(%x: f32[8@x]) -> f32[8] on @ok {\n"
                   "  %y = neg(%x) : f32[9]\n"
                   "  return %x\n"
                   "}\n"),
            "t.commir:1:12: error: expected an axis size (an integer), got ')'\n"
            "mesh @m(tp=)\n"
            "           ^\n"
            "t.commir:5:8: error: unknown op 'bogus'\n"
            "  %z = bogus(%y)\n"
            "       ^\n"
            "t.commir:13:8: error: result type f32[9] does not match the inferred type f32[8]\n"
            "  %y = neg(%x) : f32[9]\n"
            "       ^\n");
}

TEST(ParserErrorTest, SecondSpmdOrFuncKeywordStartsTheNextDeclaration) {
  EXPECT_EQ(Errors("func\n"
                   "func @g(%x: f32[4]) -> f32[4] {\n"
                   "  %z = bogus(%x)\n"
                   "  return %x\n"
                   "}\n"),
            "t.commir:2:1: error: expected a function name like @f, got 'func'\n"
            "func @g(%x: f32[4]) -> f32[4] {\n"
            "^\n"
            "t.commir:3:8: error: unknown op 'bogus'\n"
            "  %z = bogus(%x)\n"
            "       ^\n");
}

TEST(ParserErrorTest, NamesAndResults) {
  EXPECT_EQ(Errors("func @f(%x: f32[2], %x: f32[2]) -> () {\n"
                   "  %y = neg(%x)\n"
                   "  %y = exp(%x)\n"
                   "  %u = exp(%later)\n"
                   "  %later = neg(%x)\n"
                   "  neg(%x)\n"
                   "  %r = return\n"
                   "  %a, = neg(%x)\n"
                   "  return\n"
                   "}\n"),
            "t.commir:1:21: error: redefinition of %x (first defined at 1:9)\n"
            "func @f(%x: f32[2], %x: f32[2]) -> () {\n"
            "                    ^\n"
            "t.commir:3:3: error: redefinition of %y (first defined at 2:3)\n"
            "  %y = exp(%x)\n"
            "  ^\n"
            "t.commir:4:12: error: use of undefined value %later\n"
            "  %u = exp(%later)\n"
            "           ^\n"
            "t.commir:6:3: error: 'neg' produces 1 result, but 0 names are given\n"
            "  neg(%x)\n"
            "  ^\n"
            "t.commir:7:8: error: unknown op 'return'\n"
            "  %r = return\n"
            "       ^\n"
            "t.commir:8:7: error: expected a result name, got '='\n"
            "  %a, = neg(%x)\n"
            "      ^\n");
}

TEST(ParserErrorTest, LoopBodyValuesAreNotVisibleAfterTheLoop) {
  EXPECT_EQ(Errors("mesh @m(tp=2)\n"
                   "spmd func @f(%x: f32[2]) -> f32[2] {\n"
                   "  %r = for %i = 0 to 2 iter(%a = %x) {\n"
                   "    %n = neg(%a)\n"
                   "    yield %n\n"
                   "  }\n"
                   "  %y = add(%n, %i)\n"
                   "  %z = add(%a, %r)\n"
                   "  return %r\n"
                   "}\n"),
            "t.commir:7:12: error: use of undefined value %n\n"
            "  %y = add(%n, %i)\n"
            "           ^\n"
            "t.commir:7:16: error: use of undefined value %i\n"
            "  %y = add(%n, %i)\n"
            "               ^\n"
            "t.commir:8:12: error: use of undefined value %a\n"
            "  %z = add(%a, %r)\n"
            "           ^\n");
}

TEST(ParserErrorTest, LiteralsWhereNotAllowed) {
  EXPECT_EQ(Errors("mesh @m(tp=2)\n"
                   "spmd func @f(%x: f32[2]) -> f32[2] {\n"
                   "  %a = exp(1.0)\n"
                   "  %b = add(1, 2)\n"
                   "  %c = for %i = 0 to 2 iter(%q = 1.0) { yield %q }\n"
                   "  %d = neg(%x) {stream = %x}\n"
                   "  %e = neg(%x) {axis = %x}\n"
                   "  return 2.0\n"
                   "}\n"),
            "t.commir:3:12: error: 'exp' does not take number literals\n"
            "  %a = exp(1.0)\n"
            "           ^\n"
            "t.commir:4:8: error: 'add' needs at least one operand that is a value\n"
            "  %b = add(1, 2)\n"
            "       ^\n"
            "t.commir:5:34: error: a carried value's initial value must be a value, not a number\n"
            "  %c = for %i = 0 to 2 iter(%q = 1.0) { yield %q }\n"
            "                                 ^\n"
            "t.commir:6:8: error: 'stream' must be a non-negative integer or an index value\n"
            "  %d = neg(%x) {stream = %x}\n"
            "       ^\n"
            "t.commir:7:24: error: attribute 'axis' cannot be a value; only 'stream' can\n"
            "  %e = neg(%x) {axis = %x}\n"
            "                       ^\n"
            "t.commir:8:10: error: 'return' takes values, not number literals\n"
            "  return 2.0\n"
            "         ^\n");
}

TEST(ParserErrorTest, AttributeSyntaxErrors) {
  EXPECT_EQ(Errors("func @f(%x: f32[2, 2]) -> () {\n"
                   "  %a = reduce_sum(%x) {dims = [0, 1}\n"
                   "  %b = reduce_sum(%x) {dims = [0] keepdim}\n"
                   "  %c = reduce_sum(%x) {dims = [0], dims = [1]}\n"
                   "  %d = reduce_sum(%x) {= [0]}\n"
                   "  %e = reduce_sum(%x) {dims = }\n"
                   "  %f = reduce_sum(%x) {dims = [99999999999999999999]}\n"
                   "  %g = reduce_sum(%x) {dims = ()}\n"
                   "  return\n"
                   "}\n"),
            "t.commir:2:36: error: expected ',' or ']' in the list, got '}'\n"
            "  %a = reduce_sum(%x) {dims = [0, 1}\n"
            "                                   ^\n"
            "t.commir:3:35: error: expected ',' or '}' in the attributes, got 'keepdim'\n"
            "  %b = reduce_sum(%x) {dims = [0] keepdim}\n"
            "                                  ^\n"
            "t.commir:4:36: error: attribute 'dims' is given twice\n"
            "  %c = reduce_sum(%x) {dims = [0], dims = [1]}\n"
            "                                   ^\n"
            "t.commir:5:24: error: expected an attribute name, got '='\n"
            "  %d = reduce_sum(%x) {= [0]}\n"
            "                       ^\n"
            "t.commir:6:31: error: expected an attribute value, got '}'\n"
            "  %e = reduce_sum(%x) {dims = }\n"
            "                              ^\n"
            "t.commir:7:32: error: integer 99999999999999999999 is out of range\n"
            "  %f = reduce_sum(%x) {dims = [99999999999999999999]}\n"
            "                               ^\n"
            "t.commir:8:32: error: expected an axis name, got ')'\n"
            "  %g = reduce_sum(%x) {dims = ()}\n"
            "                               ^\n");
}

TEST(ParserErrorTest, LoopSyntaxErrors) {
  EXPECT_EQ(Errors("mesh @m(tp=2)\n"
                   "spmd func @f(%x: f32[2]) -> () {\n"
                   "  for i = 0 to 2 { yield }\n"
                   "  for %i 0 to 2 { yield }\n"
                   "  for %i = 0 2 { yield }\n"
                   "  for %i = 0 to 2 step { yield }\n"
                   "  for %i = 0 to 2 iter %a = %x { yield }\n"
                   "  %r = for %i = 0 to 2 iter(%a = %x) { yield %a } : (f32[3])\n"
                   "  %s, %t = for %i = 0 to 2 iter(%a = %x) { yield %a }\n"
                   "  for %i = 0 to 2 {lower = 1} { yield }\n"
                   "  for %i = 0 to 2\n"
                   "  return\n"
                   "}\n"),
            "t.commir:3:7: error: expected the induction variable, like %i, got 'i'\n"
            "  for i = 0 to 2 { yield }\n"
            "      ^\n"
            "t.commir:4:10: error: expected '=' after the induction variable, got '0'\n"
            "  for %i 0 to 2 { yield }\n"
            "         ^\n"
            "t.commir:5:14: error: expected 'to', got '2'\n"
            "  for %i = 0 2 { yield }\n"
            "             ^\n"
            "t.commir:6:24: error: expected the step (an integer), got '{'\n"
            "  for %i = 0 to 2 step { yield }\n"
            "                       ^\n"
            "t.commir:7:24: error: expected '(' after 'iter', got '%a'\n"
            "  for %i = 0 to 2 iter %a = %x { yield }\n"
            "                       ^\n"
            "t.commir:8:53: error: the loop's result types must be the types of its carried "
            "values\n"
            "  %r = for %i = 0 to 2 iter(%a = %x) { yield %a } : (f32[3])\n"
            "                                                    ^\n"
            "t.commir:9:12: error: the loop carries 1 value but 2 result names are given\n"
            "  %s, %t = for %i = 0 to 2 iter(%a = %x) { yield %a }\n"
            "           ^\n"
            "t.commir:10:20: error: the loop's 'lower' is written in its header\n"
            "  for %i = 0 to 2 {lower = 1} { yield }\n"
            "                   ^\n"
            "t.commir:12:3: error: expected '{' to start the loop body, got 'return'\n"
            "  return\n"
            "  ^\n");
}

TEST(ParserErrorTest, OnlyTheFirstProblemOfAnOpIsReported) {
  // The parser and the verifier find the same inference error: it is reported once.
  Parsed p = Parse("func @f(%x: f32[2]) -> f32[3] {\n"
                   "  %y = neg(%x) : f32[3]\n"
                   "  return %y\n"
                   "}\n");
  EXPECT_EQ(p.errors,
            "t.commir:2:8: error: result type f32[3] does not match the inferred type f32[2]\n"
            "  %y = neg(%x) : f32[3]\n"
            "       ^\n");
}

TEST(ParserErrorTest, ParseErrorsWithoutVerification) {
  // With verification off, parse errors are still reported; verifier errors are not.
  EXPECT_EQ(Errors("func @f() -> f32[2] {\n  %y = bogus()\n}\n", /*verify=*/false),
            "t.commir:2:8: error: unknown op 'bogus'\n"
            "  %y = bogus()\n"
            "       ^\n");
  Parsed p = Parse("func @f() -> f32[2] {\n}\n", /*verify=*/false);
  EXPECT_NE(p.module, nullptr);
}

TEST(ParserTest, WithoutVerificationEveryValueIsStillTyped) {
  // Problems only the verifier reports (an indivisible layout, ops in the wrong kind of
  // function, an invalid mesh) do not leave typeless values behind, so the module
  // prints and parses back.
  const char* source =
      "mesh @m(tp=8)\n"
      "func @f(%x: f32[100@tp, 4]) -> f32[100@tp, 4] on @m {\n"
      "  %y = relu(%x)\n"
      "  %r = rank() {axis = tp}\n"
      "  return %y, %y\n"
      "}\n"
      "mesh @z(a=0)\n"
      "spmd func @g(%x: f32[4]) -> () on @z {\n"
      "  %y = reshard(%x) : f32[4]\n"
      "  %n = neg(%y)\n"
      "  return\n"
      "}\n";
  Parsed p = Parse(source, /*verify=*/false);
  ASSERT_NE(p.module, nullptr) << p.errors;
  std::string printed = PrintModule(*p.module);
  EXPECT_EQ(printed,
            "mesh @m(tp=8)\n"
            "\n"
            "func @f(%x: f32[100@tp, 4]) -> f32[100@tp, 4] on @m {\n"
            "  %y = relu(%x) : f32[100@tp, 4]\n"
            "  %r = rank() {axis = tp} : index\n"
            "  return %y, %y\n"
            "}\n"
            "\n"
            "mesh @z(a=0)\n"
            "\n"
            "spmd func @g(%x: f32[4]) -> () on @z {\n"
            "  %y = reshard(%x) : f32[4]\n"
            "  %n = neg(%y) : f32[4]\n"
            "  return\n"
            "}\n");
  Parsed again = Parse(printed, /*verify=*/false);
  ASSERT_NE(again.module, nullptr) << again.errors;
  EXPECT_EQ(PrintModule(*again.module), printed);
  // With verification, the same text reports each problem once.
  EXPECT_EQ(Errors(source),
            "t.commir:2:13: error: type f32[100@tp, 4]: dimension 0 of size 100 is not "
            "divisible by 8, the number of devices along tp\n"
            "func @f(%x: f32[100@tp, 4]) -> f32[100@tp, 4] on @m {\n"
            "            ^\n"
            "t.commir:2:32: error: type f32[100@tp, 4]: dimension 0 of size 100 is not "
            "divisible by 8, the number of devices along tp\n"
            "func @f(%x: f32[100@tp, 4]) -> f32[100@tp, 4] on @m {\n"
            "                               ^\n"
            "t.commir:4:8: error: 'rank' is only valid in spmd functions\n"
            "  %r = rank() {axis = tp}\n"
            "       ^\n"
            "t.commir:5:3: error: return has 2 values but @f declares 1 result\n"
            "  return %y, %y\n"
            "  ^\n"
            "t.commir:7:9: error: mesh axis 'a' must have size >= 1, got 0\n"
            "mesh @z(a=0)\n"
            "        ^\n");
}

TEST(ParserErrorTest, ErrorsAtTheEndOfFile) {
  EXPECT_EQ(Errors("func @f(%x: f32[2]) -> f32[2] {\n  %y = neg(%x"),
            "t.commir:2:14: error: expected ',' or ')' in the operands, got end of file\n"
            "  %y = neg(%x\n"
            "             ^\n"
            "t.commir:2:14: error: expected '}' to close the block, got end of file\n"
            "  %y = neg(%x\n"
            "             ^\n");
  EXPECT_EQ(Errors("mesh @m(tp=2"),
            "t.commir:1:13: error: expected ',' or ')', got end of file\n"
            "mesh @m(tp=2\n"
            "            ^\n");
}

TEST(ParserErrorTest, CrlfLineEndingsAndTabs) {
  // CRLF files parse; the rendered source line drops the '\r'; tabs stay in the caret
  // line so that the caret lines up.
  EXPECT_EQ(Print("func @f(%x: f32[2]) -> f32[2] {\r\n  %y = neg(%x)\r\n  return %y\r\n}\r\n"),
            "func @f(%x: f32[2]) -> f32[2] {\n  %y = neg(%x) : f32[2]\n  return %y\n}\n");
  EXPECT_EQ(Errors("func @f(%x: f32[2]) -> f32[2] {\r\n\t%y = bogus(%x)\r\n  return %x\r\n}\r\n"),
            "t.commir:2:7: error: unknown op 'bogus'\n"
            "\t%y = bogus(%x)\n"
            "\t     ^\n");
}

// An unexpected non-ASCII character is named whole, and columns count characters: the
// 'é' in the string before the 'ü' counts once.
TEST(ParserErrorTest, NonAsciiCharactersAndCharacterColumns) {
  EXPECT_EQ(Errors("func @f(%x: f32[4]) -> f32[4] {\n"
                   "  %y = neg(%x) {s = \"\xC3\xA9\"} \xC3\xBC\n"
                   "  return %x\n"
                   "}\n"),
            "t.commir:2:8: error: 'neg' has no attribute 's' (it takes none)\n"
            "  %y = neg(%x) {s = \"\xC3\xA9\"} \xC3\xBC\n"
            "       ^\n"
            "t.commir:2:26: error: expected an op name, got invalid character '\xC3\xBC' (U+00FC)\n"
            "  %y = neg(%x) {s = \"\xC3\xA9\"} \xC3\xBC\n"
            "                         ^\n");
}

// NUL, control and invalid bytes are escaped in messages and in the quoted line, and
// the caret still lines up under the reported character.
TEST(ParserErrorTest, ControlAndInvalidBytesAreEscaped) {
  static const char kSource[] = "func @f(%x: f32[4]) -> f32[4] {\n"
                           "  \x01\n"
                           "  \xFF\xFE\n"
                           "  %z = neg(%x) {s = \"\0\"} : f32[4] $\n"
                           "  return %x\n"
                           "}\n";
  const std::string source(kSource, sizeof(kSource) - 1);
  EXPECT_EQ(Errors(source),
            "t.commir:2:3: error: expected an op name, got invalid character '\\x01'\n"
            "  \\x01\n"
            "  ^\n"
            "t.commir:3:3: error: expected an op name, got invalid byte '\\xFF'\n"
            "  \\xFF\\xFE\n"
            "  ^\n"
            "t.commir:4:8: error: 'neg' has no attribute 's' (it takes none)\n"
            "  %z = neg(%x) {s = \"\\x00\"} : f32[4] $\n"
            "       ^\n"
            "t.commir:4:35: error: expected an op name, got invalid character '$'\n"
            "  %z = neg(%x) {s = \"\\x00\"} : f32[4] $\n"
            "                                     ^\n");
}

// A UTF-8 byte order mark at the start of a file is skipped; columns on line 1 and the
// quoted line do not count it.
TEST(ParserErrorTest, ByteOrderMarkIsAccepted) {
  EXPECT_EQ(Print("\xEF\xBB\xBF" "func @f(%x: f32[2]) -> f32[2] {\n  %y = neg(%x)\n  return %y\n}\n"),
            "func @f(%x: f32[2]) -> f32[2] {\n  %y = neg(%x) : f32[2]\n  return %y\n}\n");
  EXPECT_EQ(Errors("\xEF\xBB\xBF" "func @f() -> () { bogus() }\n"),
            "t.commir:1:19: error: unknown op 'bogus'\n"
            "func @f() -> () { bogus() }\n"
            "                  ^\n");
}

// Files with lone '\r' line endings (classic Mac) get the right line numbers.
TEST(ParserErrorTest, CarriageReturnLineEndings) {
  EXPECT_EQ(Print("func @f(%x: f32[2]) -> f32[2] {\r  %y = neg(%x) // c\r  return %y\r}\r"),
            "func @f(%x: f32[2]) -> f32[2] {\n  %y = neg(%x) : f32[2]\n  return %y\n}\n");
  EXPECT_EQ(Errors("func @f() -> () {\r  bogus()\r\n}\rfunc @g() -> () {\r\r  also_bogus()\r}\r"),
            "t.commir:2:3: error: unknown op 'bogus'\n"
            "  bogus()\n"
            "  ^\n"
            "t.commir:6:3: error: unknown op 'also_bogus'\n"
            "  also_bogus()\n"
            "  ^\n");
}

// A 1 MB identifier is shown as its first 64 characters and its length, and the quoted
// line is cut to a window around the caret.
TEST(ParserErrorTest, LongTokensAndLinesAreTruncated) {
  const std::string name(1 << 20, 'a');
  std::string errors = Errors("func @f() -> () {\n  " + name + "()\n}\n");
  EXPECT_EQ(errors, "t.commir:2:3: error: unknown op '" + std::string(64, 'a') +
                        "... (1048576 characters)'\n  " + std::string(198, 'a') + "...\n  ^\n");
  // A 3 MB line with the error at its end: the window ends at the line's end.
  const std::string blanks(3000000, ' ');
  errors = Errors("func @f() -> () {\n" + blanks + "$\n}\n");
  EXPECT_EQ(errors, "t.commir:2:3000001: error: expected an op name, got invalid character '$'\n"
                    "..." + std::string(199, ' ') + "$\n" + std::string(202, ' ') + "^\n");
  // A long value name in a verifier-side message is cut the same way.
  errors = Errors("func @f() -> () {\n  return %" + name + "\n}\n");
  EXPECT_THAT(errors, HasSubstr("%" + std::string(64, 'a') + "... (1048576 characters)"));
  EXPECT_LT(errors.size(), 1000u);  // not megabytes
}

TEST(ParserErrorTest, StatusRendering) {
  absl::StatusOr<std::unique_ptr<Module>> m =
      ParseModuleOrError("func @f() -> () {\n  bogus()\n}\n", "x.commir");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(),
            "x.commir:2:3: error: unknown op 'bogus'\n"
            "  bogus()\n"
            "  ^\n");
  absl::StatusOr<std::unique_ptr<Module>> ok = ParseModuleOrError("", "x.commir");
  EXPECT_TRUE(ok.ok());
  absl::StatusOr<std::unique_ptr<Module>> missing = ParseFile("/nonexistent/file.commir");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "/nonexistent/file.commir: cannot open file");
}

// ---- Limits -------------------------------------------------------------------------

TEST(ParserLimitsTest, DeepLoopNestingIsAnErrorNotAStackOverflow) {
  std::string source = "mesh @m(tp=2)\nspmd func @f() -> () {\n";
  const int kDepth = 100000;
  for (int i = 0; i < kDepth; ++i) source += absl::StrCat("for %i", i, " = 0 to 1 {\n");
  for (int i = 0; i < kDepth; ++i) source += "yield\n}\n";
  source += "return\n}\n";
  EXPECT_EQ(Errors(source),
            "t.commir:67:1: error: loops nest too deeply (at most 64 levels)\n"
            "for %i64 = 0 to 1 {\n"
            "^\n");
}

TEST(ParserLimitsTest, SixtyFourNestedLoopsAreFine) {
  std::string source = "mesh @m(tp=2)\nspmd func @f() -> () {\n";
  for (int i = 0; i < 64; ++i) source += absl::StrCat("for %i", i, " = 0 to 1 {\n");
  for (int i = 0; i < 64; ++i) source += "yield\n}\n";
  source += "return\n}\n";
  Parsed p = Parse(source);
  EXPECT_EQ(p.errors, "");
  ASSERT_NE(p.module, nullptr);
  std::string printed = PrintModule(*p.module);
  EXPECT_EQ(Print(printed), printed);
}

TEST(ParserLimitsTest, DeepListNestingIsAnErrorNotAStackOverflow) {
  std::string source = "func @f(%x: f32[2]) -> () {\n  %y = neg(%x) {a = ";
  source += std::string(1000000, '[');
  source += "}\n  return\n}\n";
  Parsed p = Parse(source);
  EXPECT_EQ(p.module, nullptr);
  EXPECT_THAT(p.errors, HasSubstr("t.commir:2:85: error: lists nest too deeply (at most 64 levels)\n"));
}

TEST(ParserLimitsTest, HugeValuesAreErrorsNotOverflows) {
  EXPECT_EQ(Errors("mesh @m(a=4294967296, b=4294967296)\n"
                   "func @f(%x: f32[9223372036854775807, 2], %y: f32[4]) -> () on @m {\n"
                   "  %s = slice(%y) {start = [9223372036854775807], size = [1]}\n"
                   "  return\n"
                   "}\n"
                   "mesh @n(tp=4611686018427387904)\n"
                   "spmd func @g(%x: f32[4611686018427387904, 1]) -> () on @n {\n"
                   "  %a = all_gather(%x) {axis = tp, dim = 0}\n"
                   "  %b = concat(%x, %x) {dim = 0}\n"
                   "  %c = matmul(%x, %x) {transpose_b}\n"
                   "  return\n"
                   "}\n"),
            "t.commir:1:1: error: mesh @m has too many devices: the product of its axis sizes "
            "does not fit in 64 bits\n"
            "mesh @m(a=4294967296, b=4294967296)\n"
            "^\n"
            "t.commir:2:13: error: type f32[9223372036854775807, 2] has more elements than fit "
            "in 64 bits\n"
            "func @f(%x: f32[9223372036854775807, 2], %y: f32[4]) -> () on @m {\n"
            "            ^\n"
            "t.commir:8:8: error: the result dimension 4611686018427387904 * 4611686018427387904 "
            "does not fit in 64 bits\n"
            "  %a = all_gather(%x) {axis = tp, dim = 0}\n"
            "       ^\n"
            "t.commir:9:8: error: the result dimension 4611686018427387904 + 4611686018427387904 "
            "does not fit in 64 bits\n"
            "  %b = concat(%x, %x) {dim = 0}\n"
            "       ^\n"
            "t.commir:10:8: error: the result f32[4611686018427387904, 4611686018427387904] has "
            "more elements than fit in 64 bits\n"
            "  %c = matmul(%x, %x) {transpose_b}\n"
            "       ^\n");
}

TEST(ParserLimitsTest, InvalidMeshesDoNotCrashOrCascade) {
  EXPECT_EQ(Errors("mesh @m(tp=0)\n"
                   "spmd func @f(%x: f32[4@tp]) -> f32[4@tp] {\n"
                   "  %y = all_gather(%x) {axis = tp, dim = 0}\n"
                   "  %z = reduce_scatter(%y) {axis = tp, dim = 0}\n"
                   "  return %z\n"
                   "}\n"),
            "t.commir:1:9: error: mesh axis 'tp' must have size >= 1, got 0\n"
            "mesh @m(tp=0)\n"
            "        ^\n");
}

TEST(ParserLimitsTest, LargeInputsAndManyErrors) {
  // 100000 statements parse, and 50000 errors render, in linear time.
  std::string good = "func @f(%x: f32[2]) -> f32[2] {\n";
  for (int i = 0; i < 100000; ++i) good += absl::StrCat("  %v", i, " = neg(%x)\n");
  good += "  return %x\n}\n";
  Parsed p = Parse(good);
  ASSERT_NE(p.module, nullptr);
  EXPECT_EQ(p.module->functions()[0]->body()->size(), 100001u);

  std::string bad = "func @f(%x: f32[2]) -> f32[2] {\n";
  for (int i = 0; i < 50000; ++i) bad += "  %y = bogus(%x)\n";
  bad += "  return %x\n}\n";
  Parsed q = Parse(bad);
  EXPECT_EQ(q.module, nullptr);
  // One unknown op per line, then the later %y definitions are not redefinitions of
  // a broken statement's name... each line is its own error.
  size_t count = 0;
  for (size_t pos = q.errors.find("error:"); pos != std::string::npos;
       pos = q.errors.find("error:", pos + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 50000u);
}

// ---- Round trip ---------------------------------------------------------------------

// print(parse(x)) is a fixed point of print . parse.
void ExpectRoundTrip(const std::string& name, const std::string& source) {
  SCOPED_TRACE(name);
  Parsed first = Parse(source);
  ASSERT_NE(first.module, nullptr) << first.errors;
  std::string printed = PrintModule(*first.module);
  Parsed second = Parse(printed);
  ASSERT_NE(second.module, nullptr) << second.errors << "\n" << printed;
  EXPECT_EQ(PrintModule(*second.module), printed);
}

TEST(RoundTripTest, SharedExamples) {
  for (const char* name : {"ag_matmul", "ag_matmul_global4", "attention", "mlp",
                           "ring_ag_matmul", "transformer_block"}) {
    ExpectRoundTrip(name, ReadFile(absl::StrCat("testdata/examples/", name, ".commir")));
  }
}

// Every valid_* seed of the fuzzer parses, verifies and round-trips.
TEST(RoundTripTest, ValidSeedCorpus) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("parser/fuzz_corpus")) {
    std::string name = entry.path().filename().string();
    if (name.rfind("valid_", 0) != 0) continue;
    ExpectRoundTrip(name, ReadFile(entry.path().string()));
    ++count;
  }
  EXPECT_GE(count, 30);
}

// And every invalid_* seed is rejected with errors (and no crash).
TEST(RoundTripTest, InvalidSeedCorpus) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("parser/fuzz_corpus")) {
    std::string name = entry.path().filename().string();
    if (name.rfind("invalid_", 0) != 0) continue;
    SCOPED_TRACE(name);
    Parsed p = Parse(ReadFile(entry.path().string()));
    EXPECT_EQ(p.module, nullptr);
    EXPECT_NE(p.errors, "");
    ++count;
  }
  EXPECT_GE(count, 8);
}

// Literals and float attributes read back bit for bit after printing.
TEST(RoundTripTest, NumbersSurvivePrintingExactly) {
  std::mt19937_64 rng(7);
  std::vector<double> values = {0.0,   -0.0,    1.0,     -1.0,       0.1,     1e-05, 1e-6,
                                5e-324, 2.2250738585072014e-308,     1.7976931348623157e+308,
                                -2.5e-3, 3.0e22, 123456789.0, 1.0 / 3.0};
  for (int i = 0; i < 300; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    if (std::isfinite(d)) values.push_back(d);
  }
  std::string body;
  for (size_t i = 0; i < values.size(); ++i) {
    body += absl::StrCat("  %m", i, " = mul(%x, ", FormatFloat(values[i]), ")\n");
    body += absl::StrCat("  %n", i, " = rmsnorm(%x, %x) {eps = ", FormatFloat(values[i]), "}\n");
  }
  std::string source = "func @f(%x: f64[4]) -> () {\n" + body + "  return\n}\n";
  std::string printed = Print(source);
  Parsed p = Parse(printed);
  ASSERT_NE(p.module, nullptr) << p.errors;
  EXPECT_EQ(PrintModule(*p.module), printed);
  size_t i = 0;
  for (Operation* op : *p.module->functions()[0]->body()) {
    if (op->Is(OpKind::kMul)) {
      double v = op->operand(1)->literal_value();
      EXPECT_EQ(std::memcmp(&v, &values[i], sizeof(v)), 0) << FormatFloat(values[i]);
    } else if (op->Is(OpKind::kRmsNorm)) {
      double v = op->attrs().Find("eps")->float_value();
      EXPECT_EQ(std::memcmp(&v, &values[i], sizeof(v)), 0) << FormatFloat(values[i]);
      ++i;
    }
  }
  EXPECT_EQ(i, values.size());
}

TEST(RoundTripTest, IntegerExtremes) {
  EXPECT_EQ(Print("mesh @m(tp=1)\n"
                  "spmd func @f() -> () {\n"
                  "  %r = rank() {axis = tp}\n"
                  "  %a = add(%r, -9223372036854775808)\n"
                  "  %b = add(%r, 9007199254740992)\n"
                  "  %c = full() {value = -9223372036854775808} : index\n"
                  "  for %i = -9223372036854775808 to 9223372036854775807 step 9223372036854775807 {\n"
                  "    yield\n"
                  "  }\n"
                  "  return\n"
                  "}\n"),
            "mesh @m(tp=1)\n"
            "\n"
            "spmd func @f() -> () on @m {\n"
            "  %r = rank() {axis = tp} : index\n"
            "  %a = add(%r, -9223372036854775808) : index\n"
            "  %b = add(%r, 9007199254740992) : index\n"
            "  %c = full() {value = -9223372036854775808} : index\n"
            "  for %i = -9223372036854775808 to 9223372036854775807 step 9223372036854775807 {\n"
            "    yield\n"
            "  }\n"
            "  return\n"
            "}\n");
}

TEST(ParserErrorTest, IntegerLiteralsMustBeExact) {
  // Literals are held as doubles: an index or integer literal must survive that
  // (-2^63 and 2^60 do; 2^53 + 1 does not). Float operands take any integer.
  EXPECT_EQ(Errors("mesh @m(tp=1)\n"
                   "spmd func @f(%x: f32[2], %i: i64[2]) -> () {\n"
                   "  %r = rank() {axis = tp}\n"
                   "  %a = add(%r, 9223372036854775807)\n"
                   "  %b = add(9007199254740993, %i)\n"
                   "  %c = add(%x, 9007199254740993)\n"
                   "  %d = add(%i, 99999999999999999999999)\n"
                   "  %e = add(%i, -9223372036854775808)\n"
                   "  %f = add(%i, 1152921504606846976)\n"
                   "  return\n"
                   "}\n"),
            "t.commir:4:16: error: integer literal 9223372036854775807 cannot be represented "
            "exactly: literals are held as doubles\n"
            "  %a = add(%r, 9223372036854775807)\n"
            "               ^\n"
            "t.commir:5:12: error: integer literal 9007199254740993 cannot be represented "
            "exactly: literals are held as doubles\n"
            "  %b = add(9007199254740993, %i)\n"
            "           ^\n"
            "t.commir:7:16: error: integer literal 99999999999999999999999 cannot be "
            "represented exactly: literals are held as doubles\n"
            "  %d = add(%i, 99999999999999999999999)\n"
            "               ^\n");
}

// Random programs from a small grammar that tracks shapes (so most are valid), with
// odd value names, literals, comments and optional annotations: every one that
// parses must round-trip. This reaches the printer far more often than the fuzzer,
// whose mutants rarely verify.
class ProgramGenerator {
 public:
  explicit ProgramGenerator(uint64_t seed) : rng_(seed) {}

  std::string Generate() {
    values_.clear();
    next_ = 0;
    bool spmd = Coin(3);
    std::string out = Coin(2) ? "mesh @m(dp=2, tp=2)\n" : "";
    std::string sig;
    int args = 1 + Pick(3);
    for (int i = 0; i < args; ++i) {
      std::vector<int64_t> dims = RandomDims();
      std::string name = FreshName();
      std::string global = FormatType(dims, /*shard=*/true);
      if (i > 0) sig += ", ";
      sig += "%" + name + ": " + global;
      // The body sees the local type in a spmd function: track the unsharded shape
      // only when nothing was split.
      if (!spmd || global.find('@') == std::string::npos) values_.push_back({name, dims});
    }
    std::string body;
    int ops = 1 + Pick(12);
    for (int i = 0; i < ops && !values_.empty(); ++i) body += Statement(spmd);
    std::string ret = values_.empty() ? "" : values_[Pick(values_.size())].name;
    std::string result_type = ret.empty() ? "()" : FormatType(Find(ret), !spmd);
    out += std::string(spmd ? "spmd " : "") + "func @f(" + sig + ") -> " + result_type +
           (out.empty() ? "" : " on @m") + " {\n" + body + "  return" +
           (ret.empty() ? "" : " %" + ret) + (Coin(4) ? "  // done" : "") + "\n}\n";
    if (out.rfind("mesh", 0) != 0 && Coin(3)) out += "mesh @m(dp=2, tp=2)\n";
    return out;
  }

 private:
  struct Val {
    std::string name;
    std::vector<int64_t> dims;
  };

  bool Coin(int n) { return rng_() % n == 0; }
  size_t Pick(size_t n) { return rng_() % n; }

  std::string FreshName() {
    static const char* kStyles[] = {"v", "x.", "a$", "t-", "", "h.1."};
    return absl::StrCat(kStyles[Pick(6)], next_++);
  }

  std::vector<int64_t> RandomDims() {
    static const std::vector<std::vector<int64_t>> kShapes = {{4, 8}, {8}, {8, 4}, {2, 4, 8}, {}};
    return kShapes[Pick(kShapes.size())];
  }

  std::string FormatType(const std::vector<int64_t>& dims, bool shard) {
    std::string out = "f32[";
    for (size_t i = 0; i < dims.size(); ++i) {
      if (i > 0) out += ", ";
      out += absl::StrCat(dims[i]);
      if (shard && dims[i] % 4 == 0 && Coin(4)) out += Coin(2) ? "@tp" : "@(dp, tp)";
    }
    out += "]";
    return out;
  }

  const std::vector<int64_t>& Find(const std::string& name) {
    for (const Val& v : values_) {
      if (v.name == name) return v.dims;
    }
    return values_.front().dims;
  }

  std::string Statement(bool spmd) {
    const Val x = values_[Pick(values_.size())];
    std::string name = FreshName();
    std::vector<int64_t> dims = x.dims;
    std::string op;
    switch (Pick(9)) {
      case 0: {
        static const char* kUnary[] = {"neg", "exp", "relu", "tanh", "abs", "gelu", "silu"};
        op = absl::StrCat(kUnary[Pick(7)], "(%", x.name, ")");
        break;
      }
      case 1: {
        static const char* kBinary[] = {"add", "sub", "mul", "div", "max", "min"};
        std::string other = Coin(2) ? FormatLiteral() : "%" + x.name;
        op = Coin(2) ? absl::StrCat(kBinary[Pick(6)], "(%", x.name, ", ", other, ")")
                     : absl::StrCat(kBinary[Pick(6)], "(", other, ", %", x.name, ")");
        break;
      }
      case 2:
        if (dims.size() < 2) return "";
        std::swap(dims[dims.size() - 1], dims[dims.size() - 2]);
        op = absl::StrCat("transpose(%", x.name, ") {perm = [",
                          dims.size() == 2 ? "1, 0" : "0, 2, 1", "]}");
        break;
      case 3:
        if (dims.empty()) return "";
        dims.pop_back();
        op = absl::StrCat("reduce_sum(%", x.name, ") {dims = [-1]}");
        break;
      case 4:
        if (dims.size() < 2) return "";
        dims.back() = dims[dims.size() - 2];
        op = absl::StrCat("matmul(%", x.name, ", %", x.name, ") {transpose_b}");
        break;
      case 5:
        dims = {1};
        for (int64_t d : x.dims) dims[0] *= d;
        op = absl::StrCat("reshape(%", x.name, ") : ", FormatType(dims, !spmd));
        break;
      case 6:
        if (dims.empty()) return "";
        dims[0] *= 2;
        op = absl::StrCat("concat(%", x.name, ", %", x.name, ") {dim = 0}");
        break;
      case 7:
        op = absl::StrCat("softmax(%", x.name, ")");
        if (dims.empty()) return "";
        break;
      default:
        if (!spmd || dims.empty()) {
          op = absl::StrCat("convert(%", x.name, ") : ", FormatType(dims, !spmd));
        } else {
          op = absl::StrCat("all_gather(%", x.name, ") {axis = ", Coin(2) ? "tp" : "(dp, tp)",
                            ", dim = 0", Coin(2) ? ", stream = 1" : "", "}");
          dims[0] *= 2;  // wrong for (dp, tp): such programs fail to verify
        }
        break;
    }
    std::string annotation;
    if (Coin(3) && op.find(" : ") == std::string::npos) annotation = " : " + FormatType(dims, false);
    values_.push_back({name, dims});
    return absl::StrCat(Coin(5) ? "  // c\n" : "", "  %", name, " = ", op, annotation, "\n");
  }

  std::string FormatLiteral() {
    static const char* kLiterals[] = {"0.5", "-2.5e-3", "1", "inf", "-inf", "nan", "1e-05", "3."};
    return kLiterals[Pick(8)];
  }

  std::mt19937_64 rng_;
  std::vector<Val> values_;
  int next_ = 0;
};

TEST(RoundTripTest, RandomProgramsRoundTrip) {
  ProgramGenerator generator(20261121);
  int valid = 0;
  const int kPrograms = 2000;
  for (int i = 0; i < kPrograms; ++i) {
    std::string source = generator.Generate();
    DiagnosticEngine diagnostics;
    std::unique_ptr<Module> module = ParseModule(source, diagnostics);
    if (module == nullptr) continue;
    ++valid;
    std::string printed = PrintModule(*module);
    DiagnosticEngine again;
    std::unique_ptr<Module> reparsed = ParseModule(printed, again);
    ASSERT_NE(reparsed, nullptr) << source << "\n---\n" << printed << "\n---\n"
                                 << again.Render("p", printed);
    ASSERT_EQ(PrintModule(*reparsed), printed) << source;
  }
  // The generator must mostly produce valid programs to be of use.
  EXPECT_GT(valid, kPrograms / 2);
  std::printf("%d of %d random programs were valid\n", valid, kPrograms);
}

TEST(RoundTripTest, CanonicalFormOfTheRingExample) {
  EXPECT_EQ(Print(ReadFile("testdata/examples/ring_ag_matmul.commir")),
            "mesh @m(tp=4)\n"
            "\n"
            "spmd func @ag_matmul(%a: f32[512@tp, 256], %b: f32[256, 128@tp]) -> f32[512, "
            "128@tp] on @m {\n"
            "  %r = rank() {axis = tp} : index\n"
            "  %c0 = full() {value = 0.0} : f32[512, 32]\n"
            "  %c, %last = for %i = 0 to 4 step 1 iter(%acc = %c0, %blk = %a) {\n"
            "    %next = shift(%blk) {axis = tp, offset = 1, stream = 1} : f32[128, 256]\n"
            "    %part = matmul(%blk, %b) : f32[128, 32]\n"
            "    %src = sub(%r, %i) : index\n"
            "    %src4 = rem(%src, 4) : index\n"
            "    %off = mul(%src4, 128) : index\n"
            "    %acc1 = dynamic_update_slice(%acc, %part, %off) {dim = 0} : f32[512, 32]\n"
            "    yield %acc1, %next\n"
            "  } : (f32[512, 32], f32[128, 256])\n"
            "  return %c\n"
            "}\n");
}

TEST(RoundTripTest, ErrorsExampleReportsLineFive) {
  std::string source = ReadFile("testdata/examples/errors_divisibility.commir");
  absl::StatusOr<std::unique_ptr<Module>> m =
      ParseModuleOrError(source, "errors_divisibility.commir");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "errors_divisibility.commir:5:15: error: type f32[100@tp, 4]: dimension 0 of size "
            "100 is not divisible by 8, the number of devices along tp\n"
            "func @bad(%x: f32[100@tp, 4]) -> f32[100@tp, 4] {\n"
            "              ^\n"
            "errors_divisibility.commir:5:34: error: type f32[100@tp, 4]: dimension 0 of size "
            "100 is not divisible by 8, the number of devices along tp\n"
            "func @bad(%x: f32[100@tp, 4]) -> f32[100@tp, 4] {\n"
            "                                 ^\n");
}

}  // namespace
}  // namespace commir
