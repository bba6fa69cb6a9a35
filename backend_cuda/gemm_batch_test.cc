#include "backend_cuda/gemm_batch.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace commir::cuda {
namespace {

using ::testing::ElementsAre;

TEST(GemmBatchTest, NoBatchIsOneStridedProduct) {
  absl::StatusOr<BatchPlan> plan = PlanBatches({}, {});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->batch_shape.empty());
  EXPECT_EQ(plan->batch, 1);
  EXPECT_TRUE(plan->strided);
}

TEST(GemmBatchTest, EqualBatchesUseFullStrides) {
  absl::StatusOr<BatchPlan> plan = PlanBatches({2, 3}, {2, 3});
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->batch_shape, ElementsAre(2, 3));
  EXPECT_EQ(plan->batch, 6);
  EXPECT_TRUE(plan->strided);
  EXPECT_EQ(plan->a_stride_matrices, 1);
  EXPECT_EQ(plan->b_stride_matrices, 1);
}

TEST(GemmBatchTest, AMissingOrAllOnesBatchIsStrideZero) {
  absl::StatusOr<BatchPlan> plan = PlanBatches({4, 5}, {1});
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->batch_shape, ElementsAre(4, 5));
  EXPECT_TRUE(plan->strided);
  EXPECT_EQ(plan->a_stride_matrices, 1);
  EXPECT_EQ(plan->b_stride_matrices, 0);
  plan = PlanBatches({}, {3});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->a_stride_matrices, 0);
  EXPECT_EQ(plan->b_stride_matrices, 1);
}

TEST(GemmBatchTest, CrossBroadcastListsEveryPair) {
  // a [2, 1], b [1, 3]: out [2, 3]; entry (i, j) multiplies a[i] by b[j].
  absl::StatusOr<BatchPlan> plan = PlanBatches({2, 1}, {1, 3});
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->strided);
  EXPECT_THAT(plan->batch_shape, ElementsAre(2, 3));
  EXPECT_THAT(plan->a_index, ElementsAre(0, 0, 0, 1, 1, 1));
  EXPECT_THAT(plan->b_index, ElementsAre(0, 1, 2, 0, 1, 2));
}

TEST(GemmBatchTest, PartialBroadcastOfOneOperand) {
  // a [3, 2] against b [2]: b broadcasts along the first dimension only -> a's stride 1,
  // b's per entry j % 2... b has count 2 != 6, so per-entry indices.
  absl::StatusOr<BatchPlan> plan = PlanBatches({3, 2}, {2});
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->strided);
  EXPECT_THAT(plan->a_index, ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(plan->b_index, ElementsAre(0, 1, 0, 1, 0, 1));
}

TEST(GemmBatchTest, MismatchedBatchesAreAnError) {
  absl::StatusOr<BatchPlan> plan = PlanBatches({2}, {3});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace commir::cuda
