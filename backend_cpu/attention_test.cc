#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "backend_cpu/kernels.h"
#include "backend_cpu/test_util.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

using ::commir::cpu::testing::ExpectInvalidArgument;
using ::commir::cpu::testing::ExpectTensorNear;
using ::commir::cpu::testing::RandomTensor;
using ::commir::cpu::testing::Ravel;
using ::commir::cpu::testing::RoundingTolerance;
using ::commir::cpu::testing::RoundTo;

struct Reference {
  std::vector<double> output, lse;
};

// The spec's definition, one query at a time in f64: scores over the visible keys,
// softmax, weighted sum of values, and the log-sum-exp of the visible scores.
Reference ReferenceAttention(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionOptions& options) {
  const int64_t batch = q.dim(0), heads = q.dim(1), queries = q.dim(2), head_dim = q.dim(3);
  const int64_t kv_heads = k.dim(1), keys = k.dim(2), value_dim = v.dim(3);
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim)));
  const int64_t q_pos = options.q_pos.value_or(keys - queries);
  Reference result;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kvh = h / (heads / kv_heads);
      for (int64_t i = 0; i < queries; ++i) {
        std::vector<double> scores;
        std::vector<int64_t> visible_keys;
        for (int64_t j = 0; j < keys; ++j) {
          if (options.causal && options.k_pos + j > q_pos + i) continue;
          double dot = 0;
          for (int64_t d = 0; d < head_dim; ++d) {
            dot += q.GetAsDouble(Ravel({b, h, i, d}, q.shape())) *
                   k.GetAsDouble(Ravel({b, kvh, j, d}, k.shape()));
          }
          scores.push_back(scale * dot);
          visible_keys.push_back(j);
        }
        double sum = 0;
        for (double s : scores) sum += std::exp(s);
        result.lse.push_back(scores.empty() ? -INFINITY : std::log(sum));
        for (int64_t e = 0; e < value_dim; ++e) {
          double out = 0;
          for (size_t n = 0; n < scores.size(); ++n) {
            out += std::exp(scores[n]) / sum *
                   v.GetAsDouble(Ravel({b, kvh, visible_keys[n], e}, v.shape()));
          }
          result.output.push_back(out);
        }
      }
    }
  }
  return result;
}

struct AttentionCase {
  const char* name;
  int64_t batch, heads, kv_heads, queries, keys, head_dim, value_dim;
  AttentionOptions options;
};

std::vector<AttentionCase> Cases() {
  AttentionOptions causal;
  causal.causal = true;
  AttentionOptions causal_shifted = causal;  // queries 0 and 1 come before every key
  causal_shifted.q_pos = 0;
  causal_shifted.k_pos = 2;
  AttentionOptions causal_later = causal;  // decode-style: queries far after the keys
  causal_later.q_pos = 100;
  causal_later.k_pos = 3;
  AttentionOptions scaled;
  scaled.scale = 0.7;
  AttentionOptions causal_negative = causal;  // positions may be negative
  causal_negative.q_pos = -4;
  causal_negative.k_pos = -5;
  return {
      {"plain", 2, 3, 3, 4, 6, 8, 8, {}},
      {"gqa", 1, 8, 2, 3, 5, 4, 4, {}},
      {"mqa causal", 2, 4, 1, 5, 5, 8, 8, causal},
      {"value dim differs", 1, 2, 2, 3, 4, 8, 3, {}},
      {"causal default q_pos, Sq < Skv", 1, 2, 1, 3, 7, 4, 4, causal},
      {"causal default q_pos, Sq > Skv", 1, 2, 2, 6, 3, 4, 4, causal},
      {"causal, some queries see no key", 2, 4, 2, 5, 4, 8, 8, causal_shifted},
      {"causal, all keys in the past", 1, 2, 2, 3, 4, 4, 4, causal_later},
      {"custom scale", 1, 2, 2, 3, 4, 4, 4, scaled},
      {"negative positions", 1, 2, 2, 4, 4, 4, 4, causal_negative},
      {"single query and key", 1, 1, 1, 1, 1, 1, 1, {}},
      {"bigger blocks", 1, 2, 1, 33, 47, 16, 16, causal},
  };
}

