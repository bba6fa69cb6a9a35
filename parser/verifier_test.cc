// Every verifier rule, reached from text: each test asserts the messages and their
// LINE:COL (and a few the whole rendering with source line and caret). Rules that
// only IR built in memory can break are in //commir:verifier_test.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "commir/diagnostics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"

namespace commir {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// "LINE:COL: error: MESSAGE" of every diagnostic, in order.
std::vector<std::string> Diags(absl::string_view source) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(source, diagnostics);
  EXPECT_EQ(module == nullptr, diagnostics.has_errors());
  std::vector<std::string> out;
  for (const Diagnostic& d : diagnostics.Sorted()) {
    out.push_back(std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) +
                  ": error: " + d.message);
  }
  return out;
}

std::string Render(absl::string_view source) {
  DiagnosticEngine diagnostics;
  ParseModule(source, diagnostics);
  return diagnostics.Render("v.commir", source);
}

// A global function on @m(dp=2, tp=4) whose body (starting on line 3) is `body`.
std::string Global(absl::string_view body, absl::string_view sig = "(%x: f32[8, 16]) -> ()") {
  return absl::StrCat("mesh @m(dp=2, tp=4)\nfunc @f", sig, " {\n", body, "}\n");
}

std::string Spmd(absl::string_view body, absl::string_view sig = "(%x: f32[8, 16]) -> ()") {
  return absl::StrCat("mesh @m(dp=2, tp=4)\nspmd func @f", sig, " {\n", body, "}\n");
}

// ---- Module and meshes --------------------------------------------------------------

TEST(VerifierTest, ValidModuleHasNoErrors) {
  EXPECT_THAT(Diags(Global("  %y = neg(%x)\n  return\n")), IsEmpty());
}

TEST(VerifierTest, DuplicateSymbols) {
  EXPECT_THAT(Diags("mesh @a(x=2)\n"
                    "func @f() -> () on @a {\n  return\n}\n"
                    "func @f() -> () on @a {\n  return\n}\n"
                    "mesh @f(y=1)\n"
                    "mesh @a(z=2)\n"),
              ElementsAre("5:1: error: redefinition of @f", "8:1: error: redefinition of @f",
                          "9:1: error: redefinition of @a"));
}

TEST(VerifierTest, MeshAxisTwiceAndSizeBelowOne) {
  EXPECT_EQ(Render("mesh @m(tp=2, dp=0, tp=4, pp=-1)\n"),
            "v.commir:1:15: error: mesh axis 'dp' must have size >= 1, got 0\n"
            "mesh @m(tp=2, dp=0, tp=4, pp=-1)\n"
            "              ^\n"
            "v.commir:1:21: error: mesh @m has axis 'tp' twice\n"
            "mesh @m(tp=2, dp=0, tp=4, pp=-1)\n"
            "                    ^\n"
            "v.commir:1:27: error: mesh axis 'pp' must have size >= 1, got -1\n"
            "mesh @m(tp=2, dp=0, tp=4, pp=-1)\n"
            "                          ^\n");
}

TEST(VerifierTest, MeshWithTooManyDevices) {
  EXPECT_THAT(Diags("mesh @m(a=65536, b=65536, c=65536, d=65536)\n"),
              ElementsAre("1:1: error: mesh @m has too many devices: the product of its axis "
                          "sizes does not fit in 64 bits"));
}

TEST(VerifierTest, FunctionsOnAnInvalidMeshAreNotCheckedFurther) {
  // The body's problems would all stem from the mesh: one error, not a cascade.
  EXPECT_THAT(Diags("mesh @m(tp=0)\n"
                    "spmd func @f(%x: f32[7@tp]) -> f32[7@tp] {\n"
                    "  %y = all_gather(%x) {axis = tp, dim = 0}\n"
                    "  return %y\n"
                    "}\n"),
              ElementsAre("1:9: error: mesh axis 'tp' must have size >= 1, got 0"));
}

TEST(VerifierTest, UnknownMesh) {
  EXPECT_EQ(Render("mesh @m(tp=2)\nfunc @f() -> () on @nope {\n  bogus()\n}\n"),
            "v.commir:2:20: error: unknown mesh @nope\n"
            "func @f() -> () on @nope {\n"
            "                   ^\n"
            "v.commir:3:3: error: unknown op 'bogus'\n"
            "  bogus()\n"
            "  ^\n");
}

TEST(VerifierTest, FunctionWithoutOnWhenTwoMeshesExist) {
  EXPECT_THAT(Diags("mesh @a(x=2)\nmesh @b(y=2)\n"
                    "spmd func @f() -> () {\n  return\n}\n"
                    "func @g() -> () on @b {\n  return\n}\n"),
              ElementsAre("3:6: error: @f must name its mesh with 'on @MESH': the module "
                          "declares 2 meshes"));
}

// ---- Signatures and layouts ---------------------------------------------------------

