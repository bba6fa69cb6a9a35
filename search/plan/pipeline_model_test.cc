#include "search/plan/pipeline_model.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "sim/collective_time.h"
#include "sim/hardware.h"
#include "sim/placement.h"

namespace commir::search::plan {
namespace {

const sim::HardwareSpec& H100() { return *sim::FindBuiltinHardware("h100-sxm"); }

std::vector<StageCost> Equal(int64_t p, double f, double b) {
  StageCost s;
  s.forward_s = f;
  s.backward_s = b;
  return std::vector<StageCost>(p, s);
}

// The share of its FLOP rate a GEMM keeps beside this collective's NCCL kernel: its SMs
// (hardware.h: the ring's channels, or NVLS's) left to the GEMM's waves out of all SMs.
double ComputeShare(sim::CollectiveKind kind, double bytes, const sim::GroupPlacement& group) {
  const sim::CollectiveEstimate e = *sim::EstimateCollective(H100(), kind, bytes, group);
  const int sms = e.algorithm == sim::CollectiveAlgorithm::kNvls ? H100().nccl_nvls_sms
                                                                 : H100().nccl_collective_sms;
  return static_cast<double>(H100().sm_count - sms) / H100().sm_count;
}

PipelineTime Predict(const std::vector<StageCost>& stages, const PipelineConfig& c) {
  absl::StatusOr<PipelineTime> t = PredictIteration(stages, c, H100(), 8);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : PipelineTime{};
}

TEST(PipelineModelTest, OneFOneBBubbleFractionIsPMinusOneOverMPlusPMinusOne) {
  for (int64_t p : {2, 4, 8}) {
    for (int64_t m : {1, 4, 16, 64}) {
      PipelineConfig c;
      c.microbatches = m;
      const PipelineTime t = Predict(Equal(p, 1e-3, 2e-3), c);
      EXPECT_NEAR(t.bubble_fraction, (p - 1.0) / (m + p - 1.0), 1e-12) << p << " " << m;
      EXPECT_NEAR(t.breakdown.total_s, (m + p - 1) * 3e-3, 1e-12);
    }
  }
}

TEST(PipelineModelTest, InterleavingDividesTheBubbleByV) {
  PipelineConfig c;
  c.microbatches = 8;
  const double plain = Predict(Equal(4, 1e-3, 2e-3), c).breakdown.bubble_s;
  EXPECT_NEAR(plain, 3 * 3e-3, 1e-12);
  for (int64_t v : {2, 3, 4}) {
    c.virtual_stages = v;
    const PipelineTime t = Predict(Equal(4, 1e-3, 2e-3), c);
    EXPECT_NEAR(t.breakdown.bubble_s, plain / v, 1e-12) << v;
    EXPECT_NEAR(t.bubble_fraction, 3.0 / (v * 8 + 3.0), 1e-12) << v;
  }
}

// Meta's closed form for its interleaved schedule (The Llama 3 Herd of Models, section
// 3.3.2: "Overall pipeline bubble ratio is (PP-1)/(V*M)"), bubble over the ideal time, at
// the 405B runs' sizes: 16 ranks, 8 chunks, 16 or 32 micro-batches; and 1F1B's
// (p-1)/m at v = 1. The hops (2 (p v - 1) of them, v times 1F1B's less one) are costed
// apart from the bubble: the boundary's bytes once per hop.
TEST(PipelineModelTest, InterleavedBubbleRatioIsPMinusOneOverVM) {
  for (int64_t m : {16, 32}) {
    for (int64_t v : {1, 8}) {
      PipelineConfig c;
      c.microbatches = m;
      c.virtual_stages = v;
      const PipelineTime t = Predict(Equal(16, 1e-3, 2e-3), c);
      EXPECT_NEAR(t.breakdown.bubble_s / (m * 3e-3), 15.0 / (v * m), 1e-12) << m << " " << v;
      EXPECT_EQ(t.p2p_s, 0);  // no boundary bytes: no hop time
      c.boundary_bytes = 1 << 20;
      c.tp = 8;  // each rank on its own node: the hops cross the network
      const PipelineTime hopping = Predict(Equal(16, 1e-3, 2e-3), c);
      const double hop =
          sim::EstimateCollective(H100(), sim::CollectiveKind::kSendRecv, 1 << 20,
                                  *sim::PlaceGroup({0, 8}, 8))
              ->seconds;
      EXPECT_NEAR(hopping.p2p_s, hop, 1e-12);
      EXPECT_NEAR(hopping.breakdown.total_s - t.breakdown.total_s, 2.0 * (16 * v - 1) * hop,
                  1e-12);
    }
  }
}

TEST(PipelineModelTest, SlowestStageSetsTheSteadyStateAndBreakdownAddsUp) {
  std::vector<StageCost> stages = Equal(3, 1e-3, 2e-3);
  stages[1].recompute_s = 1e-3;
  stages[1].exposed_tp_comm_s = 0.5e-3;
  PipelineConfig c;
  c.microbatches = 10;
  const PipelineTime t = Predict(stages, c);
  // 10 x 4 ms on the slowest rank, and the other two ranks' 3 ms each as the bubble.
  EXPECT_NEAR(t.pipeline_s, 10 * 4e-3 + 6e-3, 1e-12);
  const TimeBreakdown& b = t.breakdown;
  EXPECT_NEAR(b.recompute_s, 10e-3, 1e-12);
  EXPECT_NEAR(b.compute_s, 10 * 2.5e-3, 1e-12);
  EXPECT_NEAR(b.exposed_comm_s, 10 * 0.5e-3, 1e-12);
  EXPECT_NEAR(b.compute_s + b.recompute_s + b.exposed_comm_s + b.bubble_s, b.total_s, 1e-12);
}

TEST(PipelineModelTest, HopsCrossNvlinkOrTheNetwork) {
  PipelineConfig c;
  c.microbatches = 4;
  c.boundary_bytes = 64 << 20;
  c.tp = 2;  // 4 ranks of 2 devices: one node
  const PipelineTime inside = Predict(Equal(4, 1e-3, 2e-3), c);
  const double hop = sim::EstimateCollective(H100(), sim::CollectiveKind::kSendRecv,
                                             c.boundary_bytes, sim::SingleNodeGroup(2))
                         ->seconds;
  EXPECT_NEAR(inside.p2p_s, hop, 1e-15);
  EXPECT_NEAR(inside.pipeline_s, 7 * 3e-3 + 2 * 3 * hop, 1e-12);
  c.tp = 8;  // each rank is a node: hops go over InfiniBand
  const PipelineTime across = Predict(Equal(4, 1e-3, 2e-3), c);
  EXPECT_GT(across.p2p_s, 2 * inside.p2p_s);
  EXPECT_NEAR(
      across.breakdown.compute_s + across.breakdown.exposed_comm_s + across.breakdown.bubble_s,
      across.breakdown.total_s, 1e-12);
}

// GPT's tied table: its gradient is all-reduced between the first and the last rank once
// per iteration, exposed (Megatron-LM's _allreduce_word_embedding_grads). Two ranks a node
// apart: a ring of two moves the whole gradient once each way, so it takes at least its
// bytes over one GPU's network bandwidth; nothing else changes.
TEST(PipelineModelTest, TiedEmbeddingGradientIsAllReducedBetweenTheEndRanks) {
  PipelineConfig c;
  c.microbatches = 8;
  c.boundary_bytes = 16 << 20;
  c.tp = 8;  // each rank a node
  const PipelineTime untied = Predict(Equal(4, 1e-3, 2e-3), c);
  EXPECT_EQ(untied.tied_embedding_s, 0);
  c.tied_embedding_parameters = 51200 / 8 * 12288;  // GPT-3 175B's table at tp = 8
  const PipelineTime tied = Predict(Equal(4, 1e-3, 2e-3), c);
  const double bytes = 4.0 * c.tied_embedding_parameters;  // fp32 main gradients
  EXPECT_GE(tied.tied_embedding_s, bytes / H100().network_bandwidth_per_gpu);
  EXPECT_LE(tied.tied_embedding_s, 2 * bytes / H100().network_bandwidth_per_gpu);
  EXPECT_NEAR(tied.breakdown.total_s, untied.breakdown.total_s + tied.tied_embedding_s, 1e-12);
  EXPECT_NEAR(tied.breakdown.compute_s + tied.breakdown.exposed_comm_s + tied.breakdown.bubble_s,
              tied.breakdown.total_s, 1e-12);
  // One rank holds the table once: nothing to all-reduce.
  const PipelineTime one = Predict(Equal(1, 1e-3, 2e-3), c);
  EXPECT_EQ(one.tied_embedding_s, 0);
}

TEST(PipelineModelTest, DataParallelReductionOverlapsTheBackward) {
  StageCost s;
  s.forward_s = 1e-3;
  s.backward_s = 2e-3;
  s.parameters_per_device = 500'000'000;
  PipelineConfig c;
  c.dp = 8;
  c.microbatches = 4;
  c.overlap_dp_comm = false;
  const PipelineTime alone = Predict({s}, c);
  const double all_reduce =
      sim::EstimateCollective(H100(), sim::CollectiveKind::kAllReduce,
                              4.0 * s.parameters_per_device, sim::SingleNodeGroup(8))
          ->seconds;
  EXPECT_NEAR(alone.dp_exposed_s, all_reduce, 1e-12);
  EXPECT_NEAR(alone.breakdown.total_s, 4 * 3e-3 + all_reduce, 1e-12);
  // Overlapped, the reduction goes layer by layer under the backward of the layer before:
  // with one layer nothing hides it; with 4, each quarter-size all-reduce runs under a
  // 0.5 ms layer backward and only the last one and what spills past the others show.
  c.overlap_dp_comm = true;
  EXPECT_NEAR(Predict({s}, c).dp_exposed_s, all_reduce, 1e-12);
  s.layers = 4;
  const double quarter =
      sim::EstimateCollective(H100(), sim::CollectiveKind::kAllReduce,
                              4.0 * s.parameters_per_device / 4, sim::SingleNodeGroup(8))
          ->seconds;
  // Each overlapped layer runs its backward beside the NCCL kernel, at `share` of its rate:
  // it takes max(reduction, backward + reduction x (1 - share)).
  const double share = ComputeShare(sim::CollectiveKind::kAllReduce,
                                    4.0 * s.parameters_per_device / 4, sim::SingleNodeGroup(8));
  ASSERT_LT(share, 1.0);
  EXPECT_NEAR(Predict({s}, c).dp_exposed_s,
              quarter + 3 * std::max(quarter - 0.5e-3, quarter * (1 - share)), 1e-12);
  // A long backward hides all but the last layer's reduction, less what the others take
  // from the compute beside them.
  s.backward_s = 10;
  EXPECT_NEAR(Predict({s}, c).dp_exposed_s, quarter + 3 * quarter * (1 - share), 1e-12);
  // Run without overlap, nothing runs beside the compute.
  c.overlap_dp_comm = false;
  EXPECT_NEAR(Predict({s}, c).dp_exposed_s, all_reduce, 1e-12);
}

TEST(PipelineModelTest, ZeroOneChainsTheReduceScatterAndTheParameterGather) {
  StageCost s;
  s.forward_s = 4e-3;  // 1 ms a layer
  s.backward_s = 6e-3;
  s.recompute_s = 2e-3;  // 2 ms a layer with the backward
  s.parameters_per_device = 400'000'000;
  s.layers = 4;
  PipelineConfig c;
  c.dp = 8;
  c.microbatches = 4;
  const sim::GroupPlacement node = sim::SingleNodeGroup(8);
  const double reduce =  // one layer's fp32 gradients: 400 MB
      sim::EstimateCollective(H100(), sim::CollectiveKind::kReduceScatter, 4e8, node)->seconds;
  const double gather =  // one layer's bf16 parameters: 200 MB
      sim::EstimateCollective(H100(), sim::CollectiveKind::kAllGather, 2e8, node)->seconds;
  const double reduce_share = ComputeShare(sim::CollectiveKind::kReduceScatter, 4e8, node);
  const double gather_share = ComputeShare(sim::CollectiveKind::kAllGather, 2e8, node);
  const double expected = reduce + 3 * std::max(reduce - 2e-3, reduce * (1 - reduce_share)) +
                          gather + 3 * std::max(gather - 1e-3, gather * (1 - gather_share));
  c.zero_stage = 1;
  EXPECT_NEAR(Predict({s}, c).dp_exposed_s, expected, 1e-12);
}

TEST(PipelineModelTest, ContextParallelRanksReduceGradientsToo) {
  StageCost s;
  s.forward_s = 1e-3;
  s.backward_s = 2e-3;
  s.parameters_per_device = 100'000'000;
  PipelineConfig c;
  c.tp = 2;
  c.cp = 2;  // dp = 1: the two cp ranks of each tp index still hold the same weights
  c.overlap_dp_comm = false;
  const double all_reduce =
      sim::EstimateCollective(H100(), sim::CollectiveKind::kAllReduce,
                              4.0 * s.parameters_per_device, sim::SingleNodeGroup(2))
          ->seconds;
  EXPECT_NEAR(Predict({s}, c).dp_exposed_s, all_reduce, 1e-12);
  c.cp = 1;
  EXPECT_EQ(Predict({s}, c).dp_exposed_s, 0);
}

TEST(PipelineModelTest, ZeroThreeGathersEachLayerEveryMicroBatchLikeFsdp) {
  StageCost s;
  s.forward_s = 2e-3;   // 1 ms a layer
  s.backward_s = 4e-3;  // 2 ms a layer
  s.parameters_per_device = 200'000'000;
  s.layers = 2;
  PipelineConfig c;
  c.dp = 16;  // two nodes: the network
  c.microbatches = 8;
  c.zero_stage = 3;
  sim::GroupPlacement nodes;  // 16 devices over 2 nodes of 8, as Megatron-LM places dp
  nodes = *sim::PlaceGroup({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, 8);
  const double gather =  // one layer's bf16 parameters: 200 MB
      sim::EstimateCollective(H100(), sim::CollectiveKind::kAllGather, 2e8, nodes)->seconds;
  const double reduce =  // one layer's fp32 gradients: 400 MB
      sim::EstimateCollective(H100(), sim::CollectiveKind::kReduceScatter, 4e8, nodes)->seconds;
  // Per micro-batch: the first gather, the second spilling past layer one's forward; in
  // the backward each layer's gather and reduction, the second's spilling past 2 ms.
  // Beside either collective the compute keeps the same share (both rings hold their SMs).
  const double share =
      std::min(ComputeShare(sim::CollectiveKind::kAllGather, 2e8, nodes),
               ComputeShare(sim::CollectiveKind::kReduceScatter, 4e8, nodes));
  EXPECT_NEAR(share, (132.0 - 32.0) / 132.0, 1e-12);  // hardware.cc: h100-sxm's 32 of 132
  const double per_microbatch =
      gather + std::max(gather - 1e-3, gather * (1 - share)) + (gather + reduce) +
      std::max(gather + reduce - 2e-3, (gather + reduce) * (1 - share));
  // FSDP2's copies on the compute stream's path: both gathers' copy-out (2 bytes read and
  // written, twice) and the reduce-scatter's copy-in (2 bytes read, 4 written) of each of
  // the 2e8 parameters, at the H100's HBM bandwidth (3.35 TB/s, calibration.md).
  const double copies = 2e8 * (2 * 2 * 2 + 2 + 4) / 3.35e12;
  ASSERT_EQ(H100().hbm_bandwidth, 3.35e12);
  const PipelineTime t = Predict({s}, c);
  EXPECT_NEAR(t.dp_exposed_s, 8 * (per_microbatch + copies), 1e-12);
  EXPECT_NEAR(t.breakdown.total_s, 8 * 6e-3 + 8 * (per_microbatch + copies), 1e-12);
  // Over the network ZeRO 3 costs more than ZeRO 1, which moves the state once an iteration.
  const double three = t.dp_exposed_s;
  c.zero_stage = 1;
  EXPECT_GT(three, 4 * Predict({s}, c).dp_exposed_s);
  // Inside one node the same gathers are cheaper.
  c.zero_stage = 3;
  c.dp = 8;
  EXPECT_LT(Predict({s}, c).dp_exposed_s, three);
}

// FSDP keeping the forward's gather (zero=2, Meta's Llama 3 405B): every micro-batch
// gathers each layer once and reduce-scatters its fp32 gradients once, over the network
// when dp spans nodes, and the transfers of all m x L layers form one chain beside the
// compute. Meta's sizes: a 405B layer at tp = 8 holds 3.98e8 parameters per device, its
// data-parallel group has one GPU in each of 64 nodes, so each transfer crosses that GPU's
// 400 Gb/s NIC: (n - 1) / n of the buffer at 50 GB/s x 0.94 (hardware.cc's network
// efficiency), plus the ring's 63 network latencies (within 3% of the bandwidth term).
TEST(PipelineModelTest, ZeroTwoGathersAndReducesEachLayerOnceAMicroBatch) {
  StageCost s;
  s.forward_s = 8 * 11.7e-3;  // 8 layers of 11.7 ms forward, 24.0 ms backward
  s.backward_s = 8 * 24.0e-3;
  s.parameters_per_device = int64_t{8} * 398'000'000;
  s.layers = 8;
  PipelineConfig c;
  c.tp = 8;
  c.dp = 64;
  c.microbatches = 32;
  c.zero_stage = 2;
  const double gather_bound = 63.0 / 64 * 2 * 3.98e8 / (50e9 * 0.94);  // bf16 parameters
  const double reduce_bound = 63.0 / 64 * 4 * 3.98e8 / (50e9 * 0.94);  // fp32 gradients
  ASSERT_EQ(H100().network_bandwidth_per_gpu, 50e9);
  ASSERT_EQ(H100().network_efficiency, 0.94);
  std::vector<int64_t> group;
  for (int64_t k = 0; k < 64; ++k) group.push_back(k * 8);
  const sim::GroupPlacement nodes = *sim::PlaceGroup(group, 8);
  const double gather =
      sim::EstimateCollective(H100(), sim::CollectiveKind::kAllGather, 2 * 3.98e8, nodes)->seconds;
  const double reduce =
      sim::EstimateCollective(H100(), sim::CollectiveKind::kReduceScatter, 4 * 3.98e8, nodes)
          ->seconds;
  EXPECT_NEAR(gather, gather_bound, 0.03 * gather_bound);
  EXPECT_NEAR(reduce, reduce_bound, 0.03 * reduce_bound);
  // 50.7 ms of transfers a layer against its 35.7 ms of compute: every one of the 256
  // layers of the iteration spills 15.0 ms past its compute, the first transfer whole.
  const double share = std::min(ComputeShare(sim::CollectiveKind::kAllGather, 2 * 3.98e8, nodes),
                                ComputeShare(sim::CollectiveKind::kReduceScatter, 4 * 3.98e8,
                                             nodes));
  const double transfers = gather + reduce;
  const double spill = std::max(transfers - 35.7e-3, transfers * (1 - share));
  EXPECT_NEAR(spill, transfers - 35.7e-3, 1e-12);  // the links, not the SMs, bound it here
  EXPECT_NEAR(spill, 15.0e-3, 0.1e-3);
  auto exposed = [&](const StageCost& stage) {
    return *DataParallelExposed(stage, 0, c, H100(), 8);
  };
  EXPECT_NEAR(exposed(s), transfers + (32 * 8 - 1) * spill, 1e-9);
  // The iteration: each micro-batch takes its compute and its 8 layers' spill, the first
  // transfer's unspilled rest added once.
  const PipelineTime t = Predict({s}, c);
  EXPECT_NEAR(t.breakdown.total_s, 32 * (8 * 35.7e-3 + 8 * spill) + transfers - spill, 1e-9);
  EXPECT_NEAR(t.breakdown.exposed_comm_s, 32 * 8 * spill + transfers - spill, 1e-9);
  // Per micro-batch, so twice the micro-batches expose about twice the time (the first
  // transfer once), and ZeRO 1, which moves the state once an iteration, far less.
  c.microbatches = 64;
  EXPECT_NEAR(exposed(s), transfers + (64 * 8 - 1) * spill, 1e-9);
  c.microbatches = 32;
  c.zero_stage = 1;
  EXPECT_LT(10 * exposed(s), t.breakdown.exposed_comm_s);
  // With compute to hide under, a layer exposes only what the NCCL kernel's SMs slow.
  c.zero_stage = 2;
  s.backward_s = 8 * 60e-3;
  EXPECT_NEAR(exposed(s), transfers + (32 * 8 - 1) * transfers * (1 - share), 1e-9);
  // Without overlap each micro-batch's whole gather and reduction are exposed.
  c.overlap_dp_comm = false;
  const double whole =
      sim::EstimateCollective(H100(), sim::CollectiveKind::kAllGather, 16 * 3.98e8, nodes)
          ->seconds +
      sim::EstimateCollective(H100(), sim::CollectiveKind::kReduceScatter, 32 * 3.98e8, nodes)
          ->seconds;
  EXPECT_NEAR(exposed(s), 32 * whole, 1e-9);
  EXPECT_NEAR(Predict({s}, c).breakdown.total_s, 32 * (8 * 71.7e-3 + whole), 1e-9);
}

// ZeRO 2's per-micro-batch transfers go into each rank's pipeline step: a rank with more
// parameters to move and less compute to hide them under (the first, holding the
// embedding) becomes the slowest, and the steady state runs at its pace rather than at
// the compute's slowest rank plus a separate tail.
TEST(PipelineModelTest, ZeroTwoSpillsIntoTheSlowestRanksStep) {
  StageCost heavy;  // more compute, few parameters: hidden but for what the SMs slow
  heavy.forward_s = 20e-3;
  heavy.backward_s = 40e-3;
  heavy.parameters_per_device = 100'000'000;
  StageCost light;  // little compute, many parameters: the transfers spill
  light.forward_s = 1e-3;
  light.backward_s = 2e-3;
  light.parameters_per_device = 1'200'000'000;
  PipelineConfig c;
  c.tp = 8;  // a node per tp group: each rank's dp pair (devices 16 i and 16 i + 8) spans two
  c.dp = 2;
  c.microbatches = 4;
  c.zero_stage = 2;
  const sim::GroupPlacement pair = *sim::PlaceGroup({0, 8}, 8);
  auto transfers = [&](double params) {
    return sim::EstimateCollective(H100(), sim::CollectiveKind::kAllGather, 2 * params, pair)
               ->seconds +
           sim::EstimateCollective(H100(), sim::CollectiveKind::kReduceScatter, 4 * params, pair)
               ->seconds;
  };
  auto spill = [&](double params, double compute) {
    const double share =
        std::min(ComputeShare(sim::CollectiveKind::kAllGather, 2 * params, pair),
                 ComputeShare(sim::CollectiveKind::kReduceScatter, 4 * params, pair));
    return std::max(transfers(params) - compute, transfers(params) * (1 - share));
  };
  const double heavy_step = 60e-3 + spill(1e8, 60e-3);
  const double light_step = 3e-3 + spill(1.2e9, 3e-3);
  ASSERT_GT(light_step, heavy_step);  // the light rank is the slowest
  ASSERT_NEAR(light_step, transfers(1.2e9), 1e-12);  // bound by its links
  const PipelineTime t = Predict({heavy, light}, c);
  // m x the slowest rank's step, the other's step as the bubble, the hops, the larger tail.
  const double tail = std::max(transfers(1e8) - spill(1e8, 60e-3),
                               transfers(1.2e9) - spill(1.2e9, 3e-3));
  EXPECT_NEAR(t.breakdown.total_s, 4 * light_step + heavy_step + 2 * t.p2p_s + tail, 1e-9);
  EXPECT_NEAR(t.breakdown.compute_s, 4 * 3e-3, 1e-12);
}

// With interleaving only the first chunk's layers reduce at the very end: the chain runs
// over L / v layers. Each layer's reduction (1e8 parameters over NVLink, about a
// millisecond) outlasts its microsecond of backward, so every layer of the chain spills.
TEST(PipelineModelTest, InterleavedChainsRunOverTheFirstChunksLayers) {
  PipelineConfig c;
  c.dp = 2;
  c.microbatches = 4;
  std::vector<StageCost> one_layer = Equal(2, 1e-6, 1e-6);
  for (StageCost& s : one_layer) s.parameters_per_device = 100'000'000;
  const double comm = Predict(one_layer, c).dp_exposed_s;  // one layer's whole reduction
  ASSERT_GT(comm, 1e-4);
  std::vector<StageCost> eight_layers = Equal(2, 8e-6, 8e-6);
  for (StageCost& s : eight_layers) {
    s.parameters_per_device = 800'000'000;
    s.layers = 8;
  }
  const double spill = comm - 1e-6;  // per further layer: its reduction less its backward
  EXPECT_NEAR(Predict(eight_layers, c).dp_exposed_s, comm + 7 * spill, 1e-9);
  c.virtual_stages = 2;
  EXPECT_NEAR(Predict(eight_layers, c).dp_exposed_s, comm + 3 * spill, 1e-9);
  c.virtual_stages = 4;
  EXPECT_NEAR(Predict(eight_layers, c).dp_exposed_s, comm + 1 * spill, 1e-9);
}

TEST(PipelineModelTest, RefusesBadConfigurations) {
  PipelineConfig c;
  EXPECT_FALSE(PredictIteration({}, c, H100(), 8).ok());
  c.virtual_stages = 2;
  EXPECT_FALSE(PredictIteration(Equal(1, 1, 1), c, H100(), 8).ok());
  c.microbatches = 6;
  absl::StatusOr<PipelineTime> t = PredictIteration(Equal(4, 1, 1), c, H100(), 8);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("multiple of the pipeline size"), std::string::npos);
  c = PipelineConfig{};
  c.zero_stage = 4;
  EXPECT_FALSE(PredictIteration(Equal(2, 1, 1), c, H100(), 8).ok());
  c.zero_stage = 0;
  EXPECT_FALSE(PredictIteration(Equal(2, -1, 1), c, H100(), 8).ok());
  std::vector<StageCost> no_layer = Equal(1, 1, 1);
  no_layer[0].layers = 0;
  EXPECT_FALSE(PredictIteration(no_layer, c, H100(), 8).ok());
}

}  // namespace
}  // namespace commir::search::plan