TEST(AttentionTest, MatchesReferenceForEveryCaseAndType) {
  for (ElementType type :
       {ElementType::kF64, ElementType::kF32, ElementType::kF16, ElementType::kBF16}) {
    uint32_t seed = 1;
    for (const AttentionCase& c : Cases()) {
      const Tensor q = RandomTensor(type, {c.batch, c.heads, c.queries, c.head_dim}, seed++, -2, 2);
      const Tensor k = RandomTensor(type, {c.batch, c.kv_heads, c.keys, c.head_dim}, seed++, -2, 2);
      const Tensor v = RandomTensor(type, {c.batch, c.kv_heads, c.keys, c.value_dim}, seed++);
      Reference reference = ReferenceAttention(q, k, v, c.options);
      for (double& value : reference.output) value = RoundTo(type, value);
      for (double& value : reference.lse) value = RoundTo(ElementType::kF32, value);
      COMMIR_ASSERT_OK_AND_ASSIGN(AttentionResult result, Attention(q, k, v, c.options));
      const double atol = type == ElementType::kF64   ? 1e-13
                          : type == ElementType::kF32 ? 1e-6
                                                      : 1e-3;
      ExpectTensorNear(result.output, type, {c.batch, c.heads, c.queries, c.value_dim},
                       reference.output, RoundingTolerance(type), atol);
      ExpectTensorNear(result.lse, ElementType::kF32, {c.batch, c.heads, c.queries}, reference.lse,
                       2e-6, 1e-6);
      if (::testing::Test::HasFailure()) FAIL() << c.name << " " << ElementTypeName(type);
    }
  }
}

TEST(AttentionTest, QueriesThatSeeNoKeyGetMinusInfinityAndZeros) {
  AttentionOptions options;
  options.causal = true;
  options.q_pos = 0;
  options.k_pos = 2;  // query i sees keys j <= i - 2
  const Tensor q = RandomTensor(ElementType::kF32, {1, 1, 4, 4}, 1);
  const Tensor k = RandomTensor(ElementType::kF32, {1, 1, 3, 4}, 2);
  const Tensor v = RandomTensor(ElementType::kF32, {1, 1, 3, 2}, 3);
  COMMIR_ASSERT_OK_AND_ASSIGN(AttentionResult result, Attention(q, k, v, options));
  for (int64_t i = 0; i < 2; ++i) {
    EXPECT_EQ(result.lse.data<float>()[i], -std::numeric_limits<float>::infinity());
    EXPECT_EQ(result.output.data<float>()[2 * i], 0.0f);
    EXPECT_EQ(result.output.data<float>()[2 * i + 1], 0.0f);
  }
  // Query 2 sees exactly key 0: softmax weight 1, so the output row is v[0] and lse the
  // single scaled score.
  EXPECT_FLOAT_EQ(result.output.data<float>()[4], v.data<float>()[0]);
  EXPECT_FLOAT_EQ(result.output.data<float>()[5], v.data<float>()[1]);
  double score = 0;
  for (int d = 0; d < 4; ++d) score += q.GetAsDouble(2 * 4 + d) * k.GetAsDouble(d);
  EXPECT_NEAR(result.lse.data<float>()[2], score / 2.0, 1e-6);
}

// Keys no query can see are never read: a block entirely in the queries' future (ring
// attention's blocks past the diagonal) costs no GEMM, and keys past the last query's
// position are left out of both products. NaN in those keys and values shows it: read,
// they would turn 0 * NaN into NaN in the output.
TEST(AttentionTest, CausalMaskSkipsKeysNoQuerySees) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  AttentionOptions future;
  future.causal = true;
  future.q_pos = 0;
  future.k_pos = 4;  // the 4 queries sit at 0..3, every key at 4 or later
  const Tensor q = RandomTensor(ElementType::kF32, {1, 2, 4, 4}, 1);
  const Tensor poisoned = Tensor::FromDouble(ElementType::kF32, {1, 1, 3, 4}, std::vector<double>(12, nan));
  COMMIR_ASSERT_OK_AND_ASSIGN(AttentionResult skipped, Attention(q, poisoned, poisoned, future));
  ExpectTensorNear(skipped.output, ElementType::kF32, {1, 2, 4, 4}, std::vector<double>(32, 0.0), 0);
  ExpectTensorNear(skipped.lse, ElementType::kF32, {1, 2, 4}, std::vector<double>(8, -INFINITY), 0);

  // Queries at 0..3 and keys at 0..5: keys 4 and 5 are in every query's future.
  AttentionOptions prefix;
  prefix.causal = true;
  prefix.q_pos = 0;
  const Tensor k = RandomTensor(ElementType::kF32, {1, 1, 6, 4}, 2);
  const Tensor v = RandomTensor(ElementType::kF32, {1, 1, 6, 4}, 3);
  std::vector<double> k_values, v_values;
  for (int64_t i = 0; i < 24; ++i) {
    k_values.push_back(i < 16 ? k.GetAsDouble(i) : nan);
    v_values.push_back(i < 16 ? v.GetAsDouble(i) : nan);
  }
  const Tensor k_tail = Tensor::FromDouble(ElementType::kF32, {1, 1, 6, 4}, k_values);
  const Tensor v_tail = Tensor::FromDouble(ElementType::kF32, {1, 1, 6, 4}, v_values);
  COMMIR_ASSERT_OK_AND_ASSIGN(AttentionResult expected, Attention(q, k, v, prefix));
  COMMIR_ASSERT_OK_AND_ASSIGN(AttentionResult actual, Attention(q, k_tail, v_tail, prefix));
  for (int64_t i = 0; i < 32; ++i) {
    EXPECT_EQ(actual.output.GetAsDouble(i), expected.output.GetAsDouble(i)) << i;
  }
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(actual.lse.GetAsDouble(i), expected.lse.GetAsDouble(i)) << i;
}