TEST(VerifierTest, SignatureLayouts) {
  EXPECT_THAT(
      Diags("mesh @m(dp=2, tp=4)\n"
            "func @f(%a: f32[8@pp], %b: f32[8@tp, 8@tp], %c: f32[6@tp],\n"
            "        %d: f32[8@(dp, tp)] partial(dp), %e: f32[12@(dp, tp)])\n"
            "    -> (f32[3@dp], f32[8] partial(zz)) {\n"
            "  return %a, %a\n"
            "}\n"
            "func @g(%x: f32[4@tp]) -> f32[4@tp] on @nomesh {\n  return %x\n}\n"
            "func @h(%x: f32[4@tp]) -> f32[4] partial(tp) on @m {\n"
            "  return %x\n"
            "}\n"),
      ElementsAre(
          "2:13: error: type f32[8@pp] names axis 'pp', which mesh @m does not have",
          "2:28: error: type f32[8@tp, 8@tp] uses axis 'tp' more than once",
          "2:49: error: type f32[6@tp]: dimension 0 of size 6 is not divisible by 4, the "
          "number of devices along tp",
          "3:13: error: type f32[8@(dp, tp)] partial(dp) uses axis 'dp' more than once",
          "3:46: error: type f32[12@(dp, tp)]: dimension 0 of size 12 is not divisible by 8, "
          "the number of devices along (dp, tp)",
          "4:9: error: type f32[3@dp]: dimension 0 of size 3 is not divisible by 2, the number "
          "of devices along dp",
          "4:20: error: type f32[8] partial(zz) names axis 'zz', which mesh @m does not have",
          "7:40: error: unknown mesh @nomesh"));
}

TEST(VerifierTest, ShardedTypesWithoutAMesh) {
  // Uses of the invalid argument are not flagged again.
  EXPECT_THAT(Diags("func @f(%x: f32[8@tp], %w: f32[8]) -> f32[8] {\n"
                    "  %y = neg(%x)\n"
                    "  %z = exp(%w) : f32[8] partial(tp)\n"
                    "  return %x\n"
                    "}\n"),
              ElementsAre("1:13: error: type f32[8@tp] names mesh axis 'tp' but the function "
                          "has no mesh",
                          "3:18: error: type f32[8] partial(tp) names mesh axis 'tp' but the "
                          "function has no mesh"));
}

TEST(VerifierTest, WrittenResultLayoutsAreChecked) {
  EXPECT_THAT(Diags(Global("  %a = neg(%x) : f32[8@pp, 16]\n"
                           "  %b = neg(%x) : f32[8, 16@(tp, tp)]\n"
                           "  %c = neg(%x) : f32[8, 16@(dp, tp), 8]\n"
                           "  %d = neg(%x) : f32[8@tp, 16@dp]\n"
                           "  return\n")),
              ElementsAre("3:18: error: type f32[8@pp, 16] names axis 'pp', which mesh @m does "
                          "not have",
                          "4:18: error: type f32[8, 16@(tp, tp)] uses axis 'tp' more than once",
                          "5:8: error: result type f32[8, 16@(dp, tp), 8] does not match the "
                          "inferred type f32[8, 16]"));
}

// ---- Terminators, returns and yields ------------------------------------------------

TEST(VerifierTest, MissingTerminator) {
  // At the last op, or at the function when the body is empty.
  EXPECT_EQ(Render(Global("  %y = neg(%x)\n")),
            "v.commir:3:8: error: the function body must end with 'return'\n"
            "  %y = neg(%x)\n"
            "       ^\n");
  EXPECT_THAT(Diags(Global("")), ElementsAre("2:1: error: the function body must end with 'return'"));
  EXPECT_THAT(Diags(Spmd("  for %i = 0 to 2 {\n"
                         "    %y = neg(%x)\n"
                         "  }\n"
                         "  for %j = 0 to 2 {\n"
                         "  }\n"
                         "  return\n")),
              ElementsAre("4:10: error: the loop body must end with 'yield'",
                          "6:3: error: the loop body must end with 'yield'"));
}

TEST(VerifierTest, TerminatorNotLast) {
  EXPECT_THAT(Diags(Global("  return\n  %y = neg(%x)\n")),
              ElementsAre("3:3: error: 'return' must be the last op of its block",
                          "4:8: error: the function body must end with 'return'"));
  EXPECT_THAT(Diags(Spmd("  for %i = 0 to 2 {\n"
                         "    yield\n"
                         "    yield\n"
                         "  }\n"
                         "  return\n"
                         "  return\n")),
              ElementsAre("4:5: error: 'yield' must be the last op of its block",
                          "7:3: error: 'return' must be the last op of its block"));
}

