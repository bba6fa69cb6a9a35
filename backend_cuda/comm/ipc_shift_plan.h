// The stream operations of one member's copy-engine shift across processes, as data
// (plain C++): the engine issues them on the member's transfer stream (cudaMemcpyAsync,
// cuStreamWaitValue32, cuStreamWriteValue32), and ipc_shift_plan_test runs several
// processes' lists under adversarial interleavings to check that every call delivers the
// right data, no slot is overwritten before it is drained, and nothing deadlocks.
#ifndef COMMIR_BACKEND_CUDA_COMM_IPC_SHIFT_PLAN_H_
#define COMMIR_BACKEND_CUDA_COMM_IPC_SHIFT_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "backend_cuda/comm/ipc_record.h"

namespace commir::cuda::comm {

// Where bytes live: a process's staging allocation (byte offset from its start), or the
// member's own send / receive buffer.
struct IpcPlace {
  enum class Kind { kStaging, kSend, kRecv };
  Kind kind = Kind::kStaging;
  int process = 0;     // kStaging: whose staging
  int64_t offset = 0;  // kStaging: byte offset
};

struct IpcStreamOp {
  enum class Kind {
    kWaitFlag,   // until the 32-bit flag at `flag` is >= value (cyclic)
    kCopy,       // bytes from `src` to `dst`
    kWriteFlag,  // the flag at `flag` = value, after everything before it
  };
  Kind kind = Kind::kCopy;
  IpcPlace flag;  // kWaitFlag, kWriteFlag (kStaging)
  uint32_t value = 0;
  IpcPlace src, dst;  // kCopy
  int64_t bytes = 0;
};

struct IpcShiftCall {
  absl::Span<const int64_t> group;  // mesh devices in group order
  int64_t position = 0;             // this member's position in the group
  int64_t offset = 0;               // the shift's offset (any sign; not 0 mod n)
  int64_t devices_per_process = 1;  // process p drives [p*k, (p+1)*k)
  int64_t processes = 1;            // of the job: each gets this member's drained flag
  int64_t slot_bytes = 0;           // of every process's staging
  int64_t bytes = 0;                // of the shift (<= slot_bytes)
  uint32_t sequence = 1;            // this member's IPC shift count, this one included
};

// Wait (on this process's flags) until the destination has drained call k-1, push the
// send buffer into its slot and set its ready flag to k; wait until this member's own
// ready flag is k, copy its slot into the receive buffer, and set this member's drained
// flag to k in every process (ipc_record.h: why every process, and why flags only grow).
std::vector<IpcStreamOp> IpcShiftOps(const IpcShiftCall& call);

}  // namespace commir::cuda::comm

#endif  // COMMIR_BACKEND_CUDA_COMM_IPC_SHIFT_PLAN_H_
