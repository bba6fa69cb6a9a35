// Reference CPU kernels for CommIR ops (docs/language.md, "Operations"): pure functions on host tensors.
//
// Conventions shared by every kernel:
//  - Errors a program can cause (shape or type mismatches, bad dimensions, out-of-range
//    offsets, integer division by zero) come back as InvalidArgument; nothing aborts.
//  - Dimensions may be negative, counting from the end (-1 is the last).
//  - Float tensors compute in f32 (f64 for f64 tensors); f16/bf16 are widened exactly and
//    the result is rounded to nearest even once, when stored.
//  - Integer tensors compute in i64 with two's-complement wraparound, then wrap into i32;
//    i1 values are 0/1 and any nonzero result is stored as 1.
#ifndef COMMIR_BACKEND_CPU_KERNELS_H_
#define COMMIR_BACKEND_CPU_KERNELS_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "commir/element_type.h"
#include "commir/cross_entropy_op.h"
#include "commir/elementwise_fn.h"
#include "runtime/host_ops.h"
#include "runtime/in_place.h"
#include "runtime/tensor.h"
#include "commir/reduction_fn.h"

namespace commir::cpu {

using runtime::Tensor;

// ---------------------------------------------------------------------------------------
// Elementwise (elementwise.cc)

// `fn` is a one-operand function for Unary, a two-operand one for Binary and select for
// Ternary (anything else is an InvalidArgument error). Messages name the function by
// ElementwiseFnName.

// neg, abs and relu accept integer tensors too; the others need a float tensor.
absl::StatusOr<Tensor> Unary(ElementwiseFn fn, const Tensor& x);

// NumPy broadcasting (either operand may be 0-d); both operands need the same element
// type, which the result has. Floats follow IEEE (x / 0 is +-inf or NaN; max and min
// propagate NaN). Integers: div rounds toward negative infinity (floor), and division by
// zero or pow with a negative exponent is an error. The predicates (compare's eq ... ge)
// give an i1 result instead, comparing exactly (IEEE: NaN is unequal to everything).
absl::StatusOr<Tensor> Binary(ElementwiseFn fn, const Tensor& a, const Tensor& b);

// select(cond, a, b): a where the i1 `cond` holds, else b, with NumPy broadcasting of all
// three; a and b share the result's element type. Values are copied, never recomputed.
absl::StatusOr<Tensor> Ternary(ElementwiseFn fn, const Tensor& cond, const Tensor& a,
                               const Tensor& b);

// Element type change. Float targets round to nearest even (overflow gives +-inf).
// Float -> integer rounds to the nearest integer, ties to even, saturating at the target's
// range, with NaN -> 0. Integer -> narrower integer wraps (two's complement, as in XLA and
// NumPy). Anything -> i1 is `value != 0`.
Tensor Convert(const Tensor& x, ElementType type);

// A tensor of `shape` (extents >= 0) with every element `value` rounded to `type`
// (runtime/host_ops.h: the runtime builds host tensors with it too).
using runtime::Full;

// ---------------------------------------------------------------------------------------
// Matrix multiplication (matmul.cc)

// a [..., M, K] x b [..., K, N] -> [batch..., M, N], where batch is the NumPy broadcast of
// the two batch shapes. transpose_a means a is stored as [..., K, M] (likewise b as
// [..., N, K]). a and b must share an element type. Floats accumulate in f32 (f64 for
// f64) through BLAS; integers in i64. The result is rounded to `result_type` once.
absl::StatusOr<Tensor> MatMul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                              ElementType result_type);

// The product of two matrices (rank 2) stored straight into `destination` (rank 2) at
// `offset` along `dim` (0: a block of rows, at an offset pointer; 1: a block of columns,
// with the destination's row length as the row stride): what MatMul followed by
// DynamicUpdateSlice(destination, product, dim, offset) computes, bit for bit, without the
// product tensor or a copy of the destination. Returns false, destination untouched, where
// it does not apply: other ranks or dimensions, an element type other than f32 and f64
// (then a and b must have destination's), a product that does not fit at `offset`.
absl::StatusOr<bool> MatMulInto(const Tensor& a, const Tensor& b, bool transpose_a,
                                bool transpose_b, Tensor& destination, int64_t dim,
                                int64_t offset);

// A matmul operand: a whole tensor, or the block of one that a dynamic_slice takes,
// read where it lies (runtime/in_place.h: SliceAsMatrices gives `block`; `sliced_dim`
// and `offset` are the slice's). f32 and f64 blocks go to BLAS as an offset pointer with
// the tensor's row stride; other types are sliced first (their conversion to the compute
// type copies them anyway). The results are those of slicing first, bit for bit.
struct MatrixOperand {
  const Tensor* tensor = nullptr;
  absl::InlinedVector<int64_t, 4> shape;  // the operand's (the block's) shape
  runtime::MatrixBlock block;
  int64_t sliced_dim = -1;  // -1: the whole tensor
  int64_t offset = 0;
};
MatrixOperand WholeMatrices(const Tensor& tensor);
absl::StatusOr<Tensor> MatMul(const MatrixOperand& a, const MatrixOperand& b, bool transpose_a,
                              bool transpose_b, ElementType result_type);