TEST(VerifierTest, TerminatorsOfTheWrongKind) {
  EXPECT_THAT(Diags(Spmd("  yield\n")),
              ElementsAre("3:3: error: 'yield' is only valid in a loop body"));
  EXPECT_THAT(Diags(Global("  yield\n")),
              ElementsAre("3:3: error: 'yield' is only valid in spmd functions"));
  EXPECT_THAT(Diags(Spmd("  for %i = 0 to 2 {\n    return\n  }\n  return\n")),
              ElementsAre("4:5: error: 'return' is not valid in a loop body (use 'yield')"));
}

TEST(VerifierTest, ReturnCountAndTypesInGlobalFunctions) {
  EXPECT_THAT(Diags(Global("  return %x\n", "(%x: f32[8, 16]) -> (f32[8, 16], f32[8, 16])")),
              ElementsAre("3:3: error: return has 1 value but @f declares 2 results"));
  EXPECT_THAT(Diags(Global("  %y = convert(%x) : f16[8, 16]\n"
                           "  return %y, %x\n",
                           "(%x: f32[8, 16]) -> (f32[8, 16], f32[16, 8])")),
              ElementsAre("4:3: error: result 0: returned f16[8, 16] does not match declared "
                          "f32[8, 16]",
                          "4:3: error: result 1: returned f32[8, 16] does not match declared "
                          "f32[16, 8]"));
  // Sharding on a global result is a request, not part of the match.
  EXPECT_THAT(Diags(Global("  return %x\n", "(%x: f32[8, 16]) -> f32[8@dp, 16@tp] partial()")),
              ElementsAre("2:53: error: expected an axis name, got ')'"));
  EXPECT_THAT(Diags(Global("  return %x\n", "(%x: f32[8, 16]) -> f32[8@dp, 16@tp]")), IsEmpty());
}

TEST(VerifierTest, ReturnTypesInSpmdFunctionsAreLocal) {
  // Each device returns its part: f32[8@dp, 16@tp] is f32[4, 4] per device.
  EXPECT_THAT(Diags(Spmd("  %y = slice(%x) {start = [0, 0], size = [4, 4]}\n"
                         "  return %y, %x\n",
                         "(%x: f32[8, 16]) -> (f32[8@dp, 16@tp], f32[16, 8] partial(tp))")),
              ElementsAre("4:3: error: result 1: each device must return f32[16, 8] (its part "
                          "of f32[16, 8] partial(tp)), got f32[8, 16]"));
  EXPECT_THAT(Diags(Spmd("  return %x\n", "(%x: f32[8, 16]) -> f32[8@dp, 16@tp]")),
              ElementsAre("3:3: error: result 0: each device must return f32[4, 4] (its part "
                          "of f32[8@dp, 16@tp]), got f32[8, 16]"));
  // An invalid declared layout is reported once, at the signature.
  EXPECT_THAT(Diags(Spmd("  return %x\n", "(%x: f32[8, 16]) -> f32[8@dp, 15@tp]")),
              ElementsAre("2:33: error: type f32[8@dp, 15@tp]: dimension 1 of size 15 is not "
                          "divisible by 4, the number of devices along tp"));
  EXPECT_THAT(Diags(Spmd("  return\n", "(%x: f32[8, 16]) -> f32[8]")),
              ElementsAre("3:3: error: return has 0 values but @f declares 1 result"));
}

TEST(VerifierTest, YieldMismatch) {
  EXPECT_THAT(Diags(Spmd("  %r = for %i = 0 to 2 iter(%a = %x) {\n"
                         "    yield %a, %a\n"
                         "  }\n"
                         "  %s = for %i = 0 to 2 iter(%a = %x) {\n"
                         "    %t = transpose(%a) {perm = [1, 0]}\n"
                         "    yield %t\n"
                         "  }\n"
                         "  %u = for %i = 0 to 2 iter(%a = %x) {\n"
                         "    yield %i\n"
                         "  }\n"
                         "  return\n")),
              ElementsAre("4:5: error: yield has 2 values but the loop carries 1",
                          "8:5: error: yield value 0 is f32[16, 8] but the loop carries f32[8, 16]",
                          "11:5: error: yield value 0 is index but the loop carries f32[8, 16]"));
}

// ---- Where ops may appear -----------------------------------------------------------

