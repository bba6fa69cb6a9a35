// NCCL-style time of one collective:
//
//   time = base latency[p] + steps x step latency[p]
//          + bus bytes / (bus bandwidth x size efficiency x protocol fraction[p])
//
// minimized over the protocols p = LL, LL128, Simple, as NCCL's tuner picks the fastest.
//  * bus bytes = message bytes x the nccl-tests bus factor: (n-1)/n for all_gather,
//    reduce_scatter and all_to_all, 2(n-1)/n for all_reduce, 1 for send/recv (`shift`).
//  * ring steps: n-1, all_reduce 2(n-1) (reduce-scatter then all-gather), send/recv 1.
//  * bus bandwidth: inside one node NVLink per direction x nvlink_bus_efficiency for ring
//    collectives and p2p_bandwidth for send/recv; a group spanning nodes is limited by its
//    members' NICs: network bandwidth per GPU x network_efficiency, with the network's
//    latency per step. What is NOT modelled: NVLS/SHARP and tree or hierarchical
//    algorithms (a spanning ring is the conservative bound), several groups sharing one
//    node's NICs, and all_to_all's pairwise exchange (treated as a ring of n-1 steps).
//  * size efficiency = bytes / (bytes + bus_half_efficiency_bytes): small messages use
//    few channels and cannot fill the links (fitted to calibration.md's curve).
// A group of one device, or an empty message, costs nothing (NCCL is not called).
#ifndef COMMIR_SIM_COLLECTIVE_TIME_H_
#define COMMIR_SIM_COLLECTIVE_TIME_H_

#include <optional>

#include "absl/status/statusor.h"
#include "commir/op_def.h"
#include "sim/hardware.h"
#include "sim/placement.h"

namespace commir::sim {

enum class CollectiveKind { kAllGather, kReduceScatter, kAllReduce, kAllToAll, kSendRecv };

// all_gather, reduce_scatter, all_reduce, all_to_all and shift (as send/recv); nullopt
// for every other op.
std::optional<CollectiveKind> CollectiveKindOf(OpKind kind);

struct CollectiveEstimate {
  double seconds = 0;
  NcclProtocol protocol = NcclProtocol::kSimple;
  int64_t steps = 0;
  double bus_bytes = 0;      // bytes each device moves over its link
  double bus_bandwidth = 0;  // bytes/s reached by the chosen protocol at this size
};

// `message_bytes` is nccl-tests' "size": the whole gathered buffer of an all_gather, the
// whole input of a reduce_scatter, the buffer of an all_reduce, each device's buffer of an
// all_to_all, the bytes sent by a send/recv. Errors on negative or non-finite bytes and
// on an empty group.
absl::StatusOr<CollectiveEstimate> EstimateCollective(const HardwareSpec& hw, CollectiveKind kind,
                                                      double message_bytes,
                                                      const GroupPlacement& group);

// The size-efficiency factor of the curve above.
double MessageSizeEfficiency(const HardwareSpec& hw, double message_bytes);

// A peer copy by the copy engines inside a node (cudaMemcpyPeerAsync), which takes no SMs
// and runs no NCCL protocol:
//
//   time = copy_engine_latency + bytes / bandwidth
//
// bandwidth: copy_engine_bandwidth_one_way when the link between the two GPUs carries
// nothing the other way, copy_engine_bandwidth_both_ways / 2 when it does (a shift
// between two GPUs, a bidirectional ring). Errors like EstimateCollective.
struct CopyEngineEstimate {
  double seconds = 0;
  double bytes = 0;      // sent (and, in a ring step, received) by the device
  double bandwidth = 0;  // bytes/s in this transfer's direction
};
double CopyEngineBandwidth(const HardwareSpec& hw, bool link_used_both_ways);
absl::StatusOr<CopyEngineEstimate> EstimateCopyEngineTransfer(const HardwareSpec& hw,
                                                              double bytes,
                                                              bool link_used_both_ways);

// What a transfer costs the GPU it runs on besides its time: the SMs its kernel occupies
// (0 for the copy engines) and the HBM bandwidth its traffic takes. A device reads what it
// sends and writes what it receives, each at the link rate; reduce_scatter and all_reduce
// also read the local operand they add the received part to:
//
//   HBM bytes/s = (2, or 3 for reductions) x bytes moved over the link / time
struct CommunicationLoad {
  int sms = 0;
  double hbm_bytes_per_s = 0;
};
double HbmAccessesPerLinkByte(CollectiveKind kind);
// An NCCL kernel: hw.nccl_p2p_sms for send/recv, hw.nccl_collective_sms otherwise.
CommunicationLoad NcclLoad(const HardwareSpec& hw, CollectiveKind kind,
                           const CollectiveEstimate& estimate);
// A copy-engine shift moving `bytes` each way (sends and receives) in `seconds`.
CommunicationLoad CopyEngineLoad(double bytes, double seconds);

}  // namespace commir::sim

#endif  // COMMIR_SIM_COLLECTIVE_TIME_H_
