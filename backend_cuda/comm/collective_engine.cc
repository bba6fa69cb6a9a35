#include "backend_cuda/comm/collective_engine.h"

#include <cuda.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "backend_cuda/comm/comm_status.h"
#include "backend_cuda/comm/ipc_record.h"
#include "backend_cuda/comm/ipc_shift_plan.h"
#include "backend_cuda/comm/p2p_route.h"
#include "backend_cuda/comm/rendezvous.h"
#include "backend_cuda/kernels/dtype.h"
#include "backend_cuda/kernels/elementwise.h"

namespace commir::cuda::comm {
namespace {

namespace ck = ::commir::cuda_kernels;

// KDType mirrors ElementType enumerator for enumerator (kernels/dtype.h).
static_assert(static_cast<int>(ck::KDType::kI1) == static_cast<int>(ElementType::kI1));
static_assert(static_cast<int>(ck::KDType::kBF16) == static_cast<int>(ElementType::kBF16));
ck::KDType KType(ElementType type) { return static_cast<ck::KDType>(type); }

ncclDataType_t NcclType(ElementType type) {
  switch (type) {
    case ElementType::kF64:
      return ncclFloat64;
    case ElementType::kF32:
      return ncclFloat32;
    case ElementType::kF16:
      return ncclFloat16;
    case ElementType::kBF16:
      return ncclBfloat16;
    case ElementType::kI64:
      return ncclInt64;
    case ElementType::kI32:
      return ncclInt32;
    case ElementType::kI1:
      return ncclUint8;  // one byte holding 0 or 1
  }
  return ncclUint8;
}

// i1 values are 0/1 bytes: their sum is a logical or (spec), which is max on bytes.
ncclRedOp_t NcclOp(ReductionFn op, ElementType type) {
  switch (op) {
    case ReductionFn::kSum:
      return type == ElementType::kI1 ? ncclMax : ncclSum;
    case ReductionFn::kMax:
      return ncclMax;
    case ReductionFn::kMin:
      return ncclMin;
    case ReductionFn::kMean:
      break;  // no collective computes a mean (the verifier's `reduce` values)
  }
  return ncclSum;
}

// Restores the calling thread's current device when it goes out of scope: the executor
// keeps its own notion of the current device.
class DeviceGuard {
 public:
  DeviceGuard() {
    if (cudaGetDevice(&saved_) != cudaSuccess) saved_ = -1;
  }
  ~DeviceGuard() {
    if (saved_ >= 0) cudaSetDevice(saved_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int saved_ = -1;
};

// cudaEventQuery that does not leave cudaErrorNotReady behind as the thread's last error
// (the runtime records it, and the kernel launchers of the executor return
// cudaGetLastError(), so a pending event seen here would fail the next launch).
cudaError_t QueryEvent(cudaEvent_t event) {
  const cudaError_t state = cudaEventQuery(event);
  if (state == cudaErrorNotReady) cudaGetLastError();
  return state;
}

using Kind = CollectiveKind;
absl::string_view KindName(Kind kind) { return CollectiveKindName(kind); }

struct Request {
  Kind kind;
  absl::Span<const int64_t> group;
  absl::Span<const MemberBuffers> local;
  int64_t count;
  ElementType type;
  ReductionFn op = ReductionFn::kSum;
  int64_t offset = 0;
};

// Elements each member receives.
int64_t RecvCount(const Request& r, int64_t n) {
  switch (r.kind) {
    case Kind::kAllGather:
      return r.count * n;
    case Kind::kReduceScatter:
      return r.count / n;
    default:
      return r.count;
  }
}

bool Overlap(const char* a, int64_t a_bytes, const char* b, int64_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

// One local member of a group, resolved.
struct Member {
  int64_t device;
  int position;     // coordinate in the group
  int local_index;  // into DevicePlan::local
  int gpu;
  const char* send;
  char* recv;
  cudaStream_t stream;
  int64_t recv_rows = 1;   // a shift's strided slot (MemberBuffers): runs of
  int64_t recv_pitch = 0;  // recv bytes / recv_rows, recv_pitch bytes apart
};

// Copies `bytes` between two GPUs' memory on `stream` (which belongs to dst_gpu).
absl::Status CopyOnStream(char* dst, int dst_gpu, const char* src, int src_gpu, int64_t bytes,
                          cudaStream_t stream) {
  if (bytes == 0) return absl::OkStatus();
  if (dst_gpu == src_gpu) {
    COMMIR_COMM_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream),
                     "cudaMemcpyAsync (collective copy)");
  } else {
    COMMIR_COMM_CUDA(cudaMemcpyPeerAsync(dst, dst_gpu, src, src_gpu, bytes, stream),
                     "cudaMemcpyPeerAsync (collective copy)");
  }
  return absl::OkStatus();
}

// Copies `bytes` from a contiguous buffer into `rows` runs of bytes / rows, `pitch` bytes
// apart, at dst (one contiguous copy when rows <= 1), on `stream` (dst_gpu's). Peer
// access between the two GPUs is enabled (unified addressing: cudaMemcpyDefault).
absl::Status CopyIntoRowsOnStream(char* dst, int dst_gpu, int64_t rows, int64_t pitch,
                                  const char* src, int src_gpu, int64_t bytes,
                                  cudaStream_t stream) {
  if (rows <= 1) return CopyOnStream(dst, dst_gpu, src, src_gpu, bytes, stream);
  if (bytes == 0) return absl::OkStatus();
  const int64_t width = bytes / rows;
  COMMIR_COMM_CUDA(cudaMemcpy2DAsync(dst, pitch, src, width, width, rows,
                                     dst_gpu == src_gpu ? cudaMemcpyDeviceToDevice
                                                        : cudaMemcpyDefault,
                                     stream),
                   "cudaMemcpy2DAsync (shift into a strided slot)");
  return absl::OkStatus();
}

}  // namespace

class CollectiveEngine::Impl {
 public:
  Impl(LaunchInfo launch, DevicePlan plan, std::vector<int64_t> mesh_shape,
       EngineOptions options)
      : launch_(std::move(launch)),
        plan_(std::move(plan)),
        mesh_shape_(std::move(mesh_shape)),
        options_(std::move(options)),
        events_(plan_.local.size()),
        transfer_(plan_.local.size(), nullptr),
        ipc_sequence_(plan_.local.size(), 0) {}

  ~Impl() {
    DeviceGuard guard;
    // Destroying a communicator with work in flight can hang; abort instead.
    bool idle = true;
    for (const auto& [stream, entry] : last_event_) {
      if (QueryEvent(entry.event) != cudaSuccess) idle = false;
    }
    if (!idle || !broken_.ok()) {
      AbortAll();
    } else {
      for (auto& [first_group, comms] : split_) {
        for (ncclComm_t comm : comms) {
          if (comm != nullptr) ncclCommDestroy(comm);
        }
      }
      for (ncclComm_t comm : world_) {
        if (comm != nullptr) ncclCommDestroy(comm);
      }
    }
    for (const auto& [stream, entry] : last_event_) cudaEventDestroy(entry.event);
    for (const LocalEvents& e : events_) {
      if (e.ready != nullptr) cudaEventDestroy(e.ready);
      if (e.done != nullptr) cudaEventDestroy(e.done);
      if (e.transfer_done != nullptr) cudaEventDestroy(e.transfer_done);
    }
    // Transfer streams are released once their work is done. A staging buffer is freed
    // only when everything finished: after a failure a transfer stream may still wait
    // for a peer's flag, and freeing would wait with it.
    for (size_t i = 0; i < transfer_.size(); ++i) {
      if (transfer_[i] == nullptr) continue;
      cudaSetDevice(plan_.local[i].gpu);
      cudaStreamDestroy(transfer_[i]);
    }
    if (idle && broken_.ok()) ReleaseIpc();
  }

