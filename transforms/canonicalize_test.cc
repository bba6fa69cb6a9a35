#include "transforms/canonicalize.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "commir/printer.h"
#include "gtest/gtest.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

using testing::ParseForTest;
using testing::TransformText;

std::string RunCanonicalize(absl::string_view input, CanonicalizeOptions options = {}) {
  return TransformText(input, [&](Module& m) { Canonicalize(m, options); });
}

// ---- Constant folding ----------------------------------------------------------------

TEST(CanonicalizeTest, FoldsChainsOfConstantsIntoOneFull) {
  EXPECT_EQ(RunCanonicalize(R"(func @f() -> f32[4] {
  %a = full() {value = 2.0} : f32[4]
  %b = full() {value = 3.0} : f32[]
  %c = mul(%a, %b) : f32[4]
  %d = neg(%c) : f32[4]
  %e = add(%d, 0.5) : f32[4]
  return %e
}
)"),
            R"(func @f() -> f32[4] {
  %e = full() {value = -5.5} : f32[4]
  return %e
}
)");
}

TEST(CanonicalizeTest, BroadcastOfConstantsStaysAConstant) {
  EXPECT_EQ(RunCanonicalize(R"(func @f() -> f32[2, 3] {
  %a = full() {value = 1.5} : f32[2, 1]
  %b = full() {value = 2.0} : f32[3]
  %c = sub(%a, %b) : f32[2, 3]
  return %c
}
)"),
            R"(func @f() -> f32[2, 3] {
  %c = full() {value = -0.5} : f32[2, 3]
  return %c
}
)");
}

TEST(CanonicalizeTest, FoldedValuesAreRoundedToTheElementType) {
  // exp(1) in float, and 2048 + 1 in f16 (not representable: ties to even 2048).
  EXPECT_EQ(RunCanonicalize(R"(func @f() -> (f32[4], f16[4], bf16[4]) {
  %one = full() {value = 1.0} : f32[4]
  %e = exp(%one) : f32[4]
  %h = full() {value = 2048.0} : f16[4]
  %s = add(%h, 1.0) : f16[4]
  %b = full() {value = 0.1} : bf16[4]
  %n = neg(%b) : bf16[4]
  return %e, %s, %n
}
)"),
            R"(func @f() -> (f32[4], f16[4], bf16[4]) {
  %e = full() {value = 2.7182817459106445} : f32[4]
  %s = full() {value = 2048.0} : f16[4]
  %n = full() {value = -0.10009765625} : bf16[4]
  return %e, %s, %n
}
)");
}

TEST(CanonicalizeTest, FoldsConvertAndIntegerMath) {
  EXPECT_EQ(RunCanonicalize(R"(func @f() -> (i32[2], f16[2], i32[2], i32[2]) {
  %a = full() {value = 2.5} : f32[2]
  %b = convert(%a) : i32[2]
  %c = full() {value = 2049} : i64[2]
  %d = convert(%c) : f16[2]
  %e = full() {value = -7} : i32[2]
  %f = div(%e, 2) : i32[2]
  %g = div(%e, 0) : i32[2]
  return %b, %d, %f, %g
}
)"),
            R"(func @f() -> (i32[2], f16[2], i32[2], i32[2]) {
  %b = full() {value = 2} : i32[2]
  %d = full() {value = 2048.0} : f16[2]
  %e = full() {value = -7} : i32[2]
  %f = full() {value = -4} : i32[2]
  %g = div(%e, 0) : i32[2]
  return %b, %d, %f, %g
}
)");
}

TEST(CanonicalizeTest, KeepsShardedResultTypes) {
  EXPECT_EQ(RunCanonicalize(R"(mesh @m(tp=2)

func @f() -> f32[4@tp, 2] on @m {
  %a = full() {value = 4.0} : f32[4, 2]
  %b = sqrt(%a) : f32[4@tp, 2]
  return %b
}
)"),
            R"(mesh @m(tp=2)

func @f() -> f32[4@tp, 2] on @m {
  %b = full() {value = 2.0} : f32[4@tp, 2]
  return %b
}
)");
}

