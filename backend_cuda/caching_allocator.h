// Device memory for the cuda backend: a stream-aware caching allocator per GPU, and
// the device buffers (runtime::DeviceStorage) that tensors on the GPU hold.
//
// cudaMalloc and cudaFree synchronise the device, so the executor never calls them in
// steady state: freed buffers go to a BlockCache (block_cache.h) and are handed out
// again on the stream that owns them. A buffer remembers the other streams that used it
// (RecordUse, like PyTorch's recordStream); when it is freed an event is recorded on
// each of them, and the block is reused only after those events complete, found by
// cudaEventQuery, never by waiting. When cudaMalloc fails, idle cached blocks are
// released and the allocation retried once before reporting out of memory.
#ifndef COMMIR_BACKEND_CUDA_CACHING_ALLOCATOR_H_
#define COMMIR_BACKEND_CUDA_CACHING_ALLOCATOR_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "backend_cuda/block_cache.h"
#include "runtime/tensor.h"

namespace commir::cuda {

class DeviceBuffer;

// Recycled, timing-free CUDA events of one GPU.
class EventPool {
 public:
  explicit EventPool(int gpu) : gpu_(gpu) {}
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  absl::StatusOr<cudaEvent_t> Acquire();
  void Release(cudaEvent_t event);

 private:
  int gpu_;
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_;
};

class CachingAllocator : public std::enable_shared_from_this<CachingAllocator> {
 public:
  static std::shared_ptr<CachingAllocator> Create(int gpu);
  ~CachingAllocator();  // returns cached blocks to the driver
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // `bytes` of device memory whose first use is on `stream` (its owning stream).
  absl::StatusOr<std::shared_ptr<DeviceBuffer>> Allocate(size_t bytes, cudaStream_t stream);

  int gpu() const { return gpu_; }
  EventPool& events() { return *events_; }

  struct Stats {
    size_t in_use_bytes = 0;
    size_t peak_in_use_bytes = 0;
    size_t cached_bytes = 0;
    int64_t driver_allocations = 0;  // cudaMalloc calls
    int64_t cache_hits = 0;
  };
  Stats stats();

 private:
  friend class DeviceBuffer;
  explicit CachingAllocator(int gpu);
  // Called by ~DeviceBuffer with the fences of the other streams that used it.
  void Free(Block block, std::vector<uintptr_t> fences);

  int gpu_;
  std::shared_ptr<EventPool> events_;
  std::mutex mutex_;
  BlockCache cache_;
  Stats stats_;
};

// A block of device memory on one GPU plus the synchronisation state of the value it
// holds: the event recorded after its producer, and the streams that used it.
class DeviceBuffer : public runtime::DeviceStorage {
 public:
  DeviceBuffer(std::shared_ptr<CachingAllocator> allocator, Block block, size_t bytes);
  ~DeviceBuffer() override;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return reinterpret_cast<void*>(block_.ptr); }
  size_t bytes() const { return bytes_; }
  int gpu() const { return allocator_->gpu(); }
  cudaStream_t home_stream() const { return reinterpret_cast<cudaStream_t>(block_.stream); }

  // Records the producer's completion on `stream` (after the op that wrote the buffer
  // was enqueued there). Replaces an earlier record.
  absl::Status MarkWritten(cudaStream_t stream);
  // Makes `stream` wait for the producer (nothing when it is the producer's stream) and
  // notes the use, so the memory outlives work queued on `stream` now.
  absl::Status UseOn(cudaStream_t stream);
  // Makes `stream` wait for everything queued so far on the other streams that used the
  // buffer (and its home stream): before `stream` writes a value in place whose earlier
  // readers may still run elsewhere.
  absl::Status WaitForUsers(cudaStream_t stream);
  // Whether the producer has finished (true when none was recorded); never blocks.
  absl::StatusOr<bool> Ready() const;

  // A ring's carried block received into its slot (runtime/in_place.h:
  // CarriedBlockInSlot), the slot at `byte_offset`: its own record besides the whole
  // buffer's. A matmul reading the block waits for that receive only, not for the next
  // step's receive into another slot, which MarkWritten records later in program order
  // (waiting for it would undo the ring's overlap of transfer and GEMM).
  absl::Status MarkSlotWritten(int64_t byte_offset, cudaStream_t stream);
  // UseOn for a reader of the slot at `byte_offset`: waits for its MarkSlotWritten, or
  // for the whole buffer's producer where the slot has none.
  absl::Status UseSlotOn(int64_t byte_offset, cudaStream_t stream);

 private:
  struct SlotRecord {
    cudaEvent_t written = nullptr;  // from the allocator's pool
    cudaStream_t writer = nullptr;
  };
  std::shared_ptr<CachingAllocator> allocator_;
  Block block_;
  size_t bytes_;
  cudaEvent_t written_ = nullptr;  // from the allocator's pool
  cudaStream_t writer_ = nullptr;
  std::vector<cudaStream_t> other_streams_;  // users other than home_stream()
  // Per slot offset, at most one per slot of the gathered value (a ring's devices).
  absl::flat_hash_map<int64_t, SlotRecord> slots_;
};

}  // namespace commir::cuda

#endif  // COMMIR_BACKEND_CUDA_CACHING_ALLOCATOR_H_