TEST(AttentionTest, NoKeysAtAll) {
  const Tensor q = RandomTensor(ElementType::kBF16, {1, 2, 3, 4}, 1);
  COMMIR_ASSERT_OK_AND_ASSIGN(AttentionResult result,
                              Attention(q, Tensor(ElementType::kBF16, {1, 1, 0, 4}),
                                        Tensor(ElementType::kBF16, {1, 1, 0, 5}), {}));
  ExpectTensorNear(result.output, ElementType::kBF16, {1, 2, 3, 5}, std::vector<double>(30, 0.0),
                   0);
  ExpectTensorNear(result.lse, ElementType::kF32, {1, 2, 3}, std::vector<double>(6, -INFINITY), 0);
}

TEST(AttentionTest, StableForLargeScores) {
  // Scores of about 1e4 overflow exp without the maximum subtracted.
  const Tensor q = Tensor::FromDouble(ElementType::kF32, {1, 1, 1, 1}, std::vector<double>{100});
  const Tensor k =
      Tensor::FromDouble(ElementType::kF32, {1, 1, 2, 1}, std::vector<double>{100, 99.99});
  const Tensor v = Tensor::FromDouble(ElementType::kF32, {1, 1, 2, 1}, std::vector<double>{1, 3});
  COMMIR_ASSERT_OK_AND_ASSIGN(AttentionResult result, Attention(q, k, v, {}));
  const double p1 = 1 / (1 + std::exp(-1.0));  // scores 10000 and 9999
  ExpectTensorNear(result.output, ElementType::kF32, {1, 1, 1, 1}, {p1 * 1 + (1 - p1) * 3}, 1e-5);
  ExpectTensorNear(result.lse, ElementType::kF32, {1, 1, 1}, {10000 + std::log(1 + std::exp(-1.0))},
                   1e-6);
}

TEST(AttentionTest, Errors) {
  const Tensor q(ElementType::kF32, {1, 4, 2, 8});
  const Tensor k(ElementType::kF32, {1, 2, 3, 8});
  ExpectInvalidArgument(Attention(Tensor(ElementType::kF32, {4, 2, 8}), k, k, {}).status(),
                        {"4-D"});
  ExpectInvalidArgument(Attention(q, Tensor(ElementType::kF32, {1, 3, 3, 8}),
                                  Tensor(ElementType::kF32, {1, 3, 3, 8}), {})
                            .status(),
                        {"4 query heads", "3 kv heads"});
  ExpectInvalidArgument(Attention(q, Tensor(ElementType::kF32, {1, 2, 3, 7}), k, {}).status(),
                        {"f32[1, 2, 3, 7]"});
  ExpectInvalidArgument(Attention(q, k, Tensor(ElementType::kF32, {1, 2, 4, 8}), {}).status(),
                        {"f32[1, 2, 4, 8]"});
  ExpectInvalidArgument(Attention(q, k, Tensor(ElementType::kF32, {2, 2, 3, 8}), {}).status(),
                        {"f32[2, 2, 3, 8]"});
  ExpectInvalidArgument(Attention(Tensor(ElementType::kI32, {1, 4, 2, 8}), k, k, {}).status(),
                        {"floating-point"});
  ExpectInvalidArgument(Attention(q, Tensor(ElementType::kF32, {1, 0, 3, 8}),
                                  Tensor(ElementType::kF32, {1, 0, 3, 8}), {})
                            .status(),
                        {"0 kv heads"});
}

}  // namespace
}  // namespace commir::cpu
