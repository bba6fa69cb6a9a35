// Reductions, softmax and norms against the cpu backend on random inputs.
#include "backend_cuda/kernels/reduce.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backend_cpu/kernels.h"
#include "backend_cuda/kernels/gpu_test_util.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::cuda_kernels {
namespace {

using ::commir::cuda_kernels::testing::DeviceBuffer;
using ::commir::cuda_kernels::testing::Download;
using ::commir::cuda_kernels::testing::ExpectNear;
using ::commir::cuda_kernels::testing::ExpectSameBits;
using ::commir::cuda_kernels::testing::RandomTensor;
using ::commir::cuda_kernels::testing::Ulp;
using ::commir::cuda_kernels::testing::Upload;
using runtime::Tensor;

struct ReduceCase {
  std::vector<int64_t> shape;
  std::vector<int64_t> dims;
};
// Row layouts (innermost reduced; warp and block paths), column layouts (innermost kept),
// mixed groups, no reduction, full reduction and empty reductions.
const std::vector<ReduceCase> kReduceCases = {
    {{37, 1000}, {1}},     {{3, 5000}, {-1}},       {{1000, 37}, {0}},     {{37, 100}, {0, 1}},
    {{4, 5, 6}, {0, 2}},   {{4, 5, 6}, {1}},        {{2, 3, 4, 5}, {1, 3}}, {{7, 9}, {}},
    {{100000}, {0}},       {{5, 0}, {1}},           {{0, 5}, {0}},         {{8, 1, 3}, {1}},
    {{}, {}},
};

TEST(ReduceKernelTest, MatchesCpuForEveryOpAndType) {
  COMMIR_SKIP_WITHOUT_GPU();
  const struct {
    ReductionFn k;
    ReductionFn c;
  } ops[] = {{ReductionFn::kSum, ReductionFn::kSum},
             {ReductionFn::kMax, ReductionFn::kMax},
             {ReductionFn::kMin, ReductionFn::kMin},
             {ReductionFn::kMean, ReductionFn::kMean}};
  uint32_t seed = 1;
  for (const auto& op : ops) {
    for (ElementType type : {ElementType::kF32, ElementType::kF16, ElementType::kBF16,
                             ElementType::kF64, ElementType::kI64, ElementType::kI32,
                             ElementType::kI1}) {
      for (const ReduceCase& c : kReduceCases) {
        const Tensor x = RandomTensor(type, c.shape, seed++, IsIntegerType(type) ? -50 : -1,
                                      type == ElementType::kI1 ? 1 : (IsIntegerType(type) ? 50 : 1));
        const auto want = cpu::Reduce(op.c, x, c.dims, /*keepdim=*/false);
        const std::string what = absl::StrFormat("reduce_%s %s [%s] dims [%s]",
                                                 ReductionFnName(op.c), ElementTypeName(type),
                                                 absl::StrJoin(c.shape, ","),
                                                 absl::StrJoin(c.dims, ","));
        DeviceBuffer dx = Upload(x);
        DeviceBuffer dy(std::max<int64_t>(want.ok() ? want->byte_size() : 0, 8));
        DeviceBuffer flag(sizeof(int32_t));
        ASSERT_EQ(cudaMemset(flag.get(), 0, sizeof(int32_t)), cudaSuccess);
        COMMIR_ASSERT_CUDA_OK(LaunchReduce(op.k, type, dx.get(), x.shape(), c.dims,
                                           dy.get(), static_cast<int32_t*>(flag.get()), nullptr));
        int32_t host_flag = 0;
        ASSERT_EQ(cudaMemcpy(&host_flag, flag.get(), 4, cudaMemcpyDeviceToHost), cudaSuccess);
        if (!want.ok()) {  // integer mean of nothing
          EXPECT_EQ(host_flag, kErrEmptyIntMean) << what;
          continue;
        }
        EXPECT_EQ(host_flag, 0) << what;
        const Tensor got = Download(dy.get(), type, want->shape());
        if (IsIntegerType(type) || op.k == ReductionFn::kMax || op.k == ReductionFn::kMin) {
          ExpectSameBits(got, *want, what);
        } else {
          // Different summation orders: the error bound grows with the count of terms
          // (values in [-1, 1)), plus one rounding of the result type.
          int64_t count = 1;
          for (int64_t d : c.dims) count *= c.shape[(d + c.shape.size()) % c.shape.size()];
          const double sum_scale = op.k == ReductionFn::kMean ? 1.0 : static_cast<double>(count);
          const double f32_error = type == ElementType::kF64 ? 1e-13 : 4e-6;
          ExpectNear(got, *want, 2 * Ulp(type), f32_error * std::sqrt(sum_scale) + 1e-30, what);
        }
      }
    }
  }
}

TEST(ReduceKernelTest, MaxAndMinPropagateNan) {
  COMMIR_SKIP_WITHOUT_GPU();
  std::vector<double> values(3000, 1.0);
  values[1234] = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = Tensor::FromDouble(ElementType::kF32, {3, 1000}, values);
  for (ReductionFn op : {ReductionFn::kMax, ReductionFn::kMin}) {
    DeviceBuffer dx = Upload(x), dy(3 * 4);
    COMMIR_ASSERT_CUDA_OK(LaunchReduce(op, KDType::kF32, dx.get(), x.shape(), std::vector<int64_t>{1},
                                       dy.get(), nullptr, nullptr));
    const std::vector<double> got = Download(dy.get(), ElementType::kF32, {3}).ToDouble();
    EXPECT_EQ(got[0], 1.0);
    EXPECT_TRUE(std::isnan(got[1]));
    EXPECT_EQ(got[2], 1.0);
  }
}

// The compensated (Kahan) sums must not turn an infinite sum into NaN: the correction
// term of inf is inf - inf. Row layout (dim 1) and column layout (dim 0).
TEST(ReduceKernelTest, SumsWithInfinityStayInfinite) {
  COMMIR_SKIP_WITHOUT_GPU();
  std::vector<double> values(3000, 1.0);
  values[5] = std::numeric_limits<double>::infinity();      // row 0 (and column 5)
  values[1000 + 7] = -std::numeric_limits<double>::infinity();  // row 1 (and column 7)
  const Tensor x = Tensor::FromDouble(ElementType::kF32, {3, 1000}, values);
  for (ReductionFn op : {ReductionFn::kSum, ReductionFn::kMean}) {
    DeviceBuffer dx = Upload(x), rows(3 * 4), cols(1000 * 4);
    COMMIR_ASSERT_CUDA_OK(LaunchReduce(op, KDType::kF32, dx.get(), x.shape(),
                                       std::vector<int64_t>{1}, rows.get(), nullptr, nullptr));
    COMMIR_ASSERT_CUDA_OK(LaunchReduce(op, KDType::kF32, dx.get(), x.shape(),
                                       std::vector<int64_t>{0}, cols.get(), nullptr, nullptr));
    const std::vector<double> r = Download(rows.get(), ElementType::kF32, {3}).ToDouble();
    const std::vector<double> c = Download(cols.get(), ElementType::kF32, {1000}).ToDouble();
    EXPECT_EQ(r[0], std::numeric_limits<double>::infinity());
    EXPECT_EQ(r[1], -std::numeric_limits<double>::infinity());
    EXPECT_EQ(r[2], op == ReductionFn::kSum ? 1000.0 : 1.0);
    EXPECT_EQ(c[5], std::numeric_limits<double>::infinity());
    EXPECT_EQ(c[7], -std::numeric_limits<double>::infinity());
    EXPECT_EQ(c[0], op == ReductionFn::kSum ? 3.0 : 1.0);
  }
}

TEST(SoftmaxKernelTest, MatchesCpu) {
  COMMIR_SKIP_WITHOUT_GPU();
  const struct {
    std::vector<int64_t> shape;
    int64_t dim;
  } cases[] = {{{7, 33}, -1}, {{3, 5000}, 1}, {{4, 5, 6}, 1}, {{4, 5, 6}, 0},
               {{}, 0},       {{2, 0}, 1},    {{1, 1024}, -1}};
  uint32_t seed = 10;
  for (ElementType type : {ElementType::kF32, ElementType::kF16, ElementType::kBF16,
                           ElementType::kF64}) {
    for (const auto& c : cases) {
      const Tensor x = RandomTensor(type, c.shape, seed++, -8, 8);
      const auto want = cpu::Softmax(x, c.dim);
      ASSERT_TRUE(want.ok()) << want.status();
      DeviceBuffer dx = Upload(x), dy(std::max<int64_t>(x.byte_size(), 8));
      COMMIR_ASSERT_CUDA_OK(LaunchSoftmax(type, dx.get(), x.shape(), c.dim, dy.get(), nullptr));
      const std::string what = absl::StrFormat("softmax %s [%s] dim %d", ElementTypeName(type),
                                               absl::StrJoin(c.shape, ","), c.dim);
      const double tol = type == ElementType::kF64 ? 1e-13 : (type == ElementType::kF32 ? 2e-6 : Ulp(type));
      ExpectNear(Download(dy.get(), type, x.shape()), *want, tol, 1e-7, what);
      // In place.
      COMMIR_ASSERT_CUDA_OK(LaunchSoftmax(type, dx.get(), x.shape(), c.dim, dx.get(), nullptr));
      ExpectNear(Download(dx.get(), type, x.shape()), *want, tol, 1e-7, what + " in place");
    }
  }
}

TEST(SoftmaxKernelTest, AllNegativeInfinitySliceIsNan) {
  COMMIR_SKIP_WITHOUT_GPU();
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = Tensor::FromDouble(ElementType::kF32, {2, 3}, {-inf, -inf, -inf, 0.0, -inf, 1.0});
  DeviceBuffer dx = Upload(x), dy(x.byte_size());
  COMMIR_ASSERT_CUDA_OK(LaunchSoftmax(KDType::kF32, dx.get(), x.shape(), -1, dy.get(), nullptr));
  ExpectNear(Download(dy.get(), ElementType::kF32, {2, 3}), *cpu::Softmax(x, -1), 2e-6, 0, "-inf rows");
}

TEST(NormKernelTest, LayerNormAndRmsNormMatchCpu) {
  COMMIR_SKIP_WITHOUT_GPU();
  uint32_t seed = 50;
  for (ElementType type : {ElementType::kF32, ElementType::kF16, ElementType::kBF16,
                           ElementType::kF64}) {
    for (ElementType param_type : {ElementType::kF32, ElementType::kBF16}) {
      for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
               {5, 64}, {3, 3000}, {2, 3, 17}, {1, 1}, {0, 8}}) {
        const int64_t n = shape.back();
        const int64_t rows = runtime::NumElements(shape) / std::max<int64_t>(n, 1);
        // An offset mean exercises the two-pass variance.
        const Tensor x = RandomTensor(type, shape, seed++, 2.0, 6.0);
        const Tensor w = RandomTensor(param_type, {n}, seed++, 0.5, 1.5);
        const Tensor b = RandomTensor(param_type, {n}, seed++, -1, 1);
        DeviceBuffer dx = Upload(x), dw = Upload(w), db = Upload(b);
        DeviceBuffer dy(std::max<int64_t>(x.byte_size(), 8));
        const std::string what = absl::StrFormat("%s x, %s params [%s]", ElementTypeName(type),
                                                 ElementTypeName(param_type),
                                                 absl::StrJoin(shape, ","));
        const double tol = type == ElementType::kF64 ? 1e-12 : (type == ElementType::kF32 ? 2e-5 : 2 * Ulp(type));
        COMMIR_ASSERT_CUDA_OK(LaunchLayerNorm(type, dx.get(), rows, n, param_type,
                                              dw.get(), param_type, db.get(), 1e-5,
                                              dy.get(), nullptr));
        ExpectNear(Download(dy.get(), type, shape), *cpu::LayerNorm(x, w, b, 1e-5), tol, tol,
                   "layernorm " + what);
        COMMIR_ASSERT_CUDA_OK(LaunchRmsNorm(type, dx.get(), rows, n, param_type,
                                            dw.get(), 1e-6, dy.get(), nullptr));
        ExpectNear(Download(dy.get(), type, shape), *cpu::RmsNorm(x, w, 1e-6), tol, tol,
                   "rmsnorm " + what);
      }
    }
  }
}

TEST(ReduceKernelTest, RejectsBadDimsWithoutLaunching) {
  const std::vector<int64_t> shape = {3, 4};
  EXPECT_EQ(LaunchReduce(ReductionFn::kSum, KDType::kF32, nullptr, shape, std::vector<int64_t>{2},
                         nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchReduce(ReductionFn::kSum, KDType::kF32, nullptr, shape,
                         std::vector<int64_t>{1, -1}, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSoftmax(KDType::kI32, nullptr, shape, 0, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSoftmax(KDType::kF32, nullptr, shape, 2, nullptr, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace commir::cuda_kernels
