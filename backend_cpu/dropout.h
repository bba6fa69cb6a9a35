// The cpu kernel of `dropout` (commir/philox.h draws the mask).
#ifndef COMMIR_BACKEND_CPU_DROPOUT_H_
#define COMMIR_BACKEND_CPU_DROPOUT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "commir/dropout_indexing.h"
#include "runtime/tensor.h"

namespace commir::cpu {

// y[j] = x[j] * scale where the Philox 4x32-10 draw of (seed, global index of element j,
// step) is >= the threshold, else 0 (also for a NaN or infinite x[j]); computed in f32
// (f64 for f64) and rounded once. x must have a float element type.
absl::StatusOr<runtime::Tensor> Dropout(const runtime::Tensor& x, uint64_t seed,
                                        const DropoutIndexing& indexing, uint64_t step = 0);

}  // namespace commir::cpu

#endif  // COMMIR_BACKEND_CPU_DROPOUT_H_
