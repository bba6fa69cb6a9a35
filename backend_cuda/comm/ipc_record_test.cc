#include "backend_cuda/comm/ipc_record.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace commir::cuda::comm {
namespace {

using ::testing::HasSubstr;

IpcRecord Record(int rank) {
  IpcRecord r;
  r.rank = rank;
  r.pid = 1000 + rank;
  r.local_devices = 2;
  r.slot_bytes = 1 << 20;
  r.handle = std::string(kIpcHandleBytes, static_cast<char>(rank + 1));
  r.handle[0] = '\0';  // handles are binary
  return r;
}

TEST(IpcRecordTest, RoundTripsEveryField) {
  std::vector<std::string> blobs = {EncodeIpcRecord(Record(0)), EncodeIpcRecord(Record(1))};
  absl::StatusOr<std::vector<IpcRecord>> got = DecodeIpcRecords(blobs, 2, 1 << 20);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ((*got)[r].rank, r);
    EXPECT_EQ((*got)[r].pid, 1000 + r);
    EXPECT_EQ((*got)[r].handle, Record(r).handle);
  }
}

TEST(IpcRecordTest, RefusesForeignMisplacedAndDisagreeingRecords) {
  std::vector<std::string> blobs = {EncodeIpcRecord(Record(0)), "garbage"};
  EXPECT_EQ(DecodeIpcRecords(blobs, 2, 1 << 20).status().code(), absl::StatusCode::kDataLoss);
  blobs = {EncodeIpcRecord(Record(1)), EncodeIpcRecord(Record(0))};
  EXPECT_THAT(DecodeIpcRecords(blobs, 2, 1 << 20).status().message(),
              HasSubstr("rank 0's place says rank 1"));
  IpcRecord other = Record(1);
  other.slot_bytes = 2 << 20;
  blobs = {EncodeIpcRecord(Record(0)), EncodeIpcRecord(other)};
  absl::Status s = DecodeIpcRecords(blobs, 2, 1 << 20).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("not running the same program"));
}

TEST(IpcRecordTest, LayoutAndSlotSizes) {
  // ready[] and drained[] of the largest counts never overlap, and all fit before slot 0.
  EXPECT_EQ(ReadyFlagOffset(0), 0);
  EXPECT_EQ(ReadyFlagOffset(kMaxIpcDevices - 1) + 4, DrainedFlagOffset(0));
  EXPECT_EQ(DrainedFlagOffset(kMaxIpcDevices - 1) + 4, kFlagBytes);
  EXPECT_EQ(SlotOffset(0, 1 << 20), kFlagBytes);
  EXPECT_EQ(SlotOffset(3, 1 << 20), kFlagBytes + 3 * (1 << 20));
  EXPECT_EQ(StagingSlotBytes(0), 1 << 20);
  EXPECT_EQ(StagingSlotBytes(1 << 20), 1 << 20);
  EXPECT_EQ(StagingSlotBytes((1 << 20) + 1), 2 << 20);
  EXPECT_EQ(StagingSlotBytes(int64_t{3} << 30), int64_t{4} << 30);
  EXPECT_EQ(StagingSlotBytes((int64_t{1} << 40) + 1), 0);
  EXPECT_EQ(StagingSlotBytes(-1), 0);
}

}  // namespace
}  // namespace commir::cuda::comm
