// Helpers for the CPU kernel tests: random inputs, index arithmetic for f64 reference
// loops, and tolerant tensor comparison.
#ifndef COMMIR_BACKEND_CPU_TEST_UTIL_H_
#define COMMIR_BACKEND_CPU_TEST_UTIL_H_

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "backend_cpu/kernels.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

// Evaluates a StatusOr expression, fails the test (returning from it) if it is an error,
// and otherwise moves the value into `lhs`, which may be a declaration.
#define COMMIR_ASSERT_OK_AND_ASSIGN(lhs, expression) \
  COMMIR_ASSERT_OK_AND_ASSIGN_IMPL(COMMIR_TEST_CONCAT(status_or_, __LINE__), lhs, expression)
#define COMMIR_ASSERT_OK_AND_ASSIGN_IMPL(status_or, lhs, expression) \
  auto status_or = (expression);                                     \
  ASSERT_TRUE(status_or.ok()) << status_or.status();                 \
  lhs = *std::move(status_or)
#define COMMIR_TEST_CONCAT(a, b) COMMIR_TEST_CONCAT_IMPL(a, b)
#define COMMIR_TEST_CONCAT_IMPL(a, b) a##b

namespace commir::cpu::testing {

using runtime::Tensor;

// Uniform values in [low, high) rounded to `type` (for integer types, uniform integers in
// [low, high]). Deterministic for a given seed.
Tensor RandomTensor(ElementType type, std::vector<int64_t> shape, uint32_t seed, double low = -1.0,
                    double high = 1.0);

// Row-major multi-index of a flat index and back.
std::vector<int64_t> Unravel(int64_t flat_index, absl::Span<const int64_t> shape);
int64_t Ravel(absl::Span<const int64_t> index, absl::Span<const int64_t> shape);

// What storing `value` into a tensor of `type` gives back.
double RoundTo(ElementType type, double value);

// A relative tolerance that allows a result computed in f32 (f64) and rounded to `type`
// to be off by about one unit in the last place of `type`.
double RoundingTolerance(ElementType type);

// Expects `actual` to have `type` and `shape`, and each element to be within
// atol + rtol * |expected| of `expected` (NaN matches NaN; infinities must match exactly).
void ExpectTensorNear(const Tensor& actual, ElementType type, absl::Span<const int64_t> shape,
                      absl::Span<const double> expected, double rtol, double atol = 0.0);

// Same, with exact equality.
void ExpectTensorEq(const Tensor& actual, ElementType type, absl::Span<const int64_t> shape,
                    absl::Span<const double> expected);

// The block of `base` at `offset` along `dim` (negative: from the end), `size` long, as the
// view the interpreter hands a kernel instead of running the slice.
MatrixOperand SliceView(const Tensor& base, int64_t dim, int64_t offset, int64_t size);

// Expects an InvalidArgument status whose message contains every one of `fragments`.
void ExpectInvalidArgument(const absl::Status& status,
                           std::initializer_list<std::string_view> fragments);

}  // namespace commir::cpu::testing

#endif  // COMMIR_BACKEND_CPU_TEST_UTIL_H_