TEST(VerifierTest, SpmdOnlyOpsInAGlobalFunction) {
  EXPECT_THAT(Diags(Global("  %r = rank() {axis = tp}\n"
                           "  %g = all_gather(%x) {axis = tp, dim = 0}\n"
                           "  %s = reduce_scatter(%x) {axis = tp, dim = 0}\n"
                           "  %a = all_reduce(%x) {axis = tp}\n"
                           "  %t = all_to_all(%x) {axis = tp, split_dim = 0, concat_dim = 1}\n"
                           "  %h = shift(%x) {axis = tp}\n"
                           "  %i = full() {value = 0} : index\n"
                           "  %d = dynamic_slice(%x, %i) {dim = 0, size = 2}\n"
                           "  %u = dynamic_update_slice(%x, %x, %i) {dim = 0}\n"
                           "  %j = add(%i, %i)\n"
                           "  %k = rem(%i, 2)\n"
                           "  for %l = 0 to 2 {\n"
                           "    yield\n"
                           "  }\n"
                           "  return\n")),
              ElementsAre("3:8: error: 'rank' is only valid in spmd functions",
                          "4:8: error: 'all_gather' is only valid in spmd functions",
                          "5:8: error: 'reduce_scatter' is only valid in spmd functions",
                          "6:8: error: 'all_reduce' is only valid in spmd functions",
                          "7:8: error: 'all_to_all' is only valid in spmd functions",
                          "8:8: error: 'shift' is only valid in spmd functions",
                          "10:8: error: 'dynamic_slice' is only valid in spmd functions",
                          "11:8: error: 'dynamic_update_slice' is only valid in spmd functions",
                          "12:8: error: index arithmetic is only valid in spmd functions",
                          "13:8: error: index arithmetic is only valid in spmd functions",
                          "14:3: error: 'for' is only valid in spmd functions",
                          "15:5: error: 'yield' is only valid in spmd functions"));
}

TEST(VerifierTest, ReshardInASpmdFunction) {
  EXPECT_THAT(Diags(Spmd("  %y = reshard(%x) : f32[8, 16]\n  return\n")),
              ElementsAre("3:8: error: 'reshard' is only valid in global functions"));
}

TEST(VerifierTest, ShardedTypesInsideASpmdBody) {
  EXPECT_EQ(Render(Spmd("  %y = neg(%x) : f32[8@tp, 16]\n"
                        "  %z = exp(%x) : f32[8, 16] partial(dp)\n"
                        "  %r = for %i = 0 to 1 iter(%a = %x) {\n"
                        "    yield %a\n"
                        "  } : f32[8@dp, 16]\n"
                        "  return\n")),
            "v.commir:3:18: error: f32[8@tp, 16]: types in a spmd function body are per-device "
            "and carry no sharding\n"
            "  %y = neg(%x) : f32[8@tp, 16]\n"
            "                 ^\n"
            "v.commir:4:18: error: f32[8, 16] partial(dp): types in a spmd function body are "
            "per-device and carry no sharding\n"
            "  %z = exp(%x) : f32[8, 16] partial(dp)\n"
            "                 ^\n"
            "v.commir:7:7: error: the loop's result types must be the types of its carried "
            "values\n"
            "  } : f32[8@dp, 16]\n"
            "      ^\n");
}

// ---- Attributes ---------------------------------------------------------------------

TEST(VerifierTest, UnknownAttributes) {
  EXPECT_THAT(Diags(Global("  %a = neg(%x) {fast}\n"
                           "  %b = softmax(%x) {axis = 1}\n"
                           "  return\n")),
              ElementsAre("3:8: error: 'neg' has no attribute 'fast' (it takes none)",
                          "4:8: error: 'softmax' has no attribute 'axis' (known: dim)"));
}

TEST(VerifierTest, WrongAttributeKinds) {
  EXPECT_THAT(
      Diags(Spmd("  %a = softmax(%x) {dim = 1.0}\n"
                 "  %b = layernorm(%x, %x, %x) {eps = true}\n"
                 "  %c = attention(%x, %x, %x) {causal = 1}\n"
                 "  %d = gelu(%x) {approximate = fast}\n"
                 "  %e = reduce_sum(%x) {dims = [0.5]}\n"
                 "  %f = all_reduce(%x) {axis = 2}\n"
                 "  %g = all_reduce(%x) {axis = [tp]}\n"
                 "  %h = all_reduce(%x) {axis = tp, reduce = prod}\n"
                 "  %i = reduce_sum(%x) {dims = 0}\n"
                 "  %j = neg(%x) {stream = -1}\n"
                 "  %k = neg(%x) {stream = tp}\n"
                 "  return\n")),
      ElementsAre("3:8: error: attribute 'dim' must be an integer, got 1.0",
                  "4:8: error: attribute 'eps' must be a number, got true",
                  "5:8: error: attribute 'causal' must be true or false, got 1",
                  "6:8: error: attribute 'approximate' must be one of none, tanh, got fast",
                  "7:8: error: attribute 'dims' must be a list of integers, got [0.5]",
                  "8:8: error: attribute 'axis' must be a mesh axis or an axis group like (dp, "
                  "tp), got 2",
                  "9:8: error: attribute 'axis' must be a mesh axis or an axis group like (dp, "
                  "tp), got [tp]",
                  "10:8: error: attribute 'reduce' must be one of sum, max, min, got prod",
                  "11:8: error: attribute 'dims' must be a list of integers, got 0",
                  "12:8: error: 'stream' must be a non-negative integer or an index value",
                  "13:8: error: 'stream' must be a non-negative integer or an index value"));
}

