#include "runtime/in_place.h"

#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "commir/diagnostics.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "runtime/fill_test_programs.h"

namespace commir::runtime {
namespace {

TEST(PlaceBlockTest, RowBlockIsAnOffsetPointerColumnBlockAStride) {
  // Rows 16..31 of a [64, 13] matrix start at element 16 * 13 = 208, a row apart.
  std::optional<MatrixBlock> rows = PlaceBlock(64, 13, 0, 16, 16, 13);
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->first, 208);
  EXPECT_EQ(rows->row_stride, 13);
  // Columns 26..38 of a [16, 52] matrix: element 26, rows 52 apart.
  std::optional<MatrixBlock> cols = PlaceBlock(16, 52, 1, 26, 16, 13);
  ASSERT_TRUE(cols.has_value());
  EXPECT_EQ(cols->first, 26);
  EXPECT_EQ(cols->row_stride, 52);
  // Counted from the end: -1 is the columns.
  std::optional<MatrixBlock> last = PlaceBlock(16, 52, -1, 39, 16, 13);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->first, 39);
}

TEST(PlaceBlockTest, DeclinesWhatDoesNotFit) {
  EXPECT_FALSE(PlaceBlock(64, 13, 0, 49, 16, 13).has_value());  // rows 49..64
  EXPECT_FALSE(PlaceBlock(64, 13, 0, -1, 16, 13).has_value());
  EXPECT_FALSE(PlaceBlock(64, 13, 0, 0, 16, 12).has_value());  // narrower than a row
  EXPECT_FALSE(PlaceBlock(16, 52, 1, 40, 16, 13).has_value());
  EXPECT_FALSE(PlaceBlock(16, 52, 2, 0, 16, 13).has_value());
  EXPECT_FALSE(PlaceBlock(16, 52, 1, INT64_MAX, 16, 13).has_value());
}

// `body` as the body of the spmd function `@f` with `header` (its mesh line and
// signature, up to and including the opening brace); null (and a test failure) when it
// does not parse.
std::unique_ptr<Module> ParseCase(const std::string& header, const std::string& body) {
  const std::string source = header + body + "}\n";
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(source, diagnostics);
  EXPECT_NE(module, nullptr) << source;
  return module;
}

// The last op of `kind` in `@f`'s body, or null.
const Operation* LastOfKind(const Module& module, OpKind kind) {
  const Operation* found = nullptr;
  for (const Operation* op : *module.functions()[0]->body()) {
    if (op->Is(kind)) found = op;
  }
  return found;
}

// The update of each case's %blk: whether the matmul writes into it.
bool Fuses(const std::string& body) {
  std::unique_ptr<Module> module = ParseCase(
      "mesh @m(tp=1)\nspmd func @f(%a: f32[4, 8], %b: f32[8, 3], %c: f32[12, 3]) -> "
      "f32[12, 3] on @m {\n",
      body);
  if (module == nullptr) return false;
  const Operation* matmul = LastOfKind(*module, OpKind::kMatmul);
  const Operation* update = matmul == nullptr ? nullptr : MatmulWritesInto(*matmul);
  if (update != nullptr) {
    EXPECT_EQ(UpdateWrittenByMatmul(*update), matmul);
  }
  return update != nullptr;
}

// The first op of `body` (a slice of %k f32[2, 3, 16, 8]): whether it is read in place,
// and the one dimension it cuts.
struct SliceCase {
  bool in_place;
  std::optional<SliceExtent> extent;
};
SliceCase FirstSlice(const std::string& body) {
  std::unique_ptr<Module> module = ParseCase(
      "mesh @m(sp=1)\nspmd func @f(%q: f32[2, 3, 4, 8], %k: f32[2, 3, 16, 8], %i: index) -> "
      "f32[2, 3, 4, 8] on @m {\n",
      body);
  if (module == nullptr) return {false, std::nullopt};
  const Operation& slice = **module->functions()[0]->body()->begin();
  return {SliceReadInPlace(slice), SliceAlongOneDim(slice)};
}

