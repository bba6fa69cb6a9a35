// How a collective's data moves (plain C++, unit-tested without CUDA): over NCCL, or over
// copy engines (cudaMemcpyAsync on a transfer stream, ordered with events; across the
// processes of one node through CUDA IPC staging buffers), chosen by --p2p=ce|nccl and
// where the group's members live; and which copies a copy-only collective is made of.
#ifndef COMMIR_BACKEND_CUDA_COMM_P2P_ROUTE_H_
#define COMMIR_BACKEND_CUDA_COMM_P2P_ROUTE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace commir::cuda::comm {

// --p2p: ce (copy engines inside a node, NCCL across nodes and for reductions between
// GPUs) or nccl (NCCL wherever NCCL can run: the behaviour before copy engines).
enum class P2pTransport { kCopyEngine, kNccl };
absl::StatusOr<P2pTransport> ParseP2pTransport(absl::string_view text);  // "ce" | "nccl"
absl::string_view P2pTransportName(P2pTransport transport);

enum class CollectiveKind { kAllGather, kReduceScatter, kAllReduce, kAllToAll, kShift };
absl::string_view CollectiveKindName(CollectiveKind kind);
// all_gather, all_to_all and shift only move bytes; the others also reduce.
bool IsCopyOnly(CollectiveKind kind);

enum class Route {
  // Members share GPUs, all in this process, --p2p=nccl (or a reduction): copies and the
  // reduction kernel on the members' own streams (NCCL cannot run two ranks on one GPU).
  kMemberStreamCopies,
  // All members in this process: copies on each destination's transfer stream, after
  // events of every member's stream, which in turn wait for the copies.
  kCopyEngine,
  // A shift across processes of one node: each member pushes into its destination's
  // IPC-shared staging buffer and signals it with stream memory operations.
  kCopyEngineIpc,
  kNccl,
  // Members share GPUs and span processes: nothing can run it.
  kUnsupported,
};
absl::string_view RouteName(Route route);

struct RouteQuery {
  CollectiveKind kind = CollectiveKind::kShift;
  P2pTransport p2p = P2pTransport::kCopyEngine;
  bool all_local = true;    // every member of the group is driven by this process
  bool shares_gpus = false;  // some GPU runs more than one mesh device (launch mode (c))
  int num_nodes = 1;        // nodes of the job (LaunchInfo::num_nodes)
};
// The same answer on every process for the same op (SPMD): it depends on the query only.
Route ChooseRoute(const RouteQuery& query);

// One copy of a copy-only collective: `bytes` from member `src` (position in the group)
// at byte `src_offset` of its send buffer to member `dst` at `dst_offset` of its receive
// buffer.
struct CopyStep {
  int64_t dst = 0;
  int64_t dst_offset = 0;
  int64_t src = 0;
  int64_t src_offset = 0;
  int64_t bytes = 0;
};
// The copies that make member `dst`'s receive buffer, in the order they are issued.
// send_bytes: the per-member send buffer (divisible by n for all_to_all); offset: the
// shift's offset (any sign). InvalidArgument for a reduction or a bad size.
absl::StatusOr<std::vector<CopyStep>> CopiesInto(CollectiveKind kind, int64_t n, int64_t dst,
                                                 int64_t send_bytes, int64_t offset = 0);

// The member a shift's member `position` receives from: (position - offset) mod n.
int64_t ShiftSource(int64_t n, int64_t position, int64_t offset);
int64_t ShiftDestination(int64_t n, int64_t position, int64_t offset);

}  // namespace commir::cuda::comm

#endif  // COMMIR_BACKEND_CUDA_COMM_P2P_ROUTE_H_
