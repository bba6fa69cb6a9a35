// attention_grad with partial_keys (the global lse of a block of keys, as a backward ring
// passes it): the keys split into blocks, each block's gradients computed against the
// whole op's lse, dq summed and dk/dv concatenated, give the whole op's gradients.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "backend_cpu/kernels.h"
#include "backend_cpu/test_util.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

using ::commir::cpu::testing::ExpectTensorNear;
using ::commir::cpu::testing::RandomTensor;

struct Case {
  const char* name;
  int64_t heads, kv_heads, queries, keys, head_dim, value_dim;
  bool causal;
  std::optional<int64_t> q_pos;
  int64_t k_pos;
};

// Keys [first, first + count) of a [B, H, S, D] tensor.
Tensor KeySlice(const Tensor& t, int64_t first, int64_t count) {
  const int64_t outer = t.dim(0) * t.dim(1), keys = t.dim(2), width = t.dim(3);
  const std::vector<double> all = t.ToDouble();
  std::vector<double> part;
  part.reserve(outer * count * width);
  for (int64_t bh = 0; bh < outer; ++bh) {
    const auto begin = all.begin() + (bh * keys + first) * width;
    part.insert(part.end(), begin, begin + count * width);
  }
  return Tensor::FromDouble(t.element_type(), {t.dim(0), t.dim(1), count, width}, part);
}

// Writes `block` (keys [first, first + block.dim(2))) into `whole`, a [B, H, S, D] vector.
void PlaceKeys(const Tensor& block, int64_t first, int64_t keys, std::vector<double>& whole) {
  const int64_t outer = block.dim(0) * block.dim(1), count = block.dim(2), width = block.dim(3);
  const std::vector<double> part = block.ToDouble();
  for (int64_t bh = 0; bh < outer; ++bh) {
    std::copy(part.begin() + bh * count * width, part.begin() + (bh + 1) * count * width,
              whole.begin() + (bh * keys + first) * width);
  }
}

struct Gradients {
  std::vector<double> dq, dk, dv;
};

// The keys cut into `blocks` nearly equal blocks (the first ones a key longer), each
// block's attention_grad{partial_keys} against the whole op's o and lse at the block's
// k_pos; dq summed, dk and dv put back in place, all in f64.
Gradients BlockwiseGradients(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                             const Tensor& lse, const Tensor& dout, const AttentionOptions& whole,
                             int blocks) {
  const int64_t keys = k.dim(2);
  Gradients sum{std::vector<double>(q.num_elements()), std::vector<double>(k.num_elements()),
                std::vector<double>(v.num_elements())};
  int64_t first = 0;
  for (int b = 0; b < blocks; ++b) {
    const int64_t count = keys / blocks + (b < keys % blocks ? 1 : 0);
    AttentionOptions options = whole;
    // The whole op's default q_pos counts all its keys, not the block's.
    options.q_pos = whole.q_pos.value_or(keys - q.dim(2));
    options.k_pos = whole.k_pos + first;
    options.partial_keys = true;
    absl::StatusOr<AttentionGradResult> part =
        AttentionGrad(q, KeySlice(k, first, count), KeySlice(v, first, count), o, lse, dout,
                      options);
    EXPECT_TRUE(part.ok()) << part.status();
    if (!part.ok()) return sum;
    const std::vector<double> dq = part->dq.ToDouble();
    for (size_t i = 0; i < dq.size(); ++i) sum.dq[i] += dq[i];
    PlaceKeys(part->dk, first, keys, sum.dk);
    PlaceKeys(part->dv, first, keys, sum.dv);
    first += count;
  }
  return sum;
}

