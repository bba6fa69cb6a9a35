#include "sim/collective_time.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace commir::sim {

std::optional<CollectiveKind> CollectiveKindOf(OpKind kind) {
  switch (kind) {
    case OpKind::kAllGather: return CollectiveKind::kAllGather;
    case OpKind::kReduceScatter: return CollectiveKind::kReduceScatter;
    case OpKind::kAllReduce: return CollectiveKind::kAllReduce;
    case OpKind::kAllToAll: return CollectiveKind::kAllToAll;
    case OpKind::kShift: return CollectiveKind::kSendRecv;
    default: return std::nullopt;
  }
}

absl::string_view CollectiveAlgorithmName(CollectiveAlgorithm algorithm) {
  switch (algorithm) {
    case CollectiveAlgorithm::kRing: return "ring";
    case CollectiveAlgorithm::kNvls: return "nvls";
    case CollectiveAlgorithm::kPairwise: return "pairwise";
    case CollectiveAlgorithm::kSendRecv: return "send/recv";
  }
  return "?";
}

double MessageSizeEfficiency(const HardwareSpec& hw, double message_bytes) {
  if (message_bytes <= 0) return 1;
  return message_bytes / (message_bytes + hw.bus_half_efficiency_bytes);
}

namespace {

// One (algorithm, protocol) NCCL could run: its latency and its bytes term.
struct Candidate {
  CollectiveAlgorithm algorithm;
  NcclProtocol protocol;
  int64_t steps;
  double latency_s;
  double bus_bytes;
  double bytes_s;
};

// Keeps the fastest candidate in `est`, as NCCL's tuner does.
void Consider(const Candidate& c, CollectiveEstimate& est) {
  const double t = c.latency_s + c.bytes_s;
  if (t >= est.seconds) return;
  est.seconds = t;
  est.algorithm = c.algorithm;
  est.protocol = c.protocol;
  est.steps = c.steps;
  est.bus_bytes = c.bus_bytes;
  est.bus_bandwidth = c.bytes_s > 0 ? c.bus_bytes / c.bytes_s : 0;
}

double NetworkBandwidth(const HardwareSpec& hw) {
  return hw.network_bandwidth_per_gpu * hw.network_efficiency;
}

void ConsiderRing(const HardwareSpec& hw, CollectiveKind kind, double bytes,
                  const GroupPlacement& group, double size_efficiency, CollectiveEstimate& est) {
  const int64_t n = group.num_devices;
  const int64_t nodes = std::max<int64_t>(group.num_nodes, 1);
  const bool all_reduce = kind == CollectiveKind::kAllReduce;
  const int64_t steps = all_reduce ? 2 * (n - 1) : n - 1;
  const int64_t inter_steps = all_reduce ? 2 * (nodes - 1) : nodes - 1;
  const double bus_bytes = bytes * static_cast<double>(steps) / static_cast<double>(n);
  const double members_per_node = static_cast<double>(n) / static_cast<double>(nodes);
  double bandwidth = std::numeric_limits<double>::infinity();
  if (members_per_node > 1) bandwidth = hw.nvlink_bandwidth_per_direction * hw.nvlink_bus_efficiency;
  if (nodes > 1) bandwidth = std::min(bandwidth, members_per_node * NetworkBandwidth(hw));
  for (int p = 0; p < kNumNcclProtocols; ++p) {
    const double latency = hw.nccl_base_latency_s[p] +
                           static_cast<double>(steps - inter_steps) * hw.nccl_nvlink_step_latency_s[p] +
                           static_cast<double>(inter_steps) * hw.network_latency_s;
    const double rate = bandwidth * size_efficiency * hw.nccl_protocol_bandwidth_fraction[p];
    Consider({CollectiveAlgorithm::kRing, static_cast<NcclProtocol>(p), steps, latency, bus_bytes,
              bus_bytes / rate},
             est);
  }
}

void ConsiderNvls(const HardwareSpec& hw, double bytes, const GroupPlacement& group,
                  double size_efficiency, CollectiveEstimate& est) {
  const double n = static_cast<double>(group.num_devices);
  const double bus_bytes = bytes * (n + 1) / n;
  const double rate = hw.nvlink_bandwidth_per_direction * hw.nvls_bus_efficiency * size_efficiency;
  Consider({CollectiveAlgorithm::kNvls, NcclProtocol::kSimple, 0, hw.nccl_nvls_latency_s,
            bus_bytes, bus_bytes / rate},
           est);
}

void ConsiderPairwise(const HardwareSpec& hw, double bytes, const GroupPlacement& group,
                      double size_efficiency, CollectiveEstimate& est) {
  const double n = static_cast<double>(group.num_devices);
  const double nodes = static_cast<double>(std::max<int64_t>(group.num_nodes, 1));
  const double same_node_peers = n / nodes - 1;
  const double other_node_peers = n - 1 - same_node_peers;
  const double chunk = bytes / n;
  const double nvlink = hw.nvlink_bandwidth_per_direction * hw.all_to_all_bus_efficiency;
  for (int p = 0; p < kNumNcclProtocols; ++p) {
    const double scale = size_efficiency * hw.nccl_protocol_bandwidth_fraction[p];
    const double latency = hw.nccl_base_latency_s[p] +
                           same_node_peers * hw.nccl_nvlink_step_latency_s[p] +
                           other_node_peers * hw.network_latency_s;
    // NCCL posts every pair's send/recv in one group: the pairs inside the node (NVLink)
    // and those to other nodes (the NIC) move at the same time, so the slower part sets
    // the time.
    const double nvlink_s = same_node_peers * chunk / (nvlink * scale);
    const double network_s =
        other_node_peers * chunk /
        (NetworkBandwidth(hw) * hw.all_to_all_network_efficiency * scale);
    const double bytes_s = std::max(nvlink_s, network_s);
    Consider({CollectiveAlgorithm::kPairwise, static_cast<NcclProtocol>(p), group.num_devices - 1,
              latency, bytes * (n - 1) / n, bytes_s},
             est);
  }
}

void ConsiderSendRecv(const HardwareSpec& hw, double bytes, const GroupPlacement& group,
                      double size_efficiency, CollectiveEstimate& est) {
  const bool spans_nodes = !group.within_one_node();
  const double bandwidth = spans_nodes ? NetworkBandwidth(hw) : hw.p2p_bandwidth;
  for (int p = 0; p < kNumNcclProtocols; ++p) {
    const double step = spans_nodes ? hw.network_latency_s : hw.nccl_nvlink_step_latency_s[p];
    const double rate = bandwidth * size_efficiency * hw.nccl_protocol_bandwidth_fraction[p];
    Consider({CollectiveAlgorithm::kSendRecv, static_cast<NcclProtocol>(p), 1,
              hw.nccl_base_latency_s[p] + step, bytes, bytes / rate},
             est);
  }
}

}  // namespace

