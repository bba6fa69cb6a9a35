#include "commir/philox.h"

#include <cmath>
#include <cstdint>

#include "gtest/gtest.h"

namespace commir::philox {
namespace {

// The three philox4x32 10-round lines of Random123's known-answer file (kat_vectors, as
// distributed with Random123 by D. E. Shaw Research; columns: counter, key, result).
struct KnownAnswer {
  Counter counter;
  Key key;
  Counter expected;
};

TEST(Philox, MatchesRandom123KnownAnswers) {
  const KnownAnswer answers[] = {
      {{{0, 0, 0, 0}}, {{0, 0}}, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       {{0xffffffff, 0xffffffff}},
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       {{0xa4093822, 0x299f31d0}},
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const KnownAnswer& a : answers) {
    const Counter got = Philox4x32(a.counter, a.key);
    for (int w = 0; w < 4; ++w) {
      EXPECT_EQ(got.words[w], a.expected.words[w]) << "word " << w;
    }
  }
}

// Random123's 7-round line for the pi digits: the round count is a parameter, not baked in.
TEST(Philox, SevenRoundsMatchRandom123) {
  const Counter got = Philox4x32({{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
                                 {{0xa4093822, 0x299f31d0}}, 7);
  const uint32_t expected[4] = {0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a};
  for (int w = 0; w < 4; ++w) EXPECT_EQ(got.words[w], expected[w]) << "word " << w;
}

// Usable in constant expressions: a compile-time known answer.
static_assert(Philox4x32({{0, 0, 0, 0}}, {{0, 0}}).words[0] == 0x6627e8d5u);

TEST(Philox, ElementDrawIsTheFirstWordOfTheIndexCounter) {
  // Index 0 under seed 0 is the all-zero known answer.
  EXPECT_EQ(ElementDraw(0, 0), 0x6627e8d5u);
  // Both 32-bit halves of the index and of the seed reach the generator.
  EXPECT_NE(ElementDraw(0, uint64_t{1} << 32), ElementDraw(0, 0));
  EXPECT_NE(ElementDraw(uint64_t{1} << 32, 0), ElementDraw(0, 0));
  const uint64_t all = ~uint64_t{0};
  EXPECT_EQ(ElementDraw(all, (uint64_t{0xffffffff})),
            Philox4x32({{0xffffffff, 0, 0, 0}}, {{0xffffffff, 0xffffffff}}).words[0]);
}

TEST(Philox, TheStepIsTheCountersUpperHalf) {
  // Step 0 is the draw without a step; both halves of the step reach the generator as
  // counter words 2 and 3, against the paper's generator itself.
  EXPECT_EQ(ElementDraw(9, 5, 0), ElementDraw(9, 5));
  const uint64_t step = (uint64_t{0x01234567} << 32) | 0x89abcdefu;
  EXPECT_EQ(ElementDraw(9, 5, step), Philox4x32({{5, 0, 0x89abcdefu, 0x01234567u}}, {{9, 0}}).words[0]);
  EXPECT_NE(ElementDraw(9, 5, 1), ElementDraw(9, 5, 0));
  EXPECT_NE(ElementDraw(9, 5, uint64_t{1} << 32), ElementDraw(9, 5, 0));
  // Consecutive steps draw independent masks: each agrees with the previous one on about
  // rate^2 + (1 - rate)^2 of the elements (0.5 at rate 0.5), within 6 standard deviations.
  const int64_t n = 1 << 16;
  const uint64_t threshold = DropoutThreshold(0.5);
  for (uint64_t s = 0; s < 4; ++s) {
    int64_t same = 0;
    for (int64_t i = 0; i < n; ++i) {
      same += DropoutKeeps(3, static_cast<uint64_t>(i), threshold, s) ==
              DropoutKeeps(3, static_cast<uint64_t>(i), threshold, s + 1);
    }
    EXPECT_LT(std::abs(static_cast<double>(same) - n * 0.5), 6 * std::sqrt(n * 0.25)) << "step " << s;
  }
}

TEST(Philox, ThresholdIsCeilOfRateTimesTwoToThe32) {
  EXPECT_EQ(DropoutThreshold(0.0), 0u);
  EXPECT_EQ(DropoutThreshold(0.5), uint64_t{1} << 31);
  EXPECT_EQ(DropoutThreshold(0.1), 429496730u);  // ceil(429496729.6)
  EXPECT_EQ(DropoutThreshold(0.25), uint64_t{1} << 30);
  EXPECT_EQ(DropoutThreshold(std::nextafter(1.0, 0.0)), uint64_t{1} << 32);
}

// The kept fraction of n elements is Binomial(n, 1 - rate): within 6 standard deviations
// for every seed and rate tried (a failure would happen by chance with probability ~2e-9).
TEST(Philox, KeptFractionIsWithinTheBinomialBound) {
  const int64_t n = 1 << 20;
  for (double rate : {0.1, 0.5, 0.9}) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{1234}, uint64_t{0xdeadbeefcafef00d}}) {
      const uint64_t threshold = DropoutThreshold(rate);
      int64_t kept = 0;
      for (int64_t i = 0; i < n; ++i) kept += DropoutKeeps(seed, static_cast<uint64_t>(i), threshold);
      const double p = 1 - rate;
      const double sigma = std::sqrt(n * p * (1 - p));
      EXPECT_LT(std::abs(static_cast<double>(kept) - n * p), 6 * sigma)
          << "rate " << rate << " seed " << seed << " kept " << kept << " of " << n;
    }
  }
}

}  // namespace
}  // namespace commir::philox