  const std::vector<int64_t>& mesh_shape() const { return mesh_shape_; }
  absl::Duration default_timeout() const { return options_.timeout; }

  absl::Status Run(const Request& request) {
    if (!broken_.ok()) return broken_;
    absl::StatusOr<std::vector<std::vector<int64_t>>> partition =
        InferPartition(mesh_shape_, request.group);
    if (!partition.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: %s", KindName(request.kind), partition.status().message()));
    }
    absl::StatusOr<std::vector<Member>> members = Resolve(request);
    if (!members.ok()) return members.status();
    if (request.count == 0 || members->empty()) return absl::OkStatus();
    DeviceGuard guard;
    const int64_t n = static_cast<int64_t>(request.group.size());
    if (n == 1) return RunSingleton(request, *members);
    const Route route = RouteFor(request.kind, static_cast<int64_t>(members->size()) == n);
    for (const Member& m : *members) {
      if (m.recv_rows > 1 && route != Route::kCopyEngine && route != Route::kMemberStreamCopies) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "shift over devices [%s]: a strided receive buffer needs a copy-engine route "
            "inside one process, not %s (which needs contiguous memory)",
            absl::StrJoin(request.group, ","), RouteName(route)));
      }
    }
    switch (route) {
      case Route::kUnsupported:
        return absl::FailedPreconditionError(absl::StrFormat(
            "%s over devices [%s] spans processes while mesh devices share GPUs (%s); this "
            "is not supported: run one process per GPU with one mesh device each, or a "
            "single process",
            KindName(request.kind), absl::StrJoin(request.group, ","), plan_.DebugString()));
      case Route::kMemberStreamCopies:
        return RunCopies(request, *members);
      case Route::kCopyEngine:
        return RunCopyEngine(request, *members);
      case Route::kCopyEngineIpc:
        return RunIpcShift(request, *members);
      case Route::kNccl:
        break;
    }
    return RunNccl(request, *members, *partition);
  }

  Route RouteFor(Kind kind, bool all_local) const {
    return ChooseRoute(RouteQuery{kind, options_.p2p, all_local, plan_.shares_gpus(),
                                  launch_.num_nodes});
  }

  const DevicePlan& plan() const { return plan_; }

  absl::Status WaitAll(absl::Duration timeout) {
    if (!broken_.ok()) return broken_;
    const absl::Time deadline = absl::Now() + timeout;
    absl::Duration backoff = absl::Microseconds(10);
    while (true) {
      bool done = true;
      for (const auto& [stream, entry] : last_event_) {
        cudaError_t q = QueryEvent(entry.event);
        if (q == cudaErrorNotReady) {
          done = false;
        } else if (q != cudaSuccess) {
          return Fail(CommCudaStatus(q, "a stream running collectives"));
        }
      }
      COMMIR_COMM_RETURN_IF_ERROR(CheckAsyncErrors());
      if (done) return absl::OkStatus();
      if (absl::Now() >= deadline) {
        return Fail(absl::DeadlineExceededError(absl::StrFormat(
            "collectives (or the work they wait for) did not finish within %s (--timeout): "
            "a peer process may be missing, stuck or issuing different collectives; NCCL "
            "communicators were aborted",
            absl::FormatDuration(timeout))));
      }
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Milliseconds(1));
    }
  }

 private:
  struct LocalEvents {
    cudaEvent_t ready = nullptr;
    cudaEvent_t done = nullptr;
    cudaEvent_t transfer_done = nullptr;  // after a device's copy-engine transfers
  };
  // One staging allocation of this process and the peers' ones it opened (ipc_record.h).
  struct IpcStaging {
    char* own = nullptr;
    int gpu = 0;
    std::vector<char*> base;  // by rank: an opened peer allocation, or `own`
  };
  struct StreamEvent {
    int gpu;
    cudaEvent_t event;
  };

  // Checks the request against the plan and the group; returns the local members sorted by
  // position in the group.
  absl::StatusOr<std::vector<Member>> Resolve(const Request& r) {
    const int64_t n = static_cast<int64_t>(r.group.size());
    auto error = [&](std::string message) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s over devices [%s]: %s", KindName(r.kind), absl::StrJoin(r.group, ","), message));
    };
    if (r.count < 0) return error("negative element count");
    if ((r.kind == Kind::kReduceScatter || r.kind == Kind::kAllToAll) && r.count % n != 0) {
      return error(absl::StrFormat("%d elements do not split into %d blocks", r.count, n));
    }
    int64_t local_in_group = 0;
    for (int64_t device : r.group) local_in_group += plan_.IsLocal(device) ? 1 : 0;
    if (static_cast<int64_t>(r.local.size()) != local_in_group) {
      return error(absl::StrFormat(
          "this process drives %d of the group's devices but %d buffers were given",
          local_in_group, r.local.size()));
    }
    const int64_t esize = ElementTypeByteWidth(r.type);
    const int64_t send_bytes = r.count * esize;
    const int64_t recv_bytes = RecvCount(r, n) * esize;
    std::vector<Member> members;
    for (const MemberBuffers& b : r.local) {
      auto it = std::find(r.group.begin(), r.group.end(), b.device);
      if (it == r.group.end()) {
        return error(absl::StrFormat("device %d is not in the group", b.device));
      }
      int local_index = plan_.LocalIndex(b.device);
      if (local_index < 0) {
        return error(absl::StrFormat("device %d is not driven by this process", b.device));
      }
      for (const Member& m : members) {
        if (m.device == b.device) return error(absl::StrFormat("device %d given twice", b.device));
      }
      const char* send = static_cast<const char*>(b.send);
      char* recv = static_cast<char*>(b.recv);
      if (r.count > 0 && (send == nullptr || recv == nullptr)) {
        return error(absl::StrFormat("null buffer for device %d", b.device));
      }
      int64_t recv_extent = recv_bytes;
      if (b.recv_rows > 1) {
        if (r.kind != Kind::kShift) {
          return error(absl::StrFormat("a strided receive buffer (device %d) is for shifts only",
                                       b.device));
        }
        if (recv_bytes % b.recv_rows != 0 || b.recv_pitch < recv_bytes / b.recv_rows) {
          return error(absl::StrFormat(
              "device %d's strided receive buffer of %d runs %d bytes apart does not hold %d "
              "bytes",
              b.device, b.recv_rows, b.recv_pitch, recv_bytes));
        }
        recv_extent = (b.recv_rows - 1) * b.recv_pitch + recv_bytes / b.recv_rows;
      }
      bool in_place_ok = r.kind == Kind::kAllReduce && send == recv;
      if (r.count > 0 && !in_place_ok && Overlap(send, send_bytes, recv, recv_extent)) {
        return error(absl::StrFormat("send and receive buffers of device %d overlap", b.device));
      }
      members.push_back(Member{b.device, static_cast<int>(it - r.group.begin()), local_index,
                               plan_.local[local_index].gpu, send, recv, b.stream,
                               std::max<int64_t>(b.recv_rows, 1), b.recv_pitch});
    }
    std::sort(members.begin(), members.end(),
              [](const Member& a, const Member& b) { return a.position < b.position; });
    return members;
  }

  // A one-member group: every collective is the identity.
  absl::Status RunSingleton(const Request& r, const std::vector<Member>& members) {
    const Member& m = members[0];
    if (m.send != m.recv) {
      COMMIR_COMM_CUDA(cudaSetDevice(m.gpu), "cudaSetDevice");
      COMMIR_COMM_RETURN_IF_ERROR(CopyIntoRowsOnStream(m.recv, m.gpu, m.recv_rows, m.recv_pitch,
                                                       m.send, m.gpu,
                                                       r.count * ElementTypeByteWidth(r.type),
                                                       m.stream));
    }
    return MarkIssued(members);
  }

  // ---- NCCL path -----------------------------------------------------------------------

  absl::Status RunNccl(const Request& r, const std::vector<Member>& members,
                       const std::vector<std::vector<int64_t>>& partition) {
    absl::StatusOr<std::vector<ncclComm_t>*> comms = CommsFor(r.group, partition);
    if (!comms.ok()) return comms.status();
    const int64_t n = static_cast<int64_t>(r.group.size());
    const ncclDataType_t dt = NcclType(r.type);
    const int64_t esize = ElementTypeByteWidth(r.type);
    std::vector<ncclComm_t> used;
    absl::Status status;
    ncclResult_t result = ncclGroupStart();
    if (result != ncclSuccess) return Fail(NcclStatus(result, nullptr, "ncclGroupStart"));
    for (const Member& m : members) {
      ncclComm_t comm = (**comms)[m.local_index];
      used.push_back(comm);
      if (cudaError_t e = cudaSetDevice(m.gpu); e != cudaSuccess) {
        status = CommCudaStatus(e, "cudaSetDevice");
        break;
      }
      const size_t count = static_cast<size_t>(r.count);
      switch (r.kind) {
        case Kind::kAllGather:
          result = ncclAllGather(m.send, m.recv, count, dt, comm, m.stream);
          break;
        case Kind::kReduceScatter:
          result = ncclReduceScatter(m.send, m.recv, count / n, dt, NcclOp(r.op, r.type), comm,
                                     m.stream);
          break;
        case Kind::kAllReduce:
          result = ncclAllReduce(m.send, m.recv, count, dt, NcclOp(r.op, r.type), comm, m.stream);
          break;
        case Kind::kAllToAll: {
          const size_t block = count / n;
          for (int64_t j = 0; j < n && (result == ncclSuccess || result == ncclInProgress); ++j) {
            result = ncclSend(m.send + j * block * esize, block, dt, static_cast<int>(j), comm,
                              m.stream);
            if (result != ncclSuccess && result != ncclInProgress) break;
            result = ncclRecv(m.recv + j * block * esize, block, dt, static_cast<int>(j), comm,
                              m.stream);
          }
          break;
        }
        case Kind::kShift: {
          const int64_t off = ((r.offset % n) + n) % n;
          if (off == 0) {
            result = ncclSuccess;
            status = CopyOnStream(m.recv, m.gpu, m.send, m.gpu, r.count * esize, m.stream);
            break;
          }
          result = ncclSend(m.send, count, dt, static_cast<int>((m.position + off) % n), comm,
                            m.stream);
          if (result != ncclSuccess && result != ncclInProgress) break;
          result = ncclRecv(m.recv, count, dt, static_cast<int>((m.position - off + n) % n), comm,
                            m.stream);
          break;
        }
      }
      if (!status.ok()) break;
      if (result != ncclSuccess && result != ncclInProgress) {
        status = NcclStatus(result, comm, absl::StrFormat("%s on device %d", KindName(r.kind),
                                                          m.device));
        break;
      }
    }
    // The group must be closed even after a failure inside it.
    ncclResult_t end = ncclGroupEnd();
    if (!status.ok()) return Fail(status);
    if (end != ncclSuccess && end != ncclInProgress) {
      return Fail(NcclStatus(end, used.empty() ? nullptr : used[0],
                             absl::StrFormat("ncclGroupEnd (%s)", KindName(r.kind))));
    }
    // Nonblocking communicators may still be enqueueing the kernels; later work on these
    // streams must be queued behind them, so wait (host side only) until they are.
    COMMIR_COMM_RETURN_IF_ERROR(WaitReady(used, KindName(r.kind)));
    return MarkIssued(members);
  }

  // Communicators (indexed like plan_.local) for the partition `group` belongs to.
  absl::StatusOr<std::vector<ncclComm_t>*> CommsFor(
      absl::Span<const int64_t> group, const std::vector<std::vector<int64_t>>& partition) {
    COMMIR_COMM_RETURN_IF_ERROR(EnsureWorld());
    // The world communicator's ranks are device ids: it serves a whole-mesh group only
    // when the group lists the devices in ascending order (an axis group such as
    // (tp, dp) on a (dp, tp) mesh does not, and needs ranks in its own order).
    bool identity = partition.size() == 1;
    for (size_t p = 0; identity && p < group.size(); ++p) {
      identity = group[p] == static_cast<int64_t>(p);
    }
    if (identity) return &world_;
    // Keyed by the first group, which fixes both the axes and their order (the axes mask
    // alone would confuse (dp, tp) with (tp, dp)).
    const std::vector<int64_t>& key_group = partition.front();
    if (auto it = split_.find(key_group); it != split_.end()) return &it->second;

    // Every device of the mesh takes part in the split with its group's color; all
    // processes reach this point at the same op (SPMD), so the collective split completes.
    std::vector<int> color(plan_.mesh_size), key(plan_.mesh_size);
    for (size_t g = 0; g < partition.size(); ++g) {
      for (size_t p = 0; p < partition[g].size(); ++p) {
        color[partition[g][p]] = static_cast<int>(g);
        key[partition[g][p]] = static_cast<int>(p);
      }
    }
    std::vector<ncclComm_t> comms(plan_.local.size(), nullptr);
    ncclConfig_t config = Config();
    absl::Status status;
    ncclResult_t result = ncclGroupStart();
    if (result != ncclSuccess) return Fail(NcclStatus(result, nullptr, "ncclGroupStart"));
    for (size_t i = 0; i < plan_.local.size(); ++i) {
      const LocalDevice& d = plan_.local[i];
      if (cudaError_t e = cudaSetDevice(d.gpu); e != cudaSuccess) {
        status = CommCudaStatus(e, "cudaSetDevice");
        break;
      }
      result = ncclCommSplit(world_[i], color[d.mesh_device], key[d.mesh_device], &comms[i],
                             &config);
      if (result != ncclSuccess && result != ncclInProgress) {
        status = NcclStatus(result, world_[i], "ncclCommSplit");
        break;
      }
    }
    ncclResult_t end = ncclGroupEnd();
    split_[key_group] = comms;  // registered first so that Fail() aborts them too
    if (!status.ok()) return Fail(status);
    if (end != ncclSuccess && end != ncclInProgress) {
      return Fail(NcclStatus(end, nullptr, "ncclGroupEnd (ncclCommSplit)"));
    }
    std::vector<ncclComm_t> wait = comms;
    wait.insert(wait.end(), world_.begin(), world_.end());
    COMMIR_COMM_RETURN_IF_ERROR(WaitReady(wait, "ncclCommSplit"));
    return &split_[key_group];
  }

  ncclConfig_t Config() const {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // so that a hung peer becomes a timeout, not a hang
    // The SM budget (--nccl-ctas): left unset, NCCL picks by topology and size.
    if (options_.nccl_min_ctas > 0) config.minCTAs = options_.nccl_min_ctas;
    if (options_.nccl_max_ctas > 0) config.maxCTAs = options_.nccl_max_ctas;
    return config;
  }

  // The world communicator: one NCCL rank per mesh device (rank = device id).
  absl::Status EnsureWorld() {
    if (!world_.empty()) return absl::OkStatus();
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    if (launch_.rank == 0) {
      ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) return Fail(NcclStatus(r, nullptr, "ncclGetUniqueId"));
    }
    if (launch_.world_size > 1) {
      RendezvousOptions rdv;
      rdv.file_path = options_.rendezvous_file;
      rdv.master_addr = launch_.master_addr;
      rdv.master_port = launch_.rendezvous_port;
      rdv.rank = launch_.rank;
      rdv.world_size = launch_.world_size;
      rdv.timeout = options_.timeout;
      absl::StatusOr<std::string> blob = BroadcastFromRankZero(
          rdv, launch_.rank == 0 ? absl::string_view(id.internal, sizeof(id.internal))
                                 : absl::string_view());
      if (!blob.ok()) {
        return Fail(absl::Status(blob.status().code(),
                                 absl::StrFormat("exchanging the NCCL id (%s): %s",
                                                 launch_.DebugString(), blob.status().message())));
      }
      if (blob->size() != sizeof(id.internal)) {
        return Fail(absl::DataLossError(absl::StrFormat(
            "exchanging the NCCL id: got %d bytes, expected %d", blob->size(),
            sizeof(id.internal))));
      }
      std::memcpy(id.internal, blob->data(), sizeof(id.internal));
    }
    std::vector<ncclComm_t> comms(plan_.local.size(), nullptr);
    ncclConfig_t config = Config();
    absl::Status status;
    ncclResult_t result = ncclGroupStart();
    if (result != ncclSuccess) return Fail(NcclStatus(result, nullptr, "ncclGroupStart"));
    for (size_t i = 0; i < plan_.local.size(); ++i) {
      const LocalDevice& d = plan_.local[i];
      if (cudaError_t e = cudaSetDevice(d.gpu); e != cudaSuccess) {
        status = CommCudaStatus(e, "cudaSetDevice");
        break;
      }
      result = ncclCommInitRankConfig(&comms[i], static_cast<int>(plan_.mesh_size), id,
                                      static_cast<int>(d.mesh_device), &config);
      if (result != ncclSuccess && result != ncclInProgress) {
        status = NcclStatus(result, comms[i], "ncclCommInitRankConfig");
        break;
      }
    }
    ncclResult_t end = ncclGroupEnd();
    world_ = comms;
    if (!status.ok()) return Fail(status);
    if (end != ncclSuccess && end != ncclInProgress) {
      return Fail(NcclStatus(end, nullptr, "ncclGroupEnd (ncclCommInitRankConfig)"));
    }
    return WaitReady(world_, "creating the NCCL communicator");
  }

  // Polls nonblocking communicators until none is ncclInProgress, within the timeout.
  absl::Status WaitReady(absl::Span<const ncclComm_t> comms, absl::string_view what) {
    const absl::Time deadline = absl::Now() + options_.timeout;
    absl::Duration backoff = absl::Microseconds(5);
    while (true) {
      bool ready = true;
      for (ncclComm_t comm : comms) {
        if (comm == nullptr) continue;
        ncclResult_t state = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(comm, &state);
        if (r != ncclSuccess) return Fail(NcclStatus(r, comm, "ncclCommGetAsyncError"));
        if (state == ncclInProgress) {
          ready = false;
        } else if (state != ncclSuccess) {
          return Fail(NcclStatus(state, comm, what));
        }
      }
      if (ready) return absl::OkStatus();
      if (absl::Now() >= deadline) {
        return Fail(absl::DeadlineExceededError(absl::StrFormat(
            "NCCL: %s did not complete within %s (is every process of the job running and "
            "reachable? %s); communicators were aborted",
            what, absl::FormatDuration(options_.timeout), launch_.DebugString())));
      }
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Milliseconds(1));
    }
  }

  absl::Status CheckAsyncErrors() {
    auto check = [&](ncclComm_t comm) -> absl::Status {
      if (comm == nullptr) return absl::OkStatus();
      ncclResult_t state = ncclSuccess;
      ncclResult_t r = ncclCommGetAsyncError(comm, &state);
      if (r != ncclSuccess) return NcclStatus(r, comm, "ncclCommGetAsyncError");
      if (state != ncclSuccess && state != ncclInProgress) {
        return NcclStatus(state, comm, "a collective (asynchronous error)");
      }
      return absl::OkStatus();
    };
    for (ncclComm_t comm : world_) {
      if (absl::Status s = check(comm); !s.ok()) return Fail(s);
    }
    for (const auto& [first_group, comms] : split_) {
      for (ncclComm_t comm : comms) {
        if (absl::Status s = check(comm); !s.ok()) return Fail(s);
      }
    }
    return absl::OkStatus();
  }

  // Aborts every communicator and makes the engine unusable; returns `status`.
  absl::Status Fail(absl::Status status) {
    AbortAll();
    if (broken_.ok()) broken_ = status;
    return status;
  }

  void AbortAll() {
    for (auto& [first_group, comms] : split_) {
      for (ncclComm_t& comm : comms) {
        if (comm != nullptr) ncclCommAbort(comm);
        comm = nullptr;
      }
    }
    for (ncclComm_t& comm : world_) {
      if (comm != nullptr) ncclCommAbort(comm);
      comm = nullptr;
    }
  }

  // Records, per stream, an event after the collective so that WaitAll can poll it.
  // Keyed by (gpu, stream): the null stream means a different stream on every GPU.
  absl::Status MarkIssued(const std::vector<Member>& members) {
    for (const Member& m : members) {
      COMMIR_COMM_CUDA(cudaSetDevice(m.gpu), "cudaSetDevice");
      auto key = std::make_pair(m.gpu, m.stream);
      auto it = last_event_.find(key);
      if (it == last_event_.end()) {
        cudaEvent_t event;
        COMMIR_COMM_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                         "cudaEventCreate");
        it = last_event_.emplace(key, StreamEvent{m.gpu, event}).first;
      }
      COMMIR_COMM_CUDA(cudaEventRecord(it->second.event, m.stream), "cudaEventRecord");
    }
    return absl::OkStatus();
  }

  // ---- Same-GPU / copy path (mode (c)) ----------------------------------------------------

  absl::StatusOr<cudaEvent_t> LocalEvent(const Member& m, bool done) {
    LocalEvents& e = events_[m.local_index];
    cudaEvent_t& event = done ? e.done : e.ready;
    if (event == nullptr) {
      COMMIR_COMM_CUDA(cudaSetDevice(m.gpu), "cudaSetDevice");
      COMMIR_COMM_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                       "cudaEventCreate");
    }
    return event;
  }

  // Every member's stream waits for the work queued so far on every other member's
  // stream. (A wait captures the event's latest record when it is issued, so the two
  // events per device can be re-recorded at the next barrier.)
  absl::Status Barrier(const std::vector<Member>& members, bool done) {
    std::vector<cudaEvent_t> events;
    for (const Member& m : members) {
      absl::StatusOr<cudaEvent_t> event = LocalEvent(m, done);
      if (!event.ok()) return event.status();
      COMMIR_COMM_CUDA(cudaSetDevice(m.gpu), "cudaSetDevice");
      COMMIR_COMM_CUDA(cudaEventRecord(*event, m.stream), "cudaEventRecord");
      events.push_back(*event);
    }
    for (size_t d = 0; d < members.size(); ++d) {
      COMMIR_COMM_CUDA(cudaSetDevice(members[d].gpu), "cudaSetDevice");
      for (size_t s = 0; s < members.size(); ++s) {
        if (s == d ||
            (members[s].stream == members[d].stream && members[s].gpu == members[d].gpu)) {
          continue;  // the same stream is ordered already
        }
        COMMIR_COMM_CUDA(cudaStreamWaitEvent(members[d].stream, events[s], 0),
                         "cudaStreamWaitEvent");
      }
    }
    return absl::OkStatus();
  }

  // Folds n inputs (on `gpu`) into out in coordinate order, accumulating in f32 for
  // f16/bf16 and rounding once, exactly like the cpu backend's collectives.
  absl::Status Fold(const Request& r, const std::vector<const char*>& inputs, char* out,
                    int64_t count, cudaStream_t stream) {
    const ck::KDType kt = KType(r.type);
    const ReductionFn op = r.op;
    const size_t n = inputs.size();
    if (n <= static_cast<size_t>(ck::kMaxReduceBuffers)) {  // one kernel, no accumulator
      std::vector<const void*> pointers(inputs.begin(), inputs.end());
      COMMIR_COMM_CUDA(ck::LaunchReduceBuffers(op, kt, pointers.data(), static_cast<int>(n), out,
                                               count, stream),
                       "launching the collective reduction");
      return absl::OkStatus();
    }
    // Larger groups: pairwise, through an f32 accumulator for f16/bf16.
    // When the accumulator type is the element type (all but f16/bf16), `out` itself can
    // accumulate: it is none of the inputs.
    const bool separate_acc = ck::KAccumType(kt) != kt;
    void* acc = out;
    if (separate_acc) {
      COMMIR_COMM_CUDA(
          cudaMallocAsync(&acc, count * ck::KDTypeSize(ck::KAccumType(kt)), stream),
          "cudaMallocAsync (reduction accumulator)");
    }
    cudaError_t e = ck::LaunchCombine(op, kt, inputs[0], false, inputs[1], acc, separate_acc,
                                      count, stream);
    for (size_t i = 2; i + 1 < n && e == cudaSuccess; ++i) {
      e = ck::LaunchCombine(op, kt, acc, separate_acc, inputs[i], acc, separate_acc, count,
                            stream);
    }
    if (e == cudaSuccess) {
      e = ck::LaunchCombine(op, kt, acc, separate_acc, inputs[n - 1], out, false, count, stream);
    }
    cudaError_t freed = separate_acc ? cudaFreeAsync(acc, stream) : cudaSuccess;
    COMMIR_COMM_CUDA(e, "launching the collective reduction");
    COMMIR_COMM_CUDA(freed, "cudaFreeAsync (reduction accumulator)");
    return absl::OkStatus();
  }

  // Every member is in this process: each destination pulls what it needs on its own
  // stream with device-to-device (or peer) copies and reduces with the kernels' combine.
  absl::Status RunCopies(const Request& r, const std::vector<Member>& members) {
    const int64_t n = static_cast<int64_t>(members.size());
    const int64_t esize = ElementTypeByteWidth(r.type);
    const int64_t bytes = r.count * esize;
    const bool reduce = r.kind == Kind::kAllReduce || r.kind == Kind::kReduceScatter;
    bool in_place = false;
    for (const Member& m : members) in_place |= (m.send == m.recv);

    COMMIR_COMM_RETURN_IF_ERROR(Barrier(members, /*done=*/false));
    std::vector<char*> staged_result(n, nullptr);  // in-place all_reduce results
    for (const Member& d : members) {
      COMMIR_COMM_CUDA(cudaSetDevice(d.gpu), "cudaSetDevice");
      switch (r.kind) {
        case Kind::kAllGather:
          for (const Member& s : members) {
            COMMIR_COMM_RETURN_IF_ERROR(
                CopyOnStream(d.recv + s.position * bytes, d.gpu, s.send, s.gpu, bytes, d.stream));
          }
          break;
        case Kind::kAllToAll: {
          const int64_t block = bytes / n;
          for (const Member& s : members) {
            COMMIR_COMM_RETURN_IF_ERROR(CopyOnStream(d.recv + s.position * block, d.gpu,
                                                     s.send + d.position * block, s.gpu, block,
                                                     d.stream));
          }
          break;
        }
        case Kind::kShift: {
          const int64_t off = ((r.offset % n) + n) % n;
          const Member& s = members[(d.position - off + n) % n];
          COMMIR_COMM_RETURN_IF_ERROR(CopyIntoRowsOnStream(d.recv, d.gpu, d.recv_rows,
                                                           d.recv_pitch, s.send, s.gpu, bytes,
                                                           d.stream));
          break;
        }
        case Kind::kAllReduce:
        case Kind::kReduceScatter: {
          const int64_t out_count = RecvCount(r, n);
          const int64_t out_bytes = out_count * esize;
          const int64_t in_offset = r.kind == Kind::kReduceScatter ? d.position * out_bytes : 0;
          // Inputs on another GPU are staged into one scratch buffer on d's GPU.
          int64_t remote = 0;
          for (const Member& s : members) remote += s.gpu != d.gpu ? 1 : 0;
          char* scratch = nullptr;
          const int64_t scratch_bytes = (remote + (in_place ? 1 : 0)) * out_bytes;
          if (scratch_bytes > 0) {
            COMMIR_COMM_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&scratch), scratch_bytes,
                                             d.stream),
                             "cudaMallocAsync (collective staging)");
          }
          std::vector<const char*> inputs;
          int64_t next = 0;
          for (const Member& s : members) {
            if (s.gpu == d.gpu) {
              inputs.push_back(s.send + in_offset);
            } else {
              char* slot = scratch + (next++) * out_bytes;
              COMMIR_COMM_RETURN_IF_ERROR(
                  CopyOnStream(slot, d.gpu, s.send + in_offset, s.gpu, out_bytes, d.stream));
              inputs.push_back(slot);
            }
          }
          char* out = in_place ? scratch + remote * out_bytes : d.recv;
          COMMIR_COMM_RETURN_IF_ERROR(Fold(r, inputs, out, out_count, d.stream));
          if (in_place) {
            staged_result[d.position] = scratch;
          } else if (scratch != nullptr) {
            COMMIR_COMM_CUDA(cudaFreeAsync(scratch, d.stream), "cudaFreeAsync");
          }
          break;
        }
      }
    }
    // No member may overwrite its send buffer (or, in place, its result) before every
    // other member has read it.
    COMMIR_COMM_RETURN_IF_ERROR(Barrier(members, /*done=*/true));
    if (reduce && in_place) {
      const int64_t out_bytes = RecvCount(r, n) * esize;
      for (const Member& d : members) {
        int64_t remote = 0;
        for (const Member& s : members) remote += s.gpu != d.gpu ? 1 : 0;
        char* scratch = staged_result[d.position];
        COMMIR_COMM_CUDA(cudaSetDevice(d.gpu), "cudaSetDevice");
        COMMIR_COMM_RETURN_IF_ERROR(CopyOnStream(d.recv, d.gpu, scratch + remote * out_bytes,
                                                 d.gpu, out_bytes, d.stream));
        COMMIR_COMM_CUDA(cudaFreeAsync(scratch, d.stream), "cudaFreeAsync");
      }
    }
    return MarkIssued(members);
  }

  // ---- Copy engines, one process (launch modes (b) and (c)) -------------------------------

  absl::StatusOr<cudaStream_t> TransferStream(const Member& m) {
    cudaStream_t& stream = transfer_[m.local_index];
    if (stream == nullptr) {
      COMMIR_COMM_CUDA(cudaSetDevice(m.gpu), "cudaSetDevice");
      COMMIR_COMM_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                       "cudaStreamCreate (copy-engine transfer stream)");
    }
    return stream;
  }

  absl::StatusOr<cudaEvent_t> TransferDoneEvent(const Member& m) {
    cudaEvent_t& event = events_[m.local_index].transfer_done;
    if (event == nullptr) {
      COMMIR_COMM_CUDA(cudaSetDevice(m.gpu), "cudaSetDevice");
      COMMIR_COMM_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                       "cudaEventCreate");
    }
    return event;
  }

  // Direct peer copies between the GPUs of this process where the hardware allows them
  // (else cudaMemcpyPeerAsync stages through the host, still on copy engines).
  absl::Status EnablePeerAccess(int gpu, int peer) {
    if (gpu == peer || !peer_enabled_.insert({gpu, peer}).second) return absl::OkStatus();
    int can = 0;
    COMMIR_COMM_CUDA(cudaDeviceCanAccessPeer(&can, gpu, peer), "cudaDeviceCanAccessPeer");
    if (!can) return absl::OkStatus();
    COMMIR_COMM_CUDA(cudaSetDevice(gpu), "cudaSetDevice");
    cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();  // not an error here; do not leave it for the next launch
      return absl::OkStatus();
    }
    COMMIR_COMM_CUDA(e, "cudaDeviceEnablePeerAccess");
    return absl::OkStatus();
  }

  // Every member is in this process: each destination's transfer stream waits for every
  // member's stream (its sources' data and its own receive buffer are then ready), runs
  // the copies of CopiesInto, and records an event that every member's stream waits for
  // (no member may reuse its send buffer before every destination has read it).
  absl::Status RunCopyEngine(const Request& r, const std::vector<Member>& members) {
    const int64_t n = static_cast<int64_t>(members.size());
    const int64_t send_bytes = r.count * ElementTypeByteWidth(r.type);
    for (const Member& d : members) {
      for (const Member& s : members) COMMIR_COMM_RETURN_IF_ERROR(EnablePeerAccess(d.gpu, s.gpu));
    }
    std::vector<cudaEvent_t> ready;
    for (const Member& m : members) {
      absl::StatusOr<cudaEvent_t> event = LocalEvent(m, /*done=*/false);
      if (!event.ok()) return event.status();
      COMMIR_COMM_CUDA(cudaSetDevice(m.gpu), "cudaSetDevice");
      COMMIR_COMM_CUDA(cudaEventRecord(*event, m.stream), "cudaEventRecord");
      ready.push_back(*event);
    }
    std::vector<cudaEvent_t> done;
    for (const Member& d : members) {
      absl::StatusOr<cudaStream_t> transfer = TransferStream(d);
      if (!transfer.ok()) return transfer.status();
      absl::StatusOr<cudaEvent_t> finished = TransferDoneEvent(d);
      if (!finished.ok()) return finished.status();
      COMMIR_COMM_CUDA(cudaSetDevice(d.gpu), "cudaSetDevice");
      for (cudaEvent_t event : ready) {
        COMMIR_COMM_CUDA(cudaStreamWaitEvent(*transfer, event, 0), "cudaStreamWaitEvent");
      }
      absl::StatusOr<std::vector<CopyStep>> steps =
          CopiesInto(r.kind, n, d.position, send_bytes, r.offset);
      if (!steps.ok()) return steps.status();
      for (const CopyStep& step : *steps) {
        const Member& s = members[step.src];  // all local: index = position
        // Only a shift (one whole-buffer step) has a strided receive buffer.
        COMMIR_COMM_RETURN_IF_ERROR(CopyIntoRowsOnStream(d.recv + step.dst_offset, d.gpu,
                                                         d.recv_rows, d.recv_pitch,
                                                         s.send + step.src_offset, s.gpu,
                                                         step.bytes, *transfer));
      }
      COMMIR_COMM_CUDA(cudaEventRecord(*finished, *transfer), "cudaEventRecord");
      done.push_back(*finished);
    }
    for (const Member& m : members) {
      COMMIR_COMM_CUDA(cudaSetDevice(m.gpu), "cudaSetDevice");
      for (cudaEvent_t event : done) {
        COMMIR_COMM_CUDA(cudaStreamWaitEvent(m.stream, event, 0), "cudaStreamWaitEvent");
      }
    }
    return MarkIssued(members);
  }

  // ---- Copy engines across the processes of one node (CUDA IPC) ----------------------------

  using WaitValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  using WriteValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

  // The driver's stream memory operations, through cudart (no link against libcuda).
  absl::Status LoadStreamMemOps() {
    if (wait_value_ != nullptr && write_value_ != nullptr) return absl::OkStatus();
    const std::pair<const char*, void**> symbols[] = {
        {"cuStreamWaitValue32", reinterpret_cast<void**>(&wait_value_)},
        {"cuStreamWriteValue32", reinterpret_cast<void**>(&write_value_)}};
    for (auto [symbol, slot] : symbols) {
      cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
      COMMIR_COMM_CUDA(cudaGetDriverEntryPointByVersion(symbol, slot, 12000, cudaEnableDefault,
                                                        &found),
                       "cudaGetDriverEntryPointByVersion");
      if (found != cudaDriverEntryPointSuccess || *slot == nullptr) {
        return absl::UnavailableError(absl::StrFormat(
            "the CUDA driver has no %s (stream memory operations), which copy-engine shifts "
            "across processes need: use --p2p=nccl",
            symbol));
      }
    }
    return absl::OkStatus();
  }

  absl::Status MemOp(CUresult result, absl::string_view what) {
    if (result == CUDA_SUCCESS) return absl::OkStatus();
    return Fail(absl::UnavailableError(absl::StrFormat(
        "%s failed with CUDA driver error %d (copy-engine shift across processes; "
        "--p2p=nccl avoids it)",
        what, static_cast<int>(result))));
  }

  // Makes every process's staging slots hold `bytes`: the first time, and whenever a
  // larger shift comes, every process (they reach the same shift, SPMD) waits for its
  // work so far, allocates and zeroes a new staging, and exchanges IPC handles.
  absl::Status EnsureIpcStaging(int64_t bytes) {
    if (ipc_.own != nullptr && bytes <= ipc_slot_bytes_) return absl::OkStatus();
    const int64_t slot = StagingSlotBytes(bytes);
    if (slot == 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("shift of %d bytes is too large for a copy-engine staging slot", bytes));
    }
    COMMIR_COMM_RETURN_IF_ERROR(LoadStreamMemOps());
    if (ipc_.own != nullptr) COMMIR_COMM_RETURN_IF_ERROR(WaitAll(options_.timeout));
    const int64_t local = static_cast<int64_t>(plan_.local.size());
    IpcStaging next;
    next.gpu = plan_.local[0].gpu;
    COMMIR_COMM_CUDA(cudaSetDevice(next.gpu), "cudaSetDevice");
    COMMIR_COMM_CUDA(cudaMalloc(reinterpret_cast<void**>(&next.own), kFlagBytes + local * slot),
                     "cudaMalloc (copy-engine staging)");
    if (cudaError_t e = cudaMemset(next.own, 0, kFlagBytes); e != cudaSuccess) {
      cudaFree(next.own);
      return CommCudaStatus(e, "cudaMemset (copy-engine flags)");
    }
    cudaIpcMemHandle_t handle;
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaIpcGetMemHandle(&handle, next.own);
    if (e != cudaSuccess) {
      cudaFree(next.own);
      return CommCudaStatus(e, "cudaIpcGetMemHandle (copy-engine staging)");
    }
    IpcRecord mine;
    mine.rank = launch_.rank;
    mine.pid = ::getpid();
    mine.local_devices = local;
    mine.slot_bytes = slot;
    mine.handle.assign(reinterpret_cast<const char*>(&handle), sizeof(handle));
    RendezvousOptions rdv;
    rdv.file_path = options_.rendezvous_file;
    rdv.master_port = launch_.rendezvous_port;
    rdv.rank = launch_.rank;
    rdv.world_size = launch_.world_size;
    rdv.timeout = options_.timeout;
    absl::StatusOr<std::vector<std::string>> blobs = AllGatherOnOneNode(
        rdv, EncodeIpcRecord(mine), absl::StrFormat("ipc-%d", ++ipc_exchanges_));
    absl::StatusOr<std::vector<IpcRecord>> records =
        blobs.ok() ? DecodeIpcRecords(*blobs, local, slot)
                   : absl::StatusOr<std::vector<IpcRecord>>(blobs.status());
    if (!records.ok()) {
      cudaFree(next.own);
      return Fail(absl::Status(records.status().code(),
                               absl::StrFormat("exchanging CUDA IPC handles (%s): %s",
                                               launch_.DebugString(),
                                               records.status().message())));
    }
    next.base.assign(launch_.world_size, nullptr);
    for (const IpcRecord& peer : *records) {
      if (peer.rank == launch_.rank) {
        next.base[peer.rank] = next.own;
        continue;
      }
      cudaIpcMemHandle_t theirs;
      std::memcpy(&theirs, peer.handle.data(), sizeof(theirs));
      void* opened = nullptr;
      if (cudaError_t open = cudaIpcOpenMemHandle(&opened, theirs, cudaIpcMemLazyEnablePeerAccess);
          open != cudaSuccess) {
        retired_ipc_.push_back(std::move(next));
        return Fail(CommCudaStatus(
            open, absl::StrFormat("cudaIpcOpenMemHandle of rank %d's staging (pid %d)",
                                  peer.rank, peer.pid)));
      }
      next.base[peer.rank] = static_cast<char*>(opened);
    }
    if (ipc_.own != nullptr) retired_ipc_.push_back(std::move(ipc_));
    ipc_ = std::move(next);
    ipc_slot_bytes_ = slot;
    std::fill(ipc_sequence_.begin(), ipc_sequence_.end(), 0);
    return absl::OkStatus();
  }

  void ReleaseIpc() {
    retired_ipc_.push_back(std::move(ipc_));
    for (IpcStaging& staging : retired_ipc_) {
      if (staging.own == nullptr) continue;
      cudaSetDevice(staging.gpu);
      for (char* base : staging.base) {
        if (base != nullptr && base != staging.own) cudaIpcCloseMemHandle(base);
      }
      cudaFree(staging.own);
    }
    retired_ipc_.clear();
  }

  // A shift across processes: per local member, on its transfer stream after its stream,
  // the operations of IpcShiftOps (ipc_shift_plan.h, where their order is argued and
  // tested): flags waited for and written with stream memory operations, copies into
  // the destination's staging slot and out of the member's own. The member's stream then
  // waits for the transfer stream.
  absl::Status RunIpcShift(const Request& r, const std::vector<Member>& members) {
    const int64_t n = static_cast<int64_t>(r.group.size());
    const int64_t bytes = r.count * ElementTypeByteWidth(r.type);
    if (ShiftSource(n, 0, r.offset) == 0) {  // offset 0 mod n: every member keeps its data
      for (const Member& m : members) {
        COMMIR_COMM_CUDA(cudaSetDevice(m.gpu), "cudaSetDevice");
        COMMIR_COMM_RETURN_IF_ERROR(CopyOnStream(m.recv, m.gpu, m.send, m.gpu, bytes, m.stream));
      }
      return MarkIssued(members);
    }
    if (plan_.mesh_size > kMaxIpcDevices || plan_.devices_per_process > kMaxIpcDevices) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "copy-engine shifts across processes support meshes of up to %d devices (this one "
          "has %d): use --p2p=nccl",
          kMaxIpcDevices, plan_.mesh_size));
    }
    COMMIR_COMM_RETURN_IF_ERROR(EnsureIpcStaging(bytes));
    for (const Member& m : members) {
      const uint32_t k = ++ipc_sequence_[m.local_index];
      absl::StatusOr<cudaStream_t> transfer = TransferStream(m);
      if (!transfer.ok()) return transfer.status();
      absl::StatusOr<cudaEvent_t> ready = LocalEvent(m, /*done=*/false);
      if (!ready.ok()) return ready.status();
      absl::StatusOr<cudaEvent_t> finished = TransferDoneEvent(m);
      if (!finished.ok()) return finished.status();
      COMMIR_COMM_CUDA(cudaSetDevice(m.gpu), "cudaSetDevice");
      COMMIR_COMM_CUDA(cudaEventRecord(*ready, m.stream), "cudaEventRecord");
      COMMIR_COMM_CUDA(cudaStreamWaitEvent(*transfer, *ready, 0), "cudaStreamWaitEvent");
      IpcShiftCall call;
      call.group = r.group;
      call.position = m.position;
      call.offset = r.offset;
      call.devices_per_process = plan_.devices_per_process;
      call.processes = plan_.world_size;
      call.slot_bytes = ipc_slot_bytes_;
      call.bytes = bytes;
      call.sequence = k;
      auto address = [&](const IpcPlace& place) -> char* {
        switch (place.kind) {
          case IpcPlace::Kind::kSend:
            return const_cast<char*>(m.send);
          case IpcPlace::Kind::kRecv:
            return m.recv;
          case IpcPlace::Kind::kStaging:
            break;
        }
        return ipc_.base[place.process] + place.offset;
      };
      CUstream t = reinterpret_cast<CUstream>(*transfer);
      for (const IpcStreamOp& op : IpcShiftOps(call)) {
        switch (op.kind) {
          case IpcStreamOp::Kind::kWaitFlag:
            COMMIR_COMM_RETURN_IF_ERROR(
                MemOp(wait_value_(t, reinterpret_cast<CUdeviceptr>(address(op.flag)), op.value,
                                  CU_STREAM_WAIT_VALUE_GEQ),
                      "cuStreamWaitValue32 (copy-engine shift)"));
            break;
          case IpcStreamOp::Kind::kWriteFlag:
            COMMIR_COMM_RETURN_IF_ERROR(
                MemOp(write_value_(t, reinterpret_cast<CUdeviceptr>(address(op.flag)), op.value,
                                   CU_STREAM_WRITE_VALUE_DEFAULT),
                      "cuStreamWriteValue32 (copy-engine shift)"));
            break;
          case IpcStreamOp::Kind::kCopy:
            COMMIR_COMM_CUDA(cudaMemcpyAsync(address(op.dst), address(op.src), op.bytes,
                                             cudaMemcpyDefault, *transfer),
                             "cudaMemcpyAsync (copy-engine shift through staging)");
            break;
        }
      }
      COMMIR_COMM_CUDA(cudaEventRecord(*finished, *transfer), "cudaEventRecord");
      COMMIR_COMM_CUDA(cudaStreamWaitEvent(m.stream, *finished, 0), "cudaStreamWaitEvent");
    }
    return MarkIssued(members);
  }

  WaitValueFn wait_value_ = nullptr;
  WriteValueFn write_value_ = nullptr;

  LaunchInfo launch_;
  DevicePlan plan_;
  std::vector<int64_t> mesh_shape_;
  EngineOptions options_;
  std::vector<ncclComm_t> world_;                               // by local index
  // First group of a partition (its axes in their order) -> communicators by local index.
  absl::flat_hash_map<std::vector<int64_t>, std::vector<ncclComm_t>> split_;
  std::vector<LocalEvents> events_;                              // by local index
  std::vector<cudaStream_t> transfer_;                           // by local index
  absl::flat_hash_set<std::pair<int, int>> peer_enabled_;        // (gpu, peer gpu)
  // The copy-engine path across processes: the current staging, older ones (kept until
  // destruction: a peer may still have them open), the slot size, and per local device
  // the sequence number of its last IPC shift (flags of a new staging start at 0).
  IpcStaging ipc_;
  std::vector<IpcStaging> retired_ipc_;
  int64_t ipc_slot_bytes_ = 0;
  int ipc_exchanges_ = 0;
  std::vector<uint32_t> ipc_sequence_;
  absl::flat_hash_map<std::pair<int, cudaStream_t>, StreamEvent> last_event_;
  absl::Status broken_;
};

