// The Philox 4x32-10 counter-based generator (Salmon, Moraes, Dror and Shaw, "Parallel
// random numbers: as easy as 1, 2, 3", SC'11; the generator cuRAND's
// CURAND_RNG_PSEUDO_PHILOX4_32_10 implements) and the dropout decision built on it.
//
// A counter-based generator is a pure function of (counter, key): element i of a tensor
// draws from counter = i, key = seed, so any device, any partitioning of the tensor and
// any recomputation draws the same number for the same element without carrying state.
// Plain C++ without Abseil, every function COMMIR_HOST_DEVICE: the cpu kernel and the
// cuda kernel include this one header and so draw the same bits.
#ifndef COMMIR_COMMIR_PHILOX_H_
#define COMMIR_COMMIR_PHILOX_H_

#include <cstdint>

#if defined(__CUDACC__)
#define COMMIR_PHILOX_HD __host__ __device__
#else
#define COMMIR_PHILOX_HD
#endif

namespace commir::philox {

struct Counter {
  uint32_t words[4];
};
struct Key {
  uint32_t words[2];
};

// The round multipliers and the key schedule's increments (the golden ratio's and
// sqrt(3)-1's first 32 fractional bits), from the paper's section 4.
inline constexpr uint32_t kMultiplier0 = 0xD2511F53u;
inline constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
inline constexpr uint32_t kKeyIncrement0 = 0x9E3779B9u;
inline constexpr uint32_t kKeyIncrement1 = 0xBB67AE85u;
inline constexpr int kRounds = 10;

// One round: the two 32x32->64 products' halves, crossed and xored with the other two
// words and the round key.
COMMIR_PHILOX_HD constexpr Counter Round(const Counter& c, const Key& k) {
  const uint64_t p0 = static_cast<uint64_t>(kMultiplier0) * c.words[0];
  const uint64_t p1 = static_cast<uint64_t>(kMultiplier1) * c.words[2];
  const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
  return Counter{{hi1 ^ c.words[1] ^ k.words[0], lo1, hi0 ^ c.words[3] ^ k.words[1], lo0}};
}

// Philox 4x32 with `rounds` rounds; the key advances by the increments between rounds.
COMMIR_PHILOX_HD constexpr Counter Philox4x32(Counter c, Key k, int rounds = kRounds) {
  for (int r = 0; r < rounds; ++r) {
    if (r > 0) {
      k.words[0] += kKeyIncrement0;
      k.words[1] += kKeyIncrement1;
    }
    c = Round(c, k);
  }
  return c;
}

// The 32-bit draw of element `index` under `seed` in draw `step`: the first word of
// Philox 4x32-10 with counter = (index's low word, its high word, step's low word, its
// high word) and key = (seed's low word, its high word). One generator call per element
// keeps the draw a function of the element alone, whatever block of the tensor a device
// holds; the counter's upper half gives each training step (dropout's step operand) its
// own stream of draws under the same seed, step 0 being the draws without one.
COMMIR_PHILOX_HD constexpr uint32_t ElementDraw(uint64_t seed, uint64_t index, uint64_t step = 0) {
  const Counter c{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                   static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32)}};
  const Key k{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  return Philox4x32(c, k).words[0];
}

// Dropout drops an element when its draw, read as the uniform u = draw / 2^32 in [0, 1),
// is below `rate`, that is when draw < ceil(rate * 2^32): the threshold, computed once
// on the host (rate in [0, 1); the result is in [0, 2^32]) so that both backends compare
// the same integers.
inline uint64_t DropoutThreshold(double rate) {
  if (!(rate > 0)) return 0;
  const double scaled = rate * 4294967296.0;  // exact: a power-of-two scaling
  uint64_t threshold = static_cast<uint64_t>(scaled);
  if (static_cast<double>(threshold) < scaled) ++threshold;
  return threshold > (uint64_t{1} << 32) ? (uint64_t{1} << 32) : threshold;
}

COMMIR_PHILOX_HD constexpr bool DropoutKeeps(uint64_t seed, uint64_t index, uint64_t threshold,
                                             uint64_t step = 0) {
  return ElementDraw(seed, index, step) >= threshold;
}

}  // namespace commir::philox

#undef COMMIR_PHILOX_HD

#endif  // COMMIR_COMMIR_PHILOX_H_