TEST(VerifierTest, MissingRequiredAttributes) {
  EXPECT_THAT(Diags(Spmd("  %a = full() : f32[2]\n"
                         "  %b = transpose(%x)\n"
                         "  %c = slice(%x) {start = [0, 0]}\n"
                         "  %d = concat(%x, %x)\n"
                         "  %e = reduce_max(%x)\n"
                         "  %f = rank()\n"
                         "  %g = all_gather(%x) {axis = tp}\n"
                         "  %h = all_to_all(%x) {axis = tp, split_dim = 0}\n"
                         "  %i = shift(%x)\n"
                         "  return\n")),
              ElementsAre("3:8: error: 'full' needs attribute 'value'",
                          "4:8: error: 'transpose' needs attribute 'perm'",
                          "5:8: error: 'slice' needs attribute 'size'",
                          "6:8: error: 'concat' needs attribute 'dim'",
                          "7:8: error: 'reduce_max' needs attribute 'dims'",
                          "8:8: error: 'rank' needs attribute 'axis'",
                          "9:8: error: 'all_gather' needs attribute 'dim'",
                          "10:8: error: 'all_to_all' needs attribute 'concat_dim'",
                          "11:8: error: 'shift' needs attribute 'axis'"));
}

TEST(VerifierTest, StreamsOnlyInSpmdFunctions) {
  EXPECT_THAT(Diags(Global("  %a = neg(%x) {stream = 1}\n"
                           "  %i = full() {value = 0} : index\n"
                           "  %b = neg(%x) {stream = %i}\n"
                           "  return\n")),
              ElementsAre("3:8: error: 'stream' is only valid in spmd functions",
                          "5:8: error: 'stream' is only valid in spmd functions"));
  EXPECT_THAT(Diags(Spmd("  %b = neg(%x) {stream = %x}\n  return\n")),
              ElementsAre("3:8: error: 'stream' must be a non-negative integer or an index value"));
}

TEST(VerifierTest, LiteralValuesMustFitTheirType) {
  EXPECT_THAT(Diags(Spmd("  %r = rank() {axis = tp}\n"
                         "  %a = add(%r, 2.5)\n"
                         "  %b = mul(%r, 1e19)\n"
                         "  %c = sub(%r, inf)\n"
                         "  %d = add(%r, -9223372036854775808)\n"
                         "  %e = add(%i32, 3000000000)\n"
                         "  %f = add(%i32, -2147483648)\n"
                         "  %g = add(%b1, 2)\n"
                         "  %h = add(%b1, 1)\n"
                         "  %k = add(%i64, nan)\n"
                         "  %l = add(%x, nan)\n"
                         "  return\n",
                         "(%x: f32[8, 16], %i32: i32[2], %b1: i1[2], %i64: i64[2]) -> ()")),
              ElementsAre("4:16: error: literal 2.5 is not a valid index value",
                          "5:16: error: literal 1e+19 is not a valid index value",
                          "6:16: error: literal inf is not a valid index value",
                          "8:18: error: literal 3e+09 is not a valid i32 value",
                          "10:17: error: literal 2.0 is not a valid i1 value",
                          "12:18: error: literal nan is not a valid i64 value"));
}

// ---- Shape rules of every op --------------------------------------------------------

TEST(VerifierTest, ElementwiseRules) {
  EXPECT_THAT(Diags(Spmd("  %a = add(%x, %w)\n"
                         "  %b = add(%x, %h)\n"
                         "  %c = exp(%n)\n"
                         "  %d = pow(%n, %n)\n"
                         "  %r = rank() {axis = tp}\n"
                         "  %e = add(%r, %x)\n"
                         "  %f = max(%r, %r)\n"
                         "  %g = rem(%x, %x)\n"
                         "  %j = neg(%r)\n"
                         "  %k = convert(%x) : f16[16, 8]\n"
                         "  %l = convert(%x) : index\n"
                         "  %m = neg(%n)\n"
                         "  return\n",
                         "(%x: f32[8, 16], %w: f32[3], %h: f16[16], %n: i32[2]) -> ()")),
              ElementsAre("3:8: error: shapes [8, 16] and [3] do not broadcast",
                          "4:8: error: both operands must have the same element type, got f32 and "
                          "f16",
                          "5:8: error: the operand must have a floating-point element type, got "
                          "i32[2]",
                          "6:8: error: the operands must have a floating-point element type, got "
                          "i32[2]",
                          "8:8: error: cannot mix index and tensor operands (index, f32[8, 16])",
                          "9:8: error: index operands support add, sub, mul, div and rem only",
                          "10:8: error: 'rem' takes index operands",
                          "11:8: error: the operand must be a tensor, got index",
                          "12:8: error: convert keeps the shape: f32[8, 16] cannot become f16[16, "
                          "8]",
                          "13:8: error: convert keeps the shape: f32[8, 16] cannot become index"));
}

