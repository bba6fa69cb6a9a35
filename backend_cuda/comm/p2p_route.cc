#include "backend_cuda/comm/p2p_route.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace commir::cuda::comm {

absl::StatusOr<P2pTransport> ParseP2pTransport(absl::string_view text) {
  if (text == "ce") return P2pTransport::kCopyEngine;
  if (text == "nccl") return P2pTransport::kNccl;
  return absl::InvalidArgumentError(
      absl::StrFormat("--p2p must be ce or nccl, got '%s'", text));
}

absl::string_view P2pTransportName(P2pTransport transport) {
  return transport == P2pTransport::kCopyEngine ? "ce" : "nccl";
}

absl::string_view CollectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
    case CollectiveKind::kShift:
      return "shift";
  }
  return "collective";
}

bool IsCopyOnly(CollectiveKind kind) {
  return kind == CollectiveKind::kAllGather || kind == CollectiveKind::kAllToAll ||
         kind == CollectiveKind::kShift;
}

absl::string_view RouteName(Route route) {
  switch (route) {
    case Route::kMemberStreamCopies:
      return "copies on the members' streams";
    case Route::kCopyEngine:
      return "copy engines (transfer streams)";
    case Route::kCopyEngineIpc:
      return "copy engines over CUDA IPC";
    case Route::kNccl:
      return "NCCL";
    case Route::kUnsupported:
      return "unsupported";
  }
  return "unknown";
}

Route ChooseRoute(const RouteQuery& q) {
  const bool ce = q.p2p == P2pTransport::kCopyEngine && IsCopyOnly(q.kind);
  if (q.all_local) {
    if (ce) return Route::kCopyEngine;
    return q.shares_gpus ? Route::kMemberStreamCopies : Route::kNccl;
  }
  if (q.shares_gpus) return Route::kUnsupported;
  // Across processes: IPC needs every process on one node (handles are node-local), and
  // only shift has the staging protocol; the rest, and every group across nodes, is NCCL.
  if (ce && q.kind == CollectiveKind::kShift && q.num_nodes == 1) return Route::kCopyEngineIpc;
  return Route::kNccl;
}

int64_t ShiftSource(int64_t n, int64_t position, int64_t offset) {
  const int64_t off = ((offset % n) + n) % n;
  return (position - off + n) % n;
}

int64_t ShiftDestination(int64_t n, int64_t position, int64_t offset) {
  const int64_t off = ((offset % n) + n) % n;
  return (position + off) % n;
}

absl::StatusOr<std::vector<CopyStep>> CopiesInto(CollectiveKind kind, int64_t n, int64_t dst,
                                                 int64_t send_bytes, int64_t offset) {
  if (n < 1 || dst < 0 || dst >= n || send_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "copy plan: member %d of %d with %d bytes is out of range", dst, n, send_bytes));
  }
  std::vector<CopyStep> steps;
  switch (kind) {
    case CollectiveKind::kAllGather:
      for (int64_t s = 0; s < n; ++s) steps.push_back({dst, s * send_bytes, s, 0, send_bytes});
      break;
    case CollectiveKind::kAllToAll: {
      if (send_bytes % n != 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("all_to_all: %d bytes do not split into %d blocks", send_bytes, n));
      }
      const int64_t block = send_bytes / n;
      for (int64_t s = 0; s < n; ++s) steps.push_back({dst, s * block, s, dst * block, block});
      break;
    }
    case CollectiveKind::kShift:
      steps.push_back({dst, 0, ShiftSource(n, dst, offset), 0, send_bytes});
      break;
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s reduces: it is not a plan of copies", CollectiveKindName(kind)));
  }
  return steps;
}

}  // namespace commir::cuda::comm
