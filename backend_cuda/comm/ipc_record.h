// What one process tells the others of its node so that they can copy into its memory
// (the copy-engine path across processes): its CUDA IPC memory handle of one staging
// allocation, and that allocation's layout. Plain C++ (the handle is opaque bytes), so
// the encoding and its checks are unit-tested without CUDA.
//
// Staging allocation of a process (one cudaMalloc, exported with cudaIpcGetMemHandle):
//   [flags: kFlagBytes][slot of local device 0: slot_bytes][slot of local device 1]...
// The flags are 32-bit sequence numbers (a device's count of IPC shifts):
//   ready[i] (local device i):  written by the member that pushed into i's slot: the data
//                               of call k is there. One writer per call, and call k+1's
//                               writer comes after i drained call k, so it only grows.
//   drained[d] (mesh device d): written by d into EVERY process's flags once it has
//                               copied call k out of its slot; a sender waits on its own
//                               process's copy before pushing into d's slot. One writer, d,
//                               so it only grows whichever devices send to d from call to
//                               call (shift offsets may change between calls).
#ifndef COMMIR_BACKEND_CUDA_COMM_IPC_RECORD_H_
#define COMMIR_BACKEND_CUDA_COMM_IPC_RECORD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace commir::cuda::comm {

inline constexpr int64_t kIpcHandleBytes = 64;  // sizeof(cudaIpcMemHandle_t)
inline constexpr int64_t kFlagBytes = 4096;
// ready[] takes the first half of the flags and drained[] the second: up to 512 local
// devices and 512 mesh devices on the copy-engine path across processes.
inline constexpr int64_t kMaxIpcDevices = 512;
inline constexpr int64_t ReadyFlagOffset(int64_t local_index) { return local_index * 4; }
inline constexpr int64_t DrainedFlagOffset(int64_t mesh_device) {
  return kFlagBytes / 2 + mesh_device * 4;
}
inline constexpr int64_t SlotOffset(int64_t local_index, int64_t slot_bytes) {
  return kFlagBytes + local_index * slot_bytes;
}

struct IpcRecord {
  int rank = 0;
  int64_t pid = 0;             // for error messages (and to refuse a record of ourselves)
  int64_t local_devices = 0;   // slots in the allocation
  int64_t slot_bytes = 0;
  std::string handle;          // kIpcHandleBytes opaque bytes
};

std::string EncodeIpcRecord(const IpcRecord& record);
// Every process's record, checked: blob r is rank r's, handles have the right size, and
// every process agrees on the layout (slots and their size are decided identically on
// every process; a difference means the processes are not running the same program).
absl::StatusOr<std::vector<IpcRecord>> DecodeIpcRecords(absl::Span<const std::string> blobs,
                                                         int64_t local_devices,
                                                         int64_t slot_bytes);

// The staging slot size for a shift of `bytes`: at least 1 MiB, the next power of two,
// so that a run of growing shifts re-exchanges handles O(log) times. Zero for a size
// above 2^40 (refused by the caller).
int64_t StagingSlotBytes(int64_t bytes);

}  // namespace commir::cuda::comm

#endif  // COMMIR_BACKEND_CUDA_COMM_IPC_RECORD_H_