TEST(VerifierTest, FullRules) {
  EXPECT_THAT(Diags(Global("  %a = full() {value = 1.5} : index\n"
                           "  %b = full() {value = 1} : f32[8] partial(tp)\n"
                           "  %c = full() {value = 1}\n"
                           "  %d = full() {value = 0} : (f32[2], f32[2])\n"
                           "  %e = full(%x) {value = 0} : f32[2]\n"
                           "  return\n")),
              ElementsAre("3:8: error: an index constant needs an integer value, got 1.5",
                          "4:8: error: a constant cannot be partial",
                          "5:8: error: 'full' needs its result type written (': TYPE')",
                          "6:8: error: a result type must be written",
                          "7:8: error: 'full' takes 0 operands, got 1"));
}

TEST(VerifierTest, MatmulRules) {
  EXPECT_THAT(Diags(Global("  %a = matmul(%x, %x)\n"
                           "  %b = matmul(%x, %v)\n"
                           "  %c = matmul(%x, %h)\n"
                           "  %d = matmul(%b3, %b4)\n"
                           "  %e = matmul(%x, %x) {transpose_b}\n"
                           "  %f = matmul(%x, %x) {transpose_a}\n"
                           "  %g = matmul(%b3, %b3) {transpose_b} : f32[2, 8, 9]\n"
                           "  return\n",
                           "(%x: f32[8, 16], %v: f32[16], %h: f16[16, 4], %b3: f32[2, 8, 16], "
                           "%b4: f32[3, 16, 4]) -> ()")),
              ElementsAre("3:8: error: matmul contracting dimensions differ: 16 (of f32[8, 16]) "
                          "vs 8 (of f32[8, 16])",
                          "4:8: error: matmul operands need rank >= 2, got f32[8, 16] and f32[16]",
                          "5:8: error: matmul operands must have the same element type, got f32 "
                          "and f16",
                          "6:8: error: matmul batch dimensions: shapes [2] and [3] do not "
                          "broadcast",
                          "9:8: error: result type f32[2, 8, 9] does not match the inferred type "
                          "f32[2, 8, 8]"));
}

TEST(VerifierTest, AttentionRules) {
  EXPECT_THAT(
      Diags(Spmd("  %a = attention(%q, %k3, %k3)\n"
                 "  %b = attention(%x, %k, %k)\n"
                 "  %c = attention(%q, %k, %v)\n"
                 "  %d = attention(%q, %kb, %kb)\n"
                 "  %e = attention(%q, %kd, %kd)\n"
                 "  %f = attention(%q, %k, %k, %x)\n"
                 "  %g = attention(%q, %qh, %qh)\n"
                 "  %h = attention(%qi, %qi, %qi)\n"
                 "  %i, %j, %l = attention(%q, %k, %k)\n"
                 "  %m = attention(%q, %k)\n"
                 "  return\n",
                 "(%x: f32[8, 16], %q: f32[1, 6, 8, 16], %k: f32[1, 2, 8, 16], %v: f32[1, 2, 4, "
                 "16], %kb: f32[2, 2, 8, 16], %kd: f32[1, 2, 8, 32], %k3: f32[1, 4, 8, 16], "
                 "%qh: f16[1, 2, 8, 16], %qi: i32[1, 2, 8, 16]) -> ()")),
      ElementsAre("3:8: error: the 6 query heads are not divisible by the 4 key/value heads",
                  "4:8: error: q must have rank 4 [B, H, S, D], got f32[8, 16]",
                  "5:8: error: k and v must have the same heads and sequence length, got [1, 2, 8, "
                  "16] and [1, 2, 4, 16]",
                  "6:8: error: q, k and v must share the batch size",
                  "7:8: error: q and k head dims differ: 16 vs 32",
                  "8:8: error: q_pos must be an index, got f32[8, 16]",
                  "9:8: error: q and k must have the same element type, got f32 and f16",
                  "10:8: error: q must have a floating-point element type, got i32[1, 2, 8, 16]",
                  "11:16: error: 'attention' produces 1 to 2 results, but 3 names are given",
                  "12:8: error: 'attention' takes 3 to 5 operands, got 2"));
}

TEST(VerifierTest, ReductionAndNormalizationRules) {
  EXPECT_THAT(Diags(Global("  %a = reduce_sum(%x) {dims = [2]}\n"
                           "  %b = reduce_max(%x) {dims = [-3]}\n"
                           "  %c = reduce_mean(%x) {dims = [0, -2]}\n"
                           "  %d = reduce_mean(%i) {dims = [0]}\n"
                           "  %e = softmax(%x) {dim = 2}\n"
                           "  %f = softmax(%s)\n"
                           "  %g = layernorm(%x, %w, %x)\n"
                           "  %h = rmsnorm(%x, %h16)\n"
                           "  %j = rmsnorm(%s, %s)\n"
                           "  %k = layernorm(%x, %w)\n"
                           "  return\n",
                           "(%x: f32[8, 16], %i: i32[4], %s: f32[], %w: f32[16], %h16: f16[16]) "
                           "-> ()")),
              ElementsAre("3:8: error: dims = 2 is out of range for rank 2",
                          "4:8: error: dims = -3 is out of range for rank 2",
                          "5:8: error: dims lists a dimension twice",
                          "6:8: error: the operand must have a floating-point element type, got "
                          "i32[4]",
                          "7:8: error: dim = 2 is out of range for rank 2",
                          "8:8: error: softmax needs rank >= 1",
                          "9:8: error: bias must be [16] to match the last dimension of f32[8, "
                          "16], got f32[8, 16]",
                          "10:8: error: the operand and the parameters must have the same element "
                          "type, got f32 and f16",
                          "11:8: error: normalization needs rank >= 1",
                          "12:8: error: 'layernorm' takes 3 operands, got 2"));
}

