#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
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
using ::commir::cpu::testing::RandomTensor;
using ::commir::cpu::testing::Ravel;
using ::commir::cpu::testing::Unravel;

// One type of each storage width, so every copy path (1, 2, 4 and 8 bytes) runs.
constexpr ElementType kWidthTypes[] = {ElementType::kI1, ElementType::kBF16, ElementType::kF32,
                                       ElementType::kI64};

Tensor Random(ElementType type, std::vector<int64_t> shape, uint32_t seed) {
  return RandomTensor(type, std::move(shape), seed, -100, 100);
}

TEST(ReshapeTest, KeepsRowMajorOrder) {
  for (ElementType type : kWidthTypes) {
    const Tensor x = Random(type, {2, 3, 4}, 1);
    COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, Reshape(x, {4, 6}));
    ExpectTensorEq(result, type, {4, 6}, x.ToDouble());
    COMMIR_ASSERT_OK_AND_ASSIGN(Tensor flat, Reshape(x, {24}));
    ExpectTensorEq(flat, type, {24}, x.ToDouble());
  }
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor scalar, Reshape(Tensor(ElementType::kF32, {1, 1}), {}));
  EXPECT_EQ(scalar.rank(), 0);
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor empty, Reshape(Tensor(ElementType::kF32, {0, 4}), {2, 0, 3}));
  EXPECT_EQ(empty.shape(), (std::vector<int64_t>{2, 0, 3}));
}

TEST(ReshapeTest, Errors) {
  ExpectInvalidArgument(Reshape(Tensor(ElementType::kF32, {2, 3}), {4}).status(),
                        {"f32[2, 3]", "[4]"});
  ExpectInvalidArgument(Reshape(Tensor(ElementType::kF32, {0}), {-1, 0}).status(), {"negative"});
}

TEST(TransposeTest, EveryPermutationOfRankFour) {
  const std::vector<int64_t> shape = {2, 3, 4, 5};
  for (ElementType type : kWidthTypes) {
    const Tensor x = Random(type, shape, 2);
    std::vector<int64_t> perm = {0, 1, 2, 3};
    do {
      std::vector<int64_t> result_shape;
      for (int64_t p : perm) result_shape.push_back(shape[p]);
      std::vector<double> expected(x.num_elements());
      for (int64_t i = 0; i < x.num_elements(); ++i) {
        const std::vector<int64_t> out_index = Unravel(i, result_shape);
        std::vector<int64_t> in_index(4);
        for (int d = 0; d < 4; ++d) in_index[perm[d]] = out_index[d];
        expected[i] = x.GetAsDouble(Ravel(in_index, shape));
      }
      COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, Transpose(x, perm));
      ExpectTensorEq(result, type, result_shape, expected);
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST(TransposeTest, NegativeEntriesScalarsAndErrors) {
  const Tensor x = Random(ElementType::kF32, {2, 3}, 3);
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor a, Transpose(x, {-1, 0}));
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor b, Transpose(x, {1, 0}));
  EXPECT_TRUE(a.BitwiseEqual(b));
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{3, 2}));
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor scalar, Transpose(Tensor(ElementType::kF32, {}), {}));
  EXPECT_EQ(scalar.rank(), 0);
  ExpectInvalidArgument(Transpose(x, {0}).status(), {"perm [0]"});
  ExpectInvalidArgument(Transpose(x, {0, 0}).status(), {"not a permutation"});
  ExpectInvalidArgument(Transpose(x, {0, 2}).status(), {"dimension 2", "rank 2"});
}

TEST(SliceTest, MatchesReferenceIndexing) {
  const std::vector<int64_t> shape = {4, 5, 6};
  for (ElementType type : kWidthTypes) {
    const Tensor x = Random(type, shape, 4);
    const std::vector<int64_t> start = {1, 0, 2}, size = {2, 5, 3};
    std::vector<double> expected;
    for (int64_t i = 0; i < 2 * 5 * 3; ++i) {
      std::vector<int64_t> index = Unravel(i, size);
      for (int d = 0; d < 3; ++d) index[d] += start[d];
      expected.push_back(x.GetAsDouble(Ravel(index, shape)));
    }
    COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, Slice(x, start, size));
    ExpectTensorEq(result, type, size, expected);
  }
  const Tensor x = Random(ElementType::kF32, {3, 3}, 5);
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor empty, Slice(x, {3, 0}, {0, 3}));
  EXPECT_EQ(empty.shape(), (std::vector<int64_t>{0, 3}));
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor whole, Slice(x, {0, 0}, {3, 3}));
  EXPECT_TRUE(whole.BitwiseEqual(x));
}

