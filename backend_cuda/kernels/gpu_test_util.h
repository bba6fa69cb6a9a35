// Helpers for the kernel tests: skipping without a GPU, device buffers, random host
// tensors and comparisons of device results against the cpu backend's kernels.
#ifndef COMMIR_BACKEND_CUDA_KERNELS_GPU_TEST_UTIL_H_
#define COMMIR_BACKEND_CUDA_KERNELS_GPU_TEST_UTIL_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend_cuda/kernels/dtype.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::cuda_kernels::testing {

using runtime::Tensor;

// Empty when a usable GPU is present, otherwise why not (no device, no driver, ...).
std::string NoGpuReason();

#define COMMIR_SKIP_WITHOUT_GPU()                                   \
  do {                                                              \
    const std::string commir_no_gpu = ::commir::cuda_kernels::testing::NoGpuReason(); \
    if (!commir_no_gpu.empty()) GTEST_SKIP() << commir_no_gpu;      \
  } while (false)

#define COMMIR_ASSERT_CUDA_OK(expr)                                        \
  do {                                                                     \
    const cudaError_t commir_err = (expr);                                 \
    ASSERT_EQ(commir_err, cudaSuccess) << #expr << ": " << cudaGetErrorString(commir_err); \
  } while (false)


// Owns a cudaMalloc'ed buffer. `offset_bytes` shifts the usable pointer (to test
// misaligned operands); bytes() is the usable size.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes, size_t offset_bytes = 0);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept;

  void* get() const { return static_cast<char*>(base_) + offset_; }
  size_t bytes() const { return bytes_; }
  bool ok() const { return base_ != nullptr; }

 private:
  void* base_ = nullptr;
  size_t bytes_ = 0;
  size_t offset_ = 0;
};

// Copies a host tensor to a new device buffer (synchronously).
DeviceBuffer Upload(const Tensor& t, size_t offset_bytes = 0);
// Waits for the default stream and copies `type`/`shape` bytes back.
Tensor Download(const void* device, ElementType type, std::vector<int64_t> shape);

// Uniform values in [low, high) rounded to `type`; integers uniform in [low, high].
Tensor RandomTensor(ElementType type, std::vector<int64_t> shape, uint32_t seed,
                    double low = -1.0, double high = 1.0);

// Element by element: |a - e| <= atol + rtol * |e|; NaN matches NaN and infinities must
// match exactly. Reports the first few mismatches with their flat index.
void ExpectNear(const Tensor& actual, const Tensor& expected, double rtol, double atol,
                const std::string& what);

// Same element type, shape and bytes, except that any NaN matches any NaN.
void ExpectSameBits(const Tensor& actual, const Tensor& expected, const std::string& what);

// One unit in the last place of `type` relative to 1 (2^-23 for f32 etc.); 0 for ints.
double Ulp(ElementType type);

}  // namespace commir::cuda_kernels::testing

#endif  // COMMIR_BACKEND_CUDA_KERNELS_GPU_TEST_UTIL_H_