absl::StatusOr<std::unique_ptr<CollectiveEngine>> CollectiveEngine::Create(
    const LaunchInfo& launch, const DevicePlan& plan, std::vector<int64_t> mesh_shape,
    EngineOptions options) {
  int64_t size = 1;
  for (int64_t axis : mesh_shape) {
    if (axis < 1) return absl::InvalidArgumentError("mesh axis sizes must be >= 1");
    size *= axis;
  }
  if (size != plan.mesh_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "mesh shape [%s] has %d devices but the device plan has %d",
        absl::StrJoin(mesh_shape, ","), size, plan.mesh_size));
  }
  for (int ctas : {options.nccl_min_ctas, options.nccl_max_ctas}) {
    if (ctas < 0 || ctas > kMaxNcclCtas) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "NCCL CTAs must be from 1 to %d (0: NCCL's choice), got %d", kMaxNcclCtas, ctas));
    }
  }
  if (options.nccl_min_ctas > 0 && options.nccl_max_ctas > 0 &&
      options.nccl_min_ctas > options.nccl_max_ctas) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "NCCL min CTAs (%d) above max CTAs (%d)", options.nccl_min_ctas, options.nccl_max_ctas));
  }
  if (plan.world_size != launch.world_size || plan.rank != launch.rank ||
      static_cast<int64_t>(plan.local.size()) != plan.devices_per_process) {
    return absl::InvalidArgumentError("device plan does not match the launch information");
  }
  return std::unique_ptr<CollectiveEngine>(new CollectiveEngine(
      std::make_unique<Impl>(launch, plan, std::move(mesh_shape), std::move(options))));
}

