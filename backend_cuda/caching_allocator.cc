#include "backend_cuda/caching_allocator.h"

#include <algorithm>
#include <utility>

#include "backend_cuda/cuda_status.h"
#include "commir/check.h"

namespace commir::cuda {
namespace {

// A fence is a cudaEvent_t; it has completed when cudaEventQuery says so. A query that
// fails for another reason (a sticky device error) counts as completed: the context is
// unusable anyway, and the block must not stay pinned forever.
bool EventDone(uintptr_t fence) {
  return QueryEvent(reinterpret_cast<cudaEvent_t>(fence)) != cudaErrorNotReady;
}

// Sets the current device for the scope of a call and restores the caller's afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int gpu) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != gpu) cudaSetDevice(gpu);
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }

 private:
  int previous_ = -1;
};

}  // namespace

EventPool::~EventPool() {
  DeviceGuard guard(gpu_);
  for (cudaEvent_t event : free_) cudaEventDestroy(event);
}

absl::StatusOr<cudaEvent_t> EventPool::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_.empty()) {
      cudaEvent_t event = free_.back();
      free_.pop_back();
      return event;
    }
  }
  DeviceGuard guard(gpu_);
  cudaEvent_t event = nullptr;
  COMMIR_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                              "cudaEventCreateWithFlags");
  return event;
}

void EventPool::Release(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(event);
}

std::shared_ptr<CachingAllocator> CachingAllocator::Create(int gpu) {
  return std::shared_ptr<CachingAllocator>(new CachingAllocator(gpu));
}

CachingAllocator::CachingAllocator(int gpu)
    : gpu_(gpu), events_(std::make_shared<EventPool>(gpu)) {}

CachingAllocator::~CachingAllocator() {
  // Every DeviceBuffer holds a reference, so none is alive now; blocks still pending
  // fences are released after the device has finished with them.
  DeviceGuard guard(gpu_);
  cudaDeviceSynchronize();
  for (const Block& block : cache_.TakeIdle([](uintptr_t fence) {
         cudaEventDestroy(reinterpret_cast<cudaEvent_t>(fence));
         return true;
       })) {
    cudaFree(reinterpret_cast<void*>(block.ptr));
  }
}

absl::StatusOr<std::shared_ptr<DeviceBuffer>> CachingAllocator::Allocate(size_t bytes,
                                                                         cudaStream_t stream) {
  const uintptr_t key = reinterpret_cast<uintptr_t>(stream);
  // Completed fences go back to the event pool.
  auto done = [this](uintptr_t fence) {
    if (!EventDone(fence)) return false;
    events_->Release(reinterpret_cast<cudaEvent_t>(fence));
    return true;
  };
  std::unique_lock<std::mutex> lock(mutex_);
  std::optional<Block> block = cache_.Take(bytes, key, done);
  if (block.has_value()) {
    ++stats_.cache_hits;
  } else {
    const size_t size = BlockCache::RoundSize(bytes);
    DeviceGuard guard(gpu_);
    void* ptr = nullptr;
    cudaError_t error = cudaMalloc(&ptr, size);
    if (error == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear it: a failed allocation is not a sticky error
      // Give idle cached blocks back to the driver and try once more. "Idle" means no
      // other stream's fence is pending, but work queued on a block's own stream before
      // it was freed may still be running (stream-ordered reuse): wait for the device
      // first rather than rely on cudaFree's implicit synchronisation. Only on this
      // out-of-memory path does the host wait inside a step.
      cudaDeviceSynchronize();
      for (const Block& idle : cache_.TakeIdle(done)) cudaFree(reinterpret_cast<void*>(idle.ptr));
      stats_.cached_bytes = cache_.cached_bytes();
      error = cudaMalloc(&ptr, size);
      if (error == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return OutOfMemory(gpu_, bytes, cache_.cached_bytes());
      }
    }
    COMMIR_CUDA_RETURN_IF_ERROR(error, "cudaMalloc");
    ++stats_.driver_allocations;
    block = Block{reinterpret_cast<uintptr_t>(ptr), size, key};
  }
  stats_.in_use_bytes += block->size;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  stats_.cached_bytes = cache_.cached_bytes();
  lock.unlock();
  return std::make_shared<DeviceBuffer>(shared_from_this(), *block, bytes);
}

void CachingAllocator::Free(Block block, std::vector<uintptr_t> fences) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.in_use_bytes -= block.size;
  cache_.Give(block, std::move(fences));
  stats_.cached_bytes = cache_.cached_bytes();
}

CachingAllocator::Stats CachingAllocator::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

