// NCCL-style time of one collective: the fastest of the algorithms and protocols NCCL's
// tuner could pick for it (NCCL's own cost structure, src/graph/tuning.cc):
//
//   time = latency[a, p] + bus bytes / (bus bandwidth[a] x size efficiency x fraction[p])
//
//  * bus bytes = message bytes x the nccl-tests bus factor: (n-1)/n for all_gather,
//    reduce_scatter and all_to_all, 2(n-1)/n for all_reduce, 1 for send/recv (`shift`);
//    (n+1)/n for an NVLS all_reduce (below).
//  * protocols p = LL, LL128, Simple: base latency[p], per-step NVLink latency[p], and
//    the fraction[p] of the bandwidth each reaches (LL sends half its bytes as flags).
//  * size efficiency = bytes / (bytes + bus_half_efficiency_bytes): small messages use
//    few channels and cannot fill the links (fitted to calibration.md's curve).
//
// Algorithms:
//  * ring (all_gather, reduce_scatter, all_reduce): n-1 steps, 2(n-1) for all_reduce.
//    latency = base[p] + intra steps x NVLink step latency[p] + inter steps x
//    network_latency, where a ring over k nodes crosses the network in k-1 of its steps
//    (2(k-1) for all_reduce) and stays on NVLink in the others. Bus bandwidth: inside a
//    node NVLink x nvlink_bus_efficiency. Across nodes NCCL runs one ring per channel and
//    lets each channel cross between nodes at a different GPU's NIC (rail), so a node's
//    crossing traffic spreads over the NICs of its m members: the bandwidth is
//    min(NVLink x nvlink_bus_efficiency, m x network_bandwidth_per_gpu x
//    network_efficiency) (only the NIC term when m = 1). m = members / nodes.
//  * NVLS (all_reduce inside one node, when hw.nvls): the NVSwitch reduces: every GPU
//    pulls the reduction of its 1/n of the buffer from the switch (whose multimem load
//    reads that part of every GPU, its own included) and multicasts the result to all,
//    so each GPU's links carry (n+1)/n of the buffer each way and nothing is added on
//    its SMs. Bus bandwidth NVLink x nvls_bus_efficiency; latency nccl_nvls_latency
//    (Simple only). nccl-tests' busbw is then 2(n-1)/(n+1) x that bandwidth.
//  * pairwise (all_to_all): a GPU sends S/n to each of its n-1 peers and receives S/n
//    from each, all pairs posted in one group. Its m-1 peers on the node are reached over
//    NVLink at NVLink x all_to_all_bus_efficiency, its n-m peers on other nodes through
//    its NIC at network_bandwidth_per_gpu x network_efficiency x
//    all_to_all_network_efficiency; the two parts move at once, so the bandwidth term is
//    max((m-1) S/n / NVLink rate, (n-m) S/n / NIC rate). Latency: base[p] + (m-1) NVLink
//    step latency[p] + (n-m) network_latency (each pair's set-up, one after another).
//  * send/recv (`shift`): one step, p2p_bandwidth inside a node, the NIC across nodes.
//
// What is NOT modelled: trees and NVLS across nodes (NVLSTree, CollNet/SHARP: with IB
// SHARP all_reduce reaches more, calibration.md), NVLS for all_gather/reduce_scatter,
// congestion of the network beyond all_to_all's one fitted efficiency, and
// groups of different sizes per node (m is the average); for all_to_all, PXN (a GPU's
// traffic to another node forwarded over NVLink to the GPU on the same rail) and the
// per-node deduplication of DeepEP's kernels.
// A group of one device, or an empty message, costs nothing (NCCL is not called).
#ifndef COMMIR_SIM_COLLECTIVE_TIME_H_
#define COMMIR_SIM_COLLECTIVE_TIME_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "commir/op_def.h"
#include "sim/hardware.h"
#include "sim/placement.h"

namespace commir::sim {

enum class CollectiveKind { kAllGather, kReduceScatter, kAllReduce, kAllToAll, kSendRecv };

// all_gather, reduce_scatter, all_reduce, all_to_all and shift (as send/recv); nullopt
// for every other op.
std::optional<CollectiveKind> CollectiveKindOf(OpKind kind);

enum class CollectiveAlgorithm { kRing, kNvls, kPairwise, kSendRecv };
absl::string_view CollectiveAlgorithmName(CollectiveAlgorithm algorithm);

struct CollectiveEstimate {
  double seconds = 0;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
  int64_t steps = 0;        // latency steps of the algorithm (0 for NVLS: one latency)
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
// also read the local operand they add the received part to, except under NVLS, where
// the switch adds:
//
//   HBM bytes/s = (2, or 3 for reductions on the SMs) x bytes moved over the link / time
struct CommunicationLoad {
  int sms = 0;
  double hbm_bytes_per_s = 0;
};
double HbmAccessesPerLinkByte(CollectiveKind kind,
                              CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing);
// An NCCL kernel: hw.nccl_p2p_sms for send/recv and all_to_all's pairs, hw.nccl_nvls_sms
// for NVLS, hw.nccl_collective_sms for the rings.
CommunicationLoad NcclLoad(const HardwareSpec& hw, CollectiveKind kind,
                           const CollectiveEstimate& estimate);
// A copy-engine shift moving `bytes` each way (sends and receives) in `seconds`.
CommunicationLoad CopyEngineLoad(double bytes, double seconds);

}  // namespace commir::sim

#endif  // COMMIR_SIM_COLLECTIVE_TIME_H_
