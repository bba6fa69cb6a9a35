// Hardware descriptions for the performance model: what one GPU computes and
// moves per second, how GPUs are wired inside a node and between nodes, and the NCCL
// latency figures the collective model uses. All fields are in SI units (FLOP/s, bytes,
// bytes/s, seconds); the JSON file format (hardware_json.h) spells the units in its keys.
#ifndef COMMIR_SIM_HARDWARE_H_
#define COMMIR_SIM_HARDWARE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace commir::sim {

// NCCL's protocols, in the order of its tuning tables (src/graph/tuning.cc).
enum class NcclProtocol { kLL = 0, kLL128 = 1, kSimple = 2 };

// How a `shift` (and any peer copy a schedule decomposes into) moves data inside a node:
// the GPUs' copy engines (cudaMemcpyPeerAsync: no SMs) or an NCCL send/recv kernel (SMs).
// Across nodes it always goes through NCCL (copy engines reach peers over NVLink only).
enum class P2pTransport { kCopyEngine, kNccl };
absl::string_view P2pTransportName(P2pTransport transport);  // "ce", "nccl"
inline constexpr int kNumNcclProtocols = 3;
absl::string_view NcclProtocolName(NcclProtocol protocol);

struct HardwareSpec {
  std::string name;

  // --- One GPU: compute ---
  double peak_flops_bf16 = 0;  // dense tensor-core bf16 and f16 FLOP/s
  double peak_flops_tf32 = 0;  // dense tensor-core tf32 FLOP/s
  double peak_flops_f32 = 0;   // plain f32 FLOP/s (no tensor core)
  // f32 matmuls run on the tf32 tensor cores when true, on plain f32 otherwise. False by
  // default: PyTorch and cuBLAS keep f32 GEMMs in full f32 unless told otherwise.
  bool f32_matmul_uses_tf32 = false;
  int sm_count = 0;
  // GEMM pricing (sim/gemm_time.h): the fraction of its share of the tensor-core peak one
  // SM's main loop sustains; the bandwidth (bytes/s, whole GPU) at which L2 feeds A and B
  // tiles to the SMs, which makes small CTA tiles slower per SM; and the latency each wave
  // of CTAs pays before its first MMA (prologue and pipeline fill), also paid once more by
  // a split-K reduction.
  double gemm_peak_fraction = 0;
  double gemm_operand_bandwidth = 0;
  double gemm_wave_latency_s = 0;
  // Fused attention kernels (sim/attention_time.h): the fraction of the tensor-core peak
  // a CTA's inner loop over 128x128 blocks reaches, forward and backward, and each CTA's
  // fixed cost (loading its tile, the epilogue) in block times.
  double attention_peak_fraction = 0;
  double attention_backward_peak_fraction = 0;
  double attention_tile_overhead_blocks = 0;
  double attention_backward_tile_overhead_blocks = 0;
  double kernel_launch_overhead_s = 0;  // added once per kernel

  // --- One GPU: memory ---
  double hbm_bandwidth = 0;  // bytes/s
  double hbm_capacity = 0;   // bytes

  // --- Inside a node ---
  int gpus_per_node = 8;
  double nvlink_bandwidth_per_direction = 0;  // bytes/s over all links of one GPU
  int nvlink_links = 0;
  // Fraction of the NVLink bandwidth NCCL ring collectives reach as bus bandwidth for the
  // largest messages (nccl-tests busbw / per-direction NVLink bandwidth).
  double nvlink_bus_efficiency = 0;
  // Large-message bandwidth of one NCCL send/recv (a `shift`) between two GPUs of a node.
  double p2p_bandwidth = 0;
  // NCCL's all_to_all (a pairwise exchange of send/recv pairs, collective_time.h): the
  // fraction of the NVLink bandwidth its bus bandwidth reaches for the largest messages.
  double all_to_all_bus_efficiency = 0;
  // The fraction of the NIC rate (network_bandwidth_per_gpu x network_efficiency) that
  // NCCL's all_to_all reaches across nodes: every GPU sends to every other node at once,
  // many flows share the fabric's links (collective_time.h).
  double all_to_all_network_efficiency = 0;
  // NVLink SHARP (NVLS): the NVSwitch reduces and multicasts, so an all_reduce inside a
  // node moves each GPU's bytes about once per direction (collective_time.h). `nvls`:
  // the node's switches have it; the fraction of the NVLink bandwidth NVLS traffic
  // reaches; its fixed latency (NCCL runs it with the Simple protocol only).
  bool nvls = false;
  double nvls_bus_efficiency = 0;
  double nccl_nvls_latency_s = 0;
  int copy_engines = 0;  // 0: the GPU has none, peer copies go through NCCL
  // Copy-engine peer copies (cudaMemcpyPeerAsync): the bandwidth of one GPU copying to a
  // peer while nothing comes back, and the total of two GPUs copying to each other at
  // once (both directions of the link; each direction gets half of it). Bytes/s.
  double copy_engine_bandwidth_one_way = 0;
  double copy_engine_bandwidth_both_ways = 0;
  double copy_engine_latency_s = 0;  // from the copy's issue to its first bytes landing
  // Which path `shift` takes inside a node (P2pTransport above).
  P2pTransport p2p_transport = P2pTransport::kCopyEngine;

  // --- Between nodes ---
  double network_bandwidth_per_gpu = 0;  // bytes/s, one NIC per GPU
  double network_latency_s = 0;          // per ring step (or pair) that crosses the network
  double network_efficiency = 0;         // fraction of the NIC rate NCCL reaches

  // --- Message-size curve shared by every transfer ---
  // Bandwidth reaches half its large-message value at this message size (bytes): small
  // messages use few channels and cannot fill the links.
  double bus_half_efficiency_bytes = 0;

  // --- Overlap ---
  // SMs an NCCL kernel occupies while it runs (one CTA per channel): ring collectives
  // (all_gather, reduce_scatter, all_reduce) and send/recv (a `shift`, and the pairs of
  // an all_to_all). A GEMM beside it runs its waves on the SMs left (sim_backend.h); the
  // cuda backend's ncclConfig minCTAs/maxCTAs is what pins the real count to this figure.
  int nccl_collective_sms = 0;
  int nccl_p2p_sms = 0;
  // An NVLS all_reduce runs on NCCL's NVLS channels, fewer than its ring channels.
  int nccl_nvls_sms = 0;

  // --- NCCL latencies, per protocol (LL, LL128, Simple) ---
  double nccl_base_latency_s[kNumNcclProtocols] = {0, 0, 0};
  double nccl_nvlink_step_latency_s[kNumNcclProtocols] = {0, 0, 0};
  // Fraction of the bus bandwidth each protocol reaches (LL sends half its bytes as flags).
  double nccl_protocol_bandwidth_fraction[kNumNcclProtocols] = {0, 0, 0};
};

// The built-in descriptions, by name: "h100-sxm" (the default), "h200", "a100-sxm-80g".
const std::vector<HardwareSpec>& BuiltinHardware();
inline constexpr absl::string_view kDefaultHardware = "h100-sxm";
// Null when `name` is not a built-in.
const HardwareSpec* FindBuiltinHardware(absl::string_view name);

// A built-in by name, or else a JSON description file at that path (hardware_json.h).
absl::StatusOr<HardwareSpec> LoadHardware(absl::string_view name_or_path);

}  // namespace commir::sim

#endif  // COMMIR_SIM_HARDWARE_H_
