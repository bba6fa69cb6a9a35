// The reuse policy of the cuda caching allocator, kept free of CUDA so that it can be
// tested on any machine (block_cache_test.cc).
//
// A block belongs to the stream it was allocated on and is only handed out again on
// that stream: work issued there after the free is ordered after every earlier use on
// that stream, so no synchronisation is needed for it (stream-ordered reuse, as in
// PyTorch's allocator). Uses on other streams are covered by fences (CUDA events
// recorded on those streams when the block was freed): the block is reused only once
// every fence has completed, which the cache asks for through a callback and never by
// waiting. Blocks are not split; sizes are rounded so that similar requests share
// blocks, and a request takes the smallest cached block that fits without wasting more
// than the request's own size.
#ifndef COMMIR_BACKEND_CUDA_BLOCK_CACHE_H_
#define COMMIR_BACKEND_CUDA_BLOCK_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace commir::cuda {

struct Block {
  uintptr_t ptr = 0;
  size_t size = 0;      // rounded size, as allocated
  uintptr_t stream = 0;  // the stream that owns it (an opaque handle)
};

class BlockCache {
 public:
  // Asked once per fence until it says true; a fence that reported completion is
  // handed back (the callback may recycle it) and never asked about again.
  using FenceDone = std::function<bool(uintptr_t fence)>;

  // Small requests round up to 512 bytes, large ones (>= 1 MiB) to 2 MiB, so that a
  // block freed by one step fits the same request in the next.
  static size_t RoundSize(size_t bytes);

  // A cached block of at least RoundSize(bytes) owned by `stream` whose fences have
  // completed, or nothing.
  std::optional<Block> Take(size_t bytes, uintptr_t stream, const FenceDone& done);

  // Caches a freed block; `fences` are the events recorded on other streams that used
  // it (empty if only its own stream did).
  void Give(Block block, std::vector<uintptr_t> fences);

  // Removes and returns every cached block whose fences have completed (to give memory
  // back to the driver when an allocation fails).
  std::vector<Block> TakeIdle(const FenceDone& done);

  size_t cached_bytes() const { return cached_bytes_; }
  size_t num_cached() const { return blocks_.size(); }

 private:
  struct Entry {
    Block block;
    std::vector<uintptr_t> fences;  // pending, not yet reported complete
  };
  static bool AllDone(Entry& entry, const FenceDone& done);

  // (stream, size) -> entries; several blocks may share a key.
  std::multimap<std::pair<uintptr_t, size_t>, Entry> blocks_;
  size_t cached_bytes_ = 0;
};

}  // namespace commir::cuda

#endif  // COMMIR_BACKEND_CUDA_BLOCK_CACHE_H_
