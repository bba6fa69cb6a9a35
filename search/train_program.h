// The training program of a laid-out forward function: a copy of its module with the
// backward added by the autodiff pass (Differentiate, in memory), seeded by one
// cotangent per float result, so any function (not only one returning a scalar loss)
// has one. @f_grad takes @f's arguments and the cotangents and returns @f's results and
// the gradient of every float argument, each with its argument's layout: where a weight
// is replicated over an axis that splits the data, the partitioner reduces its gradient
// over that axis (all_reduce; reduce_scatter where the weight is split), and the
// gradients are results, so the sim counts their memory. No optimizer state is added.
#ifndef COMMIR_SEARCH_TRAIN_PROGRAM_H_
#define COMMIR_SEARCH_TRAIN_PROGRAM_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/ir.h"

namespace commir::search {

// Adds @<function>_grad to `module` (after @function) and returns its name. Errors are
// autodiff's (an op without a derivative rule), "LINE:COL: ..." at the op or argument.
absl::StatusOr<std::string> AddBackward(Module& module, const std::string& function);

// The float arguments of `function` that no axis splits (by name).
std::vector<std::string> ReplicatedFloatArguments(const Function& function);

}  // namespace commir::search

#endif  // COMMIR_SEARCH_TRAIN_PROGRAM_H_
