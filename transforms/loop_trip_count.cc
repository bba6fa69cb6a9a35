#include "transforms/loop_trip_count.h"

#include <limits>

namespace commir {

uint64_t LoopTripCount(int64_t lower, int64_t upper, int64_t step) {
  if (step <= 0 || upper <= lower) return 0;
  // Two's complement: the unsigned difference is exact because upper > lower.
  uint64_t distance = static_cast<uint64_t>(upper) - static_cast<uint64_t>(lower);
  uint64_t s = static_cast<uint64_t>(step);
  return distance / s + (distance % s != 0 ? 1 : 0);
}

uint64_t LoopTripCount(const Operation& loop) {
  return LoopTripCount(loop.attrs().GetInt("lower", 0), loop.attrs().GetInt("upper", 0),
                       loop.IntAttr("step"));
}

std::optional<int64_t> CheckedMultiply(int64_t a, uint64_t b) {
  if (a < 0) return std::nullopt;
  if (b > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    if (a == 0) return 0;
    return std::nullopt;
  }
  int64_t product;
  if (__builtin_mul_overflow(a, static_cast<int64_t>(b), &product)) return std::nullopt;
  return product;
}

std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

}  // namespace commir
