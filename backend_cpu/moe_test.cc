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

// Two groups of two tokens, capacity 1 each, worked by hand from the routing above:
// group 0 (tokens 0, 1): expert 1 takes token 0's first choice, token 1's is over
// capacity; expert 0 takes token 0's second, expert 2 token 1's second. Group 1 (tokens
// 2, 3): first choices to experts 1 and 0, both second choices over capacity. Slot
// (e * 2 + g) * 1 + position. Routed whole with capacity 2 the drops differ (tokens 2's
// first choice goes), which is why a token split needs the groups.
TEST(MoeSlotsTest, GroupsAreRoutedAlone) {
  absl::StatusOr<std::vector<int64_t>> slots = MoeSlots({1, 0, 1, 2, 1, 0, 0, 1}, 4, 2, 3, 1, 2);
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_EQ(*slots, (std::vector<int64_t>{2, 0, -1, 4, 3, -1, 1, -1}));
  absl::StatusOr<std::vector<int64_t>> whole = MoeSlots({1, 0, 1, 2, 1, 0, 0, 1}, 4, 2, 3, 2);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ((*whole)[4], -1);
  EXPECT_THAT(MoeSlots({1, 0, 1, 2, 1, 0, 0, 1}, 4, 2, 3, 1, 3).status().message(),
              HasSubstr("groups = 3 must be positive and divide the 4 tokens"));
}

// A grouped dispatch is the groups' own dispatches side by side: group g's [experts,
// capacity, hidden] buffer in columns [g * capacity, (g + 1) * capacity) of every expert,
// and the grouped collect reads each token back from there. 12 tokens, top-2 over 3
// experts, 3 groups of 4 tokens, capacity 2.
TEST(MoeDispatchTest, GroupedIsTheGroupsSideBySide) {
  const int64_t tokens = 12, k = 2, experts = 3, hidden = 2, groups = 3, capacity = 2;
  std::vector<int64_t> ids(tokens * k);
  std::vector<double> xv(tokens * hidden);
  for (int64_t i = 0; i < tokens * k; ++i) ids[i] = (i * 7 + i / 5) % experts;
  for (int64_t i = 0; i < tokens * hidden; ++i) xv[i] = static_cast<double>(i) + 1;
  const Tensor x = F32({tokens, hidden}, xv);
  const Tensor routing = Tensor::FromInt64(ElementType::kI64, {tokens, k}, ids);
  absl::StatusOr<Tensor> grouped = MoeDispatch(x, routing, experts, capacity, groups);
  ASSERT_TRUE(grouped.ok()) << grouped.status();
  ASSERT_EQ(grouped->shape(), (std::vector<int64_t>{experts, groups * capacity, hidden}));
  absl::StatusOr<Tensor> collected = MoeCollect(*grouped, routing, groups);
  ASSERT_TRUE(collected.ok()) << collected.status();
  const std::vector<double> got = grouped->ToDouble();
  const std::vector<double> back = collected->ToDouble();
  const int64_t per = tokens / groups;
  for (int64_t g = 0; g < groups; ++g) {
    const Tensor xg = F32({per, hidden}, std::vector<double>(xv.begin() + g * per * hidden,
                                                             xv.begin() + (g + 1) * per * hidden));
    const Tensor rg = Tensor::FromInt64(
        ElementType::kI64, {per, k},
        std::vector<int64_t>(ids.begin() + g * per * k, ids.begin() + (g + 1) * per * k));
    absl::StatusOr<Tensor> alone = MoeDispatch(xg, rg, experts, capacity);
    absl::StatusOr<Tensor> alone_back = MoeCollect(*alone, rg);
    ASSERT_TRUE(alone.ok() && alone_back.ok());
    const std::vector<double> a = alone->ToDouble();
    for (int64_t e = 0; e < experts; ++e) {
      for (int64_t c = 0; c < capacity; ++c) {
        for (int64_t h = 0; h < hidden; ++h) {
          EXPECT_EQ(got[(e * groups * capacity + g * capacity + c) * hidden + h],
                    a[(e * capacity + c) * hidden + h])
              << "group " << g << " expert " << e << " slot " << c;
        }
      }
    }
    const std::vector<double> ab = alone_back->ToDouble();
    for (size_t i = 0; i < ab.size(); ++i) {
      EXPECT_EQ(back[g * per * k * hidden + i], ab[i]) << "group " << g;
    }
  }
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
