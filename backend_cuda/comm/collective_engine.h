// The collective engine: CommIR collectives on CONTIGUOUS device buffers for one group of
// mesh devices, over NCCL (one rank per mesh device) or, when group members share a GPU
// (launch mode (c)), over device-to-device copies and a reduction kernel.
//
// Calling convention (what the cuda executor does for one collective op):
//   - `group` is the ordered list of mesh device ids of the group (coordinate order,
//     docs/language.md, "Spmd-only ops"); every process calls once per group that has local members,
//     and every process visits the groups of one op in the same order.
//   - `local` lists this process's members of the group: their mesh device id, send and
//     receive pointers (on that device's GPU) and the stream to run on. The collective
//     runs after the work already queued on that stream, and work queued afterwards sees
//     its result; the host does not block (except for one-time communicator creation).
//   - `count` is the number of elements of the per-member SEND buffer; blocks are
//     contiguous and rank-major (block j of a buffer starts at element j * count / n).
//   - Buffers: send and recv must not overlap, except that AllReduce allows send == recv.
//
// Group -> communicator: the engine knows the mesh shape, so from one group it infers the
// axes that vary inside it and hence the whole partition of the mesh into groups of that
// op; communicators for all groups of a partition are split from the world communicator
// (ncclCommSplit, color = index of the group) the first time the partition is used, and
// cached. All processes must therefore issue their first collective on a partition
// together — which SPMD execution guarantees.
//
// Copy engines (EngineOptions::p2p = kCopyEngine, --p2p=ce, the default): all_gather,
// all_to_all and shift, whose data only moves, run as cudaMemcpyAsync copies on a
// transfer stream per destination member (one per local mesh device), which waits for
// events recorded on every member's stream; every member's stream then waits for the
// copies' events, so the executor's streams see the usual ordering and the copies take
// no SMs. Inside one process the copies are device-to-device (devices sharing a GPU) or
// peer copies (peer access enabled once per GPU pair). Across the processes of a
// one-node job a shift pushes into the destination process's staging buffer, shared by
// CUDA IPC handles exchanged once over the rendezvous (ipc_record.h), with 32-bit
// sequence flags written and waited for by stream memory operations
// (cuStreamWriteValue32 / cuStreamWaitValue32), so no host round trip per call; the
// receiver then copies from its staging buffer. Reductions between GPUs, every group
// across nodes, and every collective under kNccl go over NCCL (p2p_route.h has the rule).
//
// Failure and timeout: communicators are nonblocking (ncclConfig_t.blocking = 0). Every
// CUDA/NCCL error becomes a Status carrying the call, the error string and
// ncclGetLastError(). WaitAll(timeout) waits for everything issued so far; on timeout it
// aborts every communicator (ncclCommAbort) and returns DeadlineExceeded. After an abort
// or an asynchronous NCCL error the engine is unusable (every call fails).
#ifndef COMMIR_BACKEND_CUDA_COMM_COLLECTIVE_ENGINE_H_
#define COMMIR_BACKEND_CUDA_COMM_COLLECTIVE_ENGINE_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "backend_cuda/comm/launch.h"
#include "backend_cuda/comm/p2p_route.h"
#include "backend_cuda/comm/partition.h"
#include "commir/element_type.h"
#include "commir/reduction_fn.h"

