// Pairwise (cascade) summation: splits the range in halves recursively, so the rounding
// error grows with log2(n) instead of n as in a running sum, at the same cost. Used by the
// reductions and normalisations, which sum thousands of f32 values per output element.
#ifndef COMMIR_BACKEND_CPU_PAIRWISE_SUM_H_
#define COMMIR_BACKEND_CPU_PAIRWISE_SUM_H_

#include <cstdint>

namespace commir::cpu {

// Sum of term(values[0]), term(values[stride]), ..., term(values[(count - 1) * stride])
// in T.
template <typename T, typename Term>
T PairwiseSum(const T* values, int64_t count, int64_t stride, Term term) {
  // Below this size a plain loop is as accurate as further splitting and faster.
  constexpr int64_t kLeafSize = 16;
  if (count <= kLeafSize) {
    T sum = 0;
    for (int64_t i = 0; i < count; ++i) sum += term(values[i * stride]);
    return sum;
  }
  const int64_t half = count / 2;
  return PairwiseSum(values, half, stride, term) +
         PairwiseSum(values + half * stride, count - half, stride, term);
}

// Sum of values[0], values[stride], ..., values[(count - 1) * stride] in T.
template <typename T>
T PairwiseSum(const T* values, int64_t count, int64_t stride = 1) {
  return PairwiseSum(values, count, stride, [](T value) { return value; });
}

}  // namespace commir::cpu

#endif  // COMMIR_BACKEND_CPU_PAIRWISE_SUM_H_
