// Conversions between binary32/binary64 and the two 16-bit float formats CommIR stores:
// IEEE 754 binary16 ("f16", 1-5-10) and bfloat16 ("bf16", 1-8-7).
//
// Every narrowing conversion rounds to nearest, ties to even, whatever the current
// floating-point rounding mode:
//  - values too large for the format become +-inf (after rounding, so f16 65519.99 rounds
//    to 65504 while 65520 rounds to inf);
//  - values below the smallest normal round to the format's subnormals or to a signed zero;
//  - NaN stays NaN: the sign and the top payload bits are kept and the result is quiet.
// Widening conversions are exact.
#ifndef COMMIR_FLOAT16_H_
#define COMMIR_FLOAT16_H_

#include <cstdint>

namespace commir {

uint16_t FloatToHalfBits(float value);
float HalfBitsToFloat(uint16_t bits);

uint16_t FloatToBFloat16Bits(float value);
float BFloat16BitsToFloat(uint16_t bits);

// Rounded once, directly from the double (going through float would round twice and can
// miss a tie-break, e.g. 1 + 2^-11 + 2^-40 must round up to the f16 1 + 2^-10).
uint16_t DoubleToHalfBits(double value);
uint16_t DoubleToBFloat16Bits(double value);

}  // namespace commir

#endif  // COMMIR_FLOAT16_H_
