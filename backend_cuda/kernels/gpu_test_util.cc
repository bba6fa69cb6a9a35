#include "backend_cuda/kernels/gpu_test_util.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace commir::cuda_kernels::testing {

std::string NoGpuReason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state
    return absl::StrFormat("no usable CUDA device (cudaGetDeviceCount: %s)",
                           cudaGetErrorString(err));
  }
  if (count == 0) return "no CUDA device present";
  return "";
}


DeviceBuffer::DeviceBuffer(size_t bytes, size_t offset_bytes) : bytes_(bytes), offset_(offset_bytes) {
  // Round up so that an empty tensor still gets a valid pointer.
  if (cudaMalloc(&base_, bytes + offset_bytes + 16) != cudaSuccess) base_ = nullptr;
}

DeviceBuffer::~DeviceBuffer() {
  if (base_ != nullptr) cudaFree(base_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), bytes_(other.bytes_), offset_(other.offset_) {}

DeviceBuffer Upload(const Tensor& t, size_t offset_bytes) {
  DeviceBuffer buffer(static_cast<size_t>(t.byte_size()), offset_bytes);
  if (t.byte_size() > 0) {
    EXPECT_EQ(cudaMemcpy(buffer.get(), t.raw_data(), t.byte_size(), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  return buffer;
}

Tensor Download(const void* device, ElementType type, std::vector<int64_t> shape) {
  Tensor t(type, std::move(shape));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (t.byte_size() > 0) {
    EXPECT_EQ(cudaMemcpy(t.raw_data(), device, t.byte_size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  return t;
}

Tensor RandomTensor(ElementType type, std::vector<int64_t> shape, uint32_t seed, double low,
                    double high) {
  std::mt19937_64 rng(seed);
  const int64_t n = runtime::NumElements(shape);
  if (IsIntegerType(type)) {
    std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(low),
                                                static_cast<int64_t>(high));
    std::vector<int64_t> values(n);
    for (int64_t& v : values) v = dist(rng);
    return Tensor::FromInt64(type, std::move(shape), values);
  }
  std::uniform_real_distribution<double> dist(low, high);
  std::vector<double> values(n);
  for (double& v : values) v = dist(rng);
  return Tensor::FromDouble(type, std::move(shape), values);
}

void ExpectNear(const Tensor& actual, const Tensor& expected, double rtol, double atol,
                const std::string& what) {
  ASSERT_EQ(actual.element_type(), expected.element_type()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const std::vector<double> a = actual.ToDouble();
  const std::vector<double> e = expected.ToDouble();
  int reported = 0;
  int64_t mismatches = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    bool ok;
    if (std::isnan(e[i]) || std::isnan(a[i])) {
      ok = std::isnan(e[i]) && std::isnan(a[i]);
    } else if (std::isinf(e[i]) || std::isinf(a[i])) {
      ok = a[i] == e[i];
    } else {
      ok = std::fabs(a[i] - e[i]) <= atol + rtol * std::fabs(e[i]);
    }
    if (!ok) {
      ++mismatches;
      if (reported++ < 5) {
        ADD_FAILURE() << what << ": element " << i << " of " << expected.DebugTypeString()
                      << " is " << a[i] << ", expected " << e[i] << " (rtol " << rtol
                      << ", atol " << atol << ")";
      }
    }
  }
  if (mismatches > 5) ADD_FAILURE() << what << ": " << mismatches << " mismatches in total";
}

void ExpectSameBits(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.element_type(), expected.element_type()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const int width = ElementTypeByteWidth(actual.element_type());
  const auto* a = static_cast<const unsigned char*>(actual.raw_data());
  const auto* e = static_cast<const unsigned char*>(expected.raw_data());
  int reported = 0;
  for (int64_t i = 0; i < actual.num_elements(); ++i) {
    if (std::memcmp(a + i * width, e + i * width, width) == 0) continue;
    if (IsFloatType(actual.element_type()) && std::isnan(actual.GetAsDouble(i)) &&
        std::isnan(expected.GetAsDouble(i))) {
      continue;
    }
    if (reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " of " << expected.DebugTypeString()
                    << " is " << actual.GetAsDouble(i) << ", expected "
                    << expected.GetAsDouble(i) << " (bitwise)";
    }
  }
}

double Ulp(ElementType type) {
  switch (type) {
    case ElementType::kF64: return std::ldexp(1.0, -52);
    case ElementType::kF32: return std::ldexp(1.0, -23);
    case ElementType::kF16: return std::ldexp(1.0, -10);
    case ElementType::kBF16: return std::ldexp(1.0, -7);
    default: return 0.0;
  }
}

}  // namespace commir::cuda_kernels::testing
