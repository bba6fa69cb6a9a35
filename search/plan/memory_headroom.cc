#include "search/plan/memory_headroom.h"

namespace commir::search::plan {

double NcclBufferBytes(const ParallelPlan& plan) {
  const double per_peer =
      kNcclChannels * (kNcclSimpleBufferBytes + kNcclLl128BufferBytes + kNcclLlBufferBytes);
  double peers = 0;
  if (plan.tp > 1) peers += 1;
  if (plan.cp > 1) peers += 1;
  if (plan.dp * plan.cp > 1) peers += 1;  // the gradients' reduction over dp x cp
  if (plan.pp > 1) peers += 2;            // the previous and the next pipeline rank
  return peers * per_peer;
}

MemoryHeadroom HeadroomFor(const ParallelPlan& plan, double user_bytes) {
  if (user_bytes >= 0) return {user_bytes, 0};
  return {kCudaContextBytes + NcclBufferBytes(plan), kAllocatorFragmentation};
}

}  // namespace commir::search::plan
