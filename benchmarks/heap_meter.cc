#include "benchmarks/heap_meter.h"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define COMMIR_HEAP_METER_HOOKS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define COMMIR_HEAP_METER_HOOKS 0
#endif
#endif
#ifndef COMMIR_HEAP_METER_HOOKS
#define COMMIR_HEAP_METER_HOOKS 1
#endif

namespace commir::bench {
namespace {

// Constant-initialized, so they are usable by allocations made before main().
std::atomic<bool> g_active{false};
std::atomic<int64_t> g_net{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_allocations{0};

[[maybe_unused]] inline void OnAllocate(void* ptr) {
  if (ptr == nullptr || !g_active.load(std::memory_order_relaxed)) return;
  int64_t size = static_cast<int64_t>(malloc_usable_size(ptr));
  int64_t now = g_net.fetch_add(size, std::memory_order_relaxed) + size;
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

[[maybe_unused]] inline void OnFree(void* ptr) {
  if (ptr == nullptr || !g_active.load(std::memory_order_relaxed)) return;
  g_net.fetch_sub(static_cast<int64_t>(malloc_usable_size(ptr)), std::memory_order_relaxed);
}

}  // namespace

bool HeapMeter::Available() { return COMMIR_HEAP_METER_HOOKS != 0; }

HeapMeter::HeapMeter() {
  g_net.store(0, std::memory_order_relaxed);
  g_peak.store(0, std::memory_order_relaxed);
  g_allocations.store(0, std::memory_order_relaxed);
  g_active.store(true, std::memory_order_seq_cst);
}

HeapMeter::~HeapMeter() { Stop(); }

HeapStats HeapMeter::Stop() {
  if (running_) {
    g_active.store(false, std::memory_order_seq_cst);
    result_.net_bytes = g_net.load(std::memory_order_relaxed);
    result_.peak_bytes = g_peak.load(std::memory_order_relaxed);
    result_.allocations = g_allocations.load(std::memory_order_relaxed);
    running_ = false;
  }
  return result_;
}

}  // namespace commir::bench

#if COMMIR_HEAP_METER_HOOKS

namespace {

void* Allocate(std::size_t size) {
  if (size == 0) size = 1;
  while (true) {
    if (void* ptr = std::malloc(size)) {
      commir::bench::OnAllocate(ptr);
      return ptr;
    }
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

void* AllocateAligned(std::size_t size, std::align_val_t align) {
  std::size_t alignment = static_cast<std::size_t>(align);
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  if (size == 0) size = 1;
  while (true) {
    void* ptr = nullptr;
    if (posix_memalign(&ptr, alignment, size) == 0) {
      commir::bench::OnAllocate(ptr);
      return ptr;
    }
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

void Free(void* ptr) noexcept {
  commir::bench::OnFree(ptr);
  std::free(ptr);
}

}  // namespace

void* operator new(std::size_t size) { return Allocate(size); }
void* operator new[](std::size_t size) { return Allocate(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return Allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return Allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t size, std::align_val_t align) { return AllocateAligned(size, align); }
void* operator new[](std::size_t size, std::align_val_t align) {
  return AllocateAligned(size, align);
}
void* operator new(std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  try {
    return AllocateAligned(size, align);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  try {
    return AllocateAligned(size, align);
  } catch (...) {
    return nullptr;
  }
}

void operator delete(void* ptr) noexcept { Free(ptr); }
void operator delete[](void* ptr) noexcept { Free(ptr); }
void operator delete(void* ptr, const std::nothrow_t&) noexcept { Free(ptr); }
void operator delete[](void* ptr, const std::nothrow_t&) noexcept { Free(ptr); }
void operator delete(void* ptr, std::size_t) noexcept { Free(ptr); }
void operator delete[](void* ptr, std::size_t) noexcept { Free(ptr); }
void operator delete(void* ptr, std::align_val_t) noexcept { Free(ptr); }
void operator delete[](void* ptr, std::align_val_t) noexcept { Free(ptr); }
void operator delete(void* ptr, std::align_val_t, const std::nothrow_t&) noexcept { Free(ptr); }
void operator delete[](void* ptr, std::align_val_t, const std::nothrow_t&) noexcept { Free(ptr); }
void operator delete(void* ptr, std::size_t, std::align_val_t) noexcept { Free(ptr); }
void operator delete[](void* ptr, std::size_t, std::align_val_t) noexcept { Free(ptr); }

#endif  // COMMIR_HEAP_METER_HOOKS
