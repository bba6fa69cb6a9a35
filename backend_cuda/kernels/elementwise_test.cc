// Elementwise kernels against the cpu backend (backend_cpu/kernels.h) on random inputs.
#include "backend_cuda/kernels/elementwise.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backend_cpu/collectives.h"
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

constexpr ElementType kFloatTypes[] = {ElementType::kF32, ElementType::kF16, ElementType::kBF16,
                                       ElementType::kF64};
constexpr ElementType kIntTypes[] = {ElementType::kI64, ElementType::kI32, ElementType::kI1};

struct UnaryCase {
  ElementwiseFn k;
  ElementwiseFn c;
  bool exact;          // no transcendental: must agree bit for bit
  bool positive_only;  // domain (0, inf)
};

constexpr UnaryCase kUnaryCases[] = {
    {ElementwiseFn::kNeg, ElementwiseFn::kNeg, true, false},
    {ElementwiseFn::kAbs, ElementwiseFn::kAbs, true, false},
    {ElementwiseFn::kExp, ElementwiseFn::kExp, false, false},
    {ElementwiseFn::kLog, ElementwiseFn::kLog, false, true},
    {ElementwiseFn::kSqrt, ElementwiseFn::kSqrt, true, true},  // IEEE sqrt is correctly rounded
    {ElementwiseFn::kRsqrt, ElementwiseFn::kRsqrt, true, true},
    {ElementwiseFn::kTanh, ElementwiseFn::kTanh, false, false},
    {ElementwiseFn::kSigmoid, ElementwiseFn::kSigmoid, false, false},
    {ElementwiseFn::kRelu, ElementwiseFn::kRelu, true, false},
    {ElementwiseFn::kSilu, ElementwiseFn::kSilu, false, false},
    {ElementwiseFn::kGeluErf, ElementwiseFn::kGeluErf, false, false},
    {ElementwiseFn::kGeluTanh, ElementwiseFn::kGeluTanh, false, false},
};

// Sizes that cover empty, single element, the vector body and a non-multiple-of-4 tail.
const std::vector<std::vector<int64_t>> kShapes = {{0}, {1}, {7}, {3, 1031}, {64, 1024}};

TEST(ElementwiseKernelTest, UnaryMatchesCpuOnFloats) {
  COMMIR_SKIP_WITHOUT_GPU();
  uint32_t seed = 1;
  for (const UnaryCase& op : kUnaryCases) {
    for (ElementType type : kFloatTypes) {
      for (const auto& shape : kShapes) {
        for (size_t misalign : {size_t{0}, size_t{1}}) {  // elements of offset: scalar path
          const Tensor x = RandomTensor(type, shape, seed++, op.positive_only ? 0.05 : -6.0, 6.0);
          const size_t offset = misalign * ElementTypeByteWidth(type);
          DeviceBuffer dx = Upload(x, offset);
          DeviceBuffer dy(x.byte_size(), offset);
          COMMIR_ASSERT_CUDA_OK(
              LaunchUnary(op.k, type, dx.get(), dy.get(), x.num_elements(), nullptr));
          const Tensor got = Download(dy.get(), type, shape);
          const Tensor want = *cpu::Unary(op.c, x);
          const std::string what = absl::StrFormat(
              "%s %s [%s] misalign %d", ElementwiseFnName(op.c), ElementTypeName(type),
              absl::StrJoin(shape, ","), misalign);
          // Transcendentals: libdevice and the host libm differ by a few f32 ulp, which
          // may flip one rounding step of a narrower type.
          if (op.exact) {
            ExpectSameBits(got, want, what);
          } else {
            const double rtol = type == ElementType::kF32   ? 8 * Ulp(type)
                                : type == ElementType::kF64 ? 16 * Ulp(type)
                                                            : Ulp(type);
            ExpectNear(got, want, rtol, rtol * 1e-3, what);
          }
        }
      }
    }
  }
}

TEST(ElementwiseKernelTest, UnaryInPlaceAndSpecialValues) {
  COMMIR_SKIP_WITHOUT_GPU();
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> values = {0.0, -0.0, 1.0, -1.0, 30.0, -30.0, 100.0, -100.0, inf, -inf, nan};
  for (const UnaryCase& op : kUnaryCases) {
    const Tensor x = Tensor::FromDouble(ElementType::kF32, {static_cast<int64_t>(values.size())}, values);
    DeviceBuffer d = Upload(x);
    COMMIR_ASSERT_CUDA_OK(LaunchUnary(op.k, KDType::kF32, d.get(), d.get(), x.num_elements(), nullptr));
    ExpectNear(Download(d.get(), ElementType::kF32, x.shape()), *cpu::Unary(op.c, x), 8 * Ulp(ElementType::kF32),
               1e-30, absl::StrFormat("%s specials", ElementwiseFnName(op.c)));
  }
}