TEST(SliceReadInPlaceTest, AttentionReadsSequenceBlocksOfQKAndV) {
  // A static sequence block read as k and v: a view, cut along dim 2 at 4.
  SliceCase c = FirstSlice(
      "  %kb = slice(%k) {start = [0, 0, 4, 0], size = [2, 3, 4, 8]} : f32[2, 3, 4, 8]\n"
      "  %o = attention(%q, %kb, %kb) : f32[2, 3, 4, 8]\n  return %o\n");
  EXPECT_TRUE(c.in_place);
  ASSERT_TRUE(c.extent.has_value());
  EXPECT_EQ(c.extent->dim, 2);
  EXPECT_EQ(c.extent->size, 4);
  EXPECT_EQ(c.extent->start, 4);
  // A dynamic one read as q and by a matmul: a view too; its offset comes at run time.
  c = FirstSlice(
      "  %qb = dynamic_slice(%k, %i) {dim = -2, size = 4} : f32[2, 3, 4, 8]\n"
      "  %o = attention(%qb, %k, %k) : f32[2, 3, 4, 8]\n"
      "  %p = matmul(%qb, %q) {transpose_b} : f32[2, 3, 4, 4]\n  return %o\n");
  EXPECT_TRUE(c.in_place);
  ASSERT_TRUE(c.extent.has_value());
  EXPECT_EQ(c.extent->dim, 2);
  EXPECT_FALSE(c.extent->start.has_value());
  // Also read by an elementwise op: a kernel.
  c = FirstSlice(
      "  %kb = slice(%k) {start = [0, 0, 4, 0], size = [2, 3, 4, 8]} : f32[2, 3, 4, 8]\n"
      "  %o = attention(%q, %kb, %kb) : f32[2, 3, 4, 8]\n"
      "  %e = exp(%kb) : f32[2, 3, 4, 8]\n  return %o\n");
  EXPECT_FALSE(c.in_place);
  // Cut along two dimensions: no one strided layout per (b, h) matrix.
  c = FirstSlice(
      "  %kb = slice(%k) {start = [0, 0, 4, 0], size = [2, 3, 4, 4]} : f32[2, 3, 4, 4]\n"
      "  %o = attention(%q, %k, %k) : f32[2, 3, 4, 8]\n"
      "  %p = matmul(%kb, %kb) {transpose_b} : f32[2, 3, 4, 4]\n  return %o\n");
  EXPECT_FALSE(c.extent.has_value());
  EXPECT_FALSE(c.in_place);
  // Cut along the heads with a batch of 2: the block's matrices are not evenly strided.
  c = FirstSlice(
      "  %kb = slice(%k) {start = [0, 1, 0, 0], size = [2, 1, 16, 8]} : f32[2, 1, 16, 8]\n"
      "  %o = attention(%q, %kb, %kb) : f32[2, 3, 4, 8]\n  return %o\n");
  EXPECT_FALSE(c.in_place);
}

// FlashAttention's backward takes q, k and v as its forward does (a pointer and strides),
// so a block read by attention and attention_grad as q, k or v is a view (the fused QKV
// projection's k and v in a layer's gradient); read as the output's cotangent it is not.
TEST(SliceReadInPlaceTest, AttentionGradReadsBlocksOfQKAndV) {
  SliceCase c = FirstSlice(
      "  %kb = slice(%k) {start = [0, 0, 4, 0], size = [2, 3, 4, 8]} : f32[2, 3, 4, 8]\n"
      "  %o, %lse = attention(%q, %kb, %kb)\n"
      "  %dq, %dk, %dv = attention_grad(%q, %kb, %kb, %o, %lse, %q)\n  return %dq\n");
  EXPECT_TRUE(c.in_place);
  c = FirstSlice(
      "  %kb = slice(%k) {start = [0, 0, 4, 0], size = [2, 3, 4, 8]} : f32[2, 3, 4, 8]\n"
      "  %o, %lse = attention(%q, %q, %q)\n"
      "  %dq, %dk, %dv = attention_grad(%q, %q, %q, %o, %lse, %kb)\n  return %dq\n");
  EXPECT_FALSE(c.in_place);
}

