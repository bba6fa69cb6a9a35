#include "commir/name_hash.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace commir {
namespace {

TEST(NameHashTest, EqualNamesHashEqualWhereverTheyAreStored) {
  NameHash hash;
  std::string a = "layer_12.attention_out";
  std::string b = "xx" + a;
  EXPECT_EQ(hash(a), hash(absl::string_view(b).substr(2)));
  EXPECT_EQ(hash(""), hash(absl::string_view()));
}

TEST(NameHashTest, EveryByteOfTheNameCounts) {
  NameHash hash;
  for (size_t length = 1; length <= 40; ++length) {
    std::string name(length, 'a');
    size_t base = hash(name);
    for (size_t i = 0; i < length; ++i) {
      std::string changed = name;
      changed[i] = 'b';
      EXPECT_NE(hash(changed), base) << "length " << length << ", byte " << i;
    }
    // Lengths differ too (a name and its extension by a NUL byte).
    EXPECT_NE(hash(name + std::string(1, '\0')), base) << "length " << length;
  }
}

// Names as programs write them, numbered: distinct hashes, and both the low bits
// (absl's in-group tag) and the high bits (the probe start) spread evenly.
TEST(NameHashTest, NumberedNamesSpreadEvenly) {
  NameHash hash;
  const int kNames = 200000;
  absl::flat_hash_set<size_t> seen;
  std::vector<int> low(128), high(128);
  for (int i = 0; i < kNames; ++i) {
    for (const std::string& name :
         {absl::StrCat("v", i), absl::StrCat(i), absl::StrCat("block", i, ".weight_proj")}) {
      size_t h = hash(name);
      EXPECT_TRUE(seen.insert(h).second) << name;
      ++low[h & 127];
      ++high[h >> 57];
    }
  }
  const double expected = 3.0 * kNames / 128;
  for (int b = 0; b < 128; ++b) {
    EXPECT_NEAR(low[b], expected, expected * 0.1) << "low bucket " << b;
    EXPECT_NEAR(high[b], expected, expected * 0.1) << "high bucket " << b;
  }
}

}  // namespace
}  // namespace commir