CollectiveEngine::CollectiveEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CollectiveEngine::~CollectiveEngine() = default;

absl::Status CollectiveEngine::AllGather(absl::Span<const int64_t> group,
                                         absl::Span<const MemberBuffers> local, int64_t count,
                                         ElementType type) {
  return impl_->Run(Request{Kind::kAllGather, group, local, count, type});
}

absl::Status CollectiveEngine::ReduceScatter(absl::Span<const int64_t> group,
                                             absl::Span<const MemberBuffers> local,
                                             int64_t count, ElementType type, ReductionFn op) {
  return impl_->Run(Request{Kind::kReduceScatter, group, local, count, type, op});
}

absl::Status CollectiveEngine::AllReduce(absl::Span<const int64_t> group,
                                         absl::Span<const MemberBuffers> local, int64_t count,
                                         ElementType type, ReductionFn op) {
  return impl_->Run(Request{Kind::kAllReduce, group, local, count, type, op});
}

absl::Status CollectiveEngine::AllToAll(absl::Span<const int64_t> group,
                                        absl::Span<const MemberBuffers> local, int64_t count,
                                        ElementType type) {
  return impl_->Run(Request{Kind::kAllToAll, group, local, count, type});
}

absl::Status CollectiveEngine::Shift(absl::Span<const int64_t> group,
                                     absl::Span<const MemberBuffers> local, int64_t count,
                                     ElementType type, int64_t offset) {
  return impl_->Run(
      Request{Kind::kShift, group, local, count, type, ReductionFn::kSum, offset});
}

Route CollectiveEngine::RouteOf(CollectiveKind kind, absl::Span<const int64_t> group) const {
  if (group.size() <= 1) return Route::kCopyEngine;
  int64_t local = 0;
  for (int64_t device : group) local += impl_->plan().IsLocal(device) ? 1 : 0;
  return impl_->RouteFor(kind, local == static_cast<int64_t>(group.size()));
}

absl::Status CollectiveEngine::WaitAll(absl::Duration timeout) { return impl_->WaitAll(timeout); }
absl::Status CollectiveEngine::WaitAll() { return impl_->WaitAll(impl_->default_timeout()); }

absl::StatusOr<std::vector<std::vector<int64_t>>> CollectiveEngine::PartitionOf(
    absl::Span<const int64_t> group) const {
  return InferPartition(impl_->mesh_shape(), group);
}

}  // namespace commir::cuda::comm