TEST(MatmulWritesIntoTest, OnlyWhereTheDestinationIsFreeAndReady) {
  EXPECT_TRUE(Fuses("  %o = full() {value = 4} : index\n"
                    "  %blk = matmul(%a, %b) : f32[4, 3]\n"
                    "  %r = dynamic_update_slice(%c, %blk, %o) {dim = 0} : f32[12, 3]\n"
                    "  return %r\n"));
  // The offset is known only after the matmul.
  EXPECT_FALSE(Fuses("  %blk = matmul(%a, %b) : f32[4, 3]\n"
                     "  %o = full() {value = 4} : index\n"
                     "  %r = dynamic_update_slice(%c, %blk, %o) {dim = 0} : f32[12, 3]\n"
                     "  return %r\n"));
  // The destination is read between the two: it must still hold its old rows.
  EXPECT_FALSE(Fuses("  %o = full() {value = 4} : index\n"
                     "  %blk = matmul(%a, %b) : f32[4, 3]\n"
                     "  %n = neg(%c) : f32[12, 3]\n"
                     "  %r = dynamic_update_slice(%c, %blk, %o) {dim = 0} : f32[12, 3]\n"
                     "  %s = add(%r, %n) : f32[12, 3]\n"
                     "  return %s\n"));
  // The destination is read after the update: it is not the update's to reuse.
  EXPECT_FALSE(Fuses("  %o = full() {value = 4} : index\n"
                     "  %blk = matmul(%a, %b) : f32[4, 3]\n"
                     "  %r = dynamic_update_slice(%c, %blk, %o) {dim = 0} : f32[12, 3]\n"
                     "  %s = add(%r, %c) : f32[12, 3]\n"
                     "  return %s\n"));
  // The block is used twice.
  EXPECT_FALSE(Fuses("  %o = full() {value = 4} : index\n"
                     "  %blk = matmul(%a, %b) : f32[4, 3]\n"
                     "  %r = dynamic_update_slice(%c, %blk, %o) {dim = 0} : f32[12, 3]\n"
                     "  %t = dynamic_update_slice(%r, %blk, %o) {dim = 0} : f32[12, 3]\n"
                     "  return %t\n"));
}

// The update of each case's shift: whether the shift receives into its slot. %a is each
// device's block, %c the gathered buffer it lands in.
bool Receives(const std::string& body) {
  std::unique_ptr<Module> module = ParseCase(
      "mesh @m(tp=4)\nspmd func @f(%a: f32[4, 3], %c: f32[16, 3]) -> f32[16, 3] on @m {\n",
      body);
  if (module == nullptr) return false;
  const Operation* shift = LastOfKind(*module, OpKind::kShift);
  const Operation* update = shift == nullptr ? nullptr : ShiftReceivesInto(*shift);
  if (update != nullptr) {
    EXPECT_EQ(UpdateReceivedByShift(*update), shift);
    EXPECT_TRUE(RingBlockLandsInPlace(*update));
  }
  return update != nullptr;
}