absl::StatusOr<bool> MatMulInto(const MatrixOperand& a, const MatrixOperand& b, bool transpose_a,
                                bool transpose_b, Tensor& destination, int64_t dim,
                                int64_t offset);

// ---------------------------------------------------------------------------------------
// Reductions (reduce.cc)


// Reduces over `dims` (distinct; empty means no reduction), keeping them as extent 1 when
// `keepdim`. The result has x's element type. Float sums use pairwise summation in f32
// (f64 for f64), so the error grows with log(n); max and min propagate NaN. Empty
// reductions give 0 for sum, NaN for a float mean, -inf / +inf (or the integer type's
// lowest / highest value) for max / min. Integer mean is floor(sum / count), equal to
// div(reduce_sum, count), and an error for an empty reduction.
absl::StatusOr<Tensor> Reduce(ReductionFn op, const Tensor& x, absl::Span<const int64_t> dims,
                              bool keepdim);

// ---------------------------------------------------------------------------------------
// Normalisations (norm.cc); float tensors only, computed in f32 (f64 for f64), result in
// x's element type.

// exp(x - max) / sum along `dim`. A slice that is all -inf gives NaN (0 / 0), as in
// PyTorch and JAX.
absl::StatusOr<Tensor> Softmax(const Tensor& x, int64_t dim);

// Over the last dimension N: (x - mean) / sqrt(var + eps) * weight + bias, with the biased
// variance (divided by N). weight and bias are 1-D of length N, of any float type.
absl::StatusOr<Tensor> LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                 double eps);

// Over the last dimension N: x / sqrt(mean(x^2) + eps) * weight, weight 1-D of length N.
absl::StatusOr<Tensor> RmsNorm(const Tensor& x, const Tensor& weight, double eps);

// ---------------------------------------------------------------------------------------
// Online-softmax merge (attention_merge.cc)

struct AttentionMergeResult {
  Tensor output;
  Tensor lse;
};

// attention_merge: folds the partials (outputs[i], lses[i]), i >= 1, into the accumulator
// (outputs[0], lses[0]) in order, one merge step each (commir/online_softmax.h), in the
// accumulator's type (f32 or f64); partials of other float types are widened exactly.
// outputs[i] [.., S, D], lses[i] [.., S].
absl::StatusOr<AttentionMergeResult> AttentionMerge(absl::Span<const Tensor* const> outputs,
                                                    absl::Span<const Tensor* const> lses);
// Selection (topk.cc)

struct TopKResult {
  Tensor values;   // x's element type, [..., k]
  Tensor indices;  // i64, [..., k]
};

// The k largest entries of each row of the last dimension, sorted descending, and their
// positions in the row. The order is total: NaN ranks above every number (as in
// torch.topk), equal values (+0 and -0 among them) keep the lower index first. Values are
// copied, never rounded. Needs a float or integer x of rank >= 1 and 1 <= k <= its last
// extent.
absl::StatusOr<TopKResult> TopK(const Tensor& x, int64_t k);

// ---------------------------------------------------------------------------------------
// Attention (attention.cc)

struct AttentionOptions {
  bool causal = false;
  // Multiplies q k^T; default 1 / sqrt(D) (1 when D = 0, where every score is 0 anyway).
  std::optional<double> scale;
  // Position of query 0; default Skv - Sq (the queries are the last Sq positions).
  std::optional<int64_t> q_pos;
  // Position of key 0.
  int64_t k_pos = 0;
  // AttentionGrad only (attention_grad's `partial_keys`): lse normalises over a superset
  // of the given keys, so the rebuilt probabilities are used without renormalising.
  bool partial_keys = false;
};

struct AttentionResult {
  Tensor output;  // [B, H, Sq, Dv], q's element type
  Tensor lse;     // f32 [B, H, Sq]
};

