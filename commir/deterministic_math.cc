#include "commir/deterministic_math.h"

#include <sleef.h>

namespace commir::deterministic_math {

float exp(float x) { return Sleef_cinz_expf1_u10purec(x); }
double exp(double x) { return Sleef_cinz_expd1_u10purec(x); }
float log(float x) { return Sleef_cinz_logf1_u10purec(x); }
double log(double x) { return Sleef_cinz_logd1_u10purec(x); }
float tanh(float x) { return Sleef_cinz_tanhf1_u10purec(x); }
double tanh(double x) { return Sleef_cinz_tanhd1_u10purec(x); }
float erfc(float x) { return Sleef_cinz_erfcf1_u15purec(x); }
double erfc(double x) { return Sleef_cinz_erfcd1_u15purec(x); }
float pow(float base, float exponent) { return Sleef_cinz_powf1_u10purec(base, exponent); }
double pow(double base, double exponent) { return Sleef_cinz_powd1_u10purec(base, exponent); }

}  // namespace commir::deterministic_math
