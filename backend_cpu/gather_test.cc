// gather and scatter_add on the cpu against hand-worked values: rows and columns picked
// by index, repeated indices summed, the one rounding of a 16-bit sum, integer
// wraparound, the offset form's zero rows, and the out-of-range errors.
#include "backend_cpu/gather.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

using runtime::Tensor;
using ::testing::HasSubstr;

Tensor F32(std::vector<int64_t> shape, std::vector<double> values) {
  return Tensor::FromDouble(ElementType::kF32, std::move(shape), values);
}

Tensor Ids(ElementType type, std::vector<int64_t> shape, std::vector<int64_t> values) {
  return Tensor::FromInt64(type, std::move(shape), values);
}

// [[0, 1, 2], [10, 11, 12], [20, 21, 22], [30, 31, 32]]
Tensor Table() { return F32({4, 3}, {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}); }

TEST(GatherTest, RowsByIndexTensorOfAnyShape) {
  for (ElementType type : {ElementType::kI32, ElementType::kI64}) {
    absl::StatusOr<Tensor> r = Gather(Table(), Ids(type, {2, 2}, {3, 0, 3, 1}), 0);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->shape(), (std::vector<int64_t>{2, 2, 3}));
    EXPECT_EQ(r->ToDouble(), (std::vector<double>{30, 31, 32, 0, 1, 2, 30, 31, 32, 10, 11, 12}));
  }
}

TEST(GatherTest, ColumnsAlongTheLastAxisAndAScalarIndex) {
  absl::StatusOr<Tensor> cols = Gather(Table(), Ids(ElementType::kI32, {2}, {2, 0}), -1);
  ASSERT_TRUE(cols.ok()) << cols.status();
  EXPECT_EQ(cols->shape(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(cols->ToDouble(), (std::vector<double>{2, 0, 12, 10, 22, 20, 32, 30}));
  absl::StatusOr<Tensor> row = Gather(Table(), Ids(ElementType::kI64, {}, {2}), 0);
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(row->shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(row->ToDouble(), (std::vector<double>{20, 21, 22}));
}

TEST(GatherTest, CopiesBitsOfEveryElementType) {
  Tensor table = Tensor::FromDouble(ElementType::kBF16, {3, 1}, {-0.0, 1.5, 1e30});
  absl::StatusOr<Tensor> r = Gather(table, Ids(ElementType::kI32, {3}, {2, 0, 1}), 0);
  ASSERT_TRUE(r.ok()) << r.status();
  const uint16_t* in = table.data<uint16_t>();
  const uint16_t* out = r->data<uint16_t>();
  EXPECT_EQ(out[0], in[2]);
  EXPECT_EQ(out[1], in[0]);  // -0.0 stays -0.0
  EXPECT_EQ(out[2], in[1]);
}

TEST(GatherTest, OffsetFormLooksUpItsShardAndZerosTheRest) {
  // This device holds global rows [4, 8) of an 8-row table: ids 5 and 7 are its rows 1
  // and 3; ids 0 and 3 belong to another device.
  absl::StatusOr<Tensor> r = Gather(Table(), Ids(ElementType::kI32, {4}, {5, 0, 7, 3}), 0, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ToDouble(), (std::vector<double>{10, 11, 12, 0, 0, 0, 30, 31, 32, 0, 0, 0}));
}

TEST(GatherTest, OutOfRangeIndicesAreErrors) {
  for (int64_t bad : {4, -1}) {
    absl::StatusOr<Tensor> r = Gather(Table(), Ids(ElementType::kI64, {3}, {0, bad, 1}), 0);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr(absl::StrFormat("index %d (element 1 of the indices) is out of range "
                                          "for axis 0 of extent 4", bad)));
  }
  EXPECT_FALSE(Gather(Table(), F32({1}, {0}), 0).ok());  // float indices
  EXPECT_FALSE(Gather(Table(), Ids(ElementType::kI32, {1}, {0}), 2).ok());  // axis
}

TEST(ScatterAddTest, RepeatedIndicesSum) {
  // Rows 2, 0, 2 of the updates go to rows 2, 0, 2 of the base.
  Tensor updates = F32({3, 3}, {1, 2, 3, 100, 200, 300, 1000, 2000, 3000});
  absl::StatusOr<Tensor> r = ScatterAdd(Table(), Ids(ElementType::kI32, {3}, {2, 0, 2}), updates, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ToDouble(), (std::vector<double>{100, 201, 302, 10, 11, 12, 1021, 2023, 3025, 30,
                                                31, 32}));
}

TEST(ScatterAddTest, AlongALaterAxis) {
  Tensor base = F32({2, 3}, {0, 0, 0, 0, 0, 0});
  Tensor updates = F32({2, 2}, {1, 2, 3, 4});
  absl::StatusOr<Tensor> r = ScatterAdd(base, Ids(ElementType::kI64, {2}, {1, 1}), updates, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ToDouble(), (std::vector<double>{0, 3, 0, 0, 7, 0}));
}

TEST(ScatterAddTest, SixteenBitSumsRoundOnce) {
  // 1 + 3 * 2^-9 = 1.005859375 rounds to the bf16 1.0078125 (ulp 2^-7). Rounding after
  // each add would give 1 every time (2^-9 is below half an ulp).
  Tensor base = Tensor::FromDouble(ElementType::kBF16, {1, 1}, {1.0});
  Tensor updates = Tensor::FromDouble(ElementType::kBF16, {3, 1}, {0x1p-9, 0x1p-9, 0x1p-9});
  absl::StatusOr<Tensor> r = ScatterAdd(base, Ids(ElementType::kI32, {3}, {0, 0, 0}), updates, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ToDouble(), (std::vector<double>{1.0078125}));
}

TEST(ScatterAddTest, IntegersWrapAround) {
  Tensor base = Tensor::FromInt64(ElementType::kI32, {1}, {2147483647});
  Tensor updates = Tensor::FromInt64(ElementType::kI32, {2}, {1, 1});
  absl::StatusOr<Tensor> r = ScatterAdd(base, Ids(ElementType::kI32, {2}, {0, 0}), updates, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ToInt64(), (std::vector<int64_t>{-2147483647}));
}

TEST(ScatterAddTest, OffsetFormAddsOnlyItsShardsRows) {
  // This device holds global rows [4, 8): ids 5 and 7 are its rows 1 and 3; id 0 is
  // another device's and is skipped.
  Tensor updates = F32({3, 3}, {1, 2, 3, 100, 200, 300, 1000, 2000, 3000});
  absl::StatusOr<Tensor> r =
      ScatterAdd(Table(), Ids(ElementType::kI32, {3}, {5, 0, 7}), updates, 0, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ToDouble(), (std::vector<double>{0, 1, 2, 11, 13, 15, 20, 21, 22, 1030, 2031,
                                                3032}));
}

TEST(ScatterAddTest, ErrorsNameTheProblem) {
  Tensor updates = F32({1, 3}, {1, 2, 3});
  absl::StatusOr<Tensor> r = ScatterAdd(Table(), Ids(ElementType::kI32, {1}, {9}), updates, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("scatter_add: index 9 (element 0 of the indices) is out of range"));
  absl::StatusOr<Tensor> shape = ScatterAdd(Table(), Ids(ElementType::kI32, {2}, {0, 1}), updates, 0);
  ASSERT_FALSE(shape.ok());
  EXPECT_THAT(std::string(shape.status().message()), HasSubstr("the updates must be f32[2, 3]"));
}

}  // namespace
}  // namespace commir::cpu
