// Element types as the device kernels see them.
//
// KDType is commir::ElementType itself, from the plain header the .cu files may include
// (commir/element_type_enum.h: element_type.h needs Abseil, which nvcc's sources do not
// get); the name stays for the kernels' signatures.
#ifndef COMMIR_BACKEND_CUDA_KERNELS_DTYPE_H_
#define COMMIR_BACKEND_CUDA_KERNELS_DTYPE_H_

#include <cstdint>

#include "commir/element_type_enum.h"

namespace commir::cuda_kernels {

// f16 is IEEE binary16, bf16 is bfloat16, i1 is one byte holding 0 or 1.
using KDType = ::commir::ElementType;

// Bytes one element occupies in device memory.
constexpr int KDTypeSize(KDType t) {
  switch (t) {
    case KDType::kF64:
    case KDType::kI64:
      return 8;
    case KDType::kF32:
    case KDType::kI32:
      return 4;
    case KDType::kF16:
    case KDType::kBF16:
      return 2;
    case KDType::kI1:
      return 1;
  }
  return 0;
}

constexpr bool KDTypeIsFloat(KDType t) {
  return t == KDType::kF64 || t == KDType::kF32 || t == KDType::kF16 || t == KDType::kBF16;
}

// Kernels handle tensors of rank <= kMaxRank after merging dimensions that are contiguous in
// both source and destination (so e.g. a rank-10 elementwise op is fine; a transpose that
// really permutes more than 8 separate dimension groups is not). Larger ranks return
// cudaErrorInvalidValue.
inline constexpr int kMaxRank = 8;

// Errors that depend on data values (which the host cannot see without blocking) are
// reported by OR-ing these bits into an optional device-side `int32_t` flag the caller
// allocates, zeroes, and inspects after the stream has run. Where the flag is raised the
// element is written as 0.
enum KErrorBits : int32_t {
  kErrIntDivByZero = 1,     // integer div by zero
  kErrIntNegativePow = 2,   // integer pow with a negative exponent
  kErrEmptyIntMean = 4,     // integer reduce_mean over zero elements
  kErrIndexOutOfRange = 8,  // gather / scatter_add index outside the table
  kErrLabelOutOfRange = 16,  // cross_entropy label neither a class nor ignore_index
};

}  // namespace commir::cuda_kernels

#endif  // COMMIR_BACKEND_CUDA_KERNELS_DTYPE_H_
