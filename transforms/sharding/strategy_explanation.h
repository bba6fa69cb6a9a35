// The text of propagate-sharding{explain=...}: every candidate strategy ChooseStrategy
// weighed for one op, with what it needs and costs, and why the chosen one won. It is
// made from WeighStrategies (op_rules.h), the function ChooseStrategy itself calls, so
// it shows what was decided rather than a re-derivation.
#ifndef COMMIR_TRANSFORMS_SHARDING_STRATEGY_EXPLANATION_H_
#define COMMIR_TRANSFORMS_SHARDING_STRATEGY_EXPLANATION_H_

#include <string>

#include "commir/ir.h"
#include "transforms/sharding/op_rules.h"

namespace commir::sharding {

// Explains the choice for `query` (its op in function `function_name`), e.g.
//   strategy of %y = matmul(%x, %w) in @f: 2 candidates, cheapest by (comm + compute,
//   work) ...
//     operands now: %x [dp, -], %w [-, -]; result targets: [dp, -]
//     candidate 1, from %x's layout: needs %x [dp, -], %w [-, -]; gives [dp, -];
//       comm 0, compute 28, work 96
//     ...
//     chosen: candidate 1 (least communication plus compute)
// One line per candidate; the lines after the first are indented by two spaces.
std::string ExplainStrategyChoice(const StrategyQuery& query, const WeighedStrategies& weighed,
                                  const std::string& function_name);

// Why `weighed.chosen` won: "the only candidate", "fewest reshards of pinned operands",
// "least communication plus compute", "least work among N candidates of equal
// communication plus compute", or "first in candidate order among N candidates of equal
// (comm + compute, work)".
std::string WhyChosen(const WeighedStrategies& weighed);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_STRATEGY_EXPLANATION_H_