// softmax(scale * q k^T, masked) v with q [B, H, Sq, D], k [B, Hkv, Skv, D] and
// v [B, Hkv, Skv, Dv]; H must be a multiple of Hkv and head h reads kv head
// h / (H / Hkv). Under `causal`, query i (position q_pos + i) sees key j (position
// k_pos + j) iff k_pos + j <= q_pos + i. `lse` is the natural log-sum-exp of the scaled,
// masked scores: -inf, with an all-zero output row, for a query that sees no key.
// Computed in f32 (f64 when q is f64) with the row maximum subtracted before exp, using
// BLAS for q k^T and p v per (batch, head).
absl::StatusOr<AttentionResult> Attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                          const AttentionOptions& options);
// The same with q, k and v as MatrixOperands (each [B, H, S, D] a batch of B * H [S, D]
// matrices): a block of a larger tensor that a slice takes is read where it lies, each
// matrix from its offset with the tensor's row and matrix strides (FlashAttention's
// pointer and strides), not sliced into a tensor of its own first. The values read, and
// so the results, are those of slicing first, bit for bit. (The kernel converts its
// operands to the compute type in both cases; a block's conversion reads only the block.)
absl::StatusOr<AttentionResult> Attention(const MatrixOperand& q, const MatrixOperand& k,
                                          const MatrixOperand& v, const AttentionOptions& options);

struct AttentionGradResult {
  Tensor dq;  // q's type and shape
  Tensor dk;  // k's
  Tensor dv;  // v's
};

// The gradients of Attention's output with respect to q, k and v given the output
// gradient `dout` (attention_grad.cc): o and dout [B, H, Sq, Dv] in q's type, lse the
// forward's f32 [B, H, Sq], the same options as the forward. The probabilities are
// rebuilt per block of queries from the recomputed scores and lse (renormalised per row,
// so lse's f32 rounding does not show, unless options.partial_keys: then lse is a
// superset's normaliser, p = exp(s - lse) is used as is and the gradients are the given
// keys' exact share of that softmax's); dk and dv sum over the query heads of each kv
// head's group. Computed in f32 (f64 when q is f64); a query that sees no key adds nothing.
absl::StatusOr<AttentionGradResult> AttentionGrad(const Tensor& q, const Tensor& k,
                                                  const Tensor& v, const Tensor& o,
                                                  const Tensor& lse, const Tensor& dout,
                                                  const AttentionOptions& options);

// ---------------------------------------------------------------------------------------
// Layout (layout.cc): element-preserving, any element type.

// Same elements in row-major order under a new shape (extents >= 0, same element count).
absl::StatusOr<Tensor> Reshape(const Tensor& x, absl::Span<const int64_t> new_shape);

// result.dim(i) = x.dim(perm[i]); perm is a permutation of the dimensions (entries may be
// negative).
absl::StatusOr<Tensor> Transpose(const Tensor& x, absl::Span<const int64_t> perm);

// Slice (the box [start, start + size) in every dimension; it must lie inside x) and
// Concat (along `dim`, of tensors of one element type and rank that agree on every other
// dimension) are shared with the runtime's host layout code: runtime/host_ops.h.
using runtime::Concat;
using runtime::Slice;

// NumPy broadcasting of x to `shape`.
absl::StatusOr<Tensor> Broadcast(const Tensor& x, absl::Span<const int64_t> shape);

// `size` elements from `offset` along `dim`. An offset that does not leave room for `size`
// elements is an error naming the offset, size and extent.
absl::StatusOr<Tensor> DynamicSlice(const Tensor& x, int64_t dim, int64_t offset, int64_t size);

// x with `update` written from `offset` along `dim`; update has x's element type and rank
// and matches x in every other dimension. Out-of-range offsets are errors as above.
absl::StatusOr<Tensor> DynamicUpdateSlice(const Tensor& x, const Tensor& update, int64_t dim,
                                          int64_t offset);
// The same, writing into x's own buffer (the interpreter hands over a destination nothing
// else holds); x is unchanged on error.
absl::Status DynamicUpdateSliceInPlace(Tensor& x, const Tensor& update, int64_t dim,
                                       int64_t offset);

// ---------------------------------------------------------------------------------------
// Losses (cross_entropy.cc): commir/cross_entropy_op.h gives the formulas. Statistics in
// f32 (f64 for f64 logits); a label neither in [0, classes) nor ignore_index is an error.

struct CrossEntropyResult {
  Tensor loss;  // logits' element type: a scalar (mean, sum) or one per token (none)
  Tensor lse;   // per token, f32 (f64 for f64 logits)
};
// With `shard` (and the whole vocabulary's `lse`): the vocabulary-parallel form, the
// shard's share of the loss (cross_entropy_op.h).
absl::StatusOr<CrossEntropyResult> CrossEntropy(const Tensor& logits, const Tensor& labels,
                                                const CrossEntropyOptions& options,
                                                const Tensor* lse = nullptr,
                                                std::optional<VocabShard> shard = std::nullopt);
// dlogits, in dloss's element type; with `shard`, the shard's columns of them.
absl::StatusOr<Tensor> CrossEntropyGrad(const Tensor& logits, const Tensor& labels,
                                        const Tensor& lse, const Tensor& dloss,
                                        const CrossEntropyOptions& options,
                                        std::optional<VocabShard> shard = std::nullopt);

}  // namespace commir::cpu

#endif  // COMMIR_BACKEND_CPU_KERNELS_H_