TEST(ShiftReceivesIntoTest, OnlyWhereTheSlotIsFreeAndReady) {
  EXPECT_TRUE(Receives("  %o = full() {value = 4} : index\n"
                       "  %got = shift(%a) {axis = tp, offset = 1} : f32[4, 3]\n"
                       "  %r = dynamic_update_slice(%c, %got, %o) {dim = 0} : f32[16, 3]\n"
                       "  return %r\n"));
  // The offset is known only after the shift.
  EXPECT_FALSE(Receives("  %got = shift(%a) {axis = tp, offset = 1} : f32[4, 3]\n"
                        "  %o = full() {value = 4} : index\n"
                        "  %r = dynamic_update_slice(%c, %got, %o) {dim = 0} : f32[16, 3]\n"
                        "  return %r\n"));
  // The received block is read by something else too: it needs a buffer of its own.
  EXPECT_FALSE(Receives("  %o = full() {value = 4} : index\n"
                        "  %got = shift(%a) {axis = tp, offset = 1} : f32[4, 3]\n"
                        "  %r = dynamic_update_slice(%c, %got, %o) {dim = 0} : f32[16, 3]\n"
                        "  %n = neg(%got) : f32[4, 3]\n"
                        "  %s = dynamic_update_slice(%r, %n, %o) {dim = 0} : f32[16, 3]\n"
                        "  return %s\n"));
  // The destination is read between the two: it must still hold its old rows.
  EXPECT_FALSE(Receives("  %o = full() {value = 4} : index\n"
                        "  %got = shift(%a) {axis = tp, offset = 1} : f32[4, 3]\n"
                        "  %n = neg(%c) : f32[16, 3]\n"
                        "  %r = dynamic_update_slice(%c, %got, %o) {dim = 0} : f32[16, 3]\n"
                        "  %s = add(%r, %n) : f32[16, 3]\n"
                        "  return %s\n"));
  // The destination is read after the update: it is not the update's to reuse.
  EXPECT_FALSE(Receives("  %o = full() {value = 4} : index\n"
                        "  %got = shift(%a) {axis = tp, offset = 1} : f32[4, 3]\n"
                        "  %r = dynamic_update_slice(%c, %got, %o) {dim = 0} : f32[16, 3]\n"
                        "  %s = add(%r, %c) : f32[16, 3]\n"
                        "  return %s\n"));
  // A block that is not received: a matmul's or an elementwise op's.
  EXPECT_FALSE(Receives("  %o = full() {value = 4} : index\n"
                        "  %n = neg(%a) : f32[4, 3]\n"
                        "  %r = dynamic_update_slice(%c, %n, %o) {dim = 0} : f32[16, 3]\n"
                        "  return %r\n"));
}

TEST(SliceAsRowsTest, BlocksAlongAnyDimensionAreRowsOfOneStridedCopy) {
  const int64_t dims[] = {2, 3, 16, 8};
  // Rows 4..8 of each of the 6 matrices: 6 runs of 4 * 8 elements, a matrix apart.
  std::optional<BlockRows> rows = SliceAsRows(dims, 2, 4, 4);
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->first, 4 * 8);
  EXPECT_EQ(rows->width, 4 * 8);
  EXPECT_EQ(rows->pitch, 16 * 8);
  EXPECT_EQ(rows->rows, 2 * 3);
  EXPECT_FALSE(rows->contiguous());
  // Columns 2..5: a run of 3 per row of every matrix, one row apart.
  rows = SliceAsRows(dims, -1, 2, 3);
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->first, 2);
  EXPECT_EQ(rows->width, 3);
  EXPECT_EQ(rows->pitch, 8);
  EXPECT_EQ(rows->rows, 2 * 3 * 16);
  // Along the first dimension: one contiguous range.
  rows = SliceAsRows(dims, 0, 1, 1);
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->first, 3 * 16 * 8);
  EXPECT_EQ(rows->width, 3 * 16 * 8);
  EXPECT_EQ(rows->rows, 1);
  EXPECT_TRUE(rows->contiguous());
  // Out of range, negative, no such dimension.
  EXPECT_FALSE(SliceAsRows(dims, 2, 13, 4).has_value());
  EXPECT_FALSE(SliceAsRows(dims, 2, -1, 4).has_value());
  EXPECT_FALSE(SliceAsRows(dims, 2, 0, 17).has_value());
  EXPECT_FALSE(SliceAsRows(dims, 4, 0, 1).has_value());
}


