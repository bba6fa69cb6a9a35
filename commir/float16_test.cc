#include "commir/float16.h"

#include <bit>
#include <cfenv>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace commir {
namespace {

constexpr uint16_t kHalfQuietBit = 0x0200;
constexpr uint16_t kBFloat16QuietBit = 0x0040;

bool IsHalfNan(uint16_t bits) { return (bits & 0x7c00) == 0x7c00 && (bits & 0x03ff) != 0; }
bool IsBFloat16Nan(uint16_t bits) { return (bits & 0x7f80) == 0x7f80 && (bits & 0x007f) != 0; }

// The value an f16 bit pattern denotes, straight from the IEEE 754 definition.
double HalfValueFromDefinition(uint16_t bits) {
  const int sign = (bits >> 15) != 0 ? -1 : 1;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0x1f) return mantissa == 0 ? sign * HUGE_VAL : NAN;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

TEST(Float16Test, HalfToFloatMatchesDefinitionForEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t half = static_cast<uint16_t>(bits);
    const float value = HalfBitsToFloat(half);
    if (IsHalfNan(half)) {
      EXPECT_TRUE(std::isnan(value)) << std::hex << bits;
      EXPECT_EQ(std::signbit(value), (bits & 0x8000) != 0) << std::hex << bits;
    } else {
      EXPECT_EQ(static_cast<double>(value), HalfValueFromDefinition(half)) << std::hex << bits;
      EXPECT_EQ(std::signbit(value), (bits & 0x8000) != 0) << std::hex << bits;
    }
  }
}

TEST(Float16Test, HalfRoundTripsThroughFloatAndDoubleForEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t half = static_cast<uint16_t>(bits);
    const float value = HalfBitsToFloat(half);
    // NaNs come back quiet with sign and payload kept; everything else bit-exactly.
    const uint16_t expected = IsHalfNan(half) ? (half | kHalfQuietBit) : half;
    EXPECT_EQ(FloatToHalfBits(value), expected) << std::hex << bits;
    EXPECT_EQ(DoubleToHalfBits(static_cast<double>(value)), expected) << std::hex << bits;
  }
}

TEST(Float16Test, BFloat16RoundTripsThroughFloatAndDoubleForEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t bf16 = static_cast<uint16_t>(bits);
    const float value = BFloat16BitsToFloat(bf16);
    EXPECT_EQ(std::isnan(value), IsBFloat16Nan(bf16)) << std::hex << bits;
    const uint16_t expected = IsBFloat16Nan(bf16) ? (bf16 | kBFloat16QuietBit) : bf16;
    EXPECT_EQ(FloatToBFloat16Bits(value), expected) << std::hex << bits;
    EXPECT_EQ(DoubleToBFloat16Bits(static_cast<double>(value)), expected) << std::hex << bits;
  }
}

// For every pair of adjacent finite values of a 16-bit format, the exact midpoint must go
// to the one with an even significand and anything off the midpoint to the nearer one.
// `last` is the largest finite positive pattern; its successor is infinity.
template <typename ToBits, typename DoubleToBits, typename FromBits>
void CheckTiesAndNeighbours(uint16_t last, ToBits to_bits, DoubleToBits double_to_bits,
                            FromBits from_bits) {
  for (uint16_t low = 0; low <= last; ++low) {
    const uint16_t high = low + 1;
    const double low_value = from_bits(low);
    // The successor of the largest finite value is the next power of two, not infinity.
    const double high_value =
        low == last ? low_value + (low_value - static_cast<double>(from_bits(low - 1)))
                    : static_cast<double>(from_bits(high));
    const double midpoint = (low_value + high_value) / 2;  // exact in float and double
    const uint16_t even = (low & 1) == 0 ? low : high;
    for (const uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
      const double s = sign != 0 ? -1.0 : 1.0;
      const float mid_float = static_cast<float>(s * midpoint);
      ASSERT_EQ(static_cast<double>(mid_float), s * midpoint);
      EXPECT_EQ(to_bits(mid_float), sign | even) << std::hex << low;
      EXPECT_EQ(to_bits(std::nextafter(mid_float, 0.0f)), sign | low) << std::hex << low;
      EXPECT_EQ(to_bits(std::nextafter(mid_float, static_cast<float>(s) * INFINITY)), sign | high)
          << std::hex << low;
      EXPECT_EQ(double_to_bits(s * midpoint), sign | even) << std::hex << low;
      // Just off the midpoint by far less than a float ulp: rounding through float first
      // would land on the midpoint and pick the even neighbour.
      EXPECT_EQ(double_to_bits(std::nextafter(s * midpoint, 0.0)), sign | low) << std::hex << low;
      EXPECT_EQ(double_to_bits(std::nextafter(s * midpoint, s * HUGE_VAL)), sign | high)
          << std::hex << low;
    }
  }
}

TEST(Float16Test, HalfRoundsToNearestEvenAtEveryTie) {
  CheckTiesAndNeighbours(0x7bff, FloatToHalfBits, DoubleToHalfBits, HalfBitsToFloat);
}

TEST(Float16Test, BFloat16RoundsToNearestEvenAtEveryTie) {
  CheckTiesAndNeighbours(0x7f7f, FloatToBFloat16Bits, DoubleToBFloat16Bits, BFloat16BitsToFloat);
}

