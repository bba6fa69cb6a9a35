#include "backend_cuda/cublaslt_gemm.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "backend_cuda/cuda_status.h"

namespace commir::cuda {
namespace {

// cublasGetStatusName lives in libcublas, which this backend does not link.
const char* StatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "unknown cuBLAS status";
  }
}

absl::Status LtStatus(cublasStatus_t status, absl::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  if (status == CUBLAS_STATUS_ALLOC_FAILED) {
    return absl::ResourceExhaustedError(absl::StrFormat("%s: cuBLASLt could not allocate memory", what));
  }
  return absl::InternalError(absl::StrFormat("%s: cuBLASLt error %s (%d)", what,
                                             StatusName(status), static_cast<int>(status)));
}

#define COMMIR_LT_RETURN_IF_ERROR(expr, what)                            \
  do {                                                                   \
    cublasStatus_t commir_lt_status_ = (expr);                           \
    if (commir_lt_status_ != CUBLAS_STATUS_SUCCESS) {                    \
      return LtStatus(commir_lt_status_, (what));                        \
    }                                                                    \
  } while (false)

cudaDataType_t DataType(ElementType type) {
  switch (type) {
    case ElementType::kF64: return CUDA_R_64F;
    case ElementType::kF16: return CUDA_R_16F;
    case ElementType::kBF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

int Alignment(const void* ptr) {
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  int alignment = 256;
  while (alignment > 1 && p % alignment != 0) alignment /= 2;
  return alignment;
}

}  // namespace

bool GemmSupportsDirectly(ElementType ab_type, ElementType c_type) {
  switch (ab_type) {
    case ElementType::kF32: return c_type == ElementType::kF32;
    case ElementType::kF64: return c_type == ElementType::kF64;
    case ElementType::kF16:
    case ElementType::kBF16: return c_type == ab_type || c_type == ElementType::kF32;
    default: return false;
  }
}

struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr;   // cuBLAS's A: taken from CommIR's b
  cublasLtMatrixLayout_t second = nullptr;  // cuBLAS's B: taken from CommIR's a
  cublasLtMatrixLayout_t out = nullptr;     // C and D
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  bool f64 = false;
  ~Plan() {
    if (out != nullptr) cublasLtMatrixLayoutDestroy(out);
    if (second != nullptr) cublasLtMatrixLayoutDestroy(second);
    if (first != nullptr) cublasLtMatrixLayoutDestroy(first);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

absl::StatusOr<std::unique_ptr<CublasLtGemm>> CublasLtGemm::Create(
    std::shared_ptr<CachingAllocator> allocator, Options options) {
  COMMIR_CUDA_RETURN_IF_ERROR(cudaSetDevice(allocator->gpu()), "cudaSetDevice");
  cublasLtHandle_t handle = nullptr;
  COMMIR_LT_RETURN_IF_ERROR(cublasLtCreate(&handle), "cublasLtCreate");
  return std::unique_ptr<CublasLtGemm>(new CublasLtGemm(std::move(allocator), options, handle));
}

CublasLtGemm::CublasLtGemm(std::shared_ptr<CachingAllocator> allocator, Options options,
                           cublasLtHandle_t handle)
    : allocator_(std::move(allocator)), options_(options), handle_(handle) {}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  cublasLtDestroy(handle_);
}

absl::StatusOr<CublasLtGemm::Plan*> CublasLtGemm::GetPlan(const GemmArgs& args, int alignment) {
  Key key{static_cast<int>(args.ab_type), static_cast<int>(args.c_type), args.m, args.n,
          args.k, args.transpose_a, args.transpose_b, args.batch, args.stride_a,
          args.stride_b, args.stride_c, args.ldc, args.lda, args.ldb, alignment};
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();

  auto plan = std::make_unique<Plan>();
  plan->f64 = args.ab_type == ElementType::kF64;
  cublasComputeType_t compute = plan->f64 ? CUBLAS_COMPUTE_64F
                                : (args.ab_type == ElementType::kF32 && options_.allow_tf32)
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = plan->f64 ? CUDA_R_64F : CUDA_R_32F;
  COMMIR_LT_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&plan->desc, compute, scale),
                            "cublasLtMatmulDescCreate");
  // C^T = op(B)^T op(A)^T (see the header). CommIR's b, stored row-major, reads as b^T
  // in column-major: no transpose needed for op(b)^T unless transpose_b.
  cublasOperation_t op_first = args.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_second = args.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  COMMIR_LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                           &op_first, sizeof(op_first)),
                            "setting TRANSA");
  COMMIR_LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                           &op_second, sizeof(op_second)),
                            "setting TRANSB");
  const cudaDataType_t ab = DataType(args.ab_type);
  const cudaDataType_t c = DataType(args.c_type);
  // Stored column-major shapes: b is [k, n] row-major (or [n, k] when transposed).
  const uint64_t first_rows = args.transpose_b ? args.k : args.n;
  const uint64_t first_cols = args.transpose_b ? args.n : args.k;
  const uint64_t second_rows = args.transpose_a ? args.m : args.k;
  const uint64_t second_cols = args.transpose_a ? args.k : args.m;
  // A row-major row stride is the column-major leading dimension.
  COMMIR_LT_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan->first, ab, first_rows, first_cols,
                                 args.ldb > 0 ? args.ldb : static_cast<int64_t>(first_rows)),
      "cublasLtMatrixLayoutCreate");
  COMMIR_LT_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan->second, ab, second_rows, second_cols,
                                 args.lda > 0 ? args.lda : static_cast<int64_t>(second_rows)),
      "cublasLtMatrixLayoutCreate");
  COMMIR_LT_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan->out, c, args.n, args.m, args.ldc > 0 ? args.ldc : args.n),
      "cublasLtMatrixLayoutCreate");
  if (args.batch > 1) {
    const int32_t count = static_cast<int32_t>(args.batch);
    auto set_batch = [&](cublasLtMatrixLayout_t layout, int64_t stride) -> absl::Status {
      COMMIR_LT_RETURN_IF_ERROR(
          cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                           sizeof(count)),
          "setting the batch count");
      COMMIR_LT_RETURN_IF_ERROR(
          cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                           &stride, sizeof(stride)),
          "setting the batch stride");
      return absl::OkStatus();
    };
    if (absl::Status s = set_batch(plan->first, args.stride_b); !s.ok()) return s;
    if (absl::Status s = set_batch(plan->second, args.stride_a); !s.ok()) return s;
    if (absl::Status s = set_batch(plan->out, args.stride_c); !s.ok()) return s;
  }

  cublasLtMatmulPreference_t preference = nullptr;
  COMMIR_LT_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&preference),
                            "cublasLtMatmulPreferenceCreate");
  uint64_t workspace = options_.workspace_bytes;
  uint32_t align = static_cast<uint32_t>(alignment);
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace, sizeof(workspace));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    cublasLtMatmulPreferenceSetAttribute(preference, attr, &align, sizeof(align));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->first,
                                                         plan->second, plan->out, plan->out,
                                                         preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  COMMIR_LT_RETURN_IF_ERROR(status, "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0) {
    return absl::InternalError(absl::StrFormat(
        "cuBLASLt has no algorithm for a %s x %s -> %s product of [%d, %d] x [%d, %d]",
        ElementTypeName(args.ab_type), ElementTypeName(args.ab_type),
        ElementTypeName(args.c_type), args.m, args.k, args.k, args.n));
  }
  plan->algo = result.algo;
  plan->workspace = result.workspaceSize;
  Plan* raw = plan.get();
  plans_.emplace(key, std::move(plan));
  return raw;
}

