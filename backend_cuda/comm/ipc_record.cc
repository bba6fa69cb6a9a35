#include "backend_cuda/comm/ipc_record.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace commir::cuda::comm {
namespace {

constexpr char kMagic[8] = {'C', 'I', 'P', 'C', 'R', 'E', 'C', '1'};
// magic, rank, pid, local devices, slot bytes, handle.
constexpr size_t kEncodedBytes = sizeof(kMagic) + 4 * 8 + kIpcHandleBytes;

void PutI64(int64_t value, std::string& out) {
  char bytes[8];
  std::memcpy(bytes, &value, 8);
  out.append(bytes, 8);
}
int64_t GetI64(const char* in) {
  int64_t value;
  std::memcpy(&value, in, 8);
  return value;
}

}  // namespace

std::string EncodeIpcRecord(const IpcRecord& record) {
  std::string out(kMagic, sizeof(kMagic));
  PutI64(record.rank, out);
  PutI64(record.pid, out);
  PutI64(record.local_devices, out);
  PutI64(record.slot_bytes, out);
  std::string handle = record.handle;
  handle.resize(kIpcHandleBytes, '\0');
  out += handle;
  return out;
}

absl::StatusOr<std::vector<IpcRecord>> DecodeIpcRecords(absl::Span<const std::string> blobs,
                                                         int64_t local_devices,
                                                         int64_t slot_bytes) {
  std::vector<IpcRecord> records;
  for (size_t r = 0; r < blobs.size(); ++r) {
    const std::string& blob = blobs[r];
    if (blob.size() != kEncodedBytes || std::memcmp(blob.data(), kMagic, sizeof(kMagic)) != 0) {
      return absl::DataLossError(absl::StrFormat(
          "CUDA IPC exchange: rank %d sent %d bytes that are not an IPC record", r, blob.size()));
    }
    const char* p = blob.data() + sizeof(kMagic);
    IpcRecord record;
    record.rank = static_cast<int>(GetI64(p));
    record.pid = GetI64(p + 8);
    record.local_devices = GetI64(p + 16);
    record.slot_bytes = GetI64(p + 24);
    record.handle.assign(p + 32, kIpcHandleBytes);
    if (record.rank != static_cast<int>(r)) {
      return absl::DataLossError(absl::StrFormat(
          "CUDA IPC exchange: the record in rank %d's place says rank %d", r, record.rank));
    }
    if (record.local_devices != local_devices || record.slot_bytes != slot_bytes) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "CUDA IPC exchange: rank %d (pid %d) stages %d devices x %d bytes, this process %d x "
          "%d: the processes are not running the same program",
          r, record.pid, record.local_devices, record.slot_bytes, local_devices, slot_bytes));
    }
    records.push_back(std::move(record));
  }
  return records;
}

int64_t StagingSlotBytes(int64_t bytes) {
  if (bytes < 0 || bytes > (int64_t{1} << 40)) return 0;
  int64_t slot = int64_t{1} << 20;
  while (slot < bytes) slot *= 2;
  return slot;
}

}  // namespace commir::cuda::comm
