// A small copy of a global program for proving a search candidate on the cpu mesh: the
// function's dimensions are made small while each keeps its divisibility by every
// divisor of a given number (the device counts of the mesh axes, pipeline chunks,
// zigzag halves), so that a layout and schedule valid at the real sizes are valid, and
// exercise the same code paths, at the small ones.
//
// Dimensions are related across ops (a reshape splits a dimension into factors, a
// matmul contracts two, attention nests query heads under key/value heads), so the
// sizes are not shrunk one by one. The sharding rules (transforms/sharding/op_rules.h)
// name each op's factors and which factors make up each operand and result dimension;
// the shrinker unions them through the values into *atoms*, splitting an atom where one
// op sees as two factors what another sees as one. Every dimension is then a product of
// atoms, and each atom of size s becomes gcd(s, keep_divisors_of): since
// gcd(a*b, k) divides gcd(a, k) * gcd(b, k), a dimension divisible by a divisor of k
// stays divisible by it, and dimensions that were equal stay equal.
#ifndef COMMIR_SEARCH_SHRINK_H_
#define COMMIR_SEARCH_SHRINK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "commir/ir.h"

namespace commir::search {

struct ShrunkModule {
  // A verified copy of the module with @function shrunk (other functions as they were).
  std::unique_ptr<Module> module;
  // Each distinct dimension size of the function's values that changed, with its new
  // size, largest first.
  std::vector<std::pair<int64_t, int64_t>> sizes;
  // The most elements of any value of the shrunk function.
  int64_t max_elements = 0;
};

// "4096->64, 128->64" (or "unchanged").
std::string FormatSizes(const std::vector<std::pair<int64_t, int64_t>>& sizes);

// Shrinks @`function` of `module` (a global function) as the header comment says.
// Fails with the reason when the function cannot be shrunk consistently (a reshape
// whose dimensions do not factor alike, a concatenation of unequal parts, an op with
// regions or without a sharding rule, a slice that no longer fits), when a value of the
// shrunk function still has more than `max_elements_per_value` elements, or when the
// shrunk program does not verify.
absl::StatusOr<ShrunkModule> ShrinkFunction(const Module& module, absl::string_view function,
                                            int64_t keep_divisors_of,
                                            int64_t max_elements_per_value);

// The most elements of any value (argument or op result) of `function`.
int64_t MaxValueElements(const Function& function);

}  // namespace commir::search

#endif  // COMMIR_SEARCH_SHRINK_H_
