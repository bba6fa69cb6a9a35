#include "search/plan/pipeline_model.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "sim/collective_time.h"
#include "sim/contention.h"
#include "sim/placement.h"

namespace commir::search::plan {
namespace {

absl::Status CheckConfig(const std::vector<StageCost>& stages, const PipelineConfig& c) {
  if (stages.empty()) return absl::InvalidArgumentError("pipeline: no stage");
  const int64_t p = static_cast<int64_t>(stages.size());
  if (c.tp < 1 || c.cp < 1 || c.dp < 1 || c.virtual_stages < 1 || c.microbatches < 1) {
    return absl::InvalidArgumentError(
        "pipeline: tp, cp, dp, virtual stages and micro-batches must be at least 1");
  }
  if (c.virtual_stages > 1 && p == 1) {
    return absl::InvalidArgumentError("pipeline: interleaving (v > 1) needs more than one stage");
  }
  if (c.virtual_stages > 1 && c.microbatches % p != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline: the interleaved schedule needs the micro-batches (", c.microbatches,
                     ") to be a multiple of the pipeline size (", p, ")"));
  }
  if (c.zero_stage < 0 || c.zero_stage > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline: ZeRO stage ", c.zero_stage, " (expected 0, 1, 2 or 3)"));
  }
  if (c.boundary_bytes < 0 || c.grad_bytes_per_param < 0 || c.param_bytes_per_param < 0) {
    return absl::InvalidArgumentError("pipeline: negative bytes");
  }
  for (const StageCost& s : stages) {
    if (!(s.forward_s >= 0 && s.backward_s >= 0 && s.recompute_s >= 0 && s.exposed_tp_comm_s >= 0 &&
          s.parameters_per_device >= 0 && s.layers >= 1)) {
      return absl::InvalidArgumentError(
          "pipeline: a stage has a negative or NaN cost, or no layer");
    }
  }
  return absl::OkStatus();
}

// One collective's time and the share of the compute rate a kernel keeps beside it.
struct Transfer {
  double seconds = 0;
  double compute_share = 1;
};

// The share of its FLOP rate a compute-bound kernel keeps beside an NCCL kernel: the sim's
// contention model (sim/contention.h: the NCCL kernel holds its SMs for its whole run, a
// GEMM's waves run on the others), as peak beside the load over peak.
double ComputeShareBeside(const sim::HardwareSpec& hw, sim::CollectiveKind kind,
                          const sim::CollectiveEstimate& e) {
  if (hw.peak_flops_bf16 <= 0) return 1;
  const sim::HardwareSpec beside = sim::HardwareBeside(hw, sim::NcclLoad(hw, kind, e));
  return std::clamp(beside.peak_flops_bf16 / hw.peak_flops_bf16, 0.0, 1.0);
}

absl::StatusOr<Transfer> Collective(const sim::HardwareSpec& hw, sim::CollectiveKind kind,
                                    double bytes, const std::vector<int64_t>& devices,
                                    int64_t gpus_per_node) {
  if (devices.size() < 2 || bytes <= 0) return Transfer{};
  absl::StatusOr<sim::GroupPlacement> group = sim::PlaceGroup(devices, gpus_per_node);
  if (!group.ok()) return group.status();
  absl::StatusOr<sim::CollectiveEstimate> e = sim::EstimateCollective(hw, kind, bytes, *group);
  if (!e.ok()) return e.status();
  return Transfer{e->seconds, ComputeShareBeside(hw, kind, *e)};
}

// Layer i's transfer runs under layer i+1's compute; the last transfer has nothing left to
// hide behind. `comm` and `compute` are per layer. While the transfer runs, the compute
// beside it goes at `share` of its rate (the NCCL kernel holds SMs), so an overlapped layer
// takes max(comm, compute + comm x (1 - share)): it exposes max(comm - compute,
// comm x (1 - share)) beyond its compute.
double Chain(double comm, double compute, int64_t layers, double share) {
  const double spill = std::max(comm - compute, comm * (1 - share));
  return comm + static_cast<double>(layers - 1) * std::max(0.0, spill);
}

// FSDP2's copies around its collectives, per micro-batch, on the compute stream's path
// (pytorch/pytorch torch/distributed/_composable/fsdp/_fsdp_collectives.py):
// foreach_all_gather_copy_out splits each gathered buffer into the parameters on the
// current stream (split_with_sizes_copy: the gathered bytes read and written, for the
// forward's gather and the backward's), and foreach_reduce's copy-in (chunk_cat of the
// gradients into the reduce dtype's buffer) runs on the reduce-scatter stream with the
// current stream waiting on it (reading the bf16 gradients, writing grad_bytes_per_param).
// Memory-bound copies at the HBM bandwidth.
double FsdpCopySeconds(const StageCost& s, const PipelineConfig& c, const sim::HardwareSpec& hw) {
  if (hw.hbm_bandwidth <= 0) return 0;
  const double bytes_per_param =
      2 * 2 * c.param_bytes_per_param + c.param_bytes_per_param + c.grad_bytes_per_param;
  return static_cast<double>(s.parameters_per_device) * bytes_per_param / hw.hbm_bandwidth;
}

// A rank's exposed data-parallel time in two parts: what each micro-batch's transfers add
// to the rank's steady-state step (ZeRO 2's, which gathers and reduces every micro-batch
// under its pipeline step), and what the iteration adds at its end (the others').
struct DataParallelParts {
  double per_microbatch = 0;
  double tail = 0;
};

absl::StatusOr<DataParallelParts> DataParallelTimes(const StageCost& s, int64_t first_device,
                                                    const PipelineConfig& c,
                                                    const sim::HardwareSpec& hw,
                                                    int64_t gpus_per_node) {
  // Context-parallel ranks hold the same weights as data-parallel ones, so gradients are
  // reduced over dp x cp: the devices of the rank that share a tp index (Megatron-LM's
  // data-parallel-with-context-parallel group).
  if (c.dp * c.cp == 1 || s.parameters_per_device == 0) return DataParallelParts{};
  std::vector<int64_t> group;
  for (int64_t k = 0; k < c.dp * c.cp; ++k) group.push_back(first_device + k * c.tp);
  // Without overlap the collectives run whole, once each; with it, one per layer.
  const int64_t units = c.overlap_dp_comm ? s.layers : 1;
  const double per_unit = static_cast<double>(s.parameters_per_device) / units;
  auto collective = [&](sim::CollectiveKind kind, double bytes_per_param) {
    return Collective(hw, kind, bytes_per_param * per_unit, group, gpus_per_node);
  };
  // Without overlap nothing runs beside the collectives: the compute keeps its whole rate.
  auto share = [&](const Transfer& t) { return c.overlap_dp_comm ? t.compute_share : 1.0; };
  const double forward = c.overlap_dp_comm ? s.forward_s / units : 0;
  const double backward = c.overlap_dp_comm ? (s.backward_s + s.recompute_s) / units : 0;
  // With interleaving only the first chunk's layers are left at the end of the backward
  // (the other chunks finish earlier in the cool-down and reduce under it), and the next
  // iteration's first forward needs only that chunk's parameters: the chain runs over its
  // layers / v.
  const int64_t tail = std::max<int64_t>(1, units / c.virtual_stages);
  if (c.zero_stage == 0) {
    absl::StatusOr<Transfer> reduce =
        collective(sim::CollectiveKind::kAllReduce, c.grad_bytes_per_param);
    if (!reduce.ok()) return reduce.status();
    return DataParallelParts{0, Chain(reduce->seconds, backward, tail, share(*reduce))};
  }
  absl::StatusOr<Transfer> reduce =
      collective(sim::CollectiveKind::kReduceScatter, c.grad_bytes_per_param);
  if (!reduce.ok()) return reduce.status();
  absl::StatusOr<Transfer> gather =
      collective(sim::CollectiveKind::kAllGather, c.param_bytes_per_param);
  if (!gather.ok()) return gather.status();
  if (c.zero_stage == 1) {
    return DataParallelParts{0, Chain(reduce->seconds, backward, tail, share(*reduce)) +
                                    Chain(gather->seconds, forward, tail, share(*gather))};
  }
  const double m = static_cast<double>(c.microbatches);
  if (c.zero_stage == 2) {
    // FSDP keeping the gathered parameters from the forward to the backward: every
    // micro-batch gathers each layer once and reduce-scatters its gradients once. Both go
    // over the same links beside the rank's compute, and prefetching lets a layer's
    // transfers run under the next layer's compute whichever micro-batch that belongs
    // to: one chain over all m x L layers of the iteration, its first gather and its
    // last reduction the only transfers nothing hides. Each micro-batch's L layers spill
    // into the rank's pipeline step; the chain's head, the transfer less its spill, is
    // the iteration's tail.
    if (!c.overlap_dp_comm) return DataParallelParts{gather->seconds + reduce->seconds, 0};
    const double transfers = gather->seconds + reduce->seconds;
    const double kept = std::min(share(*gather), share(*reduce));
    const double spill =
        std::max(0.0, std::max(transfers - (forward + backward), transfers * (1 - kept)));
    return DataParallelParts{static_cast<double>(units) * spill, transfers - spill};
  }
  // ZeRO 3: every micro-batch gathers each layer for its forward, again for its backward,
  // and reduce-scatters its gradients; the backward's gather and reduction share the links
  // and run one after the other beside the compute (the same SMs taken: the lesser share).
  return DataParallelParts{
      0, m * (Chain(gather->seconds, forward, units, share(*gather)) +
              Chain(gather->seconds + reduce->seconds, backward, units,
                    std::min(share(*gather), share(*reduce))) +
              FsdpCopySeconds(s, c, hw))};
}

}  // namespace

