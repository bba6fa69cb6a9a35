// The reductions ops compute: one enumeration shared by the op definitions
// (OpDef::reduction_fn says which reduction reduce_sum ... and the reducing collectives
// compute), the host kernels, the cuda kernels and NCCL calls, and the partitioner's
// pending-reduction layouts, so that no layer keeps its own copy.
//
// Plain C++ without Abseil: nvcc compiles the .cu files that include it.
#ifndef COMMIR_REDUCTION_FN_H_
#define COMMIR_REDUCTION_FN_H_

#include <cstdint>
#include <string_view>

namespace commir {

enum class ReductionFn : uint8_t {
  kSum,
  kMax,
  kMin,
  kMean,  // reduce_mean: the sum divided by the count (no collective computes it)
};

// The spelling of the `reduce` attribute and of reduce_*'s suffix.
constexpr std::string_view ReductionFnName(ReductionFn fn) {
  switch (fn) {
    case ReductionFn::kSum: return "sum";
    case ReductionFn::kMax: return "max";
    case ReductionFn::kMin: return "min";
    case ReductionFn::kMean: return "mean";
  }
  return "?";
}

}  // namespace commir

#endif  // COMMIR_REDUCTION_FN_H_