absl::StatusOr<CollectiveEstimate> EstimateCollective(const HardwareSpec& hw, CollectiveKind kind,
                                                      double message_bytes,
                                                      const GroupPlacement& group) {
  if (!(message_bytes >= 0) || !std::isfinite(message_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a collective's message size must be finite and >= 0, got %g", message_bytes));
  }
  if (group.num_devices < 1) return absl::InvalidArgumentError("a collective needs at least one device");
  CollectiveEstimate est;
  if (group.num_devices == 1 || message_bytes == 0) return est;

  est.seconds = std::numeric_limits<double>::infinity();
  const double size_efficiency = MessageSizeEfficiency(hw, message_bytes);
  switch (kind) {
    case CollectiveKind::kSendRecv:
      ConsiderSendRecv(hw, message_bytes, group, size_efficiency, est);
      break;
    case CollectiveKind::kAllToAll:
      ConsiderPairwise(hw, message_bytes, group, size_efficiency, est);
      break;
    case CollectiveKind::kAllReduce:
      if (hw.nvls && group.within_one_node()) {
        ConsiderNvls(hw, message_bytes, group, size_efficiency, est);
      }
      ConsiderRing(hw, kind, message_bytes, group, size_efficiency, est);
      break;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      ConsiderRing(hw, kind, message_bytes, group, size_efficiency, est);
      break;
  }
  return est;
}

double CopyEngineBandwidth(const HardwareSpec& hw, bool link_used_both_ways) {
  return link_used_both_ways ? hw.copy_engine_bandwidth_both_ways / 2
                             : hw.copy_engine_bandwidth_one_way;
}

absl::StatusOr<CopyEngineEstimate> EstimateCopyEngineTransfer(const HardwareSpec& hw,
                                                              double bytes,
                                                              bool link_used_both_ways) {
  if (!(bytes >= 0) || !std::isfinite(bytes)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a peer copy's size must be finite and >= 0, got %g", bytes));
  }
  CopyEngineEstimate est;
  est.bandwidth = CopyEngineBandwidth(hw, link_used_both_ways);
  est.bytes = bytes;
  if (bytes == 0) return est;  // no copy is issued
  est.seconds = hw.copy_engine_latency_s + bytes / est.bandwidth;
  return est;
}

double HbmAccessesPerLinkByte(CollectiveKind kind, CollectiveAlgorithm algorithm) {
  if (algorithm == CollectiveAlgorithm::kNvls) return 2;  // the switch adds, not the SMs
  return kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kAllReduce ? 3 : 2;
}

CommunicationLoad NcclLoad(const HardwareSpec& hw, CollectiveKind kind,
                           const CollectiveEstimate& estimate) {
  CommunicationLoad load;
  if (estimate.algorithm == CollectiveAlgorithm::kNvls) {
    load.sms = hw.nccl_nvls_sms;
  } else if (kind == CollectiveKind::kSendRecv || kind == CollectiveKind::kAllToAll) {
    load.sms = hw.nccl_p2p_sms;
  } else {
    load.sms = hw.nccl_collective_sms;
  }
  if (estimate.seconds > 0) {
    load.hbm_bytes_per_s =
        HbmAccessesPerLinkByte(kind, estimate.algorithm) * estimate.bus_bytes / estimate.seconds;
  }
  return load;
}

CommunicationLoad CopyEngineLoad(double bytes, double seconds) {
  CommunicationLoad load;
  if (seconds > 0) load.hbm_bytes_per_s = HbmAccessesPerLinkByte(CollectiveKind::kSendRecv) * bytes / seconds;
  return load;
}

}  // namespace commir::sim
