// commir-run --init: how random arguments are drawn.
//
//   uniform  (default) every argument uniform in [-1, 1) (the commir-run contract);
//   scaled   values in a realistic range for deep programs: an argument used as a
//            matmul's contracted operand b [..., K, N] (a weight; [..., N, K] with
//            transpose_b) is uniform scaled to variance 1/K (fan-in, like PyTorch's
//            nn.Linear), so activations keep their scale layer after layer; a
//            layernorm/rmsnorm weight is 1, and a layernorm bias or a bias added to a
//            matmul's product is 0; any other argument is uniform in [-1, 1).
// An argument's role is found through value-preserving ops (all_gather, reshard,
// convert), so a global program and its spmd partitions draw the same global values.
#ifndef COMMIR_TOOLS_INPUT_INIT_H_
#define COMMIR_TOOLS_INPUT_INIT_H_

#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "runtime/random_inputs.h"

namespace commir {

enum class InitScheme { kUniform, kScaled };

// "uniform" or "scaled"; otherwise InvalidArgument listing the valid names.
absl::StatusOr<InitScheme> ParseInitScheme(absl::string_view name);

// The rule for each argument of `function`, in order.
std::vector<runtime::InitRule> InitRulesFor(const Function& function, InitScheme scheme);

}  // namespace commir

#endif  // COMMIR_TOOLS_INPUT_INIT_H_
