#include "backend_cpu/collectives.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/numeric/int128.h"
#include "backend_cpu/kernels.h"
#include "backend_cpu/test_util.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

using ::commir::cpu::testing::ExpectInvalidArgument;
using ::commir::cpu::testing::ExpectTensorEq;
using ::commir::cpu::testing::RandomTensor;
using ::commir::cpu::testing::Ravel;
using ::commir::cpu::testing::Unravel;

constexpr int64_t kGroupSizes[] = {1, 2, 4, 8};
// Every extent divides by every group size, so every dimension can be split.
const std::vector<int64_t> kPartShape = {8, 16, 8};

// One random part per member, of `type` and kPartShape.
struct Group {
  std::vector<Tensor> parts;
  std::vector<const Tensor*> pointers;
};

Group MakeGroup(int64_t members, ElementType type, uint32_t seed) {
  Group group;
  for (int64_t c = 0; c < members; ++c) {
    group.parts.push_back(RandomTensor(type, kPartShape, seed + c, -8, 8));
  }
  for (const Tensor& part : group.parts) group.pointers.push_back(&part);
  return group;
}

TEST(AllGatherTest, ConcatenatesInCoordinateOrderAlongEveryDim) {
  for (int64_t n : kGroupSizes) {
    const Group group = MakeGroup(n, ElementType::kBF16, 1);
    for (int64_t dim = -3; dim < 3; ++dim) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      std::vector<int64_t> shape = kPartShape;
      shape[d] *= n;
      std::vector<double> expected(runtime::NumElements(shape));
      for (int64_t i = 0; i < static_cast<int64_t>(expected.size()); ++i) {
        std::vector<int64_t> index = Unravel(i, shape);
        const int64_t member = index[d] / kPartShape[d];
        index[d] %= kPartShape[d];
        expected[i] = group.parts[member].GetAsDouble(Ravel(index, kPartShape));
      }
      COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, AllGather(group.pointers, dim));
      ExpectTensorEq(result, ElementType::kBF16, shape, expected);
    }
  }
}

// The reduction the header promises, spelled out: fold the members in coordinate order in
// `Accumulator`, then round once.
template <typename Accumulator>
std::vector<double> SequentialReference(const Group& group, ReductionFn op) {
  const int64_t count = group.parts[0].num_elements();
  std::vector<double> result(count);
  for (int64_t i = 0; i < count; ++i) {
    Accumulator acc = static_cast<Accumulator>(group.parts[0].GetAsDouble(i));
    for (size_t c = 1; c < group.parts.size(); ++c) {
      const Accumulator value = static_cast<Accumulator>(group.parts[c].GetAsDouble(i));
      acc = op == ReductionFn::kSum   ? acc + value
            : op == ReductionFn::kMax ? std::max(acc, value)
                                   : std::min(acc, value);
    }
    result[i] = testing::RoundTo(group.parts[0].element_type(), static_cast<double>(acc));
  }
  return result;
}

TEST(AllReduceTest, FoldsInCoordinateOrderAndRoundsOnce) {
  for (int64_t n : kGroupSizes) {
    for (ReductionFn op : {ReductionFn::kSum, ReductionFn::kMax, ReductionFn::kMin}) {
      for (ElementType type : {ElementType::kF32, ElementType::kBF16, ElementType::kF16}) {
        const Group group = MakeGroup(n, type, 10);
        COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, AllReduce(group.pointers, op));
        ExpectTensorEq(result, type, kPartShape, SequentialReference<float>(group, op));
      }
      const Group f64 = MakeGroup(n, ElementType::kF64, 20);
      COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result64, AllReduce(f64.pointers, op));
      ExpectTensorEq(result64, ElementType::kF64, kPartShape, SequentialReference<double>(f64, op));
      const Group i32 = MakeGroup(n, ElementType::kI32, 30);
      COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result32, AllReduce(i32.pointers, op));
      ExpectTensorEq(result32, ElementType::kI32, kPartShape, SequentialReference<double>(i32, op));
    }
  }
}