// A ring all-gather of %a whose blocks %w multiplies on the way, the ring schedules'
// form; `edit` replaces one line of it. The ring whose carried block lives in its slot,
// if CarriedBlockInSlot finds one at the shift.
std::optional<CarriedRing> CarriedCase(const std::string& from, const std::string& to,
                                       std::unique_ptr<Module>& module) {
  std::string body =
      "  %r = rank() {axis = tp} : index\n"
      "  %g_init = full() {value = 0.0} : f32[16, 3]\n"
      "  %g_part, %blk_last = for %i = 0 to 3 step 1 iter(%g_acc = %g_init, %blk = %a) {\n"
      "    %blk_next = shift(%blk) {axis = tp, offset = 1} : f32[4, 3]\n"
      "    %src_raw = sub(%r, %i) : index\n"
      "    %src = rem(%src_raw, 4) : index\n"
      "    %off = mul(%src, 4) : index\n"
      "    %p = matmul(%blk, %w) : f32[4, 5]\n"
      "    %g_acc_1 = dynamic_update_slice(%g_acc, %blk, %off) {dim = 0} : f32[16, 3]\n"
      "    yield %g_acc_1, %blk_next\n"
      "  } : (f32[16, 3], f32[4, 3])\n"
      "  %last_raw = add(%r, 1) : index\n"
      "  %last = rem(%last_raw, 4) : index\n"
      "  %off_1 = mul(%last, 4) : index\n"
      "  %p_1 = matmul(%blk_last, %w) : f32[4, 5]\n"
      "  %g = dynamic_update_slice(%g_part, %blk_last, %off_1) {dim = 0} : f32[16, 3]\n"
      "  return %g\n";
  if (!from.empty()) {
    const size_t at = body.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at == std::string::npos) return std::nullopt;
    body.replace(at, from.size(), to);
  }
  module = ParseCase(
      "mesh @m(tp=4)\nspmd func @f(%a: f32[4, 3], %w: f32[3, 5]) -> f32[16, 3] on @m {\n", body);
  if (module == nullptr) return std::nullopt;
  std::optional<CarriedRing> found;
  WalkOps(module->functions()[0]->body(), [&](Operation* op) {
    if (std::optional<CarriedRing> ring = CarriedBlockInSlot(*op); ring.has_value()) found = ring;
  });
  return found;
}

TEST(CarriedBlockInSlotTest, TheRingSchedulesForm) {
  std::unique_ptr<Module> module;
  std::optional<CarriedRing> ring = CarriedCase("", "", module);
  ASSERT_TRUE(ring.has_value());
  EXPECT_EQ(ring->block, 1);
  EXPECT_EQ(ring->gathered, 0);
  EXPECT_TRUE(ring->shift->Is(OpKind::kShift));
  EXPECT_EQ(ring->update->result(0)->name(), "g_acc_1");
  EXPECT_EQ(ring->last_update->result(0)->name(), "g");
  EXPECT_TRUE(RingBlockLandsInPlace(*ring->update));
  EXPECT_TRUE(RingBlockLandsInPlace(*ring->last_update));
}

TEST(CarriedBlockInSlotTest, OnlyWhereEveryUseCanTakeTheView) {
  std::unique_ptr<Module> module;
  // The block is read by an op that takes no view.
  EXPECT_FALSE(CarriedCase("    %p = matmul(%blk, %w) : f32[4, 5]\n",
                           "    %p = neg(%blk) : f32[4, 3]\n", module)
                   .has_value());
  // The last block is read after the last update (the gathered value may change).
  EXPECT_FALSE(CarriedCase("  return %g\n",
                           "  %p_2 = matmul(%blk_last, %w) : f32[4, 5]\n  return %g\n", module)
                   .has_value());
  // The gathered value is read in the body besides its update.
  EXPECT_FALSE(CarriedCase("    %p = matmul(%blk, %w) : f32[4, 5]\n",
                           "    %p = matmul(%g_acc, %w) : f32[16, 5]\n", module)
                   .has_value());
  // The gathered result is read besides the last update.
  EXPECT_FALSE(CarriedCase("  return %g\n", "  %n = neg(%g_part) : f32[16, 3]\n  return %g\n",
                           module)
                   .has_value());
}

