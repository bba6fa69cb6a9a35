// The cpu backend's kernels by op kind: one entry per op family's adapter from an
// Operation (attributes, result types) to the reference kernels of kernels.h and
// collectives.h.
#ifndef COMMIR_BACKEND_CPU_KERNEL_TABLE_H_
#define COMMIR_BACKEND_CPU_KERNEL_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backend_cpu/kernels.h"
#include "commir/ir.h"
#include "commir/op_kernel_table.h"
#include "runtime/tensor.h"

namespace commir::cpu {

// Runs a tensor op on host operands; `indices` are its index operands' values.
using TensorKernel = absl::StatusOr<std::vector<runtime::Tensor>> (*)(
    const Operation& op, absl::Span<const runtime::Tensor* const> operands,
    absl::Span<const int64_t> indices);
// Runs a collective given every group member's part; returns every member's result.
using CollectiveKernel = absl::StatusOr<std::vector<runtime::Tensor>> (*)(
    const Operation& op, absl::Span<const runtime::Tensor* const> parts);

using TensorKernelTable = OpKernelTable<TensorKernel>;
using CollectiveKernelTable = OpKernelTable<CollectiveKernel>;

// The tables the backend dispatches through (built once).
const TensorKernelTable& CpuTensorKernels();

// The options of an `attention` op whose q has head dimension `head_dim`, with its
// q_pos and k_pos index operands' values (as many as it has).
AttentionOptions AttentionOptionsOf(const Operation& op, int64_t head_dim,
                                    absl::Span<const int64_t> indices);
const CollectiveKernelTable& CpuCollectiveKernels();

// Ok when every op that needs a tensor kernel or a collective kernel has one in these
// tables; otherwise an error naming each op without one.
absl::Status CheckCpuKernelTables(const TensorKernelTable& tensor,
                                  const CollectiveKernelTable& collective);

}  // namespace commir::cpu

#endif  // COMMIR_BACKEND_CPU_KERNEL_TABLE_H_
