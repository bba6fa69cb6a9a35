// Heap accounting for the benchmarks' memory counters.
//
// Method: the benchmark binaries link heap_meter.cc, which replaces the global
// operator new/delete (every form: plain, array, nothrow, sized, aligned) with versions
// that call malloc/free and, while a HeapMeter is active, add or subtract
// malloc_usable_size(ptr) of each block. That is the size of the block the allocator
// really handed out (the request rounded up to the allocator's granularity), so the
// counters see rounding waste but not glibc's 8-byte chunk headers or free-list
// fragmentation. Memory obtained with malloc directly (not through operator new) is
// not counted; the CommIR libraries and the standard containers allocate only
// through operator new.
//
// While no meter is active the hooks cost one relaxed atomic load and a branch, so the
// timed benchmark loops run without them; the benchmarks measure memory in one extra,
// untimed run of the stage.
//
// Under AddressSanitizer (which owns operator new) the hooks are compiled out and
// Available() is false; the benchmarks then omit their memory counters.
#ifndef COMMIR_BENCHMARKS_HEAP_METER_H_
#define COMMIR_BENCHMARKS_HEAP_METER_H_

#include <cstdint>

namespace commir::bench {

struct HeapStats {
  // Bytes allocated minus bytes freed between Start and Stop (may be negative when
  // the measured code frees memory it did not allocate).
  int64_t net_bytes = 0;
  // The highest net_bytes seen at any point between Start and Stop.
  int64_t peak_bytes = 0;
  // Number of allocations between Start and Stop.
  int64_t allocations = 0;
};

class HeapMeter {
 public:
  // Whether the operator new/delete hooks are compiled in.
  static bool Available();

  // Starts measuring (one meter at a time; not for concurrent use).
  HeapMeter();
  ~HeapMeter();
  HeapMeter(const HeapMeter&) = delete;
  HeapMeter& operator=(const HeapMeter&) = delete;

  // Stops measuring and returns what was seen since construction.
  HeapStats Stop();

 private:
  bool running_ = true;
  HeapStats result_;
};

}  // namespace commir::bench

#endif  // COMMIR_BENCHMARKS_HEAP_METER_H_