TEST(VerifierTest, LayoutOpRules) {
  EXPECT_THAT(Diags(Global("  %a = reshape(%x) : f32[100]\n"
                           "  %b = reshape(%x) : f16[128]\n"
                           "  %c = transpose(%x) {perm = [0]}\n"
                           "  %d = transpose(%x) {perm = [1, 2]}\n"
                           "  %e = slice(%x) {start = [4, 0], size = [5, 16]}\n"
                           "  %f = slice(%x) {start = [0], size = [1]}\n"
                           "  %g = slice(%x) {start = [-1, 0], size = [1, 1]}\n"
                           "  %h = concat(%x, %w) {dim = 0}\n"
                           "  %i = concat(%x, %y) {dim = 0}\n"
                           "  %j = concat(%x, %x) {dim = 2}\n"
                           "  %k = concat(%s, %s) {dim = 0}\n"
                           "  %l = concat(%x, %h16) {dim = 0}\n"
                           "  %m = broadcast(%w) : f32[16, 8]\n"
                           "  %n = broadcast(%w) : f16[8, 16]\n"
                           "  %o = broadcast(%x) : f32[16]\n"
                           "  %p = reshard(%x) : f32[16, 8]\n"
                           "  %q = concat(%x, %y) {dim = 1}\n"
                           "  return\n",
                           "(%x: f32[8, 16], %w: f32[16], %y: f32[4, 8], %s: f32[], "
                           "%h16: f16[8, 16]) -> ()")),
              ElementsAre("3:8: error: reshape keeps the element type and count: f32[8, 16] "
                          "cannot become f32[100]",
                          "4:8: error: reshape keeps the element type and count: f32[8, 16] "
                          "cannot become f16[128]",
                          "5:8: error: perm = [0] is not a permutation of the 2 dims of f32[8, 16]",
                          "6:8: error: perm = [1, 2] is not a permutation of the 2 dims of f32[8, "
                          "16]",
                          "7:8: error: slice [4, 9) is out of range for dimension 0 of size 8",
                          "8:8: error: start and size need 2 entries, one per dimension of f32[8, "
                          "16]",
                          "9:8: error: slice [-1, 0) is out of range for dimension 0 of size 8",
                          "10:8: error: operand 1 (f32[16]) does not match f32[8, 16] outside "
                          "dimension 0",
                          "11:8: error: operand 1 (f32[4, 8]) does not match f32[8, 16] outside "
                          "dimension 0",
                          "12:8: error: dim = 2 is out of range for rank 2",
                          "13:8: error: concat needs rank >= 1",
                          "14:8: error: concat operands must have the same element type, got f32 "
                          "and f16",
                          "15:8: error: f32[16] does not broadcast to f32[16, 8]",
                          "16:8: error: broadcast keeps the element type: f32[16] cannot become "
                          "f16[8, 16]",
                          "17:8: error: f32[8, 16] does not broadcast to f32[16]",
                          "18:8: error: reshard keeps shape and element type: f32[8, 16] cannot "
                          "become f32[16, 8]",
                          "19:8: error: operand 1 (f32[4, 8]) does not match f32[8, 16] outside "
                          "dimension 1"));
}

TEST(VerifierTest, CollectiveRules) {
  EXPECT_THAT(
      Diags(Spmd("  %a = all_gather(%x) {axis = pp, dim = 0}\n"
                 "  %b = all_reduce(%x) {axis = (dp, pp)}\n"
                 "  %c = shift(%x) {axis = (tp, dp, tp)}\n"
                 "  %d = rank() {axis = zz}\n"
                 "  %e = reduce_scatter(%x) {axis = (dp, tp), dim = 0}\n"
                 "  %f = reduce_scatter(%x) {axis = tp, dim = 0}\n"
                 "  %g = all_to_all(%x) {axis = tp, split_dim = 0, concat_dim = 1}\n"
                 "  %h = all_to_all(%x) {axis = dp, split_dim = 1, concat_dim = 2}\n"
                 "  %i = all_gather(%x) {axis = tp, dim = 2}\n"
                 "  %j = all_gather(%s) {axis = tp, dim = 0}\n"
                 "  %k = reduce_scatter(%x) {axis = tp, dim = 1, reduce = max}\n"
                 "  return\n",
                 "(%x: f32[6, 16], %s: f32[]) -> ()")),
      ElementsAre("3:8: error: mesh @m has no axis 'pp'", "4:8: error: mesh @m has no axis 'pp'",
                  "5:8: error: axis 'tp' appears twice in the group",
                  "6:8: error: mesh @m has no axis 'zz'",
                  "7:8: error: dimension 0 of size 6 is not divisible by the group size 8",
                  "8:8: error: dimension 0 of size 6 is not divisible by the group size 4",
                  "9:8: error: split_dim 0 of size 6 is not divisible by the group size 4",
                  "10:8: error: concat_dim = 2 is out of range for rank 2",
                  "11:8: error: dim = 2 is out of range for rank 2",
                  "12:8: error: a scalar has no dimension for 'dim'"));
}

