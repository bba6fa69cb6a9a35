// Time of one op on one device, from the op table's cost (commir/op_def.h
// OpCost: FLOPs and bytes, per device in spmd functions) and the hardware:
//  * GEMMs (matmul, any batch dims): launch + max(FLOPs / (peak x gemm_peak_fraction x
//    tile efficiency), bytes / HBM). Tile efficiency is wave quantization over the SMs:
//    useful M x N x batch over waves x SMs x tile area, with waves = ceil(tiles / SMs),
//    taking the best of the 128x256, 256x128 and 128x128 tiles cuBLAS picks among. The
//    roofline max makes small-K and skinny GEMMs memory-bound.
//  * attention: the same with attention_peak_fraction and tiles of 128 queries per batch
//    and head. The op table's FLOPs already halve causal attention and count GQA by query
//    heads (the shared kv heads only shrink the bytes).
//  * every other op with a cost (elementwise, reductions, norms, softmax, layout copies):
//    launch + max(bytes / HBM, FLOPs / plain f32 peak).
//  * ops with no cost (reshape, rank, loops, terminators) launch no kernel: 0.
// Tensor-core peaks: bf16 and f16 on the bf16 peak; f32 on tf32 if the hardware says
// f32_matmul_uses_tf32, else on plain f32; f64 and integers on plain f32 (a blind spot).
#ifndef COMMIR_SIM_OP_TIME_H_
#define COMMIR_SIM_OP_TIME_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "commir/element_type.h"
#include "commir/ir.h"
#include "sim/hardware.h"

namespace commir::sim {

// tiles / (ceil(tiles / sm_count) x sm_count): the fraction of SM slots the waves fill.
double WaveEfficiency(double tiles, int sm_count);

// The FLOP/s a matmul or attention of this element type runs at before any efficiency.
double MatmulPeakFlops(const HardwareSpec& hw, ElementType type);

// Best tile efficiency over the candidate tiles for `batch` GEMMs of M x N outputs.
double GemmTileEfficiency(const HardwareSpec& hw, double batch, int64_t m, int64_t n);

// Seconds of one kernel (launch overhead included).
double MatmulTime(const HardwareSpec& hw, ElementType type, double batch, int64_t m, int64_t n,
                  double flops, double bytes);
// `query_tiles`: batch x query heads x ceil(query length / 128).
double AttentionTime(const HardwareSpec& hw, ElementType type, double query_tiles, double flops,
                     double bytes);
double MemoryBoundTime(const HardwareSpec& hw, double flops, double bytes);

// The time of `op`, an op of `function`, on one device. Collectives are an error (their
// time depends on the group: see collective_time.h).
absl::StatusOr<double> OpTime(const HardwareSpec& hw, const Operation& op, const Function& function);

}  // namespace commir::sim

#endif  // COMMIR_SIM_OP_TIME_H_
