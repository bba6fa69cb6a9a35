// Iteration time of a pipelined, data-parallel training step from per-stage
// costs: 1F1B and interleaved 1F1B (Narayanan et al. 2021, "Efficient Large-Scale
// Language Model Training on GPU Clusters Using Megatron-LM", section 2.2), the
// point-to-point transfers between stages and the data-parallel gradient reduction.
//
// Per micro-batch, pipeline rank s spends F_s in forward and B_s in backward (its
// recomputation included) over all its model chunks. With m micro-batches, p ranks and
// v chunks per rank (v = 1: plain 1F1B):
//
//   pipeline = m x max_s(F_s + B_s)                       steady state of the slowest rank
//            + (sum_s(F_s + B_s) - max_s(F_s + B_s)) / v  warm-up and cool-down (bubble)
//            + 2 x (p x v - 1) x t_p2p                    the first forward's and the last
//                                                         backward's hops between stages
//
// For equal stages the bubble is (p-1)(F+B)/v: a fraction (p-1)/(m+p-1) of the time
// with v = 1, and interleaving divides it by v: (p-1)/(v m) of the ideal m (F+B), the
// ratio Meta gives for its Llama 3 schedule. Ranks whose chunks differ (the ends-only
// split with v > 1, parallel_plan.h's ChunkLayers) are taken at their mean chunk. Steady-state transfers are taken as
// hidden behind the other micro-batches' compute (Megatron-LM overlaps them).
// t_p2p is one send/recv of a micro-batch's boundary activations costed by the sim's
// collective model (sim/collective_time.h): NVLink when the neighbouring stages share a
// node, the network otherwise. Ranks are ordered as Megatron-LM orders them: tp fastest,
// then cp, then dp, then pp, so stage s's first device is s x tp x cp x dp.
//
// Data parallelism (per rank, over dp x cp, since context-parallel ranks hold the same
// weights; the sim's ring collectives, on NVLink when the group is inside a node and the
// network when it spans nodes). Communication is issued layer by layer, as Megatron-LM's
// buckets and FSDP's units are, so it overlaps compute per layer, not as one block: with L
// layers on the rank and comm c, compute t per layer, a chain where layer i's transfer
// runs under layer i+1's compute exposes
//
//   chain(c, t) = c + (L - 1) x max(c - t, c x (1 - r))   (the unhidden end, then what
//                                                         spills or is slowed)
//
// where r is the share of its FLOP rate the compute keeps beside the NCCL kernel: the
// sim's contention model (sim/contention.h), which holds the ring's SMs (hardware.h's
// nccl_collective_sms, or NVLS's) for the whole transfer, so that a GEMM's waves run on
// the others: r = (SMs - S) / SMs, 100/132 on an H100 beside a ring, 84/108 on an A100
// (calibration.md: published studies see GEMMs beside NCCL kernels about 19% slower on
// average, up to 40%). An overlapped layer thus takes max(c, t + c x (1 - r)): while the
// transfer runs the compute goes at r of its rate. Without overlap r does not apply.
//
// With interleaving over v chunks only the first chunk's L / v layers are left at the end
// (the other chunks' last backwards finish earlier in the cool-down and reduce under it;
// the next iteration's first forward needs only that chunk's parameters), so the chains
// run over L / v layers.
//
// ZeRO 0 all-reduces the gradients, ZeRO 1 reduce-scatters them, under the last
// micro-batch's backward: chain(reduction, backward). ZeRO 1 then all-gathers the
// updated bf16 parameters under the next iteration's first forward: chain(gather, forward)
// (Megatron-LM's --overlap-grad-reduce and --overlap-param-gather).
//
// ZeRO 2 is FSDP that does not reshard the parameters after the forward (torch FSDP's
// SHARD_GRAD_OP, FSDP2's reshard_after_forward=False; Meta's Llama 3 405B runs: "Our use
// of FSDP for Llama 3 shards optimizer states and gradients, but for model shards we do
// not reshard after forward computation to avoid an extra all-gather communication during
// backward passes", with gradients accumulated in FP32 over micro-batches and
// reduce-scattered in FP32; The Llama 3 Herd of Models, arXiv:2407.21783, section 3.3.2).
// The parameters are sharded outside a micro-batch's computation, so every micro-batch
// gathers each layer once before its forward, keeps it through its backward, and
// reduce-scatters the layer's gradients into the sharded fp32 accumulator after it. Both
// transfers share the rank's links beside its compute, and prefetching ("asynchronously
// prefetching sharded model weights and reducing gradients", ibid.) lets them run under
// the next layer's compute whichever micro-batch that belongs to, so one chain runs over
// the iteration's m x L layers:
//
//   chain(gather + reduce-scatter, forward + backward) over m x L layers
//
// of which each micro-batch's L spills go into the rank's pipeline step (so the slowest
// rank with them sets the steady state) and the chain's head is the iteration's tail.
//
// No copies on the compute stream: torch FSDP's flat parameter is the gather's output,
// and its cast of the gradients to the reduce dtype runs on the post-backward stream
// (pytorch/pytorch torch/distributed/fsdp/_runtime_utils.py, _post_backward_hook).
//
// ZeRO 3 keeps no whole parameters: every micro-batch gathers each layer before its
// forward and again before its backward, and reduce-scatters each layer's gradients after
// it (FSDP2's default, resharding after the forward), so it exposes
//
//   m x (chain(gather, forward) + chain(gather + reduce-scatter, backward) + copies)
//
// where copies are FSDP2's memory-bound copies on the compute stream's path: each gather's
// copy-out into the parameters (read and write, twice) and the reduce-scatter's copy-in of
// the bf16 gradients into the reduce dtype, 4 x 2 + 2 + 4 = 14 bytes per parameter at the
// HBM bandwidth (pytorch/pytorch torch/distributed/_composable/fsdp/_fsdp_collectives.py:
// foreach_all_gather_copy_out, foreach_reduce).
//
// The iteration adds the most exposed data-parallel time of any rank (a bound: ranks
// finish at different times; ZeRO 3's per-micro-batch part is exact with one stage, the
// only way the search uses it), ZeRO 2's per-micro-batch part excepted (above). Without
// overlap every collective is whole and exposed.
#ifndef COMMIR_SEARCH_PLAN_PIPELINE_MODEL_H_
#define COMMIR_SEARCH_PLAN_PIPELINE_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/hardware.h"

