// Trip counts of `for` loops, exact over the whole int64 range, and the checked
// arithmetic that the reports (comm-report, schedule-report) use to multiply them.
//
// `for %i = L to U step S` runs ceil((U - L) / S) times when U > L and S > 0, else
// never. U - L can exceed int64 (L = -2^63, U = 2^63 - 1), so the count is computed in
// uint64, where it always fits (at most 2^64 - 1).
#ifndef COMMIR_TRANSFORMS_LOOP_TRIP_COUNT_H_
#define COMMIR_TRANSFORMS_LOOP_TRIP_COUNT_H_

#include <cstdint>
#include <optional>

#include "commir/ir.h"

namespace commir {

uint64_t LoopTripCount(int64_t lower, int64_t upper, int64_t step);

// The trip count of a `for` op from its lower/upper/step attributes.
uint64_t LoopTripCount(const Operation& loop);

// a * b, or nullopt when the product does not fit in int64 (a >= 0).
std::optional<int64_t> CheckedMultiply(int64_t a, uint64_t b);

// a + b, or nullopt when the sum does not fit in int64.
std::optional<int64_t> CheckedAdd(int64_t a, int64_t b);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_LOOP_TRIP_COUNT_H_
