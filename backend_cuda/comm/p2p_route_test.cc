#include "backend_cuda/comm/p2p_route.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace commir::cuda::comm {
namespace {

TEST(P2pRouteTest, ParsesTheFlag) {
  EXPECT_EQ(*ParseP2pTransport("ce"), P2pTransport::kCopyEngine);
  EXPECT_EQ(*ParseP2pTransport("nccl"), P2pTransport::kNccl);
  EXPECT_FALSE(ParseP2pTransport("CE").ok());
  EXPECT_FALSE(ParseP2pTransport("").ok());
  EXPECT_EQ(P2pTransportName(P2pTransport::kCopyEngine), "ce");
}

TEST(P2pRouteTest, NcclKeepsTheRoutesOfBeforeCopyEngines) {
  // --p2p=nccl: copies on the members' streams where devices share a GPU and all are
  // local; NCCL otherwise; never IPC.
  for (CollectiveKind kind : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                              CollectiveKind::kAllReduce, CollectiveKind::kAllToAll,
                              CollectiveKind::kShift}) {
    RouteQuery q{kind, P2pTransport::kNccl, true, true, 1};
    EXPECT_EQ(ChooseRoute(q), Route::kMemberStreamCopies) << CollectiveKindName(kind);
    q.shares_gpus = false;
    EXPECT_EQ(ChooseRoute(q), Route::kNccl);
    q.all_local = false;
    EXPECT_EQ(ChooseRoute(q), Route::kNccl);
    q.shares_gpus = true;
    EXPECT_EQ(ChooseRoute(q), Route::kUnsupported);
  }
}

TEST(P2pRouteTest, CopyEnginesMoveBytesReductionsKeepTheirPaths) {
  for (CollectiveKind kind :
       {CollectiveKind::kAllGather, CollectiveKind::kAllToAll, CollectiveKind::kShift}) {
    EXPECT_EQ(ChooseRoute({kind, P2pTransport::kCopyEngine, true, true, 1}), Route::kCopyEngine);
    EXPECT_EQ(ChooseRoute({kind, P2pTransport::kCopyEngine, true, false, 4}), Route::kCopyEngine);
  }
  for (CollectiveKind kind : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter}) {
    EXPECT_EQ(ChooseRoute({kind, P2pTransport::kCopyEngine, true, true, 1}),
              Route::kMemberStreamCopies);
    EXPECT_EQ(ChooseRoute({kind, P2pTransport::kCopyEngine, true, false, 1}), Route::kNccl);
    EXPECT_EQ(ChooseRoute({kind, P2pTransport::kCopyEngine, false, false, 1}), Route::kNccl);
  }
}

TEST(P2pRouteTest, AcrossProcessesShiftUsesIpcOnOneNodeOnly) {
  EXPECT_EQ(ChooseRoute({CollectiveKind::kShift, P2pTransport::kCopyEngine, false, false, 1}),
            Route::kCopyEngineIpc);
  EXPECT_EQ(ChooseRoute({CollectiveKind::kShift, P2pTransport::kCopyEngine, false, false, 2}),
            Route::kNccl);
  EXPECT_EQ(ChooseRoute({CollectiveKind::kAllGather, P2pTransport::kCopyEngine, false, false, 1}),
            Route::kNccl);
  EXPECT_EQ(ChooseRoute({CollectiveKind::kShift, P2pTransport::kCopyEngine, false, true, 1}),
            Route::kUnsupported);
}

// Applies a copy plan to host buffers: member s's send buffer holds bytes 100*s + i.
std::vector<std::vector<int>> Apply(CollectiveKind kind, int64_t n, int64_t send_bytes,
                                    int64_t recv_bytes, int64_t offset) {
  std::vector<std::vector<int>> recv(n, std::vector<int>(recv_bytes, -1));
  for (int64_t d = 0; d < n; ++d) {
    absl::StatusOr<std::vector<CopyStep>> steps = CopiesInto(kind, n, d, send_bytes, offset);
    EXPECT_TRUE(steps.ok()) << steps.status();
    if (!steps.ok()) continue;
    for (const CopyStep& c : *steps) {
      EXPECT_EQ(c.dst, d);
      for (int64_t i = 0; i < c.bytes; ++i) {
        recv[d].at(c.dst_offset + i) = static_cast<int>(100 * c.src + c.src_offset + i);
      }
    }
  }
  return recv;
}

TEST(P2pRouteTest, CopyPlansMatchTheCollectivesDefinitions) {
  const int64_t n = 4, bytes = 8;
  // all_gather: recv of every member = the send buffers concatenated in group order.
  auto gathered = Apply(CollectiveKind::kAllGather, n, bytes, n * bytes, 0);
  for (int64_t d = 0; d < n; ++d) {
    for (int64_t j = 0; j < n * bytes; ++j) EXPECT_EQ(gathered[d][j], 100 * (j / bytes) + j % bytes);
  }
  // all_to_all: recv block i of member d = send block d of member i.
  auto exchanged = Apply(CollectiveKind::kAllToAll, n, bytes, bytes, 0);
  const int64_t block = bytes / n;
  for (int64_t d = 0; d < n; ++d) {
    for (int64_t j = 0; j < bytes; ++j) {
      EXPECT_EQ(exchanged[d][j], 100 * (j / block) + d * block + j % block);
    }
  }
  // shift: member c sends to (c + offset) mod n, any sign of offset.
  for (int64_t offset : {1, -1, 3, 6, -7, 0}) {
    auto shifted = Apply(CollectiveKind::kShift, n, bytes, bytes, offset);
    for (int64_t c = 0; c < n; ++c) {
      const int64_t to = (((c + offset) % n) + n) % n;
      EXPECT_EQ(shifted[to][5], 100 * c + 5) << "offset " << offset;
      EXPECT_EQ(ShiftDestination(n, c, offset), to);
      EXPECT_EQ(ShiftSource(n, to, offset), c);
    }
  }
}

TEST(P2pRouteTest, CopyPlansRefuseReductionsAndBadSizes) {
  EXPECT_FALSE(CopiesInto(CollectiveKind::kAllReduce, 4, 0, 16).ok());
  EXPECT_FALSE(CopiesInto(CollectiveKind::kAllToAll, 4, 0, 6).ok());
  EXPECT_FALSE(CopiesInto(CollectiveKind::kShift, 4, 4, 16).ok());
  EXPECT_FALSE(CopiesInto(CollectiveKind::kShift, 0, 0, 16).ok());
}

}  // namespace
}  // namespace commir::cuda::comm