DeviceBuffer::DeviceBuffer(std::shared_ptr<CachingAllocator> allocator, Block block,
                           size_t bytes)
    : allocator_(std::move(allocator)), block_(block), bytes_(bytes) {}

DeviceBuffer::~DeviceBuffer() {
  std::vector<uintptr_t> fences;
  for (cudaStream_t stream : other_streams_) {
    absl::StatusOr<cudaEvent_t> event = allocator_->events().Acquire();
    if (event.ok() && cudaEventRecord(*event, stream) == cudaSuccess) {
      fences.push_back(reinterpret_cast<uintptr_t>(*event));
      continue;
    }
    // Cannot fence (the device is failing): order the other stream before the owning one
    // would be no better, so keep the block out of circulation for good.
    if (event.ok()) allocator_->events().Release(*event);
    return;
  }
  if (written_ != nullptr) allocator_->events().Release(written_);
  for (auto& [offset, slot] : slots_) allocator_->events().Release(slot.written);
  allocator_->Free(block_, std::move(fences));
}

absl::Status DeviceBuffer::MarkWritten(cudaStream_t stream) {
  if (written_ == nullptr) {
    absl::StatusOr<cudaEvent_t> event = allocator_->events().Acquire();
    if (!event.ok()) return event.status();
    written_ = *event;
  }
  writer_ = stream;
  if (stream != home_stream() &&
      std::find(other_streams_.begin(), other_streams_.end(), stream) == other_streams_.end()) {
    other_streams_.push_back(stream);
  }
  COMMIR_CUDA_RETURN_IF_ERROR(cudaEventRecord(written_, stream), "cudaEventRecord");
  return absl::OkStatus();
}

absl::Status DeviceBuffer::UseOn(cudaStream_t stream) {
  if (written_ != nullptr && stream != writer_) {
    COMMIR_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, written_, 0), "cudaStreamWaitEvent");
  }
  if (stream != home_stream() &&
      std::find(other_streams_.begin(), other_streams_.end(), stream) == other_streams_.end()) {
    other_streams_.push_back(stream);
  }
  return absl::OkStatus();
}

absl::Status DeviceBuffer::WaitForUsers(cudaStream_t stream) {
  std::vector<cudaStream_t> users = other_streams_;
  users.push_back(home_stream());
  for (cudaStream_t user : users) {
    if (user == stream) continue;
    absl::StatusOr<cudaEvent_t> event = allocator_->events().Acquire();
    if (!event.ok()) return event.status();
    // The wait takes the event's state when it is enqueued, so the event may go back to
    // the pool at once.
    cudaError_t recorded = cudaEventRecord(*event, user);
    cudaError_t waited = recorded == cudaSuccess ? cudaStreamWaitEvent(stream, *event, 0)
                                                 : cudaSuccess;
    allocator_->events().Release(*event);
    COMMIR_CUDA_RETURN_IF_ERROR(recorded, "cudaEventRecord");
    COMMIR_CUDA_RETURN_IF_ERROR(waited, "cudaStreamWaitEvent");
  }
  return absl::OkStatus();
}

absl::Status DeviceBuffer::MarkSlotWritten(int64_t byte_offset, cudaStream_t stream) {
  SlotRecord& slot = slots_[byte_offset];
  if (slot.written == nullptr) {
    absl::StatusOr<cudaEvent_t> event = allocator_->events().Acquire();
    if (!event.ok()) {
      slots_.erase(byte_offset);
      return event.status();
    }
    slot.written = *event;
  }
  slot.writer = stream;
  COMMIR_CUDA_RETURN_IF_ERROR(cudaEventRecord(slot.written, stream), "cudaEventRecord");
  return absl::OkStatus();
}

absl::Status DeviceBuffer::UseSlotOn(int64_t byte_offset, cudaStream_t stream) {
  auto slot = slots_.find(byte_offset);
  if (slot == slots_.end()) return UseOn(stream);
  if (stream != slot->second.writer) {
    COMMIR_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, slot->second.written, 0),
                                "cudaStreamWaitEvent");
  }
  if (stream != home_stream() &&
      std::find(other_streams_.begin(), other_streams_.end(), stream) == other_streams_.end()) {
    other_streams_.push_back(stream);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> DeviceBuffer::Ready() const {
  if (written_ == nullptr) return true;
  cudaError_t state = QueryEvent(written_);
  if (state == cudaErrorNotReady) return false;
  COMMIR_CUDA_RETURN_IF_ERROR(state, "cudaEventQuery");
  return true;
}

}  // namespace commir::cuda
