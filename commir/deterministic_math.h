// Transcendental functions whose results are the same bits on every x86-64 machine.
//
// glibc's libm chooses among code paths by CPU feature when a program starts (exp, log
// and pow have FMA and AVX2 variants), and they differ in the last bit: expf(0x1.04845ep+5)
// is 0x1.f93e38p+46 on a CPU with FMA and 0x1.f93e36p+46 on one without. These wrap SLEEF's
// "cinz" scalar functions (pure C, no FMA, no dispatch; at most 1 ulp from the exact value,
// 1.5 ulp for erfc), so a result computed here is the same on every machine.
#ifndef COMMIR_DETERMINISTIC_MATH_H_
#define COMMIR_DETERMINISTIC_MATH_H_

// Named like their <cmath> counterparts, so scalar_math.h can use either.
namespace commir::deterministic_math {

float exp(float x);
double exp(double x);
float log(float x);
double log(double x);
float tanh(float x);
double tanh(double x);
float erfc(float x);
double erfc(double x);
float pow(float base, float exponent);
double pow(double base, double exponent);

}  // namespace commir::deterministic_math

#endif  // COMMIR_DETERMINISTIC_MATH_H_