TEST(AllReduceTest, SixteenBitSumsRoundOnlyAtTheEnd) {
  // 1 + 2^-8 + 2^-8 in bf16: rounding after each addition would stay at 1 (each step is a
  // tie to the even 1); summing in f32 and rounding once gives 1 + 2^-7.
  const double small = std::ldexp(1.0, -8);
  const Tensor a = Tensor::FromDouble(ElementType::kBF16, {1}, std::vector<double>{1.0});
  const Tensor b = Tensor::FromDouble(ElementType::kBF16, {1}, std::vector<double>{small});
  std::vector<const Tensor*> parts = {&a, &b, &b};
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor sum, AllReduce(parts, ReductionFn::kSum));
  ExpectTensorEq(sum, ElementType::kBF16, {1}, {1.0 + 2 * small});
}

TEST(AllReduceTest, IntegerSumsWrapAndBoolSumIsOr) {
  const int32_t max32 = std::numeric_limits<int32_t>::max();
  const Tensor a = Tensor::FromDouble(ElementType::kI32, {1}, std::vector<double>{max32});
  const Tensor b = Tensor::FromDouble(ElementType::kI32, {1}, std::vector<double>{2});
  std::vector<const Tensor*> parts = {&a, &b};
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor sum, AllReduce(parts, ReductionFn::kSum));
  ExpectTensorEq(sum, ElementType::kI32, {1}, {std::numeric_limits<int32_t>::min() + 1.0});
  const Tensor t = Tensor::FromDouble(ElementType::kI1, {2}, std::vector<double>{1, 0});
  const Tensor f = Tensor::FromDouble(ElementType::kI1, {2}, std::vector<double>{1, 0});
  std::vector<const Tensor*> flags = {&t, &f};
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor any, AllReduce(flags, ReductionFn::kSum));
  ExpectTensorEq(any, ElementType::kI1, {2}, {1, 0});
  // NaN propagates through max.
  const Tensor x = Tensor::FromDouble(ElementType::kF32, {2}, std::vector<double>{NAN, 1});
  const Tensor y = Tensor::FromDouble(ElementType::kF32, {2}, std::vector<double>{2, NAN});
  std::vector<const Tensor*> with_nan = {&x, &y};
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor maximum, AllReduce(with_nan, ReductionFn::kMax));
  ExpectTensorEq(maximum, ElementType::kF32, {2}, {NAN, NAN});
}

TEST(ReduceScatterTest, MemberKeepsItsBlockOfTheReductionAlongEveryDim) {
  for (int64_t n : kGroupSizes) {
    const Group group = MakeGroup(n, ElementType::kF32, 40);
    for (ReductionFn op : {ReductionFn::kSum, ReductionFn::kMax, ReductionFn::kMin}) {
      const std::vector<double> reduced = SequentialReference<float>(group, op);
      for (int64_t dim = -3; dim < 3; ++dim) {
        const int64_t d = dim < 0 ? dim + 3 : dim;
        std::vector<int64_t> block_shape = kPartShape;
        block_shape[d] /= n;
        COMMIR_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> result,
                                    ReduceScatter(group.pointers, dim, op));
        ASSERT_EQ(static_cast<int64_t>(result.size()), n);
        for (int64_t c = 0; c < n; ++c) {
          std::vector<double> expected;
          for (int64_t i = 0; i < runtime::NumElements(block_shape); ++i) {
            std::vector<int64_t> index = Unravel(i, block_shape);
            index[d] += c * block_shape[d];
            expected.push_back(reduced[Ravel(index, kPartShape)]);
          }
          ExpectTensorEq(result[c], ElementType::kF32, block_shape, expected);
        }
      }
    }
  }
}

TEST(AllToAllTest, EverySplitAndConcatDim) {
  for (int64_t n : kGroupSizes) {
    const Group group = MakeGroup(n, ElementType::kI64, 50);
    for (int64_t split = 0; split < 3; ++split) {
      for (int64_t concat = 0; concat < 3; ++concat) {
        std::vector<int64_t> shape = kPartShape;
        shape[split] /= n;
        shape[concat] *= n;
        COMMIR_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> result,
                                    AllToAll(group.pointers, split - 3, concat));
        ASSERT_EQ(static_cast<int64_t>(result.size()), n);
        const int64_t received_extent = shape[concat] / n;  // each block's extent along concat
        for (int64_t j = 0; j < n; ++j) {
          std::vector<double> expected;
          for (int64_t i = 0; i < runtime::NumElements(shape); ++i) {
            std::vector<int64_t> index = Unravel(i, shape);
            // Position along concat_dim picks the source member, then block j of its
            // split_dim holds the element.
            const int64_t source = index[concat] / received_extent;
            index[concat] %= received_extent;
            index[split] += j * (kPartShape[split] / n);
            expected.push_back(group.parts[source].GetAsDouble(Ravel(index, kPartShape)));
          }
          ExpectTensorEq(result[j], ElementType::kI64, shape, expected);
        }
      }
    }
  }
}

