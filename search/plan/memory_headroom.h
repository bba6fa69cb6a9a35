// What a training rank needs on its GPU besides the tensors memory_model.h counts, so that
// a plan that "fits" leaves room for the CUDA context, NCCL's buffers and the caching
// allocator's fragmentation (a plan costed at 85.62 of 85.90 GB does not run).
//
// The default, per rank, from published figures:
//  * the CUDA context: 723 MiB, measured by a PyTorch user as the whole process's
//    footprint after creating one 4-byte tensor (discuss.pytorch.org, "What is the reason
//    for pytorch's GPU memory floor?", answered: the first CUDA call creates the context);
//  * NCCL: per communicator the rank belongs to with more than one member (Megatron-LM's
//    tensor, context, data x context and pipeline groups), per channel and connected peer,
//    one receive buffer per protocol, at NCCL's defaults (src/init.cc: DEFAULT_BUFFSIZE
//    4 MiB for Simple; LL128 120 elements x 640 threads x 8 steps x 8 bytes; LL 8 lines x
//    512 threads x 8 steps x 16 bytes): 9,633,792 bytes per channel and peer; 16 channels
//    (an assumption: NCCL's ring channel count on an 8-GPU NVSwitch node; it varies with
//    the topology and NCCL version); one peer per ring, two for the pipeline's sends to the
//    previous and the next rank;
//  * fragmentation: PyTorch's caching allocator leaves a share f of the memory it reserves
//    unusable; GMLake (Guo et al., ASPLOS 2024) measured 15% on average (up to 33%) over
//    eight LLM training configurations on 80 GB A100s, so f = 0.15 and
//    reserved = allocated / (1 - f).
// `commir-search --plan ... --memory-headroom=GB` replaces all of it with one fixed amount
// (no fragmentation share), for a stack whose overhead has been measured.
#ifndef COMMIR_SEARCH_PLAN_MEMORY_HEADROOM_H_
#define COMMIR_SEARCH_PLAN_MEMORY_HEADROOM_H_

#include <cstdint>

#include "search/plan/parallel_plan.h"

namespace commir::search::plan {

inline constexpr double kCudaContextBytes = 723.0 * 1024 * 1024;
inline constexpr double kNcclSimpleBufferBytes = 4.0 * 1024 * 1024;
inline constexpr double kNcclLl128BufferBytes = 120.0 * 640 * 8 * 8;
inline constexpr double kNcclLlBufferBytes = 8.0 * 512 * 8 * 16;
inline constexpr double kNcclChannels = 16;
inline constexpr double kAllocatorFragmentation = 0.15;
// The most --memory-headroom takes (GB): past any GPU's memory.
inline constexpr double kMaxMemoryHeadroomGb = 10000;

struct MemoryHeadroom {
  double fixed_bytes = 0;    // context + NCCL, or the user's amount
  double fragmentation = 0;  // share of reserved memory lost, in [0, 1)
};

// NCCL's buffers for one rank of `plan`: the communicators it joins (see above).
double NcclBufferBytes(const ParallelPlan& plan);

// The default headroom of a rank of `plan`, or the user's fixed amount when
// `user_bytes` >= 0.
MemoryHeadroom HeadroomFor(const ParallelPlan& plan, double user_bytes);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_MEMORY_HEADROOM_H_