TEST(VerifierTest, CollectivesNeedAMesh) {
  EXPECT_THAT(Diags("spmd func @f(%x: f32[4]) -> () {\n"
                    "  %a = all_reduce(%x) {axis = tp}\n"
                    "  return\n"
                    "}\n"),
              ElementsAre("2:8: error: a collective needs a mesh, and the function has none"));
}

TEST(VerifierTest, DynamicSliceRules) {
  EXPECT_THAT(Diags(Spmd("  %r = rank() {axis = tp}\n"
                         "  %a = dynamic_slice(%x, %r) {dim = 0, size = 9}\n"
                         "  %b = dynamic_slice(%x, %r) {dim = 2, size = 1}\n"
                         "  %c = dynamic_slice(%x, %x) {dim = 0, size = 1}\n"
                         "  %d = dynamic_slice(%s, %r) {dim = 0, size = 1}\n"
                         "  %e = dynamic_slice(%x, %r) {dim = 0, size = -1}\n"
                         "  %f = dynamic_update_slice(%x, %y, %r) {dim = 0}\n"
                         "  %g = dynamic_update_slice(%x, %z, %r) {dim = 0}\n"
                         "  %h = dynamic_update_slice(%x, %x, %x) {dim = 0}\n"
                         "  %i = dynamic_update_slice(%x, %w, %r) {dim = 1}\n"
                         "  %j = dynamic_update_slice(%x, %h16, %r) {dim = 0}\n"
                         "  %k = dynamic_update_slice(%x, %u, %r) {dim = 0}\n"
                         "  return\n",
                         "(%x: f32[8, 16], %s: f32[], %y: f32[9, 16], %z: f32[4, 15], "
                         "%w: f32[8, 4], %h16: f16[8, 16], %u: f32[2, 16]) -> ()")),
              ElementsAre("4:8: error: size = 9 does not fit dimension 0 of size 8",
                          "5:8: error: dim = 2 is out of range for rank 2",
                          "6:8: error: the offset must be an index, got f32[8, 16]",
                          "7:8: error: a scalar cannot be sliced",
                          "8:8: error: size = -1 does not fit dimension 0 of size 8",
                          "9:8: error: update f32[9, 16] does not fit f32[8, 16] along dimension 0",
                          "10:8: error: update f32[4, 15] does not fit f32[8, 16] along dimension 0",
                          "11:8: error: the offset must be an index, got f32[8, 16]",
                          "13:8: error: the operand and the update must have the same element "
                          "type, got f32 and f16"));
}

TEST(VerifierTest, LoopRules) {
  EXPECT_THAT(Diags(Spmd("  %a = for %i = 0 to 4 step 0 iter(%c = %x) {\n"
                         "    yield %c\n"
                         "  }\n"
                         "  %b = for %i = 0 to 4 step -1 {\n"
                         "    yield\n"
                         "  }\n"
                         "  %d = for %i = 4 to 0 iter(%c = %x) {\n"
                         "    yield %c\n"
                         "  }\n"
                         "  %e = for %i = 0 to 4 iter(%c = %x) {bogus} {\n"
                         "    yield %c\n"
                         "  }\n"
                         "  return\n")),
              ElementsAre("3:8: error: the loop step must be positive",
                          "6:8: error: the loop carries 0 values but 1 result name is given",
                          "6:8: error: the loop step must be positive",
                          "12:8: error: 'for' has no attribute 'bogus' (known: lower, upper, step)"));
}

TEST(VerifierTest, OneErrorPerProblem) {
  // An op with a wrong written type is one error, and its result still types the
  // rest of the function, so its users are not flagged.
  EXPECT_THAT(Diags(Global("  %y = neg(%x) : f32[16, 8]\n"
                           "  %z = transpose(%y) {perm = [1, 0]}\n"
                           "  return %z\n",
                           "(%x: f32[8, 16]) -> f32[8, 16]")),
              ElementsAre("3:8: error: result type f32[16, 8] does not match the inferred type "
                          "f32[8, 16]"));
}

}  // namespace
}  // namespace commir
