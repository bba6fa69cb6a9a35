#include "sim/hardware.h"

#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/hardware_json.h"

namespace commir::sim {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

// What every built-in shares: NCCL's tuning constants and the figures calibration.md
// measured on 8xH100, used for the other GPUs too where no measurement of their own exists.
HardwareSpec CommonSpec() {
  HardwareSpec hw;
  // GEMM pricing (sim/gemm_time.h). The three figures are fitted together, by a grid
  // search, to XLA's measured H100 bf16 table (375 shapes, batch 1-4, dims 256-4096:
  // sim/testdata/xla_sm90_bf16_gemm.txt); benchmarks/sim_calibration.md gives each one's
  // error. The main loop's 86% of each SM's peak share: the table alone fits best at 88%
  // (3.5% mean error against 3.9%), but that puts 8192^3 at 820 TFLOP/s where public
  // H100 measurements give 750-800 (calibration.md) and our H200 776.5; 86% gives ~802.
  hw.gemm_peak_fraction = 0.86;
  // 14 TB/s of operand feed (fitted; calibration.md has no L2 figure): 128x256 and
  // 128x128 tiles run at the MMA rate, 64x128 at ~69% of it, 64x64 at ~51%. TMA multicast
  // lets one L2 read feed both CTAs of a cluster, so this may exceed the L2's own bandwidth.
  hw.gemm_operand_bandwidth = 14e12;
  // 2 us per wave: HBM latency of the first k-blocks, barrier set-up and the epilogue's
  // store latency; the floor of the smallest measured GEMMs (256^3: 5.2 us with launch).
  hw.gemm_wave_latency_s = 2e-6;
  // Fitted (sim/attention_time.h) to FlashAttention's non-causal H100 curves, head dim
  // 128 (calibration.md), and checked against the causal ones (benchmarks/
  // sim_calibration.md): forward on FlashAttention-3's forward (467-648 TFLOP/s at seq
  // 512-16k: 0.70 of the peak, 1.6 blocks per CTA), backward on FlashAttention-2's
  // forward+backward (248-338: 0.36, 1.5 blocks). Used for the other GPUs too (an
  // estimate: no curves of their own in calibration.md).
  hw.attention_peak_fraction = 0.70;
  hw.attention_tile_overhead_blocks = 1.6;
  hw.attention_backward_peak_fraction = 0.36;
  hw.attention_backward_tile_overhead_blocks = 1.5;
  // Estimate (not in calibration.md): a few microseconds between back-to-back kernels.
  hw.kernel_launch_overhead_s = 3e-6;
  hw.gpus_per_node = 8;
  // Measured: nccl-tests all_gather/reduce_scatter busbw 360-370 GB/s of NVLink 4's
  // 450 GB/s per direction for >= 1 GiB; the message-size curve (half-efficiency at
  // 768 KiB, together with the NCCL latencies below) is fitted so that the model gives
  // ~365 GB/s at 1 GiB and ~200 GB/s (0.45 of peak) at 16 MiB on 8 GPUs.
  hw.nvlink_bus_efficiency = 0.82;
  hw.bus_half_efficiency_bytes = 0.75 * kMiB;
  // Measured: one 400 Gb/s NIC gives 46-48 GB/s in nccl-tests (calibration.md:
  // stas00/ml-engineering network/benchmarks, nccl-tests issue 290): 47 of 50 GB/s.
  hw.network_efficiency = 0.94;
  // Estimate: one ring step through the NIC, proxy thread and switch. Checked, not
  // fitted: with it the 32-GPU all_reduce curve of calibration.md (NCCL 2.24, 1 MiB to
  // 8 GiB) comes out within 11% at every size (benchmarks/sim_calibration.md).
  hw.network_latency_s = 5e-6;
  // Fitted to the one published large-message figure: nccl-tests all_to_all reaches
  // about 320 GB/s bus bandwidth on 8 H100s in a node (calibration.md: GTC24 S62129 via
  // stas00/ml-engineering), 0.71 of 450 GB/s, less than the rings' 0.82 (each pair's
  // send/recv runs on p2p channels with smaller chunks). Checked against the simulator
  // figure of 230 GB/s and the 32-GPU cross-node figure (benchmarks/sim_calibration.md).
  hw.all_to_all_bus_efficiency = 0.71;
  // Fitted to the one published cross-node figure: nccl-tests all_to_all reaches about
  // 48 GB/s bus bandwidth on 32 H100s on 4 nodes (calibration.md: GTC24 S62129 via
  // stas00/ml-engineering), where 24 of each GPU's 31 peers are on other nodes: 0.80 of
  // the single-NIC rate of 47 GB/s (many flows at once collide in the fabric; a lone
  // NIC's nccl-tests figure has one). Checked against DeepEP's RDMA figures (43-58 GB/s
  // on 50 GB/s NICs, EP16-EP64, with tokens sent once per node and forwarded over
  // NVLink, which NCCL's all_to_all does not do: benchmarks/moe_sim_table.md).
  hw.all_to_all_network_efficiency = 0.80;
  // NCCL's tuning model (src/graph/tuning.cc): NVLS has no base latency and 25 us of
  // NVLink latency, Simple protocol only.
  hw.nccl_nvls_latency_s = 25e-6;
  // Estimate (not in calibration.md): cudaMemcpyPeerAsync takes a few microseconds from
  // its issue to its first bytes on the peer, about one kernel launch.
  hw.copy_engine_latency_s = 3e-6;
  hw.p2p_transport = P2pTransport::kCopyEngine;
  // NCCL's tuning model (src/graph/tuning.cc), ring: base latency and per-step NVLink
  // latency per protocol; LL carries half payload, LL128 about 92%.
  const double base[] = {6.6e-6, 14.0e-6, 8.4e-6};
  const double step[] = {0.6e-6, 1.9e-6, 3.4e-6};
  const double fraction[] = {0.5, 0.92, 1.0};
  for (int p = 0; p < kNumNcclProtocols; ++p) {
    hw.nccl_base_latency_s[p] = base[p];
    hw.nccl_nvlink_step_latency_s[p] = step[p];
    hw.nccl_protocol_bandwidth_fraction[p] = fraction[p];
  }
  return hw;
}

// H100 SXM 80GB. Datasheet: peaks, HBM, SMs, NVLink 4 (18 links, 450 GB/s per
// direction), NDR 400 Gb/s per GPU. Measured: send/recv 120-160 GB/s (140 used).
HardwareSpec H100Sxm() {
  HardwareSpec hw = CommonSpec();
  hw.name = "h100-sxm";
  hw.peak_flops_bf16 = 989e12;
  hw.peak_flops_tf32 = 495e12;
  hw.peak_flops_f32 = 67e12;
  hw.sm_count = 132;
  hw.hbm_bandwidth = 3.35e12;
  hw.hbm_capacity = 80 * kGiB;
  hw.nvlink_bandwidth_per_direction = 450e9;
  hw.nvlink_links = 18;
  hw.p2p_bandwidth = 140e9;
  hw.copy_engines = 4;  // estimate: async copy engines usable for peer copies
  // Measured: CUDA's p2pBandwidthLatencyTest on HGX H100 SXM, 376-380 GB/s one way and
  // 740-750 GB/s both ways between every pair (NVIDIA/nccl issue 1264).
  hw.copy_engine_bandwidth_one_way = 378e9;
  hw.copy_engine_bandwidth_both_ways = 745e9;
  // Estimate (not in calibration.md): NCCL logs 16 coll channels on H800 (8 NVLinks,
  // NVIDIA/nccl issue 892) and scales channels with the NVLinks; H100's 18 links reach
  // NCCL's cap of 32 channels, one CTA (one SM) each. send/recv uses as many p2p
  // channels per peer (the same log: 16 p2p channels per peer of 16).
  hw.nccl_collective_sms = 32;
  hw.nccl_p2p_sms = 32;
  hw.network_bandwidth_per_gpu = 50e9;
  // NVLink SHARP on the HGX H100's third-generation NVSwitches (datasheet). Measured
  // (calibration.md: NVIDIA/nccl issue 1455, nccl-tests issue 212): NVLS all_reduce bus
  // bandwidth 480 GB/s at 8 GPUs; a GPU's links then carry (n+1)/n of the buffer each way
  // (collective_time.h), so 480 = 450 x e x 2(n-1)/(n+1) gives e = 0.686. Checked on the
  // 420/440/460 GB/s at 5/6/7 GPUs (benchmarks/sim_calibration.md).
  hw.nvls = true;
  hw.nvls_bus_efficiency = 0.686;
  // NCCL's NVLS channels on sm_90 (NVLS_NCHANNELS_SM90 in src/transport/nvls.cc), one
  // CTA each.
  hw.nccl_nvls_sms = 16;
  return hw;
}

// H200 SXM 141GB: H100's compute and interconnect (datasheet), faster and larger HBM.
HardwareSpec H200() {
  HardwareSpec hw = H100Sxm();
  hw.name = "h200";
  hw.hbm_bandwidth = 4.8e12;
  hw.hbm_capacity = 141e9;
  return hw;
}

// A100 SXM 80GB. Datasheet: peaks, HBM, SMs, NVLink 3 (12 links, 300 GB/s per
// direction), HDR 200 Gb/s per GPU. No A100 measurement in calibration.md: the NCCL
// and GEMM efficiencies are H100's, send/recv is H100's scaled by the NVLink ratio.
HardwareSpec A100Sxm80g() {
  HardwareSpec hw = CommonSpec();
  hw.name = "a100-sxm-80g";
  hw.peak_flops_bf16 = 312e12;
  hw.peak_flops_tf32 = 156e12;
  hw.peak_flops_f32 = 19.5e12;
  hw.sm_count = 108;
  hw.hbm_bandwidth = 2.04e12;
  hw.hbm_capacity = 80 * kGiB;
  hw.nvlink_bandwidth_per_direction = 300e9;
  hw.nvlink_links = 12;
  hw.p2p_bandwidth = 140e9 * 300.0 / 450.0;
  hw.copy_engines = 4;
  // Copy engines: H100's measured figures scaled by the NVLink ratio (no A100 figure in
  // calibration.md). NCCL logs 24 ring channels on HGX A100 (NVIDIA/nccl-tests issue 100).
  hw.copy_engine_bandwidth_one_way = 378e9 * 300.0 / 450.0;
  hw.copy_engine_bandwidth_both_ways = 745e9 * 300.0 / 450.0;
  hw.nccl_collective_sms = 24;
  hw.nccl_p2p_sms = 24;
  // A100's NVSwitches (second generation) have no NVLink SHARP.
  hw.nvls = false;
  hw.nvls_bus_efficiency = 0.686;
  hw.nccl_nvls_sms = 16;
  hw.network_bandwidth_per_gpu = 25e9;
  // No A100 GEMM table: H100's operand feed scaled by the tensor-core peaks, so tiles keep
  // H100's relative speeds (an estimate).
  hw.gemm_operand_bandwidth = 14e12 * 312.0 / 989.0;
  return hw;
}

}  // namespace

