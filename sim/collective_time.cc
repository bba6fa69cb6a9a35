#include "sim/collective_time.h"

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

double MessageSizeEfficiency(const HardwareSpec& hw, double message_bytes) {
  if (message_bytes <= 0) return 1;
  return message_bytes / (message_bytes + hw.bus_half_efficiency_bytes);
}

absl::StatusOr<CollectiveEstimate> EstimateCollective(const HardwareSpec& hw, CollectiveKind kind,
                                                      double message_bytes,
                                                      const GroupPlacement& group) {
  if (!(message_bytes >= 0) || !std::isfinite(message_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a collective's message size must be finite and >= 0, got %g", message_bytes));
  }
  if (group.num_devices < 1) return absl::InvalidArgumentError("a collective needs at least one device");
  CollectiveEstimate est;
  const double n = static_cast<double>(group.num_devices);
  if (group.num_devices == 1 || message_bytes == 0) return est;

  double bus_factor = (n - 1) / n;
  est.steps = group.num_devices - 1;
  if (kind == CollectiveKind::kAllReduce) {
    bus_factor = 2 * (n - 1) / n;
    est.steps = 2 * (group.num_devices - 1);
  } else if (kind == CollectiveKind::kSendRecv) {
    bus_factor = 1;
    est.steps = 1;
  }
  est.bus_bytes = message_bytes * bus_factor;

  const bool spans_nodes = !group.within_one_node();
  double link_bandwidth;
  if (spans_nodes) {
    link_bandwidth = hw.network_bandwidth_per_gpu * hw.network_efficiency;
  } else if (kind == CollectiveKind::kSendRecv) {
    link_bandwidth = hw.p2p_bandwidth;
  } else {
    link_bandwidth = hw.nvlink_bandwidth_per_direction * hw.nvlink_bus_efficiency;
  }
  const double sized_bandwidth = link_bandwidth * MessageSizeEfficiency(hw, message_bytes);

  est.seconds = std::numeric_limits<double>::infinity();
  for (int p = 0; p < kNumNcclProtocols; ++p) {
    double step_latency = spans_nodes ? hw.network_latency_s : hw.nccl_nvlink_step_latency_s[p];
    double bandwidth = sized_bandwidth * hw.nccl_protocol_bandwidth_fraction[p];
    double t = hw.nccl_base_latency_s[p] + static_cast<double>(est.steps) * step_latency +
               est.bus_bytes / bandwidth;
    if (t < est.seconds) {
      est.seconds = t;
      est.protocol = static_cast<NcclProtocol>(p);
      est.bus_bandwidth = bandwidth;
    }
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

double HbmAccessesPerLinkByte(CollectiveKind kind) {
  return kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kAllReduce ? 3 : 2;
}

CommunicationLoad NcclLoad(const HardwareSpec& hw, CollectiveKind kind,
                           const CollectiveEstimate& estimate) {
  CommunicationLoad load;
  load.sms = kind == CollectiveKind::kSendRecv ? hw.nccl_p2p_sms : hw.nccl_collective_sms;
  if (estimate.seconds > 0) {
    load.hbm_bytes_per_s = HbmAccessesPerLinkByte(kind) * estimate.bus_bytes / estimate.seconds;
  }
  return load;
}

CommunicationLoad CopyEngineLoad(double bytes, double seconds) {
  CommunicationLoad load;
  if (seconds > 0) load.hbm_bytes_per_s = HbmAccessesPerLinkByte(CollectiveKind::kSendRecv) * bytes / seconds;
  return load;
}

}  // namespace commir::sim