namespace commir::search::plan {

// One pipeline rank's costs per micro-batch, over all its chunks.
struct StageCost {
  double forward_s = 0;
  double backward_s = 0;              // the backward alone
  double recompute_s = 0;             // re-run forwards, added to the backward
  double exposed_tp_comm_s = 0;       // tensor/context-parallel communication in the above
  int64_t parameters_per_device = 0;  // this rank's parameters on one device (after tp)
  // The units its data-parallel communication is issued in (its layers): see chain() above.
  int64_t layers = 1;
};

struct PipelineConfig {
  int64_t tp = 1;
  int64_t cp = 1;
  int64_t dp = 1;
  int64_t virtual_stages = 1;  // v: model chunks per pipeline rank
  int64_t microbatches = 1;    // m, per data-parallel replica and iteration
  int zero_stage = 0;          // 0..3: plain, distributed optimizer, FSDP keeping
                               // the forward's gather, FSDP (see above)
  // Bytes of one micro-batch's activations crossing a stage boundary, per device.
  int64_t boundary_bytes = 0;
  double grad_bytes_per_param = 4;   // fp32 main gradients (Megatron-LM's default)
  double param_bytes_per_param = 2;  // bf16 parameters gathered by ZeRO
  bool overlap_dp_comm = true;
  // Parameters per device of an embedding table tied to the head and held on the first
  // and the last rank (GPT with pp > 1; 0 otherwise): Megatron-LM all-reduces its
  // gradient between those two ranks once per iteration, after the backward and before
  // the optimizer (finalize_model_grads' _allreduce_word_embedding_grads), exposed.
  int64_t tied_embedding_parameters = 0;
};

struct TimeBreakdown {
  double compute_s = 0;       // the critical rank's forward and backward compute
  double recompute_s = 0;     // its recomputation
  double exposed_comm_s = 0;  // tp/cp inside layers, p2p hops, data-parallel
  double bubble_s = 0;        // pipeline warm-up and cool-down
  double total_s = 0;         // the iteration: the sum of the above
};

struct PipelineTime {
  TimeBreakdown breakdown;
  double pipeline_s = 0;       // without the data-parallel tail
  double p2p_s = 0;            // one boundary transfer
  double dp_exposed_s = 0;     // the most exposed data-parallel tail of any rank
  double tied_embedding_s = 0;  // the tied table's gradient all-reduce (exposed)
  double bubble_fraction = 0;  // bubble_s / total_s
};

// `stages` has one entry per pipeline rank (p = stages.size()). Errors on no stage,
// sizes below 1, v > 1 with p = 1, m not a multiple of p with v > 1 (Megatron-LM's
// interleaved schedule requires it), a ZeRO stage outside 0..3, negative costs.
absl::StatusOr<PipelineTime> PredictIteration(const std::vector<StageCost>& stages,
                                              const PipelineConfig& config,
                                              const sim::HardwareSpec& hardware,
                                              int64_t gpus_per_node);

// One rank's exposed data-parallel time (the model above), its devices starting at
// `first_device`: the tail PredictIteration takes the most of over ranks (with ZeRO 2 the
// whole chain, of which PredictIteration adds each micro-batch's part to the rank's
// step). Exposed for the plan search's per-rank split (plan_search.cc), which costs ranks
// one at a time.
absl::StatusOr<double> DataParallelExposed(const StageCost& stage, int64_t first_device,
                                           const PipelineConfig& config,
                                           const sim::HardwareSpec& hardware,
                                           int64_t gpus_per_node);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_PIPELINE_MODEL_H_
