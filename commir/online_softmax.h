// One online-softmax merge step (docs/language.md, `attention_merge`): the arithmetic
// both backends' attention_merge kernels run, shared so that they cannot disagree.
//
// Two partial attention results over disjoint key sets, (o_a, lse_a) and (o_b, lse_b),
// combine into the result over both key sets:
//   m   = max(lse_a, lse_b, -1e30)   (the floor keeps exp(lse - m) finite, and 0, when
//                                     both partials saw only masked keys: lse = -inf)
//   w_a = exp(lse_a - m)             w_b = exp(lse_b - m)
//   s   = w_a + w_b                  lse = m + log(s)
//   o   = o_a * (w_a / max(s, 1e-30)) + o_b * (w_b / max(s, 1e-30))
// Each operation rounds to the compute type T (float or double), in this order: the
// same values, to the bit, as the ring schedules' former merge of separate elementwise
// ops in T (which a program written with those ops still computes).
#ifndef COMMIR_ONLINE_SOFTMAX_H_
#define COMMIR_ONLINE_SOFTMAX_H_

#include "commir/scalar_math.h"

namespace commir::online_softmax {

// The floor of the running maximum and the guard of the denominator (see above).
inline constexpr double kLseFloor = -1e30;
inline constexpr double kDenominatorFloor = 1e-30;

// The weights of one row: the merged lse and the two partials' output coefficients.
template <typename T>
struct RowWeights {
  T lse;
  T coefficient_a;
  T coefficient_b;
};

template <typename T>
COMMIR_HOST_DEVICE inline RowWeights<T> MergeWeights(T lse_a, T lse_b) {
  const T m = scalar_math::Max(scalar_math::Max(lse_a, lse_b), static_cast<T>(kLseFloor));
  const T wa = scalar_math::Exp(scalar_math::Sub(lse_a, m));
  const T wb = scalar_math::Exp(scalar_math::Sub(lse_b, m));
  const T s = scalar_math::Add(wa, wb);
  const T lse = scalar_math::Add(m, scalar_math::Log(s));
  const T denominator = scalar_math::Max(s, static_cast<T>(kDenominatorFloor));
  return {lse, scalar_math::Div(wa, denominator), scalar_math::Div(wb, denominator)};
}

// One output element: o_a * c_a + o_b * c_b, each product rounded before the sum.
template <typename T>
COMMIR_HOST_DEVICE inline T MergeOutput(T o_a, T o_b, const RowWeights<T>& w) {
  const T a = scalar_math::Mul(o_a, w.coefficient_a);
  const T b = scalar_math::Mul(o_b, w.coefficient_b);
  return scalar_math::Add(a, b);
}

}  // namespace commir::online_softmax

#endif  // COMMIR_ONLINE_SOFTMAX_H_
