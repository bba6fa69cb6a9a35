#include "runtime/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "commir/element_type.h"
#include "runtime/tensor.h"

namespace commir::runtime {
namespace {

// Euclidean norm accumulated against a running scale (as LAPACK's dnrm2 does), so that
// squaring large f64 values cannot overflow, nor tiny ones underflow, the sum.
class L2Norm {
 public:
  void Add(double x) {
    const double magnitude = std::abs(x);
    if (magnitude == 0) return;
    if (magnitude > scale_) {
      const double ratio = scale_ / magnitude;
      sum_of_squares_ = 1 + sum_of_squares_ * ratio * ratio;
      scale_ = magnitude;
    } else {
      const double ratio = magnitude / scale_;
      sum_of_squares_ += ratio * ratio;
    }
  }
  double Value() const { return scale_ * std::sqrt(sum_of_squares_); }

 private:
  // The norm is scale_ * sqrt(sum_of_squares_).
  double scale_ = 0;
  double sum_of_squares_ = 0;
};

// The row-major multi-index of a flat index: "[1, 0, 2]", "[]" for a scalar.
std::string FormatIndex(absl::Span<const int64_t> shape, int64_t flat_index) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat_index % shape[d];
    flat_index /= shape[d];
  }
  return absl::StrFormat("[%s]", absl::StrJoin(index, ", "));
}

bool SameNonFinite(double actual, double expected) {
  return (std::isnan(actual) && std::isnan(expected)) || (std::isinf(actual) && actual == expected);
}

// The number of elements whose integer values differ, compared exactly (through double
// an i64 difference above 2^53 could vanish).
int64_t CountIntegerMismatches(const Tensor& actual, const Tensor& expected) {
  const std::vector<int64_t> a = actual.ToInt64();
  const std::vector<int64_t> e = expected.ToInt64();
  int64_t mismatches = 0;
  for (size_t i = 0; i < a.size(); ++i) mismatches += a[i] != e[i];
  return mismatches;
}

}  // namespace

double DefaultTolerance(ElementType type) {
  switch (type) {
    case ElementType::kF64:
    case ElementType::kF32: return 1e-5;
    case ElementType::kF16: return 5e-3;
    case ElementType::kBF16: return 2e-2;
    case ElementType::kI64:
    case ElementType::kI32:
    case ElementType::kI1: return 0;
  }
  return 0;
}

Comparison CompareWithReference(std::string_view name, const Tensor& actual, const Tensor& expected,
                                double rel_l2_tolerance) {
  Comparison result;
  result.name = std::string(name);
  result.type = actual.DebugTypeString();
  if (actual.element_type() != expected.element_type() || actual.shape() != expected.shape()) {
    result.failure_reason = absl::StrFormat("the reference is %s", expected.DebugTypeString());
    return result;
  }
  result.comparable = true;

  L2Norm error_norm, reference_norm;
  int64_t non_finite_mismatches = 0;
  int64_t first_mismatch = -1;
  for (int64_t i = 0; i < actual.num_elements(); ++i) {
    const double a = actual.GetAsDouble(i);
    const double e = expected.GetAsDouble(i);
    if (std::isfinite(a) && std::isfinite(e)) {
      error_norm.Add(a - e);
      reference_norm.Add(e);
      result.max_abs = std::max(result.max_abs, std::abs(a - e));
    } else if (!SameNonFinite(a, e)) {
      if (non_finite_mismatches++ == 0) first_mismatch = i;
    }
  }
  const double reference = reference_norm.Value();
  result.rel_l2 = reference > 0 ? error_norm.Value() / reference : error_norm.Value();

  if (non_finite_mismatches > 0) {
    result.failure_reason = absl::StrFormat(
        "non-finite values disagree at %d element%s, the first at %s: %g vs %g in the "
        "reference",
        non_finite_mismatches, non_finite_mismatches == 1 ? "" : "s",
        FormatIndex(actual.shape(), first_mismatch), actual.GetAsDouble(first_mismatch),
        expected.GetAsDouble(first_mismatch));
  } else if (IsIntegerType(actual.element_type()) && rel_l2_tolerance == 0) {
    if (const int64_t mismatches = CountIntegerMismatches(actual, expected); mismatches > 0) {
      result.failure_reason =
          absl::StrFormat("%d of %d elements differ; integers must match exactly", mismatches,
                          actual.num_elements());
    }
  } else if (!(result.rel_l2 <= rel_l2_tolerance)) {
    result.failure_reason = absl::StrFormat("rel_l2 above tolerance %.2e", rel_l2_tolerance);
  }
  result.pass = result.failure_reason.empty();
  return result;
}

std::string FormatComparison(const Comparison& comparison) {
  std::string line = absl::StrFormat("%s  %s  ", comparison.name, comparison.type);
  if (comparison.comparable) {
    absl::StrAppendFormat(&line, "rel_l2=%.2e  max_abs=%.2e", comparison.rel_l2,
                          comparison.max_abs);
  } else {
    line += "rel_l2=n/a  max_abs=n/a";
  }
  if (comparison.pass) {
    line += "  PASS";
  } else {
    absl::StrAppendFormat(&line, "  FAIL (%s)", comparison.failure_reason);
  }
  return line;
}

absl::Status CheckAllFinite(std::string_view name, const Tensor& tensor) {
  if (!IsFloatType(tensor.element_type())) return absl::OkStatus();
  int64_t nans = 0, infinities = 0, first = -1;
  for (int64_t i = 0; i < tensor.num_elements(); ++i) {
    const double value = tensor.GetAsDouble(i);
    if (std::isfinite(value)) continue;
    (std::isnan(value) ? nans : infinities) += 1;
    if (first < 0) first = i;
  }
  if (first < 0) return absl::OkStatus();
  const int64_t count = nans + infinities;
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: %d non-finite value%s (%d NaN, %d infinite), the first at %s is %g",
                      name, count, count == 1 ? "" : "s", nans, infinities,
                      FormatIndex(tensor.shape(), first), tensor.GetAsDouble(first)));
}

absl::Status CheckNonFiniteAllowed(std::string_view name, const Tensor& result,
                                   bool allow_nonfinite) {
  if (allow_nonfinite) return absl::OkStatus();
  return CheckAllFinite(name, result);
}

}  // namespace commir::runtime
