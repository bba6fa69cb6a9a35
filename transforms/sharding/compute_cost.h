// What the partitioner charges for the work a strategy leaves on each device, in the unit
// of its communication cost (layout.h: bytes a link moves per device, plus a latency per
// collective written as bytes), so that one number ranks strategies and plans by time.
//
// Without it a plan that computes the whole batch on every device costs nothing more
// than one that splits it, and the cheapest communication wins however much redundant
// work it buys: a training step on a dp x tp mesh gathered every tp-split weight and the
// dp-split batch rather than all_reduce the gradients.
//
// Time of an op's per-device share: the roofline of the sim's default device (h100-sxm,
// sim/hardware.cc; the figures are copied into PartitionerDevice below, as the
// partitioner sits below the sim, and sim/partitioner_device_test.cc checks they agree), max(FLOPs / the matmul peak of its element type, bytes accessed /
// HBM bandwidth), from the op's OpDef cost formula on its global types divided by the
// number of blocks its strategy splits the work into. It is converted to bytes at the
// bus bandwidth nccl-tests measures for large collectives inside an H100 node, about
// 360 GB/s (../shared/calibration.md), the rate the communication bytes move at.
// Efficiencies below the peak are left out: they scale every strategy of an op alike.
#ifndef COMMIR_TRANSFORMS_SHARDING_COMPUTE_COST_H_
#define COMMIR_TRANSFORMS_SHARDING_COMPUTE_COST_H_

#include "absl/types/span.h"
#include "commir/ir.h"
#include "commir/op_def.h"

namespace commir::sharding {

// The device figures the partitioner prices time with: the sim's h100-sxm.
struct PartitionerDevice {
  double peak_flops_bf16 = 989e12;  // dense tensor-core bf16 and f16
  double peak_flops_f32 = 67e12;    // plain f32 (f32 matmuls do not use TF32 by default)
  double hbm_bandwidth = 3.35e12;
  int gpus_per_node = 8;
  double network_bandwidth_per_gpu = 50e9;
};
inline constexpr PartitionerDevice kPartitionerDevice{};

// Bytes per second a collective's bytes per device move at (nccl-tests bus bandwidth,
// all_gather and reduce_scatter of >= 1 GiB on 8 H100: 360-370 GB/s).
inline constexpr double kLinkBytesPerSecond = 360e9;

// What a collective's bytes cost relative to those of one inside a node: 1 when the
// devices of its group (`axes` of `mesh`, device ids in mesh order) sit on one node of
// the default device's GPUs per node, else the ratio of the link bandwidth to the
// network's per-GPU bandwidth (a group spanning nodes moves its bytes over the NICs).
double CollectiveByteWeight(const Mesh& mesh, const AxisList& axes);

// The op's FLOPs and bytes on its global types (`operand_types` in operand order; the
// results' types are the op's own).
OpCost GlobalOpCost(const Operation& op, absl::Span<const Type> operand_types, const Mesh* mesh);

// The seconds of `global` (an op's cost on its global types, element type `type`) when
// its work is split into `blocks` equal blocks, on the default device's roofline.
double ComputeSeconds(const OpCost& global, ElementType type, double blocks);

// The same in the partitioner's unit: ComputeSeconds x kLinkBytesPerSecond.
double ComputeCostBytes(const OpCost& global, ElementType type, double blocks);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_COMPUTE_COST_H_