TEST(ShiftTest, MemberReceivesFromCoordinateMinusOffset) {
  for (int64_t n : kGroupSizes) {
    const Group group = MakeGroup(n, ElementType::kF16, 60);
    for (int64_t offset :
         {int64_t{-9}, int64_t{-3}, int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{2}, int64_t{7},
          int64_t{8}, int64_t{17}, std::numeric_limits<int64_t>::max(),
          std::numeric_limits<int64_t>::min()}) {
      const std::vector<Tensor> result = Shift(group.pointers, offset);
      ASSERT_EQ(static_cast<int64_t>(result.size()), n);
      for (int64_t c = 0; c < n; ++c) {
        // Reference modulo through 128-bit arithmetic, free of the kernel's trick.
        const absl::int128 source = ((absl::int128(c) - offset) % n + n) % n;
        EXPECT_TRUE(result[c].BitwiseEqual(group.parts[static_cast<int64_t>(source)]))
            << "n " << n << " offset " << offset << " member " << c;
      }
    }
  }
  EXPECT_TRUE(Shift({}, 1).empty());
}

TEST(CollectivesTest, ScalarParts) {
  const Tensor a = Tensor::FromDouble(ElementType::kF32, {}, std::vector<double>{1.5});
  const Tensor b = Tensor::FromDouble(ElementType::kF32, {}, std::vector<double>{-4});
  std::vector<const Tensor*> parts = {&a, &b};
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor sum, AllReduce(parts, ReductionFn::kSum));
  ExpectTensorEq(sum, ElementType::kF32, {}, {-2.5});
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor minimum, AllReduce(parts, ReductionFn::kMin));
  ExpectTensorEq(minimum, ElementType::kF32, {}, {-4});
  const std::vector<Tensor> shifted = Shift(parts, 1);
  EXPECT_TRUE(shifted[0].BitwiseEqual(b));
  EXPECT_TRUE(shifted[1].BitwiseEqual(a));
  // A scalar has no dimension to gather along or split.
  ExpectInvalidArgument(AllGather(parts, 0).status(), {"rank 0"});
  ExpectInvalidArgument(ReduceScatter(parts, 0, ReductionFn::kSum).status(), {"rank 0"});
}

TEST(CollectivesTest, Errors) {
  const Tensor a(ElementType::kF32, {4, 6});
  const Tensor b(ElementType::kF32, {4, 5});
  const Tensor c(ElementType::kF16, {4, 6});
  std::vector<const Tensor*> shapes_differ = {&a, &b};
  std::vector<const Tensor*> types_differ = {&a, &c};
  ExpectInvalidArgument(AllGather({}, 0).status(), {"all_gather", "no members"});
  ExpectInvalidArgument(AllGather(shapes_differ, 0).status(), {"member 1", "f32[4, 5]"});
  ExpectInvalidArgument(AllReduce(types_differ, ReductionFn::kSum).status(), {"f16[4, 6]"});
  std::vector<const Tensor*> three = {&a, &a, &a, &a, &a};
  ExpectInvalidArgument(ReduceScatter(three, 0, ReductionFn::kSum).status(),
                        {"reduce_scatter", "extent 4", "5 equal blocks"});
  ExpectInvalidArgument(AllToAll(three, 1, 0).status(),
                        {"all_to_all", "extent 6", "5 equal blocks"});
  std::vector<const Tensor*> pair = {&a, &a};
  ExpectInvalidArgument(AllReduce(pair, ReductionFn::kMean).status(), {"sum, max or min"});
  ExpectInvalidArgument(AllGather(pair, 2).status(), {"dimension 2"});
  ExpectInvalidArgument(AllToAll(pair, 0, -3).status(), {"dimension -3"});
  ExpectInvalidArgument(ReduceScatter(pair, 2, ReductionFn::kSum).status(), {"dimension 2"});
}

}  // namespace
}  // namespace commir::cpu
