// attention_merge: against the merge as separate elementwise kernels (the ring schedules'
// former decomposition: the same bits), against attention over the union of the key
// blocks (the online-softmax identity), masked blocks, and its refusals.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend_cpu/kernels.h"
#include "backend_cpu/test_util.h"
#include "gtest/gtest.h"
#include "runtime/host_ops.h"

namespace commir::cpu {
namespace {

using runtime::Tensor;
using testing::ExpectInvalidArgument;
using testing::RandomTensor;

Tensor Value(absl::StatusOr<Tensor> t) {
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : Tensor();
}

// The merge of one partial as the ring schedule used to emit it: one kernel per op, in
// the accumulator's type T (convert, max, max with -1e30, sub, exp, ..., the reshapes to
// [.., 1] and the broadcast products).
AttentionMergeResult DecomposedMerge(const Tensor& o_a, const Tensor& lse_a, const Tensor& o_b_in,
                                     const Tensor& lse_b_in) {
  const ElementType t = o_a.element_type();
  const Tensor o_b = Convert(o_b_in, t);
  const Tensor lse_b = Convert(lse_b_in, t);
  const Tensor floor = runtime::Full(t, {}, -1e30);
  const Tensor tiny = runtime::Full(t, {}, 1e-30);
  Tensor m = Value(Binary(ElementwiseFn::kMax, lse_a, lse_b));
  m = Value(Binary(ElementwiseFn::kMax, m, floor));
  const Tensor wa = Value(Unary(ElementwiseFn::kExp, Value(Binary(ElementwiseFn::kSub, lse_a, m))));
  const Tensor wb = Value(Unary(ElementwiseFn::kExp, Value(Binary(ElementwiseFn::kSub, lse_b, m))));
  const Tensor s = Value(Binary(ElementwiseFn::kAdd, wa, wb));
  const Tensor lse = Value(Binary(ElementwiseFn::kAdd, m, Value(Unary(ElementwiseFn::kLog, s))));
  const Tensor denominator = Value(Binary(ElementwiseFn::kMax, s, tiny));
  std::vector<int64_t> column = lse_a.shape();
  column.push_back(1);
  const Tensor ca = Value(Reshape(Value(Binary(ElementwiseFn::kDiv, wa, denominator)), column));
  const Tensor cb = Value(Reshape(Value(Binary(ElementwiseFn::kDiv, wb, denominator)), column));
  const Tensor oa = Value(Binary(ElementwiseFn::kMul, o_a, ca));
  const Tensor ob = Value(Binary(ElementwiseFn::kMul, o_b, cb));
  return {Value(Binary(ElementwiseFn::kAdd, oa, ob)), lse};
}

absl::StatusOr<AttentionMergeResult> Merge(const std::vector<const Tensor*>& o,
                                           const std::vector<const Tensor*>& lse) {
  return AttentionMerge(o, lse);
}

TEST(AttentionMergeTest, EqualsTheDecomposedMergeBitForBit) {
  for (ElementType acc : {ElementType::kF32, ElementType::kF64}) {
    for (ElementType part : {ElementType::kBF16, ElementType::kF32, ElementType::kF64}) {
      SCOPED_TRACE(std::string(ElementTypeName(acc)) + " accumulator, " + std::string(ElementTypeName(part)));
      const Tensor o_a = RandomTensor(acc, {2, 3, 5, 4}, 1);
      const Tensor lse_a = RandomTensor(acc, {2, 3, 5}, 2, -4, 4);
      const Tensor o_b = RandomTensor(part, {2, 3, 5, 4}, 3);
      const Tensor lse_b = RandomTensor(ElementType::kF32, {2, 3, 5}, 4, -4, 4);
      const Tensor o_c = RandomTensor(part, {2, 3, 5, 4}, 5);
      const Tensor lse_c = RandomTensor(ElementType::kF32, {2, 3, 5}, 6, -4, 4);
      COMMIR_ASSERT_OK_AND_ASSIGN(AttentionMergeResult fused,
                                  Merge({&o_a, &o_b, &o_c}, {&lse_a, &lse_b, &lse_c}));
      const AttentionMergeResult first = DecomposedMerge(o_a, lse_a, o_b, lse_b);
      const AttentionMergeResult both = DecomposedMerge(first.output, first.lse, o_c, lse_c);
      EXPECT_TRUE(fused.output.BitwiseEqual(both.output));
      EXPECT_TRUE(fused.lse.BitwiseEqual(both.lse));
      EXPECT_EQ(fused.output.element_type(), acc);
      EXPECT_EQ(fused.lse.element_type(), acc);
    }
  }
}

// softmax over keys [0, 3k) is the merge of the softmaxes over three blocks of k keys.
TEST(AttentionMergeTest, MergedBlocksEqualAttentionOverAllKeys) {
  const int64_t keys = 6;
  const Tensor q = RandomTensor(ElementType::kF64, {1, 2, 4, 8}, 7);
  const Tensor k = RandomTensor(ElementType::kF64, {1, 2, 3 * keys, 8}, 8);
  const Tensor v = RandomTensor(ElementType::kF64, {1, 2, 3 * keys, 8}, 9);
  AttentionOptions options;
  options.scale = 0.5;
  COMMIR_ASSERT_OK_AND_ASSIGN(AttentionResult whole, Attention(q, k, v, options));
  std::vector<AttentionResult> blocks;
  for (int b = 0; b < 3; ++b) {
    const Tensor kb = Value(DynamicSlice(k, 2, b * keys, keys));
    const Tensor vb = Value(DynamicSlice(v, 2, b * keys, keys));
    COMMIR_ASSERT_OK_AND_ASSIGN(AttentionResult r, Attention(q, kb, vb, options));
    blocks.push_back(std::move(r));
  }
  const Tensor lse0 = Convert(blocks[0].lse, ElementType::kF64);
  COMMIR_ASSERT_OK_AND_ASSIGN(
      AttentionMergeResult merged,
      Merge({&blocks[0].output, &blocks[1].output, &blocks[2].output},
            {&lse0, &blocks[1].lse, &blocks[2].lse}));
  const std::vector<double> want = whole.output.ToDouble();
  const std::vector<double> got = merged.output.ToDouble();
  ASSERT_EQ(got.size(), want.size());
  // The blocks' lse are f32: their rounding (2^-24 relative) bounds the weights' error.
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  const std::vector<double> lse_want = whole.lse.ToDouble();
  const std::vector<double> lse_got = merged.lse.ToDouble();
  for (size_t i = 0; i < lse_got.size(); ++i) EXPECT_NEAR(lse_got[i], lse_want[i], 1e-6) << i;
}

// A block wholly in its queries' future (lse = -inf, o = 0) leaves the accumulator as it
// is; two of them give attention's empty row (o = 0, lse = -inf), not NaN.
TEST(AttentionMergeTest, FullyMaskedBlocksKeepTheAccumulator) {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor o = Tensor::FromDouble(ElementType::kF32, {2, 2}, {1.5, -2.0, 0.25, 3.0});
  const Tensor lse = Tensor::FromDouble(ElementType::kF32, {2}, {0.75, -inf});
  const Tensor empty_o = Tensor::FromDouble(ElementType::kBF16, {2, 2}, {0, 0, 0, 0});
  const Tensor empty_lse = Tensor::FromDouble(ElementType::kF32, {2}, {-inf, -inf});
  COMMIR_ASSERT_OK_AND_ASSIGN(AttentionMergeResult r, Merge({&o, &empty_o}, {&lse, &empty_lse}));
  testing::ExpectTensorEq(r.output, ElementType::kF32, {2, 2}, {1.5, -2.0, 0, 0});
  testing::ExpectTensorEq(r.lse, ElementType::kF32, {2}, {0.75, -inf});
}

TEST(AttentionMergeTest, RejectsBadOperands) {
  const Tensor o = RandomTensor(ElementType::kF32, {2, 3}, 1);
  const Tensor lse = RandomTensor(ElementType::kF32, {2}, 2);
  const Tensor o_bf16 = RandomTensor(ElementType::kBF16, {2, 3}, 3);
  const Tensor lse_long = RandomTensor(ElementType::kF32, {3}, 4);
  const Tensor o_int = Tensor::FromInt64(ElementType::kI32, {2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectInvalidArgument(Merge({&o}, {&lse}).status(), {"at least one partial"});
  ExpectInvalidArgument(Merge({&o_bf16, &o}, {&lse, &lse}).status(), {"f32 or f64"});
  ExpectInvalidArgument(Merge({&o, &o}, {&lse, &lse_long}).status(), {"pair 1"});
  ExpectInvalidArgument(Merge({&o, &o_int}, {&lse, &lse}).status(), {"pair 1", "float"});
}

}  // namespace
}  // namespace commir::cpu
