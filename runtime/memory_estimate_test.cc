#include "runtime/memory_estimate.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "commir/diagnostics.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "testing/call_programs.h"

namespace commir::runtime {
namespace {

constexpr uint64_t kTile = 256 * 256 * 4;  // bytes of an f32[256, 256]

std::unique_ptr<Module> Parse(const std::string& source) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(source, diagnostics);
  EXPECT_NE(module, nullptr) << source;
  return module;
}

TEST(PeakLiveBytes, AChainHoldsAnOperandAndAResult) {
  std::string source = "func @f(%x: f32[256, 256]) -> f32[256, 256] {\n  %v0 = neg(%x)\n";
  for (int i = 1; i < 100; ++i) absl::StrAppend(&source, "  %v", i, " = neg(%v", i - 1, ")\n");
  absl::StrAppend(&source, "  return %v99\n}\n");
  std::unique_ptr<Module> module = Parse(source);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(PeakLiveBytesPerDevice(*module->functions()[0]), 2 * kTile);
}

TEST(PeakLiveBytes, ValuesUsedLaterStayLive) {
  std::unique_ptr<Module> module = Parse(
      "func @f(%x: f32[256, 256]) -> f32[256, 256] {\n"
      "  %a = neg(%x)\n"
      "  %b = neg(%a)\n"
      "  %c = neg(%b)\n"
      "  %d = add(%c, %x)\n"
      "  return %d\n"
      "}\n");
  ASSERT_NE(module, nullptr);
  // %x is live to the end: x, b, c at the third op; x, c, d at the fourth.
  EXPECT_EQ(PeakLiveBytesPerDevice(*module->functions()[0]), 3 * kTile);
}

TEST(PeakLiveBytes, LoopsAddTheirBodyToWhatIsLiveAround) {
  std::unique_ptr<Module> module = Parse(
      "mesh @m(dp=1)\n"
      "spmd func @f(%x: f32[256, 256]) -> f32[256, 256] {\n"
      "  %w = neg(%x)\n"
      "  %r = for %i = 0 to 4 step 1 iter(%a = %x) {\n"
      "    %b = add(%a, %w)\n"
      "    %c = neg(%b)\n"
      "    yield %c\n"
      "  } : (f32[256, 256])\n"
      "  %z = add(%r, %w)\n"
      "  return %z\n"
      "}\n");
  ASSERT_NE(module, nullptr);
  // Around the loop: x, w and the carried result; in the body: a, b (then b, c).
  EXPECT_EQ(PeakLiveBytesPerDevice(*module->functions()[0]), 5 * kTile);
}

TEST(PeakLiveBytes, CallsAddTheirCalleesPeakBeyondTheOperands) {
  // @layer peaks at three tiles (%a, %b and %c), one of which is its argument; @top
  // holds %x and %y when it calls it: 2 + (3 - 1) = 4 tiles.
  std::unique_ptr<Module> module = Parse(
      "func @top(%x: f32[256, 256], %y: f32[256, 256]) -> f32[256, 256] {\n"
      "  %c = call @layer(%x) : f32[256, 256]\n"
      "  %d = add(%c, %y)\n"
      "  return %d\n"
      "}\n"
      "func @layer(%x: f32[256, 256]) -> f32[256, 256] {\n"
      "  %a = neg(%x)\n"
      "  %b = neg(%a)\n"
      "  %c = add(%a, %b)\n"
      "  return %c\n"
      "}\n");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(PeakLiveBytesPerDevice(*module->FindFunction("layer")), 3 * kTile);
  EXPECT_EQ(PeakLiveBytesPerDevice(*module->FindFunction("top")), 4 * kTile);
}

// Each function's peak is computed once, callees first: following each call down took
// time exponential in the depth of calls that fan out (2^40 calls here). At every level
// the argument or the first call's result (16 bytes) is live with the result being made.
TEST(PeakLiveBytes, CallsThatFanOutAreEstimatedOncePerFunction) {
  std::unique_ptr<Module> module = Parse(testing::FanOut(40));
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(PeakLiveBytesPerDevice(*module->FindFunction("main")), 32u);
  module = Parse(testing::DeepChain(20000));
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(PeakLiveBytesPerDevice(*module->FindFunction("main")), 32u);
}

TEST(PeakLiveBytes, HugeTensorsSaturateInsteadOfWrapping) {
  std::unique_ptr<Module> module = Parse(
      "func @f() -> f32[1000000, 1000000] {\n"
      "  %a = full() {value = 1.0} : f32[1000000, 1000000]\n"
      "  return %a\n"
      "}\n");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(PeakLiveBytesPerDevice(*module->functions()[0]), uint64_t{4'000'000'000'000});
  EXPECT_EQ(SaturatingMul(uint64_t{1} << 40, uint64_t{1} << 40),
            std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(SaturatingAdd(std::numeric_limits<uint64_t>::max(), 1),
            std::numeric_limits<uint64_t>::max());
}

TEST(PhysicalMemory, IsKnownOnLinux) { EXPECT_GT(PhysicalMemoryBytes(), uint64_t{1} << 20); }

// A slice that only matmuls read is a view (in_place.h: SliceReadInPlace): it costs
// nothing, and the 64-row tensor it is cut from stays live until the matmul, after its
// own last use (the slice). By hand, in bytes: %w 4096, %x and %y 8192 each, %b and %p
// 2048 each. With the view, the peak is at the matmul: %w + %x + %y + %p. With a slice
// that runs (an elementwise reader), %x dies at the slice and the peak is %w + %b + %y
// + %p.
constexpr char kView[] = R"(mesh @m(tp=1)
spmd func @f(%w: f32[32, 32]) -> (f32[16, 32], f32[64, 32]) on @m {
  %x = full() {value = 1.0} : f32[64, 32]
  %i = full() {value = 16} : index
  %b = dynamic_slice(%x, %i) {dim = 0, size = 16} : f32[16, 32]
  %y = full() {value = 2.0} : f32[64, 32]
  %p = $READER : f32[16, 32]
  return %p, %y
}
)";

TEST(PeakLiveBytes, AViewKeepsItsSlicedTensorUntilItsLastReader) {
  std::string source = kView;
  source.replace(source.find("$READER"), 7, "matmul(%b, %w)");
  std::unique_ptr<Module> module = Parse(source);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(PeakLiveBytesPerDevice(*module->functions()[0]), 4096u + 8192 + 8192 + 2048);
}

TEST(PeakLiveBytes, ASliceThatRunsHoldsItsBlockOnly) {
  std::string source = kView;
  source.replace(source.find("$READER"), 7, "add(%b, %b)");
  std::unique_ptr<Module> module = Parse(source);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(PeakLiveBytesPerDevice(*module->functions()[0]), 4096u + 2048 + 8192 + 2048);
}

// Two views of one tensor, read at different times: the tensor lives until the later
// reader. %x 8192, %y 8192, each view 0, %p 2048, %q 1024; %w (4096) dies at the first
// matmul. The peak is at the second matmul: %x + %p + %y + %q (where running the slices
// would hold %w + %x + %b + %c = 18432 at the second slice instead).
TEST(PeakLiveBytes, ATensorWithTwoViewsLivesUntilTheLaterReader) {
  std::unique_ptr<Module> module = Parse(
      R"(mesh @m(tp=1)
spmd func @f(%w: f32[32, 32]) -> (f32[16, 32], f32[16, 16], f32[64, 32]) on @m {
  %x = full() {value = 1.0} : f32[64, 32]
  %i = full() {value = 16} : index
  %b = dynamic_slice(%x, %i) {dim = 0, size = 16} : f32[16, 32]
  %c = dynamic_slice(%x, %i) {dim = 1, size = 16} : f32[64, 16]
  %p = matmul(%b, %w) : f32[16, 32]
  %y = full() {value = 2.0} : f32[64, 32]
  %q = matmul(%c, %c) {transpose_a} : f32[16, 16]
  return %p, %q, %y
}
)");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(PeakLiveBytesPerDevice(*module->functions()[0]), 8192u + 2048 + 8192 + 1024);
}


// A ring all-gather whose carried block lives in its slot of the gathered value
// (in_place.h: CarriedBlockInSlot): the body's block argument, the shift's result and the
// loop's block result are views of the gathered value, with no bytes of their own. By
// hand, in bytes: %x 2048, %g_init 8192; the loop holds its results (%g_part 8192) and
// its body's peak, at the update: %g_acc and %g_acc_1, 8192 each. Peak 2048 + 8192 +
// 8192 + 16384. Where the last block is returned (no view: the rule does not hold), the
// block is a buffer of its own three times over (the loop's result, the body's
// argument, the shift's result: 2048 each), peak 40960.
constexpr char kRing[] = R"(mesh @m(tp=4)
spmd func @f(%x: f32[16, 32]) -> ($RESULTS) on @m {
  %r = rank() {axis = tp} : index
  %g_init = full() {value = 0.0} : f32[64, 32]
  %g_part, %blk_last = for %i = 0 to 3 step 1 iter(%g_acc = %g_init, %blk = %x) {
    %blk_next = shift(%blk) {axis = tp, offset = 1} : f32[16, 32]
    %src_raw = sub(%r, %i) : index
    %src = rem(%src_raw, 4) : index
    %off = mul(%src, 16) : index
    %g_acc_1 = dynamic_update_slice(%g_acc, %blk, %off) {dim = 0} : f32[64, 32]
    yield %g_acc_1, %blk_next
  } : (f32[64, 32], f32[16, 32])
  %src_last_raw = add(%r, 1) : index
  %src_last = rem(%src_last_raw, 4) : index
  %off_1 = mul(%src_last, 16) : index
  %g = dynamic_update_slice(%g_part, %blk_last, %off_1) {dim = 0} : f32[64, 32]
  return $RETURNED
}
)";

TEST(PeakLiveBytes, ARingsCarriedBlockInItsSlotHoldsNoBytes) {
  std::string source = kRing;
  source.replace(source.find("$RESULTS"), 8, "f32[64, 32]");
  source.replace(source.find("$RETURNED"), 9, "%g");
  std::unique_ptr<Module> module = Parse(source);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(PeakLiveBytesPerDevice(*module->functions()[0]), 2048u + 8192 + 8192 + 16384);
}

TEST(PeakLiveBytes, ACarriedBlockOfItsOwnIsCountedWhereTheRuleFails) {
  std::string source = kRing;
  source.replace(source.find("$RESULTS"), 8, "f32[64, 32], f32[16, 32]");
  source.replace(source.find("$RETURNED"), 9, "%g, %blk_last");
  std::unique_ptr<Module> module = Parse(source);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(PeakLiveBytesPerDevice(*module->functions()[0]), 40960u);
}

}  // namespace
}  // namespace commir::runtime
