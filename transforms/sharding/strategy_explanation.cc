#include "transforms/sharding/strategy_explanation.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace commir::sharding {
namespace {

std::string ValueName(const Value* value) {
  if (value->is_literal()) return absl::StrCat(value->literal_value());
  return value->name().empty() ? std::string("%<unnamed>") : absl::StrCat("%", value->name());
}

// "%y = matmul(%x, %w)".
std::string OpHeader(const Operation& op) {
  std::vector<std::string> results, operands;
  for (const Value* r : op.results()) results.push_back(ValueName(r));
  for (const Value* v : op.operands()) operands.push_back(ValueName(v));
  return absl::StrFormat("%s = %s(%s)", absl::StrJoin(results, ", "), op.name(),
                         absl::StrJoin(operands, ", "));
}

std::string Origin(const Choice& choice, const Operation& op) {
  switch (choice.origin) {
    case CandidateOrigin::kOperand:
      return absl::StrCat("from ", ValueName(op.operand(choice.origin_index)), "'s layout");
    case CandidateOrigin::kAvailable:
      return absl::StrCat("from a layout ", ValueName(op.operand(choice.origin_index)),
                          " already exists in");
    case CandidateOrigin::kTargets: return "from the result targets";
    case CandidateOrigin::kReplicated: return "replicated";
    case CandidateOrigin::kStatsGathered:
      return absl::StrCat("candidate ", choice.origin_index + 1, " with statistics gathered");
  }
  return "";
}

// Whether two costs (communication plus compute) tie in CheaperChoice's comparison.
bool SameComm(const Choice& a, const Choice& b) {
  Choice comm_a, comm_b;  // the costs alone, equal work
  comm_a.comm_cost = a.comm_cost;
  comm_a.compute_cost = a.compute_cost;
  comm_b.comm_cost = b.comm_cost;
  comm_b.compute_cost = b.compute_cost;
  return !CheaperChoice(comm_a, comm_b) && !CheaperChoice(comm_b, comm_a);
}

}  // namespace

std::string WhyChosen(const WeighedStrategies& weighed) {
  const std::vector<Choice>& all = weighed.candidates;
  if (all.size() == 1) return "the only candidate";
  const Choice& chosen = all[weighed.chosen];
  int same_comm = 0, same_cost = 0, same_pinned = 0;
  for (const Choice& c : all) {
    // Moving fewer pinned operands (weights laid out as the user keeps them) comes first.
    if (c.pinned_moves != chosen.pinned_moves) continue;
    ++same_pinned;
    if (!SameComm(c, chosen)) continue;
    ++same_comm;
    if (!CheaperChoice(chosen, c)) ++same_cost;
  }
  if (same_pinned == 1) return "fewest reshards of pinned operands";
  if (same_comm == 1) return "least communication plus compute";
  if (same_cost == 1) {
    return absl::StrFormat("least work among %d candidates of equal communication plus compute",
                           same_comm);
  }
  return absl::StrFormat(
      "first in candidate order among %d candidates of equal (comm + compute, work)", same_cost);
}

std::string ExplainStrategyChoice(const StrategyQuery& query, const WeighedStrategies& weighed,
                                  const std::string& function_name) {
  const Operation& op = *query.op;
  const OpRule& rule = *query.rule;
  std::string out = absl::StrFormat(
      "strategy of %s in @%s: %d candidate%s, cheapest by (comm + compute, work), ties to the "
      "earlier; comm = bytes per device + %.0f per collective, compute = its time in bytes at "
      "the link rate",
      OpHeader(op), function_name, weighed.candidates.size(),
      weighed.candidates.size() == 1 ? "" : "s", kCollectiveLatencyBytes);
  std::vector<std::string> known, targets;
  for (size_t i = 0; i < rule.operands.size(); ++i) {
    if (!rule.operands[i].is_tensor) continue;
    const bool have = i < query.operands.size() && query.operands[i].has_value();
    known.push_back(absl::StrCat(ValueName(op.operand(static_cast<int>(i))), " ",
                                 have ? query.operands[i]->ToString() : "unknown"));
  }
  for (size_t r = 0; r < rule.results.size(); ++r) {
    if (!rule.results[r].is_tensor) continue;
    const bool have = r < query.targets.size() && query.targets[r].has_value();
    targets.push_back(have ? query.targets[r]->ToString() : "none");
  }
  absl::StrAppend(&out, "\n  operands now: ", absl::StrJoin(known, ", "),
                  "; result targets: ", absl::StrJoin(targets, ", "));
  for (size_t k = 0; k < weighed.candidates.size(); ++k) {
    const Choice& c = weighed.candidates[k];
    std::vector<std::string> needs, gives;
    for (size_t i = 0; i < c.operands.size(); ++i) {
      if (!rule.operands[i].is_tensor) continue;
      needs.push_back(absl::StrCat(ValueName(op.operand(static_cast<int>(i))), " ",
                                   c.operands[i].ToString()));
    }
    for (size_t r = 0; r < c.results.size(); ++r) {
      if (rule.results[r].is_tensor) gives.push_back(c.results[r].ToString());
    }
    absl::StrAppendFormat(&out,
                          "\n  candidate %d, %s: needs %s; gives %s; comm %.0f, compute %.0f, "
                          "work %.0f%s%s",
                          k + 1, Origin(c, op), absl::StrJoin(needs, ", "),
                          absl::StrJoin(gives, ", "), c.comm_cost, c.compute_cost, c.work,
                          c.pinned_moves > 0
                              ? absl::StrCat(", reshards ", c.pinned_moves, " pinned operand",
                                             c.pinned_moves == 1 ? "" : "s")
                              : "",
                          k == weighed.chosen ? "  <- chosen" : "");
  }
  absl::StrAppendFormat(&out, "\n  chosen: candidate %d (%s)", weighed.chosen + 1,
                        WhyChosen(weighed));
  return out;
}

}  // namespace commir::sharding
