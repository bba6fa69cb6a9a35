// The dimensions a search can split: the program's index spaces (its "batch",
// "sequence", "heads", "hidden" or "FFN" dimensions), found from the ops' sharding rules
// rather than from names.
//
// Each op's rule (transforms/sharding/op_rules.h) names its factors and, for every
// dimension of every operand and result, the factors it is made of, major first.
// Splitting a value's dimension over devices splits its major factor, so a value's
// dimension and the major factor of that dimension in every op that reads or writes it
// are one index space: a union-find over (value, dimension) and (op, factor) nodes joins
// them. Each class is then one candidate for a split: the search assigns mesh axes to
// classes, and the layouts of the function's arguments and results follow.
//
// Self-attention joins the keys' sequence to the queries' (the rule keeps them apart:
// the key sequence is not split by attention itself, but ring and Ulysses schedules split
// it like the queries'), when both have the same length.
//
// A class is splittable over a group of g devices when g divides the size of the major
// factor at each of its occurrences (a reshape [256] -> [8, 32] lets 256 split over at
// most 8); `divisible_size` is the gcd of those sizes. Classes in which every occurrence
// must stay whole (attention's head dimension) are not offered.
#ifndef COMMIR_SEARCH_DIM_CLASSES_H_
#define COMMIR_SEARCH_DIM_CLASSES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/ir.h"

namespace commir::search {

// A dimension of the function's signature: argument `index` (or result, `is_result`).
struct SignatureDim {
  bool is_result = false;
  int index = 0;
  int dim = 0;
};

struct DimClass {
  // The first signature dimension in the class, as "x.0" (argument %x, dimension 0) or
  // "result0.1": how tables and messages name the class.
  std::string name;
  // Every group size that divides this also divides each occurrence's major factor.
  int64_t divisible_size = 0;
  // Where the class appears in the signature (arguments first, in order).
  std::vector<SignatureDim> signature_dims;
  // Whether some argument or result of the input program already splits it: the user
  // pinned it, and every candidate splits it.
  bool pinned = false;
};

// The splittable classes that appear in `function`'s signature, ordered by their first
// signature dimension. `function` must be a verified global function.
absl::StatusOr<std::vector<DimClass>> FindDimClasses(const Function& function);

// "%x.0"-style name of a signature dimension.
std::string SignatureDimName(const Function& function, const SignatureDim& dim);

}  // namespace commir::search

#endif  // COMMIR_SEARCH_DIM_CLASSES_H_
