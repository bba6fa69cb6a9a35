#include "commir/float16.h"

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>

namespace commir {
namespace {

// Rounds a 32-bit unsigned magnitude right by `shift` bits, to nearest, ties to even.
uint32_t ShiftRightRoundingToNearestEven(uint32_t value, int shift) {
  const uint32_t kept = value >> shift;
  const uint32_t dropped = value & ((uint32_t{1} << shift) - 1);
  const uint32_t half = uint32_t{1} << (shift - 1);
  if (dropped > half || (dropped == half && (kept & 1))) return kept + 1;
  return kept;
}

// Rounds a double to float "to odd": truncate toward zero and, if anything was lost, set
// the lowest significand bit. Rounding that result to nearest-even at a precision at least
// two bits narrower equals rounding the double directly (Boldo & Melquiond, "When double
// rounding is odd"). f16 keeps 11 significant bits and bf16 8, well under float's 24, also
// in their subnormal ranges, which float still represents with spare bits.
float DoubleToFloatRoundingToOdd(double value) {
  if (std::isnan(value) || std::isinf(value)) return static_cast<float>(value);
  // Casting a finite double beyond float's range is undefined behaviour; truncation
  // toward zero gives FLT_MAX, whose significand is already odd.
  if (std::fabs(value) > FLT_MAX) return std::copysign(FLT_MAX, static_cast<float>(value));
  float rounded = static_cast<float>(value);
  if (static_cast<double>(rounded) == value) return rounded;
  if (std::fabs(static_cast<double>(rounded)) > std::fabs(value)) {
    rounded = std::nextafter(rounded, 0.0f);
  }
  return std::bit_cast<float>(std::bit_cast<uint32_t>(rounded) | 1u);
}

}  // namespace

uint16_t FloatToHalfBits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;

  if (magnitude > 0x7f800000u) {
    // NaN: keep the top 10 payload bits and force the quiet bit, so a payload living only
    // in the dropped low bits cannot turn into infinity.
    return sign | 0x7e00u | static_cast<uint16_t>((magnitude >> 13) & 0x3ffu);
  }
  // 65520 = 65504 + half an ulp is a tie between 65504 (odd significand) and 2^16, so it
  // and everything above, infinity included, rounds to infinity.
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;
  if (magnitude >= 0x38800000u) {
    // Normal f16 range (>= 2^-14): rebias the exponent from 127 to 15, then round away the
    // 13 extra significand bits. A carry out of the significand correctly bumps the exponent.
    const uint32_t rebiased = magnitude - (uint32_t{127 - 15} << 23);
    return sign | static_cast<uint16_t>(ShiftRightRoundingToNearestEven(rebiased, 13));
  }
  // Below 2^-25 (half the smallest subnormal) everything rounds to zero; 2^-25 itself is a
  // tie that goes to the even zero, which the general path below also gets right.
  if (magnitude < 0x33000000u) return sign;
  // f16 subnormals count units of 2^-24. The float is significand * 2^(exponent - 150),
  // so the count is the significand (with its implicit bit) shifted right by
  // 126 - exponent, which is 14..24 here. A result of 0x400 is the smallest normal.
  const uint32_t exponent = magnitude >> 23;
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const int shift = static_cast<int>(126 - exponent);
  return sign | static_cast<uint16_t>(ShiftRightRoundingToNearestEven(significand, shift));
}

float HalfBitsToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in float.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
}

uint16_t FloatToBFloat16Bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    // NaN: truncate the payload and force the quiet bit (see FloatToHalfBits).
    return static_cast<uint16_t>(bits >> 16) | 0x0040u;
  }
  // bfloat16 is the top half of a float, with the same exponent range, so one rounding of
  // the low 16 bits covers normals, subnormals and overflow to infinity alike.
  const uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

float BFloat16BitsToFloat(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

uint16_t DoubleToHalfBits(double value) {
  return FloatToHalfBits(DoubleToFloatRoundingToOdd(value));
}

uint16_t DoubleToBFloat16Bits(double value) {
  return FloatToBFloat16Bits(DoubleToFloatRoundingToOdd(value));
}

}  // namespace commir
