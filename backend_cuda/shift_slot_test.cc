#include "backend_cuda/shift_slot.h"

#include <optional>

#include "gtest/gtest.h"

namespace commir::cuda {
namespace {

using comm::Route;

TEST(ShiftSlotTest, ARowBlockIsAnOffsetPointerOnEveryRoute) {
  // Rows 64..128 of a bf16 [256, 512] buffer: 64 * 512 * 2 bytes at 64 rows' bytes.
  const int64_t buffer[] = {256, 512};
  const int64_t block[] = {64, 512};
  for (Route route : {Route::kNccl, Route::kCopyEngine, Route::kCopyEngineIpc,
                      Route::kMemberStreamCopies}) {
    std::optional<ShiftSlot> slot = PlanShiftSlot(buffer, block, 0, 64, 2, route);
    ASSERT_TRUE(slot.has_value());
    EXPECT_EQ(slot->receive, SlotReceive::kOffsetPointer);
    EXPECT_EQ(slot->byte_offset, 64 * 512 * 2);
    EXPECT_EQ(slot->width, 64 * 512 * 2);
    EXPECT_EQ(slot->rows, 1);
  }
  // A sequence block of a [1, 4, 256, 64] buffer with batch 1 along dim 1 is contiguous
  // too (every dimension before it is 1).
  const int64_t heads[] = {1, 8, 16, 64};
  const int64_t two_heads[] = {1, 2, 16, 64};
  std::optional<ShiftSlot> slot = PlanShiftSlot(heads, two_heads, 1, 4, 4, Route::kNccl);
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->receive, SlotReceive::kOffsetPointer);
  EXPECT_EQ(slot->byte_offset, 4 * 16 * 64 * 4);
  EXPECT_EQ(slot->width, 2 * 16 * 64 * 4);
}

TEST(ShiftSlotTest, AColumnBlockIsA2DCopyOnCopyEnginesAndStagedOverNccl) {
  // Columns 128..256 of an f32 [64, 512] buffer: 64 rows of 128 floats, 512 floats apart.
  const int64_t buffer[] = {64, 512};
  const int64_t block[] = {64, 128};
  for (Route route : {Route::kCopyEngine, Route::kMemberStreamCopies}) {
    std::optional<ShiftSlot> slot = PlanShiftSlot(buffer, block, -1, 128, 4, route);
    ASSERT_TRUE(slot.has_value());
    EXPECT_EQ(slot->receive, SlotReceive::kStrided2D);
    EXPECT_EQ(slot->byte_offset, 128 * 4);
    EXPECT_EQ(slot->width, 128 * 4);
    EXPECT_EQ(slot->pitch, 512 * 4);
    EXPECT_EQ(slot->rows, 64);
  }
  for (Route route : {Route::kNccl, Route::kCopyEngineIpc}) {
    std::optional<ShiftSlot> slot = PlanShiftSlot(buffer, block, 1, 128, 4, route);
    ASSERT_TRUE(slot.has_value());
    EXPECT_EQ(slot->receive, SlotReceive::kStaged);
  }
  // A sequence block of every (batch, head) matrix: one run per matrix.
  const int64_t kv[] = {2, 4, 256, 64};
  const int64_t kv_block[] = {2, 4, 64, 64};
  std::optional<ShiftSlot> slot = PlanShiftSlot(kv, kv_block, 2, 192, 2, Route::kCopyEngine);
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->receive, SlotReceive::kStrided2D);
  EXPECT_EQ(slot->byte_offset, 192 * 64 * 2);
  EXPECT_EQ(slot->width, 64 * 64 * 2);
  EXPECT_EQ(slot->pitch, 256 * 64 * 2);
  EXPECT_EQ(slot->rows, 2 * 4);
}

TEST(ShiftSlotTest, DeclinesWhatDoesNotFit) {
  const int64_t buffer[] = {256, 512};
  const int64_t block[] = {64, 512};
  const int64_t narrow[] = {64, 256};
  const int64_t flat[] = {64 * 512};
  EXPECT_FALSE(PlanShiftSlot(buffer, block, 0, 193, 2, Route::kNccl).has_value());
  EXPECT_FALSE(PlanShiftSlot(buffer, block, 0, -1, 2, Route::kNccl).has_value());
  EXPECT_FALSE(PlanShiftSlot(buffer, narrow, 0, 0, 2, Route::kNccl).has_value());
  EXPECT_FALSE(PlanShiftSlot(buffer, flat, 0, 0, 2, Route::kNccl).has_value());
  EXPECT_FALSE(PlanShiftSlot(buffer, block, 2, 0, 2, Route::kNccl).has_value());
}


TEST(CarriedBlockSlotTest, RowBlocksAreSentFromTheirSlotStridedOnesAreNot) {
  // Row blocks of an f32 [1024, 256] gathered value: 128 rows at row 384 begin
  // 384 * 256 * 4 bytes in, one contiguous range.
  const int64_t gathered[] = {1024, 256};
  EXPECT_TRUE(CarriedBlockContiguous(gathered, 0, 128));
  EXPECT_TRUE(CarriedBlockContiguous(gathered, -2, 128));
  EXPECT_EQ(ContiguousBlockByteOffset(gathered, 0, 384, 128, 4), 384 * 256 * 4);
  // A column block: 1024 runs of 64 floats, 256 apart: strided, kept apart and copied.
  EXPECT_FALSE(CarriedBlockContiguous(gathered, 1, 64));
  EXPECT_FALSE(ContiguousBlockByteOffset(gathered, 1, 64, 64, 4).has_value());
  // A sequence block of several heads [2, 8, 4096, 128] along dim 2: strided.
  const int64_t heads[] = {2, 8, 4096, 128};
  EXPECT_FALSE(CarriedBlockContiguous(heads, 2, 512));
  // With batch and heads 1 it is one range: 512 rows of 128 bf16 at row 1024.
  const int64_t one_head[] = {1, 1, 4096, 128};
  EXPECT_TRUE(CarriedBlockContiguous(one_head, 2, 512));
  EXPECT_EQ(ContiguousBlockByteOffset(one_head, 2, 1024, 512, 2), 1024 * 128 * 2);
  // Out of range, or no element width: nothing.
  EXPECT_FALSE(ContiguousBlockByteOffset(gathered, 0, 1000, 128, 4).has_value());
  EXPECT_FALSE(ContiguousBlockByteOffset(gathered, 0, 0, 128, 0).has_value());
}

}  // namespace
}  // namespace commir::cuda
