// Exact semantics of the CommIR collectives (docs/language.md, "Spmd-only ops") on one group of devices,
// evaluated on the host: parts[c] is the local tensor of the group member with coordinate
// c, and results are indexed the same way. The CPU and simulated backends execute
// collectives with these functions; other backends are checked against them.
//
// Every member must hold a tensor of the same element type and shape (as in SPMD code);
// a mismatch, an empty group or an indivisible dimension is InvalidArgument.
//
// Reductions combine the parts one at a time in coordinate order (((p0 + p1) + p2) + ...)
// in f32 for f32/f16/bf16 and in f64 for f64, and round to the element type once at the
// end; integer sums wrap (two's complement), and i1 sums are logical or.
#ifndef COMMIR_BACKEND_CPU_COLLECTIVES_H_
#define COMMIR_BACKEND_CPU_COLLECTIVES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backend_cpu/kernels.h"
#include "runtime/tensor.h"

namespace commir::cpu {

// The parts concatenated along `dim` in coordinate order; every member receives this.
absl::StatusOr<Tensor> AllGather(absl::Span<const Tensor* const> parts, int64_t dim);

// The elementwise reduction (kSum, kMax or kMin) of all parts; every member receives it.
absl::StatusOr<Tensor> AllReduce(absl::Span<const Tensor* const> parts, ReductionFn op);

// AllReduce, then `dim` is split into one block per member and member c keeps block c.
absl::StatusOr<std::vector<Tensor>> ReduceScatter(absl::Span<const Tensor* const> parts,
                                                  int64_t dim, ReductionFn op);

// Each member splits `split_dim` into n blocks and sends block j to member j; member j
// concatenates the blocks it receives along `concat_dim` in source order.
absl::StatusOr<std::vector<Tensor>> AllToAll(absl::Span<const Tensor* const> parts,
                                             int64_t split_dim, int64_t concat_dim);

// Member c sends to (c + offset) mod n, so it receives parts[(c - offset) mod n]. Any
// offset is allowed, negative too. Needs no checks, so it cannot fail.
std::vector<Tensor> Shift(absl::Span<const Tensor* const> parts, int64_t offset);

}  // namespace commir::cpu

#endif  // COMMIR_BACKEND_CPU_COLLECTIVES_H_
