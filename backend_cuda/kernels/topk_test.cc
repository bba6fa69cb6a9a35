// The top_k kernel against the cpu backend's, bit for bit: the selection is exact (values
// are copied, the order is total), so nothing may differ, in any element type, with ties
// (few distinct values) and with NaN.
#include "backend_cuda/kernels/topk.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend_cpu/kernels.h"
#include "backend_cuda/kernels/gpu_test_util.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::cuda_kernels {
namespace {

using runtime::Tensor;
using testing::Download;
using testing::ExpectSameBits;
using testing::RandomTensor;
using testing::Upload;

void ExpectMatchesCpu(const Tensor& x, int64_t k, const std::string& what) {
  absl::StatusOr<cpu::TopKResult> expected = cpu::TopK(x, k);
  ASSERT_TRUE(expected.ok()) << expected.status();
  const int64_t n = x.shape().back();
  const int64_t rows = x.num_elements() / n;
  std::vector<int64_t> shape = x.shape();
  shape.back() = k;
  testing::DeviceBuffer in = Upload(x);
  testing::DeviceBuffer values(static_cast<size_t>(rows * k * KDTypeSize(x.element_type())));
  testing::DeviceBuffer indices(static_cast<size_t>(rows * k * 8));
  COMMIR_ASSERT_CUDA_OK(LaunchTopK(x.element_type(), in.get(), rows, n, k, values.get(),
                                   static_cast<int64_t*>(indices.get()), nullptr));
  ExpectSameBits(Download(values.get(), x.element_type(), shape), expected->values,
                 what + " values");
  ExpectSameBits(Download(indices.get(), ElementType::kI64, shape), expected->indices,
                 what + " indices");
}

TEST(TopKKernelTest, MatchesTheCpuKernelBitForBit) {
  COMMIR_SKIP_WITHOUT_GPU();
  for (ElementType type : {ElementType::kF64, ElementType::kF32, ElementType::kF16,
                           ElementType::kBF16, ElementType::kI64, ElementType::kI32}) {
    // [-8, 8]: integers and 16-bit floats repeat values, so ties are common.
    Tensor x = RandomTensor(type, {3, 5, 129}, 17, -8, 8);
    if (IsFloatType(type)) {
      x.SetFromDouble(4, std::numeric_limits<double>::quiet_NaN());
      x.SetFromDouble(200, -0.0);
      x.SetFromDouble(201, 0.0);
    }
    for (int64_t k : {1, 7, 129}) {
      ExpectMatchesCpu(x, k, absl::StrCat(ElementTypeName(type), " k=", k));
    }
  }
}

TEST(TopKKernelTest, RejectsBadArgumentsWithoutLaunching) {
  int64_t indices = 0;
  EXPECT_EQ(LaunchTopK(KDType::kF32, nullptr, 1, 4, 0, nullptr, &indices, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchTopK(KDType::kF32, nullptr, 1, 4, 5, nullptr, &indices, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchTopK(KDType::kI1, nullptr, 1, 4, 2, nullptr, &indices, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace commir::cuda_kernels