TEST(Float16Test, HalfOverflowAndUnderflowBoundaries) {
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(65519.99f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(-65520.0f), 0xfc00);
  EXPECT_EQ(FloatToHalfBits(FLT_MAX), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(INFINITY), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(-INFINITY), 0xfc00);
  EXPECT_EQ(DoubleToHalfBits(1e300), 0x7c00);
  EXPECT_EQ(DoubleToHalfBits(-1e300), 0xfc00);
  EXPECT_EQ(DoubleToHalfBits(-HUGE_VAL), 0xfc00);

  EXPECT_EQ(FloatToHalfBits(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalfBits(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);  // tie with zero -> even zero
  EXPECT_EQ(FloatToHalfBits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalfBits(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units: tie -> 2
  EXPECT_EQ(FloatToHalfBits(std::ldexp(3.0f, -26)), 0x0001);  // 0.75 units -> 1
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(FloatToHalfBits(-std::ldexp(1.0f, -30)), 0x8000);
  EXPECT_EQ(FloatToHalfBits(std::numeric_limits<float>::denorm_min()), 0x0000);
  // The largest subnormal plus a bit more than half an ulp rounds up into the normals.
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1023.75f, -24)), 0x0400);
  EXPECT_EQ(DoubleToHalfBits(1e-300), 0x0000);
  EXPECT_EQ(DoubleToHalfBits(-1e-300), 0x8000);
  EXPECT_EQ(DoubleToHalfBits(std::numeric_limits<double>::denorm_min()), 0x0000);
}

TEST(Float16Test, BFloat16OverflowAndUnderflowBoundaries) {
  EXPECT_EQ(FloatToBFloat16Bits(FLT_MAX), 0x7f80);
  EXPECT_EQ(FloatToBFloat16Bits(-FLT_MAX), 0xff80);
  EXPECT_EQ(FloatToBFloat16Bits(INFINITY), 0x7f80);
  EXPECT_EQ(DoubleToBFloat16Bits(1e300), 0x7f80);
  EXPECT_EQ(DoubleToBFloat16Bits(-1e300), 0xff80);
  EXPECT_EQ(FloatToBFloat16Bits(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBFloat16Bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToBFloat16Bits(std::ldexp(1.0f, -133)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToBFloat16Bits(std::ldexp(1.0f, -134)), 0x0000);  // tie -> even zero
  EXPECT_EQ(FloatToBFloat16Bits(std::ldexp(3.0f, -134)), 0x0002);  // 1.5 units: tie -> 2
  EXPECT_EQ(DoubleToBFloat16Bits(1e-300), 0x0000);
  EXPECT_EQ(DoubleToBFloat16Bits(-1e-300), 0x8000);
  EXPECT_EQ(FloatToBFloat16Bits(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16Bits(3.140625f), 0x4049);
}

TEST(Float16Test, DoubleRoundsOnceNotThroughFloat) {
  // 1 + 2^-11 is the f16 tie between 1 and 1 + 2^-10; a tiny excess must round up even
  // though rounding to float first would erase it.
  EXPECT_EQ(DoubleToHalfBits(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)), 0x3c01);
  EXPECT_EQ(DoubleToHalfBits(1.0 + std::ldexp(1.0, -11) - std::ldexp(1.0, -40)), 0x3c00);
  EXPECT_EQ(DoubleToBFloat16Bits(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)), 0x3f81);
  EXPECT_EQ(DoubleToBFloat16Bits(1.0 + std::ldexp(1.0, -8) - std::ldexp(1.0, -40)), 0x3f80);
  // The same in the subnormal range of f16.
  EXPECT_EQ(DoubleToHalfBits(std::ldexp(1.0, -25) + std::ldexp(1.0, -60)), 0x0001);
}

TEST(Float16Test, NanStaysNanWithSignAndIsQuiet) {
  const float quiet = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(IsHalfNan(FloatToHalfBits(quiet)));
  EXPECT_TRUE(IsHalfNan(FloatToHalfBits(-quiet)));
  EXPECT_NE(FloatToHalfBits(-quiet) & 0x8000, 0);
  EXPECT_TRUE(IsBFloat16Nan(FloatToBFloat16Bits(quiet)));
  EXPECT_NE(FloatToBFloat16Bits(-quiet) & 0x8000, 0);
  // A NaN whose payload lies only in bits that get dropped must not become infinity.
  const float low_payload_nan = std::bit_cast<float>(uint32_t{0x7f800001});
  EXPECT_EQ(FloatToHalfBits(low_payload_nan), 0x7e00);
  EXPECT_EQ(FloatToBFloat16Bits(low_payload_nan), 0x7fc0);
  EXPECT_TRUE(IsHalfNan(DoubleToHalfBits(std::numeric_limits<double>::quiet_NaN())));
  EXPECT_TRUE(IsBFloat16Nan(DoubleToBFloat16Bits(-std::numeric_limits<double>::quiet_NaN())));
}

TEST(Float16Test, IndependentOfTheFloatingPointRoundingMode) {
  const double tie_plus = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  for (int mode : {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO}) {
    ASSERT_EQ(std::fesetround(mode), 0);
    EXPECT_EQ(DoubleToHalfBits(tie_plus), 0x3c01) << mode;
    EXPECT_EQ(DoubleToHalfBits(-tie_plus), 0xbc01) << mode;
    EXPECT_EQ(FloatToHalfBits(1.0f + std::ldexp(1.0f, -11)), 0x3c00) << mode;
    EXPECT_EQ(DoubleToBFloat16Bits(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)), 0x3f81)
        << mode;
    EXPECT_EQ(DoubleToBFloat16Bits(-1e300), 0xff80) << mode;
  }
  std::fesetround(FE_TONEAREST);
}

}  // namespace
}  // namespace commir