TEST(CanonicalizeTest, NeverFoldsIntoAPartialConstant) {
  const char* text = R"(mesh @m(tp=2)

func @f() -> f32[4] partial(tp) on @m {
  %a = full() {value = 4.0} : f32[4]
  %b = add(%a, %a) : f32[4] partial(tp)
  return %b
}
)";
  EXPECT_EQ(RunCanonicalize(text), text);
}

TEST(CanonicalizeTest, FoldsIndexArithmeticWithFloorSemantics) {
  EXPECT_EQ(RunCanonicalize(R"(mesh @m(tp=2)

spmd func @f(%x: f32[16]) -> (f32[2], index) on @m {
  %c = full() {value = -7} : index
  %d = rem(%c, 4) : index
  %e = mul(%d, 2) : index
  %q = div(%c, 2) : index
  %s = dynamic_slice(%x, %e) {dim = 0, size = 2} : f32[2]
  %z = div(%q, 0) : index
  return %s, %z
}
)"),
            R"(mesh @m(tp=2)

spmd func @f(%x: f32[16]) -> (f32[2], index) on @m {
  %e = full() {value = 2} : index
  %q = full() {value = -4} : index
  %s = dynamic_slice(%x, %e) {dim = 0, size = 2} : f32[2]
  %z = div(%q, 0) : index
  return %s, %z
}
)");
}

TEST(CanonicalizeTest, FoldsInsideLoopBodiesAndDropsTheStream) {
  EXPECT_EQ(RunCanonicalize(R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> f32[4] on @m {
  %r = for %i = 0 to 4 step 1 iter(%a = %x) {
    %one = full() {value = 1.0} : f32[4]
    %two = add(%one, %one) {stream = 1} : f32[4]
    %a1 = mul(%a, %two) : f32[4]
    yield %a1
  } : f32[4]
  return %r
}
)"),
            R"(mesh @m(tp=2)

spmd func @f(%x: f32[4]) -> f32[4] on @m {
  %r = for %i = 0 to 4 step 1 iter(%a = %x) {
    %two = full() {value = 2.0} : f32[4]
    %a1 = mul(%a, %two) : f32[4]
    yield %a1
  } : f32[4]
  return %r
}
)");
}

TEST(CanonicalizeTest, LeavesConstantsThatWereAlreadyDeadToDce) {
  const char* text = R"(func @f(%x: f32[4]) -> f32[4] {
  %unused = full() {value = 1.0} : f32[4]
  return %x
}
)";
  EXPECT_EQ(RunCanonicalize(text), text);
}

TEST(CanonicalizeTest, FoldConstantsCanBeTurnedOff) {
  const char* text = R"(func @f() -> f32[4] {
  %a = full() {value = 2.0} : f32[4]
  %b = neg(%a) : f32[4]
  return %b
}
)";
  CanonicalizeOptions options;
  options.fold_constants = false;
  EXPECT_EQ(RunCanonicalize(text, options), text);
}

TEST(CanonicalizeTest, MaxRewritesStopsEarly) {
  const char* text = R"(func @f() -> f32[4] {
  %a = full() {value = 2.0} : f32[4]
  %b = neg(%a) : f32[4]
  %c = neg(%b) : f32[4]
  %d = exp(%c) : f32[4]
  return %d
}
)";
  CanonicalizeOptions options;
  options.max_rewrites = 1;
  EXPECT_EQ(RunCanonicalize(text, options), R"(func @f() -> f32[4] {
  %b = full() {value = -2.0} : f32[4]
  %c = neg(%b) : f32[4]
  %d = exp(%c) : f32[4]
  return %d
}
)");
  options.max_rewrites = 0;
  EXPECT_EQ(RunCanonicalize(text, options), text);
}

TEST(CanonicalizeTest, CountsRewrites) {
  std::unique_ptr<Module> module = ParseForTest(R"(func @f(%x: f32[4]) -> f32[4] {
  %a = mul(%x, 1.0) : f32[4]
  %b = add(%a, 0.0) : f32[4]
  return %b
}
)");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Canonicalize(*module), 2);
  EXPECT_EQ(Canonicalize(*module), 0);
}

