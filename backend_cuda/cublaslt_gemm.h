// Matrix products through cuBLASLt: CommIR's row-major batched `matmul` with
// transposes, NumPy-broadcast batch dimensions and f32 accumulation.
//
// Row-major to column-major: a row-major [R, C] matrix is the column-major [C, R]
// matrix with leading dimension C, i.e. its transpose. So C = op(A) op(B) is computed
// as C^T = op(B)^T op(A)^T with cuBLAS's first operand taken from b and its second from
// a, and C^T in column-major is exactly C in row-major: no copies.
//
// Numerics: f32, f16 and bf16 multiply with CUBLAS_COMPUTE_32F (f32 accumulation,
// no TF32: the spec checks f32 at 1e-5, beyond TF32's 10-bit mantissa; allow_tf32 opts
// in), f64 with CUBLAS_COMPUTE_64F. The result type is any float type: f32/f16/bf16
// inputs write f32 directly or their own type; other combinations are computed in f32
// and converted (round to nearest even) by the caller through the `convert` hook.
//
// Plans (descriptors, layouts and the heuristic's algorithm) are cached per shape,
// types, transposes, batch strides and pointer alignment, so a steady-state call costs
// one cublasLtMatmul. The workspace comes from the caching allocator.
#ifndef COMMIR_BACKEND_CUDA_CUBLASLT_GEMM_H_
#define COMMIR_BACKEND_CUDA_CUBLASLT_GEMM_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backend_cuda/caching_allocator.h"
#include "backend_cuda/gemm_batch.h"
#include "commir/element_type.h"

namespace commir::cuda {

// One strided-batched product on row-major matrices: for b in [0, batch):
//   c[b] = op(a[b]) op(b[b]) with op(a) [m, k], op(b) [k, n], c [m, n].
// A stride of 0 repeats the same matrix (a broadcast batch dimension).
struct GemmArgs {
  ElementType ab_type = ElementType::kF32;  // of a and b
  ElementType c_type = ElementType::kF32;   // of c
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements
  // c's row stride in elements, 0 for n (packed). Larger for a column block written in
  // place of a wider matrix (runtime/in_place.h's PlaceBlock); batch must then be 1.
  int64_t ldc = 0;
  // a's and b's row strides in elements, 0 for packed (their stored row length: k or m
  // for a, n or k for b). Larger for a column block read in place from a wider matrix
  // (runtime/in_place.h's SliceAsMatrices): cuBLASLt's layout takes it as the leading
  // dimension, the pointer points at the block.
  int64_t lda = 0, ldb = 0;
};

// Whether cuBLASLt multiplies ab_type into c_type directly (f32->f32, f16->f16|f32,
// bf16->bf16|f32, f64->f64).
bool GemmSupportsDirectly(ElementType ab_type, ElementType c_type);

class CublasLtGemm {
 public:
  struct Options {
    bool allow_tf32 = false;                    // f32 with TF32 tensor cores
    size_t workspace_bytes = size_t{32} << 20;  // what Hopper kernels like
  };
  // One per GPU; `allocator` supplies the workspace.
  static absl::StatusOr<std::unique_ptr<CublasLtGemm>> Create(
      std::shared_ptr<CachingAllocator> allocator, Options options);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // Enqueues the product on `stream`. Needs GemmSupportsDirectly(ab_type, c_type).
  absl::Status Run(const GemmArgs& args, cudaStream_t stream);

  int64_t cached_plans() const { return static_cast<int64_t>(plans_.size()); }

 private:
  struct Plan;
  using Key = std::tuple<int, int, int64_t, int64_t, int64_t, bool, bool, int64_t, int64_t,
                         int64_t, int64_t, int64_t, int64_t, int64_t, int>;
  CublasLtGemm(std::shared_ptr<CachingAllocator> allocator, Options options,
               cublasLtHandle_t handle);
  absl::StatusOr<Plan*> GetPlan(const GemmArgs& args, int alignment);

  std::shared_ptr<CachingAllocator> allocator_;
  Options options_;
  cublasLtHandle_t handle_;
  absl::flat_hash_map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace commir::cuda

#endif  // COMMIR_BACKEND_CUDA_CUBLASLT_GEMM_H_
