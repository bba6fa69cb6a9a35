// The verifier's rules for `call`, reached from text: each test asserts the messages and
// their LINE:COL. (testdata/errors/call*.commir show them rendered by commir-opt.)
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "commir/diagnostics.h"
#include "commir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "testing/call_programs.h"

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
    out.push_back(absl::StrCat(d.loc.line, ":", d.loc.col, ": error: ", d.message));
  }
  return out;
}

// A module on @m(tp=2) with a global @layer and a spmd @slayer (lines 2-9), then `rest`
// from line 10.
std::string WithLayers(absl::string_view rest) {
  return absl::StrCat(
      "mesh @m(tp=2)\n"
      "func @layer(%x: f32[4, 8], %s: f32[8@tp]) -> f32[4, 8] {\n"
      "  %y = tanh(%x)\n"
      "  return %y\n"
      "}\n"
      "spmd func @slayer(%x: f32[4, 8@tp]) -> f32[4, 8@tp] {\n"
      "  %y = tanh(%x)\n"
      "  return %y\n"
      "}\n",
      rest);
}

TEST(CallVerifierTest, ValidCallsRoundTrip) {
  std::string source = WithLayers(
      "func @top(%x: f32[4, 8], %s: f32[8]) -> f32[4, 8] {\n"
      "  %a = call @layer(%x, %s) : f32[4, 8]\n"
      "  %b = call @later(%a) : f32[4, 8]\n"
      "  return %b\n"
      "}\n"
      "func @later(%x: f32[4, 8]) -> f32[4, 8] {\n"
      "  return %x\n"
      "}\n");
  EXPECT_THAT(Diags(source), IsEmpty());
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(source, diagnostics);
  ASSERT_NE(module, nullptr);
  std::string printed = PrintModule(*module);
  EXPECT_THAT(printed, ::testing::HasSubstr("%a = call @layer(%x, %s) : f32[4, 8]\n"));
  std::unique_ptr<Module> again = ParseModule(printed, diagnostics);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(PrintModule(*again), printed);
}

TEST(CallVerifierTest, UnknownCalleeAndArity) {
  EXPECT_THAT(Diags(WithLayers("func @top(%x: f32[4, 8], %s: f32[8]) -> () {\n"
                               "  %a = call @missing(%x) : f32[4, 8]\n"
                               "  %b = call @layer(%x) : f32[4, 8]\n"
                               "  %c, %d = call @layer(%x, %s) : (f32[4, 8], f32[4, 8])\n"
                               "  return\n"
                               "}\n")),
              ElementsAre("11:8: error: call of unknown function @missing",
                          "12:8: error: @layer takes 2 arguments, the call passes 1",
                          "13:12: error: @layer returns 1 result, the call names 2"));
}

TEST(CallVerifierTest, TypesAndLayoutsMatchTheSignature) {
  EXPECT_THAT(
      Diags(WithLayers("func @top(%x: f32[4, 8], %s: f32[8], %t: f32[8@tp]) -> () {\n"
                       "  %a = call @layer(%s, %s) : f32[4, 8]\n"
                       "  %b = call @layer(%x, %s) : f32[4]\n"
                       "  %c = call @layer(%x, %t) : f32[4, 8]\n"
                       "  return\n"
                       "}\n"
                       "spmd func @stop(%x: f32[4, 8@tp]) -> () {\n"
                       "  %a = call @slayer(%x) : f32[4, 8]\n"
                       "  return\n"
                       "}\n")),
      ElementsAre(
          "11:8: error: argument 0 of @layer: f32[8] does not match the declared f32[4, 8]",
          "12:30: error: result 0 of @layer: f32[4] does not match the declared f32[4, 8]",
          "17:27: error: result 0 of @slayer: per device f32[4, 4] (the part of f32[4, 8@tp]) is "
          "expected, got f32[4, 8]"));
}

TEST(CallVerifierTest, GlobalCallsGlobalAndSpmdCallsSpmd) {
  EXPECT_THAT(Diags(WithLayers("func @top(%x: f32[4, 8]) -> () {\n"
                               "  %a = call @slayer(%x) : f32[4, 8]\n"
                               "  return\n"
                               "}\n")),
              ElementsAre("11:8: error: global function @top cannot call spmd function @slayer"));
}

TEST(CallVerifierTest, RecursionIsReportedAtTheCallThatClosesTheCycle) {
  EXPECT_THAT(Diags("func @a(%x: f32[4]) -> f32[4] {\n"
                    "  %y = call @b(%x) : f32[4]\n"
                    "  return %y\n"
                    "}\n"
                    "func @b(%x: f32[4]) -> f32[4] {\n"
                    "  %y = call @c(%x) : f32[4]\n"
                    "  return %y\n"
                    "}\n"
                    "func @c(%x: f32[4]) -> f32[4] {\n"
                    "  %y = call @a(%x) : f32[4]\n"
                    "  return %y\n"
                    "}\n"),
              ElementsAre("10:8: error: recursive call: @a -> @b -> @c -> @a (calls may not "
                          "form a cycle)"));
}

// The call graph is walked without recursion: a chain of 20,000 calls used to overflow
// the stack.
TEST(CallVerifierTest, DeepChainOfCallsVerifies) {
  EXPECT_THAT(Diags(testing::DeepChain(20000)), IsEmpty());
}

// A cycle through 20,000 functions, reported once at the call that closes it, with the
// middle of the cycle left out.
TEST(CallVerifierTest, LongCycleIsReportedOnceAndShortened) {
  std::string cycle = "@f0";
  for (int i = 1; i < 8; ++i) absl::StrAppend(&cycle, " -> @f", i);
  absl::StrAppend(&cycle, " -> ... (19984 more)");
  for (int i = 19992; i < 20000; ++i) absl::StrAppend(&cycle, " -> @f", i);
  EXPECT_THAT(Diags(testing::CallCycle(20000)),
              ElementsAre(absl::StrCat(2 + 5 * 19999, ":8: error: recursive call: ", cycle,
                                       " -> @f0 (calls may not form a cycle)")));
}

TEST(CallVerifierTest, CalleeIsASymbolAndResultTypesAreWritten) {
  EXPECT_THAT(
      Diags(WithLayers("func @top(%x: f32[4, 8], %s: f32[8]) -> () {\n"
                       "  %a = call layer(%x, %s) : f32[4, 8]\n"
                       "  %b = call @layer(%x, %s)\n"
                       "  %c = call @layer(%x, %s) {callee = layer} : f32[4, 8]\n"
                       "  return\n"
                       "}\n")),
      ElementsAre("11:13: error: expected the called function's name like @f after "
                  "'call', got 'layer'",
                  "12:8: error: 'call' needs its result types written (': T' or ': (T0, "
                  "T1)')",
                  "13:28: error: the callee is written 'call @f(...)', not as an attribute"));
}

}  // namespace
}  // namespace commir