// ---- Identities ----------------------------------------------------------------------

TEST(CanonicalizeTest, RemovesArithmeticIdentities) {
  EXPECT_EQ(RunCanonicalize(R"(func @f(%x: f32[4]) -> (f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4]) {
  %one = full() {value = 1.0} : f32[4]
  %zero = full() {value = 0.0} : f32[]
  %a = mul(%x, 1.0) : f32[4]
  %b = mul(%one, %x) : f32[4]
  %c = add(%x, %zero) : f32[4]
  %d = add(0.0, %x) : f32[4]
  %e = sub(%x, -0.0) : f32[4]
  %f = div(%x, %one) : f32[4]
  %g = neg(%x) : f32[4]
  %h = neg(%g) : f32[4]
  return %a, %b, %c, %d, %e, %f, %h
}
)"),
            R"(func @f(%x: f32[4]) -> (f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4]) {
  return %x, %x, %x, %x, %x, %x, %x
}
)");
}

TEST(CanonicalizeTest, KeepsNonIdentities) {
  const char* text = R"(func @f(%x: f32[4]) -> (f32[4], f32[4], f32[4], f32[4]) {
  %a = sub(0.0, %x) : f32[4]
  %b = div(1.0, %x) : f32[4]
  %c = mul(%x, 2.0) : f32[4]
  %d = add(%x, 1.0) : f32[4]
  return %a, %b, %c, %d
}
)";
  EXPECT_EQ(RunCanonicalize(text), text);
}

TEST(CanonicalizeTest, IdentitiesNeedTheExactType) {
  // Broadcasting changes the shape, and a result sharding differs from x's: both stay.
  const char* text = R"(mesh @m(tp=2)

func @f(%x: f32[1, 4], %y: f32[4]) -> (f32[3, 4], f32[4@tp]) on @m {
  %ones = full() {value = 1.0} : f32[3, 4]
  %a = mul(%x, %ones) : f32[3, 4]
  %b = add(%y, 0.0) : f32[4@tp]
  return %a, %b
}
)";
  EXPECT_EQ(RunCanonicalize(text), text);
}

TEST(CanonicalizeTest, IdentitiesOnIntegersAndIndices) {
  EXPECT_EQ(RunCanonicalize(R"(mesh @m(tp=2)

spmd func @f(%x: i32[4], %i: index) -> (i32[4], index, index) on @m {
  %a = div(%x, 1) : i32[4]
  %b = add(%i, 0) : index
  %c = mul(1, %i) : index
  return %a, %b, %c
}
)"),
            R"(mesh @m(tp=2)

spmd func @f(%x: i32[4], %i: index) -> (i32[4], index, index) on @m {
  return %x, %i, %i
}
)");
}

TEST(CanonicalizeTest, DoubleNegationKeepsAnInnerNegationThatIsStillUsed) {
  EXPECT_EQ(RunCanonicalize(R"(func @f(%x: f32[4]) -> (f32[4], f32[4]) {
  %a = neg(%x) : f32[4]
  %b = neg(%a) : f32[4]
  return %a, %b
}
)"),
            R"(func @f(%x: f32[4]) -> (f32[4], f32[4]) {
  %a = neg(%x) : f32[4]
  return %a, %x
}
)");
}

TEST(CanonicalizeTest, ComposesTransposes) {
  EXPECT_EQ(RunCanonicalize(R"(func @f(%x: f32[2, 3, 4]) -> (f32[4, 2, 3], f32[2, 3, 4], f32[2, 3, 4]) {
  %a = transpose(%x) {perm = [1, 2, 0]} : f32[3, 4, 2]
  %b = transpose(%a) {perm = [1, 2, 0]} : f32[4, 2, 3]
  %c = transpose(%x) {perm = [2, 0, 1]} : f32[4, 2, 3]
  %d = transpose(%c) {perm = [1, 2, 0]} : f32[2, 3, 4]
  %e = transpose(%x) {perm = [0, 1, 2]} : f32[2, 3, 4]
  return %b, %d, %e
}
)"),
            R"(func @f(%x: f32[2, 3, 4]) -> (f32[4, 2, 3], f32[2, 3, 4], f32[2, 3, 4]) {
  %b = transpose(%x) {perm = [2, 0, 1]} : f32[4, 2, 3]
  return %b, %x, %x
}
)");
}

