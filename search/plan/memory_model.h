// Memory per pipeline rank of a training plan: weights, gradients and Adam's
// mixed-precision optimizer state split by the ZeRO stage, and the activations held by
// in-flight micro-batches, against the GPU's HBM capacity.
//
// Per parameter (Rajbhandari et al. 2020, "ZeRO", section 3.1: mixed-precision Adam is
// 2 + 2 + 12 = 16 bytes): bf16 weights (2), gradients (2, or 4 as Megatron-LM's fp32 main
// gradients: 18 bytes in all), and an fp32 master copy, momentum and variance (12).
// ZeRO 1 shards the optimizer state over dp (Megatron-LM's distributed optimizer,
// --use-distributed-optimizer: its docs/source distrib_optimizer.md table gives 6 + 12/d
// bytes per parameter for 16-bit parameters with fp32 gradients, which is 2 + 4 whole and
// the 12 bytes of fp32 main parameters and Adam moments over d; it shards neither the
// gradients nor the parameters), ZeRO 2 the gradients too (torch FSDP's SHARD_GRAD_OP, as
// Meta ran Llama 3 405B: its parameters are gathered while a micro-batch is between its
// forward and backward, which with a pipeline's micro-batches in flight is every chunk's,
// so they count whole; no Megatron-LM equivalent: the search does not offer it), ZeRO 3
// the weights too (FSDP2).
//
// Headroom: what a rank needs besides the tensors the model counts (see MemoryHeadroom in
// memory_headroom.h): a fixed part (the CUDA context, NCCL's buffers per communicator)
// and the caching allocator's fragmentation, a fraction f of the memory it reserves, so
// reserved = total / (1 - f). A rank fits when total / (1 - f) + fixed <= capacity.
//
// Activations under 1F1B: rank s (0-based) of p holds min(m, p - s) micro-batches' worth
// of its layers (Narayanan et al. 2021). Interleaved over v chunks, Megatron-LM's warm-up
// runs (p - s - 1) x 2 + (v - 1) x p chunk forwards before its first backward, so rank s
// holds min(m v, (p - s - 1) x 2 + (v - 1) x p + 1) chunk micro-batches of its layers / v
// (rank 0: p (1 + (p-1)/(p v)) micro-batches' worth, as Korthikanti et al. 2022 state).
// Recomputation (per rank): none keeps every layer's activations; selective drops what
// the recomputed attention produced; full keeps only each layer's input and, while a
// layer is recomputed, one layer's activations.
#ifndef COMMIR_SEARCH_PLAN_MEMORY_MODEL_H_
#define COMMIR_SEARCH_PLAN_MEMORY_MODEL_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace commir::search::plan {

enum class Recompute { kNone, kSelective, kFull };

// One pipeline rank's layers, per device and micro-batch.
struct StageFootprint {
  int64_t parameters_per_device = 0;           // after tp (embeddings included on their ranks)
  int64_t activation_bytes = 0;                // all its layers, no recomputation
  int64_t selective_saved_bytes = 0;           // all its layers: what selective drops
  int64_t input_bytes = 0;                     // all its layers' inputs: what full keeps
  int64_t largest_layer_activation_bytes = 0;  // full's working set
};

struct MemoryConfig {
  int64_t pipeline_size = 1;   // p
  int64_t stage = 0;           // s, 0-based
  int64_t virtual_stages = 1;  // v
  int64_t microbatches = 1;    // m
  int64_t dp = 1;              // the ZeRO sharding degree: dp x cp (cp ranks hold the same weights)
  int zero_stage = 0;
  Recompute recompute = Recompute::kNone;
  double weight_bytes_per_param = 2;
  double grad_bytes_per_param = 4;  // 2: 16 bytes/param in all; 4: 18
  double optimizer_bytes_per_param = 12;
  double hbm_capacity_bytes = 0;  // 0: no limit
  double headroom_bytes = 0;      // fixed: CUDA context, NCCL buffers
  double fragmentation = 0;       // in [0, 1): the allocator's share of reserved memory
};

struct StageMemory {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  double activations = 0;
  double in_flight_microbatches = 0;  // in micro-batches' worth of the rank's layers
  double total = 0;     // the tensors above
  double headroom = 0;  // fixed headroom + fragmentation on top of `total`
  bool fits = true;     // total + headroom within the capacity
};

// Errors on sizes below 1, a stage outside [0, p), a ZeRO stage outside 0..3, negative
// bytes or headroom, a fragmentation outside [0, 1).
absl::StatusOr<StageMemory> StageMemoryUse(const StageFootprint& footprint,
                                           const MemoryConfig& config);

// Micro-batches' worth of a rank's activations held at the peak (see above).
double InFlightMicrobatches(int64_t pipeline_size, int64_t stage, int64_t virtual_stages,
                            int64_t microbatches);

// Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
// Models"), activation bytes of one layer with 16-bit activations and dropout, tensor
// parallel over t with sequence parallelism: s b h (34 + 5 a s / h) / t; selective
// recomputation leaves 34 s b h / t. The cross-check for the measured activations.
double KorthikantiLayerActivationBytes(int64_t sequence, int64_t micro_batch, int64_t hidden,
                                       int64_t heads, int64_t tp, bool selective);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_MEMORY_MODEL_H_