TEST(CarriedBlockInSlotTest, OffsetsOfIndexArithmeticAreKnownBeforeTheShift) {
  std::unique_ptr<Module> module;
  // Index arithmetic of the induction variable and values before the loop: known.
  EXPECT_TRUE(CarriedCase("    %off = mul(%src, 4) : index\n",
                          "    %four = full() {value = 4} : index\n"
                          "    %off = mul(%src, %four) : index\n",
                          module)
                  .has_value());
}

// The first `full` of a parsed fill_test program, or null (and a failure).
const Operation* FirstFull(const Module* module) {
  if (module == nullptr) return nullptr;
  for (const Operation* op : *module->functions()[0]->body()) {
    if (op->Is(OpKind::kFull) && op->result(0)->type().is_tensor()) return op;
  }
  ADD_FAILURE() << "no tensor full";
  return nullptr;
}

bool Unfilled(const std::string& source) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(source, diagnostics);
  EXPECT_NE(module, nullptr) << source;
  const Operation* full = FirstFull(module.get());
  return full != nullptr && FillOverwrittenBeforeRead(*full);
}

TEST(FillOverwrittenBeforeReadTest, RingThatWritesEveryBlockNeedsNoFill) {
  EXPECT_TRUE(Unfilled(fill_test::Covered()));
}

TEST(FillOverwrittenBeforeReadTest, OwnerSlotsWrittenEachNeedNoFill) {
  EXPECT_TRUE(Unfilled(fill_test::Slots()));
}

TEST(FillOverwrittenBeforeReadTest, BufferLeftPartlyUnwrittenKeepsItsFill) {
  EXPECT_FALSE(Unfilled(fill_test::OneBlockShort()));
  EXPECT_FALSE(Unfilled(fill_test::RepeatedBlock()));
  EXPECT_FALSE(Unfilled(fill_test::SlotsOneShort()));
}

TEST(FillOverwrittenBeforeReadTest, BufferReadBeforeTheLastWriteKeepsItsFill) {
  EXPECT_FALSE(Unfilled(fill_test::ReadBeforeLastWrite()));
}

TEST(FillOverwrittenBeforeReadTest, OtherShapesKeepTheirFill) {
  const std::string header = "mesh @m(tp=2)\n\nspmd func @f(%x: f32[4, 8]) -> f32[8, 8] on @m {\n";
  // Read whole: no update at all.
  EXPECT_FALSE(Unfilled(header +
                        "  %b = full() {value = 1.0} : f32[8, 8]\n"
                        "  return %b\n}\n"));
  // Both halves written at offset 0: rows 4..8 never are.
  EXPECT_FALSE(Unfilled(header +
                        "  %b = full() {value = 1.0} : f32[8, 8]\n"
                        "  %o = full() {value = 0} : index\n"
                        "  %h = dynamic_update_slice(%b, %x, %o) {dim = 0} : f32[8, 8]\n"
                        "  %g = dynamic_update_slice(%h, %x, %o) {dim = 0} : f32[8, 8]\n"
                        "  return %g\n}\n"));
  // The same at offsets 0 and 4: every row written.
  EXPECT_TRUE(Unfilled(header +
                       "  %b = full() {value = 1.0} : f32[8, 8]\n"
                       "  %o = full() {value = 0} : index\n"
                       "  %o4 = full() {value = 4} : index\n"
                       "  %h = dynamic_update_slice(%b, %x, %o) {dim = 0} : f32[8, 8]\n"
                       "  %g = dynamic_update_slice(%h, %x, %o4) {dim = 0} : f32[8, 8]\n"
                       "  return %g\n}\n"));
}

}  // namespace
}  // namespace commir::runtime