TEST(SliceTest, Errors) {
  const Tensor x(ElementType::kF32, {3, 4});
  ExpectInvalidArgument(Slice(x, {0}, {1, 1}).status(), {"one entry per dimension"});
  ExpectInvalidArgument(Slice(x, {2, 0}, {2, 4}).status(), {"dimension 0"});
  ExpectInvalidArgument(Slice(x, {0, -1}, {1, 1}).status(), {"dimension 1"});
  ExpectInvalidArgument(Slice(x, {0, 0}, {1, -1}).status(), {"dimension 1"});
}

TEST(ConcatTest, AlongEveryDimension) {
  for (ElementType type : kWidthTypes) {
    for (int64_t dim = -3; dim < 3; ++dim) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      std::vector<Tensor> parts;
      std::vector<int64_t> offsets;  // start of each part along d
      std::vector<int64_t> result_shape = {2, 3, 4};
      result_shape[d] = 0;
      for (int64_t p = 0; p < 3; ++p) {
        std::vector<int64_t> shape = {2, 3, 4};
        shape[d] = p + 1;  // parts of different extents, 1 + 2 + 3
        offsets.push_back(result_shape[d]);
        result_shape[d] += shape[d];
        parts.push_back(Random(type, shape, 10 + p));
      }
      std::vector<double> expected(runtime::NumElements(result_shape));
      for (int64_t i = 0; i < static_cast<int64_t>(expected.size()); ++i) {
        std::vector<int64_t> index = Unravel(i, result_shape);
        int64_t p = 2;
        while (index[d] < offsets[p]) --p;
        index[d] -= offsets[p];
        expected[i] = parts[p].GetAsDouble(Ravel(index, parts[p].shape()));
      }
      std::vector<const Tensor*> pointers = {&parts[0], &parts[1], &parts[2]};
      COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, Concat(pointers, dim));
      ExpectTensorEq(result, type, result_shape, expected);
    }
  }
}

TEST(ConcatTest, SinglePartEmptyPartsAndErrors) {
  const Tensor x = Random(ElementType::kF32, {2, 2}, 6);
  const Tensor empty(ElementType::kF32, {0, 2});
  std::vector<const Tensor*> one = {&x};
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor same, Concat(one, 0));
  EXPECT_TRUE(same.BitwiseEqual(x));
  std::vector<const Tensor*> with_empty = {&empty, &x, &empty};
  COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, Concat(with_empty, 0));
  EXPECT_TRUE(result.BitwiseEqual(x));

  ExpectInvalidArgument(Concat({}, 0).status(), {"at least one"});
  const Tensor other_type(ElementType::kF16, {2, 2});
  std::vector<const Tensor*> mixed = {&x, &other_type};
  ExpectInvalidArgument(Concat(mixed, 0).status(), {"f32[2, 2]", "f16[2, 2]"});
  const Tensor wider(ElementType::kF32, {2, 3});
  std::vector<const Tensor*> mismatched = {&x, &wider};
  ExpectInvalidArgument(Concat(mismatched, 0).status(), {"dimension 0"});
  std::vector<const Tensor*> ok_along_1 = {&x, &wider};
  EXPECT_TRUE(Concat(ok_along_1, 1).ok());
  ExpectInvalidArgument(Concat(one, 2).status(), {"dimension 2"});
  const Tensor scalar(ElementType::kF32, {});
  std::vector<const Tensor*> scalars = {&scalar};
  ExpectInvalidArgument(Concat(scalars, 0).status(), {"rank 0"});
}

TEST(BroadcastTest, NumPyRules) {
  struct Case {
    std::vector<int64_t> from, to;
  };
  const std::vector<Case> cases = {{{3, 1}, {2, 3, 4}}, {{}, {2, 2}},  {{4}, {3, 4}},
                                   {{1, 1}, {1, 1}},    {{1}, {0, 5}}, {{2, 1, 3}, {2, 4, 3}}};
  for (ElementType type : kWidthTypes) {
    for (const Case& c : cases) {
      const Tensor x = Random(type, c.from, 7);
      std::vector<double> expected(runtime::NumElements(c.to));
      for (int64_t i = 0; i < static_cast<int64_t>(expected.size()); ++i) {
        const std::vector<int64_t> out_index = Unravel(i, c.to);
        std::vector<int64_t> in_index;
        for (size_t d = 0; d < c.from.size(); ++d) {
          const int64_t out_d = c.to.size() - c.from.size() + d;
          in_index.push_back(c.from[d] == 1 ? 0 : out_index[out_d]);
        }
        expected[i] = x.GetAsDouble(Ravel(in_index, c.from));
      }
      COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, Broadcast(x, c.to));
      ExpectTensorEq(result, type, c.to, expected);
    }
  }
}

