// The cpu dropout kernel: a block at its offsets drops what the whole tensor drops there,
// kept values are x / (1 - rate) rounded once, and blocks outside their tensor are refused.
#include "backend_cpu/dropout.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "commir/dropout_indexing.h"
#include "commir/philox.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

using runtime::Tensor;

std::vector<float> Iota(int64_t n) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(0.25f * static_cast<float>(i + 1));
  return v;
}

Tensor RunDropout(const Tensor& x, std::vector<int64_t> global, std::vector<int64_t> offsets,
                  double rate, uint64_t seed) {
  absl::StatusOr<DropoutIndexing> indexing = DropoutIndexingOf(
      x.shape(), global.empty() ? std::nullopt : std::optional(global), offsets, rate);
  EXPECT_TRUE(indexing.ok()) << indexing.status();
  absl::StatusOr<Tensor> y = Dropout(x, seed, *indexing);
  EXPECT_TRUE(y.ok()) << y.status();
  return *y;
}

// Every block of a [6, 10] tensor, the slices a 2x2, 3x5 or 6x1 mesh would hold, drops
// and keeps exactly the elements the whole tensor does there.
TEST(DropoutKernelTest, ABlockDropsWhatTheWholeTensorDropsThere) {
  const Tensor whole = Tensor::FromFloat(ElementType::kF32, {6, 10}, Iota(60));
  const std::vector<float> want = RunDropout(whole, {}, {}, 0.4, 99).ToFloat();
  const std::vector<float> x = whole.ToFloat();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 5}, {2, 2}, {6, 1}, {1, 10}}) {
    for (int64_t r0 = 0; r0 < 6; r0 += rows) {
      for (int64_t c0 = 0; c0 < 10; c0 += cols) {
        std::vector<float> block;
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < cols; ++c) block.push_back(x[(r0 + r) * 10 + c0 + c]);
        }
        const std::vector<float> got =
            RunDropout(Tensor::FromFloat(ElementType::kF32, {rows, cols}, block), {6, 10},
                       {r0, c0}, 0.4, 99)
                .ToFloat();
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < cols; ++c) {
            EXPECT_EQ(got[r * cols + c], want[(r0 + r) * 10 + c0 + c])
                << "block at (" << r0 << ", " << c0 << ") element (" << r << ", " << c << ")";
          }
        }
      }
    }
  }
}

// Kept: x / (1 - rate) rounded once to the element type (bf16 here); dropped: 0, even for
// NaN and infinity; rate 0 keeps every element unchanged.
TEST(DropoutKernelTest, KeptValuesAreScaledOnceAndDroppedOnesAreZero) {
  std::vector<float> values = Iota(64);
  values[3] = std::numeric_limits<float>::quiet_NaN();
  values[5] = std::numeric_limits<float>::infinity();
  const Tensor x = Tensor::FromFloat(ElementType::kBF16, {64}, values);
  const std::vector<float> in = x.ToFloat();
  const std::vector<float> got = RunDropout(x, {}, {}, 0.3, 5).ToFloat();
  const uint64_t threshold = philox::DropoutThreshold(0.3);
  for (size_t i = 0; i < in.size(); ++i) {
    if (!philox::DropoutKeeps(5, i, threshold)) {
      EXPECT_EQ(got[i], 0.0f) << i;
      continue;
    }
    const float scaled =
        Tensor::FromFloat(ElementType::kBF16, {1}, {in[i] * static_cast<float>(1 / 0.7)}).ToFloat()[0];
    if (std::isnan(in[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << i;
    } else {
      EXPECT_EQ(got[i], scaled) << i;
    }
  }
  const std::vector<float> all = RunDropout(x, {}, {}, 0.0, 5).ToFloat();
  for (size_t i = 0; i < in.size(); ++i) {
    if (!std::isnan(in[i])) EXPECT_EQ(all[i], in[i]) << i;
  }
}

TEST(DropoutKernelTest, RefusesBlocksOutsideTheirTensorAndIntegerTensors) {
  const std::vector<int64_t> block = {3, 5};
  for (const std::vector<int64_t>& offsets :
       {std::vector<int64_t>{4, 0}, {0, 6}, {-1, 0}, {0, std::numeric_limits<int64_t>::max()}}) {
    absl::StatusOr<DropoutIndexing> indexing =
        DropoutIndexingOf(block, std::vector<int64_t>{6, 10}, offsets, 0.5);
    ASSERT_FALSE(indexing.ok());
    EXPECT_TRUE(absl::StrContains(indexing.status().message(), "leaves the tensor [6, 10]"))
        << indexing.status();
  }
  EXPECT_FALSE(DropoutIndexingOf(block, std::vector<int64_t>{6}, {0, 0}, 0.5).ok());
  EXPECT_FALSE(DropoutIndexingOf(block, std::nullopt, {}, 1.0).ok());
  absl::StatusOr<DropoutIndexing> whole = DropoutIndexingOf({4}, std::nullopt, {}, 0.5);
  ASSERT_TRUE(whole.ok());
  const Tensor ints = Tensor::FromInt64(ElementType::kI32, {4}, std::vector<int64_t>{1, 2, 3, 4});
  absl::StatusOr<Tensor> refused = Dropout(ints, 0, *whole);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "float")) << refused.status();
}

}  // namespace
}  // namespace commir::cpu
