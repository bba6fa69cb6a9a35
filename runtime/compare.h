// Numerics checks for commir-run --check: comparing a result with its reference, and
// the report line printed for it (the commir-run contract: "One line per result: name, shape,
// dtype, relative L2 error, max abs error, PASS or FAIL").
//
// The errors are computed in double over the elements where both tensors are finite:
//   rel_l2  = ||actual - expected||_2 / ||expected||_2, or the absolute ||actual -
//             expected||_2 when the reference's norm is 0 (an all-zero reference, which
//             a relative error cannot measure);
//   max_abs = max |actual - expected|.
// A result passes when its type and shape equal the reference's, its non-finite values
// match the reference's (see below) and rel_l2 <= the tolerance. For integer types a
// tolerance of 0 (their default) demands exact equality, checked on the stored
// integers rather than through double.
//
// Non-finite values: an element that is NaN in both tensors, or the same infinity in
// both, matches and is left out of the error sums (a reference can legitimately
// produce them, e.g. a fully masked attention row's lse of -inf). A NaN or infinity
// where the reference has anything else (a finite value, the other infinity, NaN) is a
// FAIL whatever the tolerance, and so is a finite value where the reference is not.
//
// commir-run applies one rule to non-finite results, with or without --check
// (CheckNonFiniteAllowed): NaN or infinity in a result is an error unless the user
// allows it (--allow-nonfinite). A --check reference that computes the same NaNs
// vouches for nothing (it is the same program, usually), so it does not excuse them;
// once allowed, the comparison above decides, position by position.
#ifndef COMMIR_RUNTIME_COMPARE_H_
#define COMMIR_RUNTIME_COMPARE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "commir/element_type.h"
#include "runtime/tensor.h"

namespace commir::runtime {

struct Comparison {
  std::string name;
  // The actual result's type, e.g. "f32[512, 128]".
  std::string type;
  // False when the types or shapes differ; rel_l2 and max_abs are then meaningless.
  bool comparable = false;
  double rel_l2 = 0;
  double max_abs = 0;
  bool pass = false;
  // Why the result failed; empty when it passed.
  std::string failure_reason;
};

// The default relative L2 tolerance: 1e-5 for f64 and f32, 5e-3 for f16, 2e-2 for
// bf16 (the commir-run contract), and 0 (exact) for integer types.
double DefaultTolerance(ElementType type);

Comparison CompareWithReference(std::string_view name, const Tensor& actual, const Tensor& expected,
                                double rel_l2_tolerance);

// The report line, with fixed fields separated by two spaces and errors in scientific
// notation with two decimals:
//   "%c  f32[512, 128]  rel_l2=3.20e-07  max_abs=1.90e-06  PASS"
//   "%c  f32[4]  rel_l2=1.50e-01  max_abs=3.00e-01  FAIL (rel_l2 above tolerance 1.00e-05)"
//   "%c  f32[4]  rel_l2=n/a  max_abs=n/a  FAIL (the reference is f32[4, 1])"
std::string FormatComparison(const Comparison& comparison);

// OK unless a floating-point `tensor` holds NaN or infinity; otherwise an
// InvalidArgument error naming `name`, the count of each, and the first offending
// element's index and value, e.g.
//   "result %r: 3 non-finite values (2 NaN, 1 infinite), the first at [0, 1] is nan".
absl::Status CheckAllFinite(std::string_view name, const Tensor& tensor);

// The rule for non-finite values in a result, with or without a reference (see the top
// of this file): OK when `allow_nonfinite`, otherwise CheckAllFinite.
absl::Status CheckNonFiniteAllowed(std::string_view name, const Tensor& result,
                                   bool allow_nonfinite);

}  // namespace commir::runtime

#endif  // COMMIR_RUNTIME_COMPARE_H_
