#include "backend_cuda/block_cache.h"

#include <algorithm>

namespace commir::cuda {
namespace {

constexpr size_t kSmallGranule = 512;
constexpr size_t kLargeThreshold = size_t{1} << 20;
constexpr size_t kLargeGranule = size_t{2} << 20;

size_t RoundUp(size_t value, size_t granule) { return (value + granule - 1) / granule * granule; }

}  // namespace

size_t BlockCache::RoundSize(size_t bytes) {
  if (bytes == 0) return kSmallGranule;  // every tensor gets a distinct, valid address
  return bytes < kLargeThreshold ? RoundUp(bytes, kSmallGranule) : RoundUp(bytes, kLargeGranule);
}

bool BlockCache::AllDone(Entry& entry, const FenceDone& done) {
  // Drop fences as they report completion, so none is asked about twice.
  auto pending = std::remove_if(entry.fences.begin(), entry.fences.end(),
                                [&](uintptr_t fence) { return done(fence); });
  entry.fences.erase(pending, entry.fences.end());
  return entry.fences.empty();
}

std::optional<Block> BlockCache::Take(size_t bytes, uintptr_t stream, const FenceDone& done) {
  const size_t size = RoundSize(bytes);
  // Waste at most the request's own size: a 4 KiB tensor must not pin a 1 GiB block.
  const size_t limit = size > (SIZE_MAX / 2) ? SIZE_MAX : 2 * size;
  for (auto it = blocks_.lower_bound({stream, size});
       it != blocks_.end() && it->first.first == stream && it->first.second <= limit; ++it) {
    if (!AllDone(it->second, done)) continue;
    Block block = it->second.block;
    cached_bytes_ -= block.size;
    blocks_.erase(it);
    return block;
  }
  return std::nullopt;
}

void BlockCache::Give(Block block, std::vector<uintptr_t> fences) {
  cached_bytes_ += block.size;
  blocks_.emplace(std::make_pair(block.stream, block.size), Entry{block, std::move(fences)});
}

std::vector<Block> BlockCache::TakeIdle(const FenceDone& done) {
  std::vector<Block> idle;
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    if (AllDone(it->second, done)) {
      idle.push_back(it->second.block);
      cached_bytes_ -= it->second.block.size;
      it = blocks_.erase(it);
    } else {
      ++it;
    }
  }
  return idle;
}

}  // namespace commir::cuda