absl::Status CublasLtGemm::Run(const GemmArgs& args, cudaStream_t stream) {
  if (!GemmSupportsDirectly(args.ab_type, args.c_type)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cuBLASLt does not multiply %s into %s directly", ElementTypeName(args.ab_type),
        ElementTypeName(args.c_type)));
  }
  if (args.m == 0 || args.n == 0 || args.batch == 0) return absl::OkStatus();
  if (args.ldc != 0 && (args.ldc < args.n || args.batch != 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a GEMM row stride of %d for %d columns (batch %d)", args.ldc, args.n, args.batch));
  }
  const int64_t a_row = args.transpose_a ? args.m : args.k;
  const int64_t b_row = args.transpose_b ? args.k : args.n;
  if ((args.lda != 0 && args.lda < a_row) || (args.ldb != 0 && args.ldb < b_row)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "GEMM operand row strides %d and %d for rows of %d and %d elements", args.lda, args.ldb,
        a_row, b_row));
  }
  if (args.k == 0 && args.ldc > args.n) {
    // The empty sum's zeros, row by row.
    const size_t bytes = ElementTypeByteWidth(args.c_type);
    COMMIR_CUDA_RETURN_IF_ERROR(
        cudaMemset2DAsync(args.c, static_cast<size_t>(args.ldc) * bytes, 0,
                          static_cast<size_t>(args.n) * bytes, static_cast<size_t>(args.m),
                          stream),
        "cudaMemset2DAsync");
    return absl::OkStatus();
  }
  if (args.k == 0) {
    // An empty sum: zeros, without asking cuBLASLt about a degenerate shape.
    const size_t elements = static_cast<size_t>((args.batch - 1) * args.stride_c + args.m * args.n);
    COMMIR_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(args.c, 0, elements * ElementTypeByteWidth(args.c_type), stream),
        "cudaMemsetAsync");
    return absl::OkStatus();
  }
  // Batch entries start at base + i * stride, so the strides count towards alignment.
  auto stride_alignment = [](int64_t stride, ElementType type) {
    return Alignment(reinterpret_cast<const void*>(
        static_cast<uintptr_t>(stride) * ElementTypeByteWidth(type)));
  };
  int alignment = std::min({Alignment(args.a), Alignment(args.b), Alignment(args.c),
                            stride_alignment(args.stride_a, args.ab_type),
                            stride_alignment(args.stride_b, args.ab_type),
                            stride_alignment(args.stride_c, args.c_type),
                            stride_alignment(args.ldc, args.c_type),
                            stride_alignment(args.lda, args.ab_type),
                            stride_alignment(args.ldb, args.ab_type)});
  absl::StatusOr<Plan*> plan = GetPlan(args, alignment);
  if (!plan.ok()) return plan.status();
  // The workspace is stream-ordered: freed right after the launch, it is reused only by
  // later work on the same stream.
  std::shared_ptr<DeviceBuffer> workspace;
  if ((*plan)->workspace > 0) {
    absl::StatusOr<std::shared_ptr<DeviceBuffer>> buffer =
        allocator_->Allocate((*plan)->workspace, stream);
    if (!buffer.ok()) return buffer.status();
    workspace = *std::move(buffer);
  }
  const double alpha64 = 1.0, beta64 = 0.0;
  const float alpha32 = 1.0f, beta32 = 0.0f;
  const void* alpha = (*plan)->f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = (*plan)->f64 ? static_cast<const void*>(&beta64) : &beta32;
  // k == 0: beta = 0 and an empty sum give zeros, which cuBLASLt writes.
  COMMIR_LT_RETURN_IF_ERROR(
      cublasLtMatmul(handle_, (*plan)->desc, alpha, args.b, (*plan)->first, args.a,
                     (*plan)->second, beta, args.c, (*plan)->out, args.c, (*plan)->out,
                     &(*plan)->algo, workspace ? workspace->data() : nullptr,
                     (*plan)->workspace, stream),
      "cublasLtMatmul");
  return absl::OkStatus();
}

}  // namespace commir::cuda
