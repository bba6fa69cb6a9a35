// A structural fingerprint of a module: equal for modules that differ only in the names
// of their SSA values (and in source locations), different for any other difference the
// printer would show (a mesh, a function's name, mesh or signature, an op's kind,
// operands and their order, literals, attributes, result types, regions).
//
// Values are identified by where they are defined (arguments and results numbered in
// order), not by name, so a program renamed, or printed and parsed, keeps its
// fingerprint. It is 128 bits: two unrelated 64-bit hashes (absl's and the standard
// library's) of an encoding that determines the structure; a collision among even a
// billion modules has a probability under 1e-20. absl's hash is seeded per process, so
// fingerprints are compared within one process only (the search's dedupe).
#ifndef COMMIR_COMMIR_FINGERPRINT_H_
#define COMMIR_COMMIR_FINGERPRINT_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "commir/ir.h"

namespace commir {

struct Fingerprint {
  uint64_t a = 0;
  uint64_t b = 0;
  friend bool operator==(const Fingerprint& x, const Fingerprint& y) {
    return x.a == y.a && x.b == y.b;
  }
  friend bool operator!=(const Fingerprint& x, const Fingerprint& y) { return !(x == y); }
  template <typename H>
  friend H AbslHashValue(H h, const Fingerprint& f) {
    return H::combine(std::move(h), f.a, f.b);
  }
};

Fingerprint ModuleFingerprint(const Module& module);

// Values numbered by a caller: the same number stands for the same value.
using ValueNumbers = absl::flat_hash_map<const Value*, int64_t>;

// The same encoding for one op alone: a byte string that determines what `op` computes
// from the values it reads, those defined outside it by their number in `numbers`, those
// defined inside its regions by their order there; equal strings, equal computations.
// `op`'s own results are left out (the caller numbers them). Compared within one
// process, like fingerprints.
std::string OpStructureKey(const Operation& op, const ValueNumbers& numbers);

}  // namespace commir

#endif  // COMMIR_COMMIR_FINGERPRINT_H_