TEST(ElementwiseKernelTest, UnaryOnIntegersWrapsLikeCpu) {
  COMMIR_SKIP_WITHOUT_GPU();
  const std::vector<int64_t> values = {0, 1, -1, 5, -7, std::numeric_limits<int64_t>::min(),
                                       std::numeric_limits<int32_t>::min(), 123456789};
  for (ElementType type : kIntTypes) {
    const Tensor x = Tensor::FromInt64(type, {static_cast<int64_t>(values.size())}, values);
    for (const UnaryCase& op : kUnaryCases) {
      DeviceBuffer dx = Upload(x);
      DeviceBuffer dy(x.byte_size());
      const cudaError_t err = LaunchUnary(op.k, type, dx.get(), dy.get(), x.num_elements(), nullptr);
      const auto want = cpu::Unary(op.c, x);
      if (!want.ok()) {
        EXPECT_EQ(err, cudaErrorInvalidValue) << ElementwiseFnName(op.c);
        continue;
      }
      COMMIR_ASSERT_CUDA_OK(err);
      ExpectSameBits(Download(dy.get(), type, x.shape()), *want,
                     absl::StrFormat("%s %s", ElementwiseFnName(op.c), ElementTypeName(type)));
    }
  }
}

struct BinaryCase {
  ElementwiseFn k;
  ElementwiseFn c;
};
constexpr BinaryCase kBinaryCases[] = {
    {ElementwiseFn::kAdd, ElementwiseFn::kAdd}, {ElementwiseFn::kSub, ElementwiseFn::kSub},
    {ElementwiseFn::kMul, ElementwiseFn::kMul}, {ElementwiseFn::kDiv, ElementwiseFn::kDiv},
    {ElementwiseFn::kMax, ElementwiseFn::kMax}, {ElementwiseFn::kMin, ElementwiseFn::kMin},
    {ElementwiseFn::kPow, ElementwiseFn::kPow},
};

struct ShapePair {
  std::vector<int64_t> a, b;
};
const std::vector<ShapePair> kBroadcasts = {
    {{37, 129}, {37, 129}}, {{}, {6, 7}},        {{6, 7}, {}},           {{4, 1, 5}, {3, 1}},
    {{2, 3, 4}, {4}},       {{2, 1, 9}, {2, 5, 1}}, {{1, 1}, {1, 1}},   {{5, 0}, {1}},
    {{2, 3, 1, 4, 1, 5, 1, 2, 3}, {3, 7, 4, 1, 5, 1, 2, 1}},  // rank 9, merges to <= 8
};

std::vector<int64_t> BroadcastShape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t ea = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t eb = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    out[i] = ea == 1 ? eb : ea;
  }
  return out;
}