absl::StatusOr<double> DataParallelExposed(const StageCost& s, int64_t first_device,
                                           const PipelineConfig& c, const sim::HardwareSpec& hw,
                                           int64_t gpus_per_node) {
  absl::StatusOr<DataParallelParts> parts =
      DataParallelTimes(s, first_device, c, hw, gpus_per_node);
  if (!parts.ok()) return parts.status();
  return static_cast<double>(c.microbatches) * parts->per_microbatch + parts->tail;
}

absl::StatusOr<PipelineTime> PredictIteration(const std::vector<StageCost>& stages,
                                              const PipelineConfig& c, const sim::HardwareSpec& hw,
                                              int64_t gpus_per_node) {
  if (absl::Status s = CheckConfig(stages, c); !s.ok()) return s;
  const int64_t p = static_cast<int64_t>(stages.size());
  const double m = static_cast<double>(c.microbatches);
  const double v = static_cast<double>(c.virtual_stages);
  const int64_t stride = c.tp * c.cp * c.dp;  // devices per pipeline rank

  PipelineTime out;
  if (p > 1) {
    absl::StatusOr<Transfer> hop =
        Collective(hw, sim::CollectiveKind::kSendRecv, static_cast<double>(c.boundary_bytes),
                   {0, stride}, gpus_per_node);
    if (!hop.ok()) return hop.status();
    out.p2p_s = hop->seconds;
    if (c.virtual_stages > 1) {
      // Interleaving also sends from the last rank back to the first (the next chunk).
      absl::StatusOr<Transfer> wrap =
          Collective(hw, sim::CollectiveKind::kSendRecv, static_cast<double>(c.boundary_bytes),
                     {0, (p - 1) * stride}, gpus_per_node);
      if (!wrap.ok()) return wrap.status();
      out.p2p_s = std::max(out.p2p_s, wrap->seconds);
    }
  }
  const double hops = p > 1 ? 2.0 * (static_cast<double>(p) * v - 1) * out.p2p_s : 0;
  if (p > 1 && c.tied_embedding_parameters > 0) {
    absl::StatusOr<Transfer> tied =
        Collective(hw, sim::CollectiveKind::kAllReduce,
                   static_cast<double>(c.tied_embedding_parameters) * c.grad_bytes_per_param,
                   {0, (p - 1) * stride}, gpus_per_node);
    if (!tied.ok()) return tied.status();
    out.tied_embedding_s = tied->seconds;
  }

  // Each rank's micro-batch: its compute, and what its data-parallel transfers add to
  // every micro-batch (ZeRO 2's; the slowest rank sets the steady state with them).
  std::vector<double> dp_step(stages.size(), 0);
  auto per_microbatch = [&](size_t i) {
    return stages[i].forward_s + stages[i].backward_s + stages[i].recompute_s + dp_step[i];
  };
  for (size_t i = 0; i < stages.size(); ++i) {
    absl::StatusOr<DataParallelParts> dp =
        DataParallelTimes(stages[i], static_cast<int64_t>(i) * stride, c, hw, gpus_per_node);
    if (!dp.ok()) return dp.status();
    dp_step[i] = dp->per_microbatch;
    out.dp_exposed_s = std::max(out.dp_exposed_s, dp->tail);
  }
  size_t critical = 0;
  double sum = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    sum += per_microbatch(i);
    if (per_microbatch(i) > per_microbatch(critical)) critical = i;
  }
  const StageCost& cs = stages[critical];
  const double slowest = per_microbatch(critical);
  const double bubble = (sum - slowest) / v;
  out.pipeline_s = m * slowest + bubble + hops;

  TimeBreakdown& b = out.breakdown;
  b.compute_s = m * (cs.forward_s + cs.backward_s - cs.exposed_tp_comm_s);
  b.recompute_s = m * cs.recompute_s;
  b.exposed_comm_s = m * (cs.exposed_tp_comm_s + dp_step[critical]) + hops + out.dp_exposed_s +
                     out.tied_embedding_s;
  b.bubble_s = bubble;
  b.total_s = out.pipeline_s + out.dp_exposed_s + out.tied_embedding_s;
  out.bubble_fraction = b.total_s > 0 ? b.bubble_s / b.total_s : 0;
  return out;
}

}  // namespace commir::search::plan
