// Time of one op on one device, from the op table's cost (commir/op_def.h
// OpCost: FLOPs and bytes, per device in spmd functions) and the hardware:
//  * GEMMs (matmul, any batch dims): sim/gemm_time.h, the fastest of the CTA tiles and
//    split-K factors a cuBLASLt-style heuristic chooses among, each priced by its waves
//    over the SMs, its main loop, pipeline-fill latency, epilogue and split-K reduction,
//    and the memory roofline. Batch dims broadcast on one operand count once in its bytes.
//  * attention and attention_grad: FlashAttention's tiles, by sequence lengths, head dims
//    and the causal mask (sim/attention_time.h). OpTime does not know index values: a
//    causal op that writes q_pos/k_pos is priced at the op table's average there; the
//    sim backend passes the values (AttentionKernelTime).
//  * every other op with a cost (elementwise, reductions, norms, softmax, layout copies):
//    launch + max(bytes / HBM, FLOPs / plain f32 peak).
//  * ops with no cost (reshape, rank, loops, terminators) launch no kernel: 0; nor do
//    the blocks a GEMM reads or writes in place (sim/gemm_views.h).
// Tensor-core peaks: MatmulPeakFlops (sim/gemm_time.h).
#ifndef COMMIR_SIM_OP_TIME_H_
#define COMMIR_SIM_OP_TIME_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "commir/element_type.h"
#include "commir/ir.h"
#include "sim/gemm_time.h"
#include "sim/hardware.h"

namespace commir::sim {

// tiles / (ceil(tiles / sm_count) x sm_count): the fraction of SM slots the waves fill.
double WaveEfficiency(double tiles, int sm_count);

double MemoryBoundTime(const HardwareSpec& hw, double flops, double bytes);

// The time of `op`, an op of `function`, on one device. Collectives are an error (their
// time depends on the group: see collective_time.h).
absl::StatusOr<double> OpTime(const HardwareSpec& hw, const Operation& op, const Function& function);

}  // namespace commir::sim

#endif  // COMMIR_SIM_OP_TIME_H_