TEST(CanonicalizeTest, ComposedTransposeKeepsItsShardingAndAnInnerUse) {
  EXPECT_EQ(RunCanonicalize(R"(mesh @m(tp=2)

func @f(%x: f32[2, 4]) -> (f32[4, 2], f32[2@tp, 4]) on @m {
  %a = transpose(%x) {perm = [1, 0]} : f32[4, 2]
  %b = transpose(%a) {perm = [1, 0]} : f32[2@tp, 4]
  return %a, %b
}
)"),
            R"(mesh @m(tp=2)

func @f(%x: f32[2, 4]) -> (f32[4, 2], f32[2@tp, 4]) on @m {
  %a = transpose(%x) {perm = [1, 0]} : f32[4, 2]
  %b = transpose(%x) {perm = [0, 1]} : f32[2@tp, 4]
  return %a, %b
}
)");
}

TEST(CanonicalizeTest, CollapsesReshapes) {
  EXPECT_EQ(RunCanonicalize(R"(func @f(%x: f32[2, 6]) -> (f32[3, 4], f32[2, 6], f32[2, 6]) {
  %a = reshape(%x) : f32[12]
  %b = reshape(%a) : f32[3, 4]
  %c = reshape(%b) : f32[2, 6]
  %d = reshape(%x) : f32[2, 6]
  return %b, %c, %d
}
)"),
            R"(func @f(%x: f32[2, 6]) -> (f32[3, 4], f32[2, 6], f32[2, 6]) {
  %b = reshape(%x) : f32[3, 4]
  return %b, %x, %x
}
)");
}

TEST(CanonicalizeTest, RemovesSameTypeConvertBroadcastAndReshard) {
  EXPECT_EQ(RunCanonicalize(R"(mesh @m(tp=2)

func @f(%x: f32[4@tp]) -> (f32[4@tp], f32[4@tp], f32[4@tp], f32[4], bf16[4@tp], f32[2, 4]) on @m {
  %a = convert(%x) : f32[4@tp]
  %b = broadcast(%x) : f32[4@tp]
  %c = reshard(%x) : f32[4@tp]
  %d = reshard(%x) : f32[4]
  %e = convert(%x) : bf16[4@tp]
  %f = broadcast(%x) : f32[2, 4]
  return %a, %b, %c, %d, %e, %f
}
)"),
            R"(mesh @m(tp=2)

func @f(%x: f32[4@tp]) -> (f32[4@tp], f32[4@tp], f32[4@tp], f32[4], bf16[4@tp], f32[2, 4]) on @m {
  %d = reshard(%x) : f32[4]
  %e = convert(%x) : bf16[4@tp]
  %f = broadcast(%x) : f32[2, 4]
  return %x, %x, %x, %d, %e, %f
}
)");
}

TEST(CanonicalizeTest, ScalesLinearlyWhenRewritesShareAnOperand) {
  // 50k identities x * %one: every replaced op is a user of %one, so erasing them one
  // at a time would search %one's long user list each time.
  std::string text =
      "func @f(%x: f32[4]) -> f32[4] {\n  %one = full() {value = 1.0} : f32[4]\n"
      "  %v0 = neg(%x) : f32[4]\n";
  constexpr int kSteps = 50000;
  for (int i = 1; i <= kSteps; ++i) {
    absl::StrAppend(&text, "  %v", i, " = mul(%v", i - 1, ", %one) : f32[4]\n");
  }
  absl::StrAppend(&text, "  return %v", kSteps, "\n}\n");
  std::unique_ptr<Module> module = ParseForTest(text);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Canonicalize(*module), kSteps);
  EXPECT_EQ(PrintModule(*module), R"(func @f(%x: f32[4]) -> f32[4] {
  %v0 = neg(%x) : f32[4]
  return %v0
}
)");
}

}  // namespace
}  // namespace commir
