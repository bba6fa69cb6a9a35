// A hash for value names in hash tables keyed by name (the parser's symbol table, the
// printer's taken-name set). Names are short; absl's string hash is an out-of-line
// call per lookup, and these tables see several lookups per op of a large program.
// This one is inline: a few overlapping word loads and 64x64->128-bit multiplies, whose
// bits are well mixed throughout (absl's tables use both the low and the high bits).
#ifndef COMMIR_COMMIR_NAME_HASH_H_
#define COMMIR_COMMIR_NAME_HASH_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"

namespace commir {

struct NameHash {
  size_t operator()(absl::string_view name) const {
    const char* p = name.data();
    const size_t n = name.size();
    if (n >= 8) {
      uint64_t h = kSeed ^ n;
      // Every whole word, then the last eight bytes (overlapping the previous word).
      for (size_t i = 0; i + 8 < n; i += 8) h = Mix(h ^ Load64(p + i), kMul1);
      return Mix(h ^ Load64(p + n - 8), kMul2);
    }
    // Up to seven bytes, packed into one word (overlapping loads cover every byte).
    uint64_t a = 0;
    if (n >= 4) {
      a = (Load32(p) << 32) | Load32(p + n - 4);
    } else if (n > 0) {
      a = (uint64_t{static_cast<unsigned char>(p[0])} << 16) |
          (uint64_t{static_cast<unsigned char>(p[n / 2])} << 8) |
          uint64_t{static_cast<unsigned char>(p[n - 1])};
    }
    return Mix(a ^ kSeed ^ n, a ^ kMul1);
  }

 private:
  static constexpr uint64_t kSeed = 0xa0761d6478bd642full;
  static constexpr uint64_t kMul1 = 0xe7037ed1a0b428dbull;
  static constexpr uint64_t kMul2 = 0x8ebc6af09c88c6e3ull;

  static uint64_t Mix(uint64_t a, uint64_t b) {
    unsigned __int128 product = static_cast<unsigned __int128>(a) * b;
    return static_cast<uint64_t>(product) ^ static_cast<uint64_t>(product >> 64);
  }
  static uint64_t Load64(const char* p) {
    uint64_t v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  static uint64_t Load32(const char* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
};

// Hash and equality for a hash set of objects keyed by their name, with heterogeneous
// lookup by absl::string_view: `NameOf::Get` projects both an element and a string_view
// to the name (e.g. a set of Value* found by name without building a key object).
template <typename NameOf>
struct NameKeyHash {
  using is_transparent = void;
  template <typename T>
  size_t operator()(const T& v) const { return NameHash()(NameOf::Get(v)); }
};
template <typename NameOf>
struct NameKeyEq {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const { return NameOf::Get(a) == NameOf::Get(b); }
};

}  // namespace commir

#endif  // COMMIR_COMMIR_NAME_HASH_H_
