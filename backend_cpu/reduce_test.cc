#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend_cpu/kernels.h"
#include "backend_cpu/test_util.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

using ::commir::cpu::testing::ExpectInvalidArgument;
using ::commir::cpu::testing::ExpectTensorEq;
using ::commir::cpu::testing::ExpectTensorNear;
using ::commir::cpu::testing::RandomTensor;
using ::commir::cpu::testing::Ravel;
using ::commir::cpu::testing::RoundingTolerance;
using ::commir::cpu::testing::RoundTo;
using ::commir::cpu::testing::Unravel;

constexpr ReductionFn kAllReduceOps[] = {ReductionFn::kSum, ReductionFn::kMax, ReductionFn::kMin,
                                      ReductionFn::kMean};

struct Reference {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

// f64 reduction that visits every input element and folds it into its output element.
Reference ReferenceReduce(ReductionFn op, const Tensor& x, const std::vector<bool>& reduced,
                          bool keepdim) {
  Reference result;
  std::vector<int64_t> folded_shape;  // the result shape with reduced dims kept as 1
  for (int64_t d = 0; d < x.rank(); ++d) {
    folded_shape.push_back(reduced[d] ? 1 : x.dim(d));
    if (!reduced[d] || keepdim) result.shape.push_back(reduced[d] ? 1 : x.dim(d));
  }
  const int64_t outputs = runtime::NumElements(folded_shape);
  const double start = op == ReductionFn::kMax ? -INFINITY : op == ReductionFn::kMin ? INFINITY : 0.0;
  result.values.assign(outputs, start);
  std::vector<int64_t> counts(outputs, 0);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    std::vector<int64_t> index = Unravel(i, x.shape());
    for (int64_t d = 0; d < x.rank(); ++d) {
      if (reduced[d]) index[d] = 0;
    }
    const int64_t o = Ravel(index, folded_shape);
    const double value = x.GetAsDouble(i);
    double& acc = result.values[o];
    acc = op == ReductionFn::kMax   ? std::max(acc, value)
          : op == ReductionFn::kMin ? std::min(acc, value)
                                 : acc + value;
    ++counts[o];
  }
  if (op == ReductionFn::kMean) {
    for (int64_t o = 0; o < outputs; ++o) result.values[o] /= counts[o];
  }
  return result;
}

TEST(ReduceTest, EveryDimSubsetOpAndTypeMatchesReference) {
  const std::vector<int64_t> shape = {3, 4, 5};
  for (ElementType type :
       {ElementType::kF64, ElementType::kF32, ElementType::kF16, ElementType::kBF16}) {
    const Tensor x = RandomTensor(type, shape, 1);
    for (int mask = 0; mask < 8; ++mask) {
      std::vector<bool> reduced(3);
      std::vector<int64_t> dims;
      for (int d = 0; d < 3; ++d) {
        reduced[d] = (mask >> d) & 1;
        // Alternate positive and negative spellings of the same dimension.
        if (reduced[d]) dims.push_back(d % 2 == 0 ? d : d - 3);
      }
      for (bool keepdim : {false, true}) {
        for (ReductionFn op : kAllReduceOps) {
          Reference reference = ReferenceReduce(op, x, reduced, keepdim);
          for (double& value : reference.values) value = RoundTo(type, value);
          COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, Reduce(op, x, dims, keepdim));
          ExpectTensorNear(result, type, reference.shape, reference.values, RoundingTolerance(type),
                           type == ElementType::kF64 ? 1e-14 : 1e-6);
          if (::testing::Test::HasFailure()) {
            FAIL() << ReductionFnName(op) << " mask " << mask << " keepdim " << keepdim << " "
                   << ElementTypeName(type);
          }
        }
      }
    }
  }
}

TEST(ReduceTest, IntegerReductionsAreExactAndMeanFloors) {
  const Tensor x =
      Tensor::FromDouble(ElementType::kI32, {2, 3}, std::vector<double>{-3, -4, 0, 5, 6, 8});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor sum, Reduce(ReductionFn::kSum, x, {1}, false));
  ExpectTensorEq(sum, ElementType::kI32, {2}, {-7, 19});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor mean, Reduce(ReductionFn::kMean, x, {1}, true));
  ExpectTensorEq(mean, ElementType::kI32, {2, 1}, {-3, 6});  // floor(-7 / 3), floor(19 / 3)
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor mean0, Reduce(ReductionFn::kMean, x, {0}, false));
  ExpectTensorEq(mean0, ElementType::kI32, {3}, {1, 1, 4});  // floor(2/2), floor(2/2), floor(8/2)
  COMMIR_ASSERT_OK_AND_ASSIGN(
      Tensor mean_neg,
      Reduce(ReductionFn::kMean,
             Tensor::FromDouble(ElementType::kI64, {2}, std::vector<double>{-3, -4}), {0}, false));
  ExpectTensorEq(mean_neg, ElementType::kI64, {}, {-4});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor maximum, Reduce(ReductionFn::kMax, x, {0, 1}, false));
  ExpectTensorEq(maximum, ElementType::kI32, {}, {8});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor minimum, Reduce(ReductionFn::kMin, x, {-1}, false));
  ExpectTensorEq(minimum, ElementType::kI32, {2}, {-4, 5});
  // i1: sum is "any", min is "all".
  const Tensor flags =
      Tensor::FromDouble(ElementType::kI1, {2, 2}, std::vector<double>{0, 1, 1, 1});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor any, Reduce(ReductionFn::kSum, flags, {1}, false));
  ExpectTensorEq(any, ElementType::kI1, {2}, {1, 1});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor all, Reduce(ReductionFn::kMin, flags, {1}, false));
  ExpectTensorEq(all, ElementType::kI1, {2}, {0, 1});
}