TEST(ElementwiseKernelTest, BinaryWithBroadcastingMatchesCpu) {
  COMMIR_SKIP_WITHOUT_GPU();
  uint32_t seed = 100;
  for (const BinaryCase& op : kBinaryCases) {
    for (ElementType type : {ElementType::kF32, ElementType::kF16, ElementType::kBF16,
                             ElementType::kF64, ElementType::kI64, ElementType::kI32,
                             ElementType::kI1}) {
      for (const ShapePair& shapes : kBroadcasts) {
        const bool integer = IsIntegerType(type);
        // pow: positive bases for floats, small non-negative exponents for integers; div:
        // integers avoid zero divisors here (tested below).
        double a_lo = -4, a_hi = 4, b_lo = -4, b_hi = 4;
        if (op.k == ElementwiseFn::kPow) {
          a_lo = integer ? -3 : 0.1;
          b_lo = integer ? 0 : -3;
          b_hi = integer ? 5 : 3;
        }
        if (op.k == ElementwiseFn::kDiv && integer) b_lo = 1;
        if (type == ElementType::kI1) {
          a_lo = b_lo = std::max(0.0, b_lo);
          a_hi = b_hi = 1;
        }
        const Tensor a = RandomTensor(type, shapes.a, seed++, a_lo, a_hi);
        const Tensor b = RandomTensor(type, shapes.b, seed++, b_lo, b_hi);
        const std::vector<int64_t> out_shape = BroadcastShape(shapes.a, shapes.b);
        DeviceBuffer da = Upload(a), db = Upload(b);
        DeviceBuffer dout(runtime::NumElements(out_shape) * ElementTypeByteWidth(type));
        DeviceBuffer flag(sizeof(int32_t));
        ASSERT_EQ(cudaMemset(flag.get(), 0, sizeof(int32_t)), cudaSuccess);
        COMMIR_ASSERT_CUDA_OK(LaunchBinary(op.k, type, da.get(), a.shape(), db.get(),
                                           b.shape(), dout.get(), out_shape,
                                           static_cast<int32_t*>(flag.get()), nullptr));
        const Tensor got = Download(dout.get(), type, out_shape);
        const auto want = cpu::Binary(op.c, a, b);
        ASSERT_TRUE(want.ok()) << want.status();
        const std::string what =
            absl::StrFormat("%s %s [%s] x [%s]", ElementwiseFnName(op.c), ElementTypeName(type),
                            absl::StrJoin(shapes.a, ","), absl::StrJoin(shapes.b, ","));
        if (op.k == ElementwiseFn::kPow && !integer) {
          ExpectNear(got, *want, type == ElementType::kF64 ? 1e-14 : 8 * Ulp(type), 0, what);
        } else {
          ExpectSameBits(got, *want, what);  // IEEE ops rounded once, integer arithmetic
        }
        int32_t host_flag = -1;
        ASSERT_EQ(cudaMemcpy(&host_flag, flag.get(), sizeof(int32_t), cudaMemcpyDeviceToHost),
                  cudaSuccess);
        EXPECT_EQ(host_flag, 0) << what;
      }
    }
  }
}