TEST(BroadcastTest, Errors) {
  ExpectInvalidArgument(Broadcast(Tensor(ElementType::kF32, {3}), {4}).status(), {"f32[3]", "[4]"});
  ExpectInvalidArgument(Broadcast(Tensor(ElementType::kF32, {2, 3}), {3}).status(), {"[3]"});
  ExpectInvalidArgument(Broadcast(Tensor(ElementType::kF32, {1}), {-2}).status(), {"negative"});
}

TEST(DynamicSliceTest, EveryDimensionAndOffset) {
  const std::vector<int64_t> shape = {3, 4, 5};
  const Tensor x = Random(ElementType::kF32, shape, 8);
  for (int64_t dim = 0; dim < 3; ++dim) {
    for (int64_t size = 0; size <= shape[dim]; ++size) {
      for (int64_t offset = 0; offset + size <= shape[dim]; ++offset) {
        std::vector<int64_t> result_shape = shape;
        result_shape[dim] = size;
        std::vector<double> expected;
        for (int64_t i = 0; i < runtime::NumElements(result_shape); ++i) {
          std::vector<int64_t> index = Unravel(i, result_shape);
          index[dim] += offset;
          expected.push_back(x.GetAsDouble(Ravel(index, shape)));
        }
        COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, DynamicSlice(x, dim - 3, offset, size));
        ExpectTensorEq(result, ElementType::kF32, result_shape, expected);
      }
    }
  }
}

TEST(DynamicSliceTest, OutOfRangeIsAnErrorNamingOffsetSizeAndExtent) {
  const Tensor x(ElementType::kF32, {3, 8});
  ExpectInvalidArgument(DynamicSlice(x, 1, 5, 4).status(),
                        {"offset 5", "size 4", "dimension 1", "extent 8"});
  ExpectInvalidArgument(DynamicSlice(x, 1, -1, 2).status(), {"offset -1", "size 2", "extent 8"});
  ExpectInvalidArgument(DynamicSlice(x, 0, 0, 4).status(), {"offset 0", "size 4", "extent 3"});
  ExpectInvalidArgument(DynamicSlice(x, 2, 0, 1).status(), {"dimension 2", "rank 2"});
  ExpectInvalidArgument(DynamicSlice(x, 0, std::numeric_limits<int64_t>::max(), 2).status(),
                        {"out of range"});
}

TEST(DynamicUpdateSliceTest, EveryDimensionAndOffset) {
  const std::vector<int64_t> shape = {3, 4, 5};
  for (ElementType type : kWidthTypes) {
    const Tensor x = Random(type, shape, 9);
    for (int64_t dim = 0; dim < 3; ++dim) {
      std::vector<int64_t> update_shape = shape;
      update_shape[dim] = 2;
      const Tensor update = Random(type, update_shape, 100 + dim);
      for (int64_t offset = 0; offset + 2 <= shape[dim]; ++offset) {
        std::vector<double> expected = x.ToDouble();
        for (int64_t i = 0; i < update.num_elements(); ++i) {
          std::vector<int64_t> index = Unravel(i, update_shape);
          index[dim] += offset;
          expected[Ravel(index, shape)] = update.GetAsDouble(i);
        }
        COMMIR_ASSERT_OK_AND_ASSIGN(Tensor result, DynamicUpdateSlice(x, update, dim, offset));
        ExpectTensorEq(result, type, shape, expected);
      }
    }
  }
}

TEST(DynamicUpdateSliceTest, Errors) {
  const Tensor x(ElementType::kF32, {3, 8});
  ExpectInvalidArgument(DynamicUpdateSlice(x, Tensor(ElementType::kF32, {3, 4}), -1, 5).status(),
                        {"offset 5", "size 4", "dimension 1", "extent 8"});
  ExpectInvalidArgument(DynamicUpdateSlice(x, Tensor(ElementType::kF32, {3, 9}), 1, 0).status(),
                        {"size 9", "extent 8"});
  ExpectInvalidArgument(DynamicUpdateSlice(x, Tensor(ElementType::kF32, {2, 4}), 1, 0).status(),
                        {"f32[2, 4]", "f32[3, 8]"});
  ExpectInvalidArgument(DynamicUpdateSlice(x, Tensor(ElementType::kI32, {3, 4}), 1, 0).status(),
                        {"i32[3, 4]"});
  ExpectInvalidArgument(DynamicUpdateSlice(x, Tensor(ElementType::kF32, {3}), 1, 0).status(),
                        {"f32[3]"});
}

}  // namespace
}  // namespace commir::cpu