TEST(ReduceTest, ScalarsNoDimsAndEmptyReductions) {
  const Tensor scalar = Tensor::FromDouble(ElementType::kF32, {}, std::vector<double>{2.5});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor same, Reduce(ReductionFn::kSum, scalar, {}, false));
  EXPECT_TRUE(same.BitwiseEqual(scalar));
  const Tensor x = RandomTensor(ElementType::kBF16, {2, 3}, 2);
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor identity, Reduce(ReductionFn::kMean, x, {}, true));
  EXPECT_TRUE(identity.BitwiseEqual(x));

  const Tensor empty(ElementType::kF32, {2, 0});
  const double inf = std::numeric_limits<double>::infinity();
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor sum, Reduce(ReductionFn::kSum, empty, {1}, false));
  ExpectTensorEq(sum, ElementType::kF32, {2}, {0, 0});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor maximum, Reduce(ReductionFn::kMax, empty, {1}, false));
  ExpectTensorEq(maximum, ElementType::kF32, {2}, {-inf, -inf});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor minimum, Reduce(ReductionFn::kMin, empty, {1}, false));
  ExpectTensorEq(minimum, ElementType::kF32, {2}, {inf, inf});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor mean, Reduce(ReductionFn::kMean, empty, {1}, false));
  ExpectTensorEq(mean, ElementType::kF32, {2}, {NAN, NAN});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor no_outputs, Reduce(ReductionFn::kSum, empty, {0}, false));
  EXPECT_EQ(no_outputs.shape(), (std::vector<int64_t>{0}));

  const Tensor empty_int(ElementType::kI32, {0});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor int_max, Reduce(ReductionFn::kMax, empty_int, {0}, false));
  ExpectTensorEq(int_max, ElementType::kI32, {}, {std::numeric_limits<int32_t>::min()});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor int_min, Reduce(ReductionFn::kMin, empty_int, {0}, false));
  ExpectTensorEq(int_min, ElementType::kI32, {}, {std::numeric_limits<int32_t>::max()});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor bool_min,
                              Reduce(ReductionFn::kMin, Tensor(ElementType::kI1, {0}), {0}, false));
  ExpectTensorEq(bool_min, ElementType::kI1, {}, {1});  // "all" of nothing
}

TEST(ReduceTest, MaxAndMinPropagateNan) {
  const Tensor x =
      Tensor::FromDouble(ElementType::kF32, {2, 3}, std::vector<double>{1, NAN, 3, 4, 5, 6});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor maximum, Reduce(ReductionFn::kMax, x, {1}, false));
  ExpectTensorEq(maximum, ElementType::kF32, {2}, {NAN, 6});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor minimum, Reduce(ReductionFn::kMin, x, {1}, false));
  ExpectTensorEq(minimum, ElementType::kF32, {2}, {NAN, 4});
}

TEST(ReduceTest, PairwiseSummationStaysAccurateInF32) {
  // A running f32 sum of 2^22 copies of 0.1f ends up off by several percent once the
  // total dwarfs each addend; pairwise summation stays within a few ulp.
  const int64_t n = int64_t{1} << 22;
  const Tensor x = Tensor::FromFloat(ElementType::kF32, {n}, std::vector<float>(n, 0.1f));
  const double exact = static_cast<double>(0.1f) * n;
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor sum, Reduce(ReductionFn::kSum, x, {0}, false));
  ExpectTensorNear(sum, ElementType::kF32, {}, {exact}, 1e-6);
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor mean, Reduce(ReductionFn::kMean, x, {0}, false));
  ExpectTensorNear(mean, ElementType::kF32, {}, {static_cast<double>(0.1f)}, 1e-6);
}

TEST(ReduceTest, Errors) {
  const Tensor x(ElementType::kF32, {2, 3});
  ExpectInvalidArgument(Reduce(ReductionFn::kSum, x, {2}, false).status(),
                        {"reduce_sum", "dimension 2", "rank 2"});
  ExpectInvalidArgument(Reduce(ReductionFn::kMax, x, {1, -1}, false).status(),
                        {"reduce_max", "twice"});
  ExpectInvalidArgument(
      Reduce(ReductionFn::kMean, Tensor(ElementType::kI32, {3, 0}), {1}, false).status(), {"empty"});
}

}  // namespace
}  // namespace commir::cpu