namespace commir::cuda::comm {

struct MemberBuffers {
  int64_t device = 0;          // mesh device id (must be in the group and local)
  const void* send = nullptr;  // on the device's GPU
  void* recv = nullptr;        // on the device's GPU
  cudaStream_t stream = nullptr;
  // A shift may receive into a strided slot of a larger buffer: `recv_rows` runs of
  // (count * element bytes / recv_rows) bytes, the first at `recv`, each `recv_pitch`
  // bytes after the one before (cudaMemcpy2DAsync). 0 or 1: one contiguous run. Only
  // the copy-engine routes inside one process take it (NCCL and the IPC staging need
  // contiguous memory): any other route, or any other collective, is an error.
  int64_t recv_rows = 0;
  int64_t recv_pitch = 0;
};

struct EngineOptions {
  // Rendezvous for the NCCL unique id when world_size > 1: a shared file if non-empty,
  // else TCP on launch.master_addr:master_port (see rendezvous.h).
  std::string rendezvous_file;
  // Bound on communicator creation (rendezvous + init/split) and on WaitAll's default.
  absl::Duration timeout = absl::Seconds(300);
  // Copy engines inside a node, or NCCL wherever it can run (see above).
  P2pTransport p2p = P2pTransport::kCopyEngine;
  // NCCL's SM budget: ncclConfig_t.minCTAs / maxCTAs of every communicator (one CTA runs
  // on one SM), so that a model of the run can count the SMs a collective takes away
  // from compute. 0: NCCL's own choice. At most kMaxNcclCtas; min <= max when both set.
  int nccl_min_ctas = 0;
  int nccl_max_ctas = 0;
};

// NCCL 2.28 runs at most 64 channels (MAXCHANNELS), one CTA each.
inline constexpr int kMaxNcclCtas = 64;

class CollectiveEngine {
 public:
  // mesh_shape: the axis sizes of the mesh (row-major device numbering); its product
  // must equal plan.mesh_size. Cheap: communicators are created on first use.
  static absl::StatusOr<std::unique_ptr<CollectiveEngine>> Create(
      const LaunchInfo& launch, const DevicePlan& plan, std::vector<int64_t> mesh_shape,
      EngineOptions options);
  ~CollectiveEngine();  // destroys communicators (aborts them if work is pending)
  CollectiveEngine(const CollectiveEngine&) = delete;
  CollectiveEngine& operator=(const CollectiveEngine&) = delete;

  // recv (n * count elements) = the members' send buffers concatenated in group order.
  absl::Status AllGather(absl::Span<const int64_t> group, absl::Span<const MemberBuffers> local,
                         int64_t count, ElementType type);
  // send has count = n * block elements; member c receives (count / n elements) the
  // reduction of block c over all members. count % n == 0.
  absl::Status ReduceScatter(absl::Span<const int64_t> group,
                             absl::Span<const MemberBuffers> local, int64_t count,
                             ElementType type, ReductionFn op);
  // recv (count elements) = the reduction over all members.
  absl::Status AllReduce(absl::Span<const int64_t> group, absl::Span<const MemberBuffers> local,
                         int64_t count, ElementType type, ReductionFn op);
  // send block j (count / n elements) goes to member j; recv block i comes from member i.
  absl::Status AllToAll(absl::Span<const int64_t> group, absl::Span<const MemberBuffers> local,
                        int64_t count, ElementType type);
  // Member c sends its count elements to member (c + offset) mod n and receives those of
  // member (c - offset) mod n. Any offset, negative too.
  absl::Status Shift(absl::Span<const int64_t> group, absl::Span<const MemberBuffers> local,
                     int64_t count, ElementType type, int64_t offset);

  // Blocks the host until all collectives issued so far (on every stream used) have
  // finished, polling so that a hung collective becomes DeadlineExceeded (communicators
  // are aborted) and an asynchronous NCCL failure becomes Unavailable.
  absl::Status WaitAll(absl::Duration timeout);
  // Same, with the timeout of EngineOptions.
  absl::Status WaitAll();

  // How a collective over `group` runs here (for tests, benchmarks and logs).
  Route RouteOf(CollectiveKind kind, absl::Span<const int64_t> group) const;

  // Inferred partition of the mesh for a group (exposed for tests): every group of the
  // partition, each in coordinate order, ordered by first member.
  absl::StatusOr<std::vector<std::vector<int64_t>>> PartitionOf(
      absl::Span<const int64_t> group) const;

  class Impl;

 private:
  explicit CollectiveEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace commir::cuda::comm

#endif  // COMMIR_BACKEND_CUDA_COMM_COLLECTIVE_ENGINE_H_