TEST(ElementwiseKernelTest, IntegerDivisionFloorsAndFlagsZeroDivisors) {
  COMMIR_SKIP_WITHOUT_GPU();
  const Tensor a = Tensor::FromInt64(ElementType::kI32, {6}, {7, -7, 7, -7, 5, std::numeric_limits<int32_t>::min()});
  const Tensor b = Tensor::FromInt64(ElementType::kI32, {6}, {2, 2, -2, -2, 0, -1});
  DeviceBuffer da = Upload(a), db = Upload(b), dout(a.byte_size()), flag(sizeof(int32_t));
  ASSERT_EQ(cudaMemset(flag.get(), 0, sizeof(int32_t)), cudaSuccess);
  COMMIR_ASSERT_CUDA_OK(LaunchBinary(ElementwiseFn::kDiv, KDType::kI32, da.get(), a.shape(), db.get(),
                                     b.shape(), dout.get(), a.shape(),
                                     static_cast<int32_t*>(flag.get()), nullptr));
  const Tensor got = Download(dout.get(), ElementType::kI32, {6});
  // floor(7/2)=3, floor(-7/2)=-4, floor(7/-2)=-4, floor(-7/-2)=3, x/0 -> 0 + flag, and
  // INT32_MIN / -1 computed in i64 (2^31) wraps back to INT32_MIN.
  EXPECT_EQ(got.ToInt64(), (std::vector<int64_t>{3, -4, -4, 3, 0, std::numeric_limits<int32_t>::min()}));
  int32_t host_flag = 0;
  ASSERT_EQ(cudaMemcpy(&host_flag, flag.get(), sizeof(int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host_flag, kErrIntDivByZero);
  // The cpu backend reports the same program as an error.
  EXPECT_FALSE(cpu::Binary(ElementwiseFn::kDiv, a, b).ok());

  const Tensor e = Tensor::FromInt64(ElementType::kI64, {2}, {2, -1});
  const Tensor base = Tensor::FromInt64(ElementType::kI64, {2}, {3, 3});
  DeviceBuffer dbase = Upload(base), de = Upload(e), dp(base.byte_size());
  ASSERT_EQ(cudaMemset(flag.get(), 0, sizeof(int32_t)), cudaSuccess);
  COMMIR_ASSERT_CUDA_OK(LaunchBinary(ElementwiseFn::kPow, KDType::kI64, dbase.get(), base.shape(),
                                     de.get(), e.shape(), dp.get(), base.shape(),
                                     static_cast<int32_t*>(flag.get()), nullptr));
  EXPECT_EQ(Download(dp.get(), ElementType::kI64, {2}).ToInt64(), (std::vector<int64_t>{9, 0}));
  ASSERT_EQ(cudaMemcpy(&host_flag, flag.get(), sizeof(int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host_flag, kErrIntNegativePow);
}

TEST(ElementwiseKernelTest, FloatMaxMinPropagateNan) {
  COMMIR_SKIP_WITHOUT_GPU();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor a = Tensor::FromDouble(ElementType::kBF16, {4}, {nan, 1.0, -2.0, nan});
  const Tensor b = Tensor::FromDouble(ElementType::kBF16, {4}, {1.0, nan, 3.0, nan});
  for (const BinaryCase& op : {kBinaryCases[4], kBinaryCases[5]}) {
    DeviceBuffer da = Upload(a), db = Upload(b), dout(a.byte_size());
    COMMIR_ASSERT_CUDA_OK(LaunchBinary(op.k, KDType::kBF16, da.get(), a.shape(), db.get(),
                                       b.shape(), dout.get(), a.shape(), nullptr, nullptr));
    ExpectSameBits(Download(dout.get(), ElementType::kBF16, {4}), *cpu::Binary(op.c, a, b),
                   std::string(ElementwiseFnName(op.c)));
  }
}

TEST(ElementwiseKernelTest, CompareAndSelectMatchCpu) {
  COMMIR_SKIP_WITHOUT_GPU();
  uint32_t seed = 700;
  for (ElementType type : {ElementType::kF32, ElementType::kF16, ElementType::kBF16,
                           ElementType::kF64, ElementType::kI64, ElementType::kI32}) {
    for (const ShapePair& shapes : kBroadcasts) {
      // Small integers in a narrow range so that every predicate sees ties.
      const Tensor a = RandomTensor(type, shapes.a, seed++, -2, 2);
      const Tensor b = RandomTensor(type, shapes.b, seed++, -2, 2);
      const std::vector<int64_t> out_shape = BroadcastShape(shapes.a, shapes.b);
      const int64_t n = runtime::NumElements(out_shape);
      DeviceBuffer da = Upload(a), db = Upload(b), dp(n);
      const std::string where =
          absl::StrFormat("%s [%s] x [%s]", ElementTypeName(type), absl::StrJoin(shapes.a, ","),
                          absl::StrJoin(shapes.b, ","));
      for (ElementwiseFn fn : {ElementwiseFn::kEq, ElementwiseFn::kNe, ElementwiseFn::kLt,
                               ElementwiseFn::kLe, ElementwiseFn::kGt, ElementwiseFn::kGe}) {
        COMMIR_ASSERT_CUDA_OK(LaunchCompare(fn, type, da.get(), a.shape(), db.get(),
                                            b.shape(), dp.get(), out_shape, nullptr));
        const auto want = cpu::Binary(fn, a, b);
        ASSERT_TRUE(want.ok()) << want.status();
        ExpectSameBits(Download(dp.get(), ElementType::kI1, out_shape), *want, where);
      }
      // select(a < b, a, b) is the minimum, through the i1 predicate just computed.
      const Tensor pred = *cpu::Binary(ElementwiseFn::kLt, a, b);
      DeviceBuffer dpred = Upload(pred);
      DeviceBuffer dout(n * ElementTypeByteWidth(type));
      COMMIR_ASSERT_CUDA_OK(LaunchSelect(type, dpred.get(), pred.shape(), da.get(),
                                         a.shape(), db.get(), b.shape(), dout.get(), out_shape,
                                         nullptr));
      const auto want = cpu::Ternary(ElementwiseFn::kSelect, pred, a, b);
      ASSERT_TRUE(want.ok()) << want.status();
      ExpectSameBits(Download(dout.get(), type, out_shape), *want, where);
    }
  }
}

TEST(ElementwiseKernelTest, ConvertRoundsLikeCpuForEveryPair) {
  COMMIR_SKIP_WITHOUT_GPU();
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Ties, overflow into f16/bf16/i32, NaN and infinities, values needing double rounding
  // care (1 + 2^-11 + 2^-40 rounds up in f16 only when rounded once).
  const std::vector<double> floats = {0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 3.5, 1e10, -1e10, 65519.0,
                                      65520.0, 3.0e38, 1e300, inf, -inf, nan,
                                      1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40),
                                      1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30), 1e-8,
                                      -123456.789};
  const std::vector<int64_t> ints = {0, 1, -1, 2, 255, 65519, 65520, (int64_t{1} << 53) + 1,
                                     std::numeric_limits<int64_t>::max(),
                                     std::numeric_limits<int64_t>::min(),
                                     (int64_t{1} << 31) + 5, 16777217, 257};
  for (ElementType from : {ElementType::kF64, ElementType::kF32, ElementType::kF16,
                           ElementType::kBF16, ElementType::kI64, ElementType::kI32,
                           ElementType::kI1}) {
    Tensor x = IsIntegerType(from)
                   ? Tensor::FromInt64(from, {static_cast<int64_t>(ints.size())}, ints)
                   : Tensor::FromDouble(from, {static_cast<int64_t>(floats.size())}, floats);
    for (ElementType to : {ElementType::kF64, ElementType::kF32, ElementType::kF16,
                           ElementType::kBF16, ElementType::kI64, ElementType::kI32,
                           ElementType::kI1}) {
      DeviceBuffer dx = Upload(x);
      DeviceBuffer dy(x.num_elements() * ElementTypeByteWidth(to));
      COMMIR_ASSERT_CUDA_OK(
          LaunchConvert(from, dx.get(), to, dy.get(), x.num_elements(), nullptr));
      ExpectSameBits(Download(dy.get(), to, x.shape()), cpu::Convert(x, to),
                     absl::StrFormat("%s -> %s", ElementTypeName(from), ElementTypeName(to)));
    }
  }
  // A large random f32 -> bf16 / f16 sweep.
  const Tensor big = RandomTensor(ElementType::kF32, {100003}, 7, -70000.0, 70000.0);
  for (ElementType to : {ElementType::kF16, ElementType::kBF16, ElementType::kI32}) {
    DeviceBuffer dx = Upload(big), dy(big.num_elements() * ElementTypeByteWidth(to));
    COMMIR_ASSERT_CUDA_OK(LaunchConvert(KDType::kF32, dx.get(), to, dy.get(),
                                        big.num_elements(), nullptr));
    ExpectSameBits(Download(dy.get(), to, big.shape()), cpu::Convert(big, to),
                   absl::StrFormat("random f32 -> %s", ElementTypeName(to)));
  }
}

TEST(ElementwiseKernelTest, FillMatchesCpuFull) {
  COMMIR_SKIP_WITHOUT_GPU();
  for (ElementType type : {ElementType::kF64, ElementType::kF32, ElementType::kF16,
                           ElementType::kBF16, ElementType::kI64, ElementType::kI32,
                           ElementType::kI1}) {
    for (double value : {0.0, -1.5, 2.5, 0.1, 1e6, -3e9, std::numeric_limits<double>::infinity()}) {
      const std::vector<int64_t> shape = {3, 333};
      DeviceBuffer d(runtime::NumElements(shape) * ElementTypeByteWidth(type));
      COMMIR_ASSERT_CUDA_OK(LaunchFill(type, d.get(), runtime::NumElements(shape), value, nullptr));
      ExpectSameBits(Download(d.get(), type, shape), cpu::Full(type, shape, value),
                     absl::StrFormat("full %s %g", ElementTypeName(type), value));
    }
  }
}

// Folding a group's parts with the accumulator variant reproduces the cpu backend's
// all_reduce bit for bit (f32 accumulation, one rounding at the end).
TEST(ElementwiseKernelTest, CombineChainMatchesCpuAllReduce) {
  COMMIR_SKIP_WITHOUT_GPU();
  const struct {
    ReductionFn k;
    ReductionFn c;
  } ops[] = {{ReductionFn::kSum, ReductionFn::kSum},
             {ReductionFn::kMax, ReductionFn::kMax},
             {ReductionFn::kMin, ReductionFn::kMin}};
  for (const auto& op : ops) {
    for (ElementType type : {ElementType::kBF16, ElementType::kF16, ElementType::kF32,
                             ElementType::kF64, ElementType::kI32, ElementType::kI64}) {
      constexpr int kParts = 4;
      std::vector<Tensor> parts;
      std::vector<const Tensor*> ptrs;
      for (int i = 0; i < kParts; ++i) {
        parts.push_back(RandomTensor(type, {1001}, 500 + i, -100, 100));
      }
      for (const Tensor& p : parts) ptrs.push_back(&p);
      const auto want = cpu::AllReduce(ptrs, op.c);
      ASSERT_TRUE(want.ok()) << want.status();
      std::vector<DeviceBuffer> dparts;
      for (const Tensor& p : parts) dparts.push_back(Upload(p));
      const KDType k = type;
      DeviceBuffer acc(1001 * KDTypeSize(KAccumType(k)));
      DeviceBuffer out(1001 * KDTypeSize(k));
      COMMIR_ASSERT_CUDA_OK(LaunchCombine(op.k, k, dparts[0].get(), false, dparts[1].get(),
                                          acc.get(), true, 1001, nullptr));
      COMMIR_ASSERT_CUDA_OK(LaunchCombine(op.k, k, acc.get(), true, dparts[2].get(), acc.get(),
                                          true, 1001, nullptr));
      COMMIR_ASSERT_CUDA_OK(LaunchCombine(op.k, k, acc.get(), true, dparts[3].get(), out.get(),
                                          false, 1001, nullptr));
      ExpectSameBits(Download(out.get(), type, {1001}), *want,
                     absl::StrFormat("combine %s", ElementTypeName(type)));
      // The plain overload, in place on part 0.
      COMMIR_ASSERT_CUDA_OK(LaunchCombine(op.k, k, dparts[0].get(), dparts[1].get(),
                                          dparts[0].get(), 1001, nullptr));
      const auto pair = cpu::AllReduce({ptrs[0], ptrs[1]}, op.c);
      ExpectSameBits(Download(dparts[0].get(), type, {1001}), *pair,
                     absl::StrFormat("combine pair %s", ElementTypeName(type)));
    }
  }
}

TEST(ElementwiseKernelTest, ReduceBuffersMatchesCpuAllReduce) {
  COMMIR_SKIP_WITHOUT_GPU();
  const struct {
    ReductionFn k;
    ReductionFn c;
  } ops[] = {{ReductionFn::kSum, ReductionFn::kSum},
             {ReductionFn::kMax, ReductionFn::kMax},
             {ReductionFn::kMin, ReductionFn::kMin}};
  uint32_t seed = 900;
  for (const auto& op : ops) {
    for (ElementType type : {ElementType::kBF16, ElementType::kF16, ElementType::kF32,
                             ElementType::kF64, ElementType::kI64, ElementType::kI32,
                             ElementType::kI1}) {
      for (int n : {1, 3, 7}) {
        std::vector<Tensor> parts;
        std::vector<const Tensor*> ptrs;
        for (int i = 0; i < n; ++i) {
          parts.push_back(RandomTensor(type, {2053}, seed++, IsIntegerType(type) ? 0 : -100,
                                       type == ElementType::kI1 ? 1 : 100));
        }
        for (const Tensor& p : parts) ptrs.push_back(&p);
        const auto want = cpu::AllReduce(ptrs, op.c);
        ASSERT_TRUE(want.ok()) << want.status();
        std::vector<DeviceBuffer> dparts;
        std::vector<const void*> dptrs;
        for (const Tensor& p : parts) dparts.push_back(Upload(p));
        for (const DeviceBuffer& d : dparts) dptrs.push_back(d.get());
        // The result overwrites the last input in place.
        void* out = dparts.back().get();
        COMMIR_ASSERT_CUDA_OK(
            LaunchReduceBuffers(op.k, type, dptrs.data(), n, out, 2053, nullptr));
        ExpectSameBits(Download(out, type, {2053}), *want,
                       absl::StrFormat("reduce %d buffers of %s", n, ElementTypeName(type)));
      }
    }
  }
}

// Argument checking needs no GPU: these run everywhere.
TEST(ElementwiseKernelTest, RejectsBadArgumentsWithoutLaunching) {
  const std::vector<int64_t> a = {3, 4}, b = {5}, out = {3, 4};
  EXPECT_EQ(LaunchBinary(ElementwiseFn::kAdd, KDType::kF32, nullptr, a, nullptr, b, nullptr, out,
                         nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchUnary(ElementwiseFn::kExp, KDType::kI32, nullptr, nullptr, 4, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchUnary(ElementwiseFn::kExp, KDType::kF32, nullptr, nullptr, 0, nullptr), cudaSuccess);
  EXPECT_EQ(LaunchFill(KDType::kF32, nullptr, -1, 0.0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchReduceBuffers(ReductionFn::kSum, KDType::kF32, nullptr, 0, nullptr, 4, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace commir::cuda_kernels