absl::string_view P2pTransportName(P2pTransport transport) {
  return transport == P2pTransport::kCopyEngine ? "ce" : "nccl";
}

absl::string_view NcclProtocolName(NcclProtocol protocol) {
  switch (protocol) {
    case NcclProtocol::kLL: return "LL";
    case NcclProtocol::kLL128: return "LL128";
    case NcclProtocol::kSimple: return "Simple";
  }
  return "?";
}

const std::vector<HardwareSpec>& BuiltinHardware() {
  static const std::vector<HardwareSpec>* builtins =
      new std::vector<HardwareSpec>{H100Sxm(), H200(), A100Sxm80g()};
  return *builtins;
}

const HardwareSpec* FindBuiltinHardware(absl::string_view name) {
  for (const HardwareSpec& hw : BuiltinHardware()) {
    if (hw.name == name) return &hw;
  }
  return nullptr;
}

absl::StatusOr<HardwareSpec> LoadHardware(absl::string_view name_or_path) {
  if (const HardwareSpec* builtin = FindBuiltinHardware(name_or_path)) return *builtin;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::string(name_or_path), ec)) {
    std::vector<std::string> names;
    for (const HardwareSpec& hw : BuiltinHardware()) names.push_back(hw.name);
    return absl::NotFoundError(absl::StrFormat(
        "unknown hardware '%s': not a built-in (%s) and no such file", name_or_path,
        absl::StrJoin(names, ", ")));
  }
  return LoadHardwareJsonFile(name_or_path);
}

}  // namespace commir::sim
