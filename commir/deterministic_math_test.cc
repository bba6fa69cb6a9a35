// deterministic_math's functions against long double <cmath> (an independent, more
// precise evaluation): within their documented error, over a sweep of each domain, and at
// the inputs where glibc's own expf depends on the CPU.
#include "commir/deterministic_math.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include "gtest/gtest.h"

namespace commir::deterministic_math {
namespace {

// |actual - exact| in units of T's last place at `exact`.
template <typename T>
long double UlpError(T actual, long double exact) {
  if (std::isnan(exact)) return std::isnan(actual) ? 0 : std::numeric_limits<long double>::max();
  if (std::isinf(exact)) return actual == exact ? 0 : std::numeric_limits<long double>::max();
  const T rounded = static_cast<T>(exact);
  const T next = std::nextafter(rounded, std::numeric_limits<T>::infinity());
  const long double ulp = static_cast<long double>(next) - static_cast<long double>(rounded);
  return std::fabs(static_cast<long double>(actual) - exact) / ulp;
}

template <typename T>
void ExpectWithin(const char* name, const std::function<T(T)>& f,
                  const std::function<long double(long double)>& exact, T lo, T hi,
                  long double max_ulps) {
  constexpr int kSteps = 20000;
  long double worst = 0;
  T worst_x = lo;
  for (int i = 0; i <= kSteps; ++i) {
    const T x = lo + (hi - lo) * static_cast<T>(i) / kSteps;
    const long double e = UlpError(f(x), exact(static_cast<long double>(x)));
    if (e > worst) {
      worst = e;
      worst_x = x;
    }
  }
  EXPECT_LE(worst, max_ulps) << name << " (" << sizeof(T) * 8 << "-bit) at " << worst_x;
}

TEST(DeterministicMathTest, WithinDocumentedErrorOfLongDouble) {
  using LD = long double;
  ExpectWithin<float>("exp", [](float x) { return exp(x); }, [](LD x) { return expl(x); },
                      -87.0f, 88.0f, 1.0);
  ExpectWithin<double>("exp", [](double x) { return exp(x); }, [](LD x) { return expl(x); },
                       -700.0, 700.0, 1.0);
  ExpectWithin<float>("log", [](float x) { return log(x); }, [](LD x) { return logl(x); },
                      1e-30f, 1e30f, 1.0);
  ExpectWithin<double>("log", [](double x) { return log(x); }, [](LD x) { return logl(x); },
                       1e-300, 1e300, 1.0);
  ExpectWithin<float>("tanh", [](float x) { return tanh(x); }, [](LD x) { return tanhl(x); },
                      -10.0f, 10.0f, 1.0);
  ExpectWithin<double>("tanh", [](double x) { return tanh(x); }, [](LD x) { return tanhl(x); },
                       -20.0, 20.0, 1.0);
  ExpectWithin<float>("erfc", [](float x) { return erfc(x); }, [](LD x) { return erfcl(x); },
                      -5.0f, 9.0f, 1.5);
  ExpectWithin<double>("erfc", [](double x) { return erfc(x); }, [](LD x) { return erfcl(x); },
                       -5.0, 26.0, 1.5);
  ExpectWithin<float>(
      "pow", [](float x) { return pow(x, 0.37f); },
      [](LD x) { return powl(x, static_cast<LD>(0.37f)); }, 1e-3f, 1e4f, 1.0);
  ExpectWithin<double>(
      "pow", [](double x) { return pow(2.5, x); }, [](LD x) { return powl(2.5L, x); }, -300.0,
      300.0, 1.0);
}

// glibc's expf returns 0x1.f93e38p+46 here on CPUs with FMA and 0x1.f93e36p+46 without;
// ours is one of them on every CPU, within 1 ulp of the exact value.
TEST(DeterministicMathTest, ExpAtInputsWhereGlibcDependsOnTheCpu) {
  for (const float x : {0x1.04845ep+5f, -0x1.f8cbb2p+5f}) {
    EXPECT_LE(UlpError(exp(x), expl(static_cast<long double>(x))), 1.0L) << x;
  }
}

TEST(DeterministicMathTest, SpecialValues) {
  EXPECT_EQ(exp(0.0f), 1.0f);
  EXPECT_EQ(exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(exp(std::numeric_limits<double>::infinity()), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(log(-1.0f)));
  EXPECT_EQ(log(0.0), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(log(1.0f), 0.0f);
  EXPECT_EQ(tanh(0.0f), 0.0f);
  EXPECT_EQ(erfc(0.0), 1.0);
  EXPECT_EQ(pow(2.0f, 10.0f), 1024.0f);
  EXPECT_EQ(pow(-8.0, 3.0), -512.0);
}

}  // namespace
}  // namespace commir::deterministic_math
