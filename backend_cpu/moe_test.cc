// moe_dispatch and moe_collect on the cpu against hand-worked routings: GShard's order
// (every first choice before any second), the dropped choices, per-token and per-choice
// rows, the adjoint identity between the two, and the errors.
#include "backend_cpu/moe.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "commir/moe_routing.h"
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

// Four tokens, top-2 over three experts:
//   token 0 -> (1, 0), token 1 -> (1, 2), token 2 -> (1, 0), token 3 -> (0, 1).
// First choices in token order: 1 1 1 0, so expert 1 holds tokens 0, 1, 2 at positions
// 0, 1, 2 and expert 0 holds token 3 at 0. Then the second choices: expert 0 gets
// token 0 at 1 and token 2 at 2, expert 2 gets token 1 at 0, and token 3's second choice
// (expert 1) comes fourth in expert 1: position 3.
Tensor Routing() { return Tensor::FromInt64(ElementType::kI64, {4, 2}, {1, 0, 1, 2, 1, 0, 0, 1}); }

TEST(MoeSlotsTest, FirstChoicesBeforeSecondAndOverCapacityDropped) {
  absl::StatusOr<std::vector<int64_t>> slots = MoeSlots({1, 0, 1, 2, 1, 0, 0, 1}, 4, 2, 3, 2);
  ASSERT_TRUE(slots.ok()) << slots.status();
  // capacity 2: expert 1 keeps tokens 0 and 1; expert 0 keeps token 3 and token 0's second.
  EXPECT_EQ(*slots, (std::vector<int64_t>{2, 1, 3, 4, -1, -1, 0, -1}));
  absl::StatusOr<std::vector<int64_t>> roomy = MoeSlots({1, 0, 1, 2, 1, 0, 0, 1}, 4, 2, 3, 4);
  ASSERT_TRUE(roomy.ok());
  EXPECT_EQ(*roomy, (std::vector<int64_t>{4, 1, 5, 8, 6, 2, 0, 7}));
}

TEST(MoeSlotsTest, CapacityIsTheGShardCeiling) {
  // ceil(4 * 2 * 1.0 / 3) = 3, ceil(4 * 2 * 1.25 / 3) = 4, ceil(1024 * 2 * 1.1 / 8) = 282.
  EXPECT_EQ(*MoeCapacity(4, 2, 3, 1.0), 3);
  EXPECT_EQ(*MoeCapacity(4, 2, 3, 1.25), 4);
  EXPECT_EQ(*MoeCapacity(1024, 2, 8, 1.1), 282);
  EXPECT_EQ(*MoeCapacity(4, 2, 3, 3.0), 8);  // factor = experts: every choice fits
  EXPECT_THAT(MoeCapacity(4, 2, 3, 0).status().message(), HasSubstr("(0, 3]"));
  EXPECT_THAT(MoeCapacity(4, 2, 3, 3.5).status().message(), HasSubstr("capacity_factor = 3.5"));
  EXPECT_FALSE(MoeCapacity(4, 2, 3, std::numeric_limits<double>::infinity()).ok());
}

TEST(MoeDispatchTest, PerTokenRowsIntoSlotsAndEmptySlotsZero) {
  const Tensor x = F32({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  absl::StatusOr<Tensor> buffer = MoeDispatch(x, Routing(), 3, 2);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(buffer->shape(), (std::vector<int64_t>{3, 2, 2}));
  // expert 0: token 3, token 0; expert 1: tokens 0, 1; expert 2: token 1, empty.
  EXPECT_EQ(buffer->ToDouble(), (std::vector<double>{30, 31, 0, 1, 0, 1, 10, 11, 10, 11, 0, 0}));
}

TEST(MoeDispatchTest, PerChoiceRows) {
  // Row (t, j) = 10 t + j.
  const Tensor x = F32({4, 2, 1}, {0, 1, 10, 11, 20, 21, 30, 31});
  absl::StatusOr<Tensor> buffer = MoeDispatch(x, Routing(), 3, 2);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(buffer->ToDouble(), (std::vector<double>{30, 1, 0, 10, 11, 0}));
}

TEST(MoeCollectTest, EachChoiceReadsItsSlotDroppedOnesZero) {
  // Slot (e, c) holds 100 e + c + 1.
  const Tensor buffer = F32({3, 2, 1}, {1, 2, 101, 102, 201, 202});
  const Tensor i32 = Tensor::FromInt64(ElementType::kI32, {4, 2}, {1, 0, 1, 2, 1, 0, 0, 1});
  absl::StatusOr<Tensor> rows = MoeCollect(buffer, i32);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->shape(), (std::vector<int64_t>{4, 2, 1}));
  EXPECT_EQ(rows->ToDouble(), (std::vector<double>{101, 2, 102, 201, 0, 0, 1, 0}));
}

// <dispatch(x), y> = <x, collect(y)>: the two are adjoints, the identity the derivative
// rules rest on, here summed by hand in double.
TEST(MoeCollectTest, IsTheAdjointOfPerChoiceDispatch) {
  const Tensor x =
      F32({4, 2, 3}, {1, -2, 3, 4, 5, -6, 7, 8, 9, -1, 2, 3, 5, 4, 3, 2, 1, 0, -3, 2, 1, 7, 6, 5});
  std::vector<double> yv(3 * 2 * 3);
  for (size_t i = 0; i < yv.size(); ++i) yv[i] = 0.5 * static_cast<double>(i) - 3;
  const Tensor y = F32({3, 2, 3}, yv);
  absl::StatusOr<Tensor> dx = MoeDispatch(x, Routing(), 3, 2);
  absl::StatusOr<Tensor> cy = MoeCollect(y, Routing());
  ASSERT_TRUE(dx.ok() && cy.ok());
  auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
  };
  EXPECT_EQ(dot(dx->ToDouble(), yv), dot(x.ToDouble(), cy->ToDouble()));
  EXPECT_NE(dot(x.ToDouble(), cy->ToDouble()), 0);
}

TEST(MoeDispatchTest, Errors) {
  const Tensor x = F32({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  const Tensor bad = Tensor::FromInt64(ElementType::kI64, {4, 2}, {1, 0, 3, 2, 1, 0, 0, 1});
  absl::Status s = MoeDispatch(x, bad, 3, 2).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("expert index 3 (token 1, choice 0) is out of range [0, 3)"));
  EXPECT_THAT(MoeCollect(F32({3, 2, 1}, {0, 0, 0, 0, 0, 0}),
                         Tensor::FromInt64(ElementType::kI64, {1, 1}, {-1}))
                  .status()
                  .message(),
              HasSubstr("moe_collect: expert index -1"));
  EXPECT_THAT(MoeDispatch(F32({3, 2}, {0, 0, 0, 0, 0, 0}), Routing(), 3, 2).status().message(),
              HasSubstr("[4, hidden] or [4, 2, hidden]"));
  EXPECT_THAT(MoeDispatch(x, F32({4, 2}, {0, 0, 0, 0, 0, 0, 0, 0}), 3, 2).status().message(),
              HasSubstr("i32 or i64 [tokens, k]"));
}

}  // namespace
}  // namespace commir::cpu