// The forward's o and lse in `type`, then for 2, 3 and 4 blocks: the blockwise gradients
// against the whole partial_keys op (the same arithmetic regrouped: `exact` apart), and
// against the whole renormalised op (`vs_renormalised` apart: the renormalisation
// removes lse's f32 rounding, which partial_keys keeps, a relative 6e-8 in f64).
void CheckBlocks(const Case& c, ElementType type, double exact, double vs_renormalised) {
  SCOPED_TRACE(c.name);
  const Tensor q = RandomTensor(type, {2, c.heads, c.queries, c.head_dim}, 21);
  const Tensor k = RandomTensor(type, {2, c.kv_heads, c.keys, c.head_dim}, 22);
  const Tensor v = RandomTensor(type, {2, c.kv_heads, c.keys, c.value_dim}, 23);
  const Tensor dout = RandomTensor(type, {2, c.heads, c.queries, c.value_dim}, 24);
  AttentionOptions options;
  options.causal = c.causal;
  options.q_pos = c.q_pos;
  options.k_pos = c.k_pos;
  absl::StatusOr<AttentionResult> forward = Attention(q, k, v, options);
  ASSERT_TRUE(forward.ok()) << forward.status();
  const Tensor& o = forward->output;
  const Tensor& lse = forward->lse;
  absl::StatusOr<AttentionGradResult> renormalised = AttentionGrad(q, k, v, o, lse, dout, options);
  ASSERT_TRUE(renormalised.ok()) << renormalised.status();
  AttentionOptions partial = options;
  partial.partial_keys = true;
  absl::StatusOr<AttentionGradResult> whole = AttentionGrad(q, k, v, o, lse, dout, partial);
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (int blocks = 2; blocks <= 4; ++blocks) {
    SCOPED_TRACE(::testing::Message() << blocks << " blocks");
    const Gradients sum = BlockwiseGradients(q, k, v, o, lse, dout, options, blocks);
    const struct {
      const char* name;
      const Tensor& partial_whole;
      const Tensor& renormalised_whole;
      const std::vector<double>& blockwise;
    } results[] = {{"dq", whole->dq, renormalised->dq, sum.dq},
                   {"dk", whole->dk, renormalised->dk, sum.dk},
                   {"dv", whole->dv, renormalised->dv, sum.dv}};
    for (const auto& r : results) {
      SCOPED_TRACE(r.name);
      ExpectTensorNear(r.partial_whole, type, r.partial_whole.shape(), r.blockwise, exact, exact);
      ExpectTensorNear(r.renormalised_whole, type, r.renormalised_whole.shape(), r.blockwise,
                       vs_renormalised, vs_renormalised);
    }
  }
}

const Case kCases[] = {
    {"causal", 2, 2, 9, 9, 4, 3, true, std::nullopt, 0},
    {"causal gqa", 4, 2, 6, 11, 3, 5, true, std::nullopt, 0},
    {"gqa", 6, 2, 5, 10, 4, 4, false, std::nullopt, 0},
    // Positions where the first queries see no key at all (lse = -inf, zero gradient)
    // and whole blocks lie in some queries' future.
    {"causal positions", 4, 1, 7, 8, 3, 3, true, 10, 12},
};

TEST(AttentionGradPartialKeysTest, F64BlocksSumToTheWholeGradient) {
  for (const Case& c : kCases) CheckBlocks(c, ElementType::kF64, 1e-10, 1e-6);
}

TEST(AttentionGradPartialKeysTest, F32BlocksSumToTheWholeGradient) {
  for (const Case& c : kCases) CheckBlocks(c, ElementType::kF32, 1e-5, 1e-5);
}

// Without the attribute a block's gradients are its own softmax's: they do not sum to the
// whole gradient (the attribute changes the arithmetic, it is not ignored).
TEST(AttentionGradPartialKeysTest, RenormalisedBlocksDoNotSumToTheWholeGradient) {
  const Tensor q = RandomTensor(ElementType::kF64, {1, 2, 4, 3}, 31);
  const Tensor k = RandomTensor(ElementType::kF64, {1, 2, 6, 3}, 32);
  const Tensor v = RandomTensor(ElementType::kF64, {1, 2, 6, 3}, 33);
  const Tensor dout = RandomTensor(ElementType::kF64, {1, 2, 4, 3}, 34);
  const AttentionOptions options;
  absl::StatusOr<AttentionResult> forward = Attention(q, k, v, options);
  ASSERT_TRUE(forward.ok()) << forward.status();
  AttentionOptions block = options;
  block.q_pos = 2;
  absl::StatusOr<AttentionGradResult> first = AttentionGrad(
      q, KeySlice(k, 0, 3), KeySlice(v, 0, 3), forward->output, forward->lse, dout, block);
  block.partial_keys = true;
  absl::StatusOr<AttentionGradResult> share = AttentionGrad(
      q, KeySlice(k, 0, 3), KeySlice(v, 0, 3), forward->output, forward->lse, dout, block);
  ASSERT_TRUE(first.ok() && share.ok());
  const std::vector<double> renormalised = first->dv.ToDouble(), partial = share->dv.ToDouble();
  double largest_difference = 0;
  for (size_t i = 0; i < partial.size(); ++i) {
    largest_difference = std::max(largest_difference, std::abs(renormalised[i] - partial[i]));
  }
  EXPECT_GT(largest_difference, 1e-3);
}

}  // namespace
}  // namespace commir::cpu
