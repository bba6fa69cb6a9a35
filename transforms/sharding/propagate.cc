#include "transforms/sharding/propagate.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "transforms/collectives/collective_buckets.h"
#include "transforms/inline.h"
#include "transforms/sharding/layout.h"
#include "transforms/sharding/op_rules.h"
#include "transforms/sharding/strategy_explanation.h"

namespace commir::sharding {
namespace {

// The layout the parser infers for an elementwise op's result from its operands.
std::optional<Type> InferredElementwiseType(const Operation& op, const Mesh* mesh) {
  if (op.Is(OpKind::kConvert)) {
    Type x = op.operand(0)->type();
    if (!x.is_tensor()) return std::nullopt;
    return op.result(0)->type().WithSharding(x.dim_axes(), x.partial());
  }
  std::vector<Type> operand_types;
  for (Value* v : op.operands()) operand_types.push_back(v->type());
  OpSignature sig{operand_types, op.attrs(), {}, 1, mesh, false};
  absl::StatusOr<std::vector<Type>> inferred = op.def().infer(sig);
  if (!inferred.ok() || inferred->size() != 1) return std::nullopt;
  return (*inferred)[0];
}

}  // namespace

bool IsLayoutConstraint(const Operation& op, int r) {
  Type type = op.result(r)->type();
  if (!type.is_tensor()) return false;
  if (op.Is(OpKind::kReshard)) return true;
  if (!type.has_sharding()) return false;
  if (op.def().Has(kElementwise) && op.num_results() == 1) {
    const Function* function = op.parent_function();
    std::optional<Type> inferred =
        InferredElementwiseType(op, function != nullptr ? function->mesh() : nullptr);
    if (inferred && inferred->is_tensor() && inferred->dim_axes() == type.dim_axes() &&
        inferred->partial() == type.partial()) {
      return false;
    }
  }
  return true;
}

namespace {

class Propagator {
 public:
  Propagator(Function& function, const PropagationOptions& options, DiagnosticEngine* diagnostics)
      : function_(function),
        mesh_(*function.mesh()),
        options_(options),
        diagnostics_(diagnostics) {}

  absl::Status Run() {
    Block& body = *function_.body();
    for (int i = 0; i < body.num_arguments(); ++i) {
      Info& info = info_[body.argument(i)];
      info.layout = Layout::Of(function_.arg_types()[i], mesh_);
      info.fixed = info.decided = true;
    }
    for (Operation* op : body) {
      if (op->def().Has(kTerminator)) {
        ret_ = op;
        continue;
      }
      absl::StatusOr<OpRule> rule = RuleFor(*op);
      if (!rule.ok()) {
        if (diagnostics_ != nullptr) diagnostics_->Error(op->loc(), std::string(rule.status().message()));
        return absl::FailedPreconditionError(rule.status().message());
      }
      position_[op] = static_cast<int>(ops_.size());
      ops_.push_back(op);
      rules_.push_back(*std::move(rule));
      for (int r = 0; r < op->num_results(); ++r) {
        Value* result = op->result(r);
        if (!result->type().is_tensor()) continue;
        Info& info = info_[result];
        if (IsLayoutConstraint(*op, r)) {
          info.layout = Layout::Of(result->type(), mesh_);
          info.fixed = info.decided = true;
        }
      }
    }
    sharing_ = SharingUsers(ops_);
    // Up to four plans: the cheapest op by op, and, when that one moves an argument
    // (gathers a weight), the one that keeps the arguments where they are, as Megatron
    // does. Each op choosing greedily cannot see that gathering one weight to save one
    // reduce_scatter forces the key/value projections to gather everything later; the
    // plans' total costs can. Each is made twice when a backward pass met a sum it
    // would vote whole (LeavesSumWhole): with those votes and without them. The
    // cheapest wins (the first on a tie).
    struct Plan {
      double cost;
      absl::flat_hash_map<const Value*, Info> info;
      bool pin_arguments;
      bool skip_whole_sum_votes;
      int64_t priced_all_reduces;
      int64_t priced_buckets;
    };
    std::optional<Plan> best;
    for (bool skip : {false, true}) {
      if (skip && !met_whole_sum_vote_) break;
      for (bool pin : {false, true}) {
        ForgetFreeLayouts();
        skip_whole_sum_votes_ = skip;
        double plan_cost = Solve(pin);
        if (!best || Cheaper(plan_cost, best->cost)) {
          best = Plan{plan_cost, info_, pin, skip, priced_all_reduces_, priced_buckets_};
        }
        if (!pin && !moved_argument_) break;
      }
    }
    info_ = std::move(best->info);
    pin_arguments_ = best->pin_arguments;
    skip_whole_sum_votes_ = best->skip_whole_sum_votes;
    priced_all_reduces_ = best->priced_all_reduces;
    priced_buckets_ = best->priced_buckets;
    double cost = best->cost;
    Refine(cost);
    if (options_.report != nullptr) {
      options_.report->priced_all_reduces += priced_all_reduces_;
      options_.report->priced_all_reduce_buckets += priced_buckets_;
      Explain(*options_.report);
    }
    for (Operation* op : ops_) {
      for (Value* result : op->results()) {
        auto it = info_.find(result);
        if (it == info_.end() || it->second.fixed) continue;
        Type type = it->second.layout.ApplyTo(result->type());
        if (options_.report != nullptr) {
          ++options_.report->free_values;
          options_.report->layouts_changed += type != result->type() ? 1 : 0;
        }
        result->set_type(type);
      }
    }
    return absl::OkStatus();
  }

 private:
  struct Info {
    Layout layout;
    bool fixed = false;
    bool decided = false;
    std::optional<Layout> preferred;
    int strength = -1;
    // Layouts earlier users (in program order) resharded the value to in this forward
    // pass: lower-to-spmd makes each reshard once, so later users get them for free.
    std::vector<Layout> available;
  };

  // Runs the configured rounds of Backward and Forward; returns the cost of the plan
  // the last Forward chose (the reshards lower-to-spmd will emit, each once).
  double Solve(bool pin_arguments) {
    pin_arguments_ = pin_arguments;
    moved_argument_ = false;
    for (int round = 0; round < std::max(1, options_.iterations); ++round) {
      Backward();
      Forward();
    }
    return PlanCost();
  }

  // The cost of the reshards of the plan the last Forward chose, those at the return
  // included.
  double PlanCost() {
    double cost = plan_cost_;
    std::vector<collectives::BucketCandidate> all_reduces = all_reduces_;
    if (ret_ != nullptr) {
      for (int i = 0; i < ret_->num_operands(); ++i) {
        const Info* info = Find(ret_->operand(i));
        if (info == nullptr) continue;
        Layout to = Layout::Of(function_.result_types()[i], mesh_);
        cost += ReshardCost(ret_->operand(i)->type(), info->layout, to, mesh_);
        AllReduceCandidates(ret_->operand(i), info->layout, to, static_cast<int>(ops_.size()),
                            all_reduces);
      }
    }
    // The all_reduces that depend on none of each other's results (the gradients of a
    // backward pass, clip_grad_norm's squared norms) run combined, as
    // combine-all-reduces makes them: each bucket pays one collective's latency. Its
    // positions are those of the ops sorted by collective round, then program order.
    std::vector<int> order(ops_.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return round_[a] < round_[b]; });
    std::vector<int> position(ops_.size());
    for (size_t i = 0; i < order.size(); ++i) position[order[i]] = static_cast<int>(i);
    auto in_round_order = [&](int k) {
      return k < 0 || k >= static_cast<int>(ops_.size()) ? k : position[k];
    };
    for (collectives::BucketCandidate& c : all_reduces) {
      const bool alone = c.ready >= c.needed;
      c.needed = in_round_order(c.needed);
      c.ready = alone ? c.needed : in_round_order(c.ready);
    }
    const std::vector<collectives::Bucket> buckets =
        collectives::AssignBuckets(all_reduces, collectives::kDefaultBucketBytes);
    for (const collectives::Bucket& bucket : buckets) {
      cost -= kCollectiveLatencyBytes * static_cast<double>(bucket.members.size() - 1);
    }
    priced_all_reduces_ = static_cast<int64_t>(all_reduces.size());
    priced_buckets_ = static_cast<int64_t>(buckets.size());
    return cost;
  }

  // Adds to `out` the all_reduces of the reshard of `value` from `from` to `to` before
  // the op at position `needed`: the first collective of the reshard can run as soon as
  // `value` is made; a later one only right before its reader (it cannot be combined).
  void AllReduceCandidates(const Value* value, const Layout& from, const Layout& to, int needed,
                           std::vector<collectives::BucketCandidate>& out,
                           bool from_value_as_made = true) const {
    if (from == to) return;
    Type global = value->type();
    std::vector<ReshardStep> steps = PlanReshard(global.dims(), from, to, mesh_);
    Layout cur = from;
    // Only an all_reduce of the value as its op made it can run early; one of an earlier
    // reader's reshard, or after another step, runs where that step is emitted, right
    // before its reader (ready = needed: it goes alone).
    bool first_step = from_value_as_made;
    for (const ReshardStep& step : steps) {
      if (step.kind == ReshardStep::Kind::kAllReduce) {
        int ready = needed;
        if (first_step) {
          auto it = position_.find(value->defining_op());
          ready = it == position_.end() ? -1 : it->second;
        }
        Type local = LocalTypeOf(global, cur, mesh_);
        const double bytes = static_cast<double>(local.num_elements()) *
                             ElementTypeByteWidth(local.element_type());
        std::string axes = absl::StrJoin(step.axes, ",");
        out.push_back({ready, needed, bytes,
                       static_cast<int64_t>(absl::HashOf(axes, static_cast<int>(step.reduce),
                                                         static_cast<int>(local.element_type())))});
      }
      first_step = false;
      cur = step.after;
    }
  }

  // How many all_reduces lie on the longest chain of data dependences into op `k` under
  // `choice`: an operand the op needs reshared through an all_reduce adds one to its
  // producer's count, and so do the op's own statistics all_reduces (a split norm's).
  // combine-all-reduces orders ops by it (all_reduce_candidates.h). Not counted: the
  // all_reduces of a fixed result's reshard and of a max resolved after the op (rare;
  // the pass counts them, so the plan may then be charged a latency too few).
  int CollectiveRound(size_t k, const StrategyQuery& query, const Choice& choice) const {
    const Operation& op = *ops_[k];
    int round = 0;
    for (int i = 0; i < op.num_operands(); ++i) {
      const Value* v = op.operand(i);
      if (v->is_literal() || !v->type().is_tensor()) continue;
      auto it = position_.find(v->defining_op());
      int r = it == position_.end() ? 0 : round_[it->second];
      if (query.operands[i] && choice.operands[i] != *query.operands[i] &&
          choice.operands[i].partial.size() < query.operands[i]->partial.size()) {
        for (const ReshardStep& step :
             PlanReshard(v->type().dims(), *query.operands[i], choice.operands[i], mesh_)) {
          if (step.kind == ReshardStep::Kind::kAllReduce) {
            ++r;
            break;
          }
        }
      }
      round = std::max(round, r);
    }
    if (!rules_[k].operands.empty() &&
        StatsBytes(op.operand(0)->type(), rules_[k], choice.strategy, mesh_) > 0) {
      ++round;
    }
    return round;
  }

  static bool Cheaper(double a, double b) { return a < b - 1e-9 * std::max(1.0, b); }

  // One more round from the chosen plan, kept only when its reshards cost less than
  // `cost` (the plan's). The first backward pass knows no layout but the given ones, so
  // a gather a late user needs is voted all the way up to where a value is made: in a
  // gradient function, the all_gather before the attention's output projection
  // backward (dY W_o) pulls the layernorm backward above it onto whole rows, so the
  // partial dX of the MLP's up projection is all_reduced instead of reduce_scattered
  // onto the sequence split that the layernorm's saved statistics have. The second
  // backward pass sees those layouts and votes for the sequence split, as Megatron-SP
  // does. Forward-only programs rarely change (a second round lowered the
  // communication of one of 2000 random programs).
  void Refine(double cost) {
    if (options_.iterations > 1) return;  // rounds asked for explicitly: all were run
    absl::flat_hash_map<const Value*, Info> chosen = info_;
    const int64_t chosen_all_reduces = priced_all_reduces_;
    const int64_t chosen_buckets = priced_buckets_;
    Backward();
    Forward();
    // When the round is not kept, plan_cost_, all_reduces_ and round_ still describe it:
    // nothing reads them after Refine.
    if (!Cheaper(PlanCost(), cost)) {
      info_ = std::move(chosen);
      priced_all_reduces_ = chosen_all_reduces;
      priced_buckets_ = chosen_buckets;
    }
  }

  // Back to the state before the first Solve: only the given layouts are known.
  void ForgetFreeLayouts() {
    for (auto& [value, info] : info_) {
      // The reshards the other plan made of given values (a gathered cotangent) are
      // not made in this one: a stale entry would make them look free to its votes.
      info.available.clear();
      if (info.fixed) continue;
      info.layout = Layout();
      info.decided = false;
      info.preferred.reset();
      info.strength = -1;
    }
  }

  Info* Find(const Value* value) {
    auto it = info_.find(value);
    return it == info_.end() ? nullptr : &it->second;
  }

  void Vote(const Value* value, const Layout& layout, int strength) {
    Info* info = Find(value);
    if (info == nullptr || info->fixed || value->is_literal()) return;
    if (strength >= info->strength) {
      info->preferred = layout;
      info->strength = strength;
    }
  }

  StrategyQuery Query(size_t k) {
    Operation* op = ops_[k];
    StrategyQuery query;
    query.op = op;
    query.rule = &rules_[k];
    query.mesh = &mesh_;
    for (Value* v : op->operands()) {
      Info* info = v->is_literal() ? nullptr : Find(v);
      bool known = info != nullptr && info->decided;
      query.operands.push_back(known ? std::optional<Layout>(info->layout) : std::nullopt);
      query.available.push_back(known ? info->available : std::vector<Layout>{});
    }
    query.sharing = sharing_[k];
    if (pin_arguments_) {
      for (Value* v : op->operands()) {
        query.pinned.push_back(v->kind() == Value::Kind::kBlockArgument);
      }
    }
    for (Value* result : op->results()) {
      Info* info = Find(result);
      if (info == nullptr) {
        query.targets.push_back(std::nullopt);
      } else if (info->fixed) {
        query.targets.push_back(info->layout);
      } else {
        query.targets.push_back(info->preferred);
      }
    }
    return query;
  }

  // Whether `choice`, a candidate from the results' targets or full replication (what a
  // backward pass mostly weighs before the operands' layouts are known), keeps a summed
  // (or maxed) dimension of operand `i` whole. Such
  // a choice says only that the sum's result is wanted unsplit; splitting the sum and
  // all_reducing its (smaller) result serves that as well, and is much cheaper when the
  // operand arrives split: the gradient of a layernorm's weight sums a batch split over
  // dp. Voting the operand whole would pull the backward's activations onto whole
  // batches (an all_gather over dp per layernorm, every device computing every
  // sample). Run makes each plan also without such votes, the forward pass then
  // choosing from the layouts the operands arrive in, and keeps the cheaper: at toy
  // sizes the votes can still win (a handful of latencies against no work).
  static bool LeavesSumWhole(const OpRule& rule, const Choice& choice, int i) {
    if (choice.origin != CandidateOrigin::kTargets &&
        choice.origin != CandidateOrigin::kReplicated) {
      return false;
    }
    for (const std::vector<int>& dim : rule.operands[i].dims) {
      for (int f : dim) {
        if ((rule.kinds[f] == FactorKind::kSum || rule.kinds[f] == FactorKind::kMax) &&
            choice.strategy.factors[f].empty()) {
          return true;
        }
      }
    }
    return false;
  }

  void Backward() {
    for (auto& [value, info] : info_) {
      info.preferred.reset();
      info.strength = -1;
    }
    if (ret_ != nullptr) {
      for (int i = 0; i < ret_->num_operands(); ++i) {
        Vote(ret_->operand(i), Layout::Of(function_.result_types()[i], mesh_), 2);
      }
    }
    for (size_t k = ops_.size(); k-- > 0;) {
      Operation* op = ops_[k];
      StrategyQuery query = Query(k);
      int strength = -1;
      for (Value* result : op->results()) {
        const Info* info = Find(result);
        if (info == nullptr) continue;
        if (info->fixed) {
          strength = 2;
        } else if (info->preferred) {
          strength = std::max(strength, info->strength);
        }
      }
      bool any_known = false;
      for (const std::optional<Layout>& layout : query.operands) any_known |= layout.has_value();
      if (strength < 0 && !any_known) continue;
      bool any_free = false;
      for (Value* v : op->operands()) {
        const Info* info = v->is_literal() ? nullptr : Find(v);
        any_free |= info != nullptr && !info->fixed;
      }
      if (!any_free) continue;
      Choice choice = ChooseStrategy(query);
      for (int i = 0; i < op->num_operands(); ++i) {
        if (!rules_[k].operands[i].is_tensor) continue;
        if (LeavesSumWhole(rules_[k], choice, i)) {
          const Value* v = op->operand(i);
          const Info* info = v->is_literal() ? nullptr : Find(v);
          met_whole_sum_vote_ |= info != nullptr && !info->fixed;
          if (skip_whole_sum_votes_) continue;
        }
        Vote(op->operand(i), choice.operands[i], std::max(strength, 0));
      }
    }
  }

  // Explains the ops that define a value named in options_.explain, as the kept plan's
  // last forward round chose them. Every layout a query reads was set before its op's
  // turn in that round and not changed since; the layouts values are already available
  // in (earlier users' reshards) were not all made yet at that turn, so they are made
  // again here in program order, as that round made them, and each op is explained
  // from the query it saw (explaining from the finished round showed an op's own gather
  // as already made, at no cost).
  void Explain(PropagationReport& report) {
    if (options_.explain.empty()) return;
    for (auto& [value, info] : info_) info.available.clear();
    const double plan_cost = plan_cost_;
    const bool moved_argument = moved_argument_;
    const std::vector<collectives::BucketCandidate> all_reduces = all_reduces_;
    for (size_t k = 0; k < ops_.size(); ++k) {
      const Operation& op = *ops_[k];
      bool named = false;
      for (const Value* result : op.results()) {
        for (const std::string& name : options_.explain) {
          if (result->name() != name) continue;
          named = true;
          report.explained_names.insert(name);
        }
      }
      StrategyQuery query = Query(k);
      if (named) {
        report.explanations.push_back(
            {op.loc(), ExplainStrategyChoice(query, WeighStrategies(query), function_.name())});
      }
      RecordReshards(op, query, ChooseStrategy(query), k);
    }
    plan_cost_ = plan_cost;
    moved_argument_ = moved_argument;
    all_reduces_ = all_reduces;
  }

  void Forward() {
    for (auto& [value, info] : info_) info.available.clear();
    plan_cost_ = 0;
    all_reduces_.clear();
    round_.assign(ops_.size(), 0);
    for (size_t k = 0; k < ops_.size(); ++k) {
      Operation* op = ops_[k];
      StrategyQuery query = Query(k);
      Choice choice = ChooseStrategy(query);
      RecordReshards(*op, query, choice, k);
      plan_cost_ += choice.compute_cost;
      round_[k] = CollectiveRound(k, query, choice);
      if (!rules_[k].operands.empty()) {
        plan_cost_ += StatsBytes(op->operand(0)->type(), rules_[k], choice.strategy, mesh_);
      }
      for (int r = 0; r < op->num_results(); ++r) {
        Info* info = Find(op->result(r));
        if (info == nullptr) continue;
        Type type = op->result(r)->type();
        if (info->fixed) {
          plan_cost_ += ReshardCost(type, choice.results[r], info->layout, mesh_);
          continue;
        }
        Layout layout = choice.results[r];
        if (!layout.partial.empty() && layout.partial_kind == ReductionFn::kMax) {
          Layout target = query.targets[r] ? *query.targets[r] : Layout::Replicated(layout.rank());
          if (!target.partial.empty()) target.partial.clear();
          layout = ReducePartial(layout, target, mesh_);
          Layout resolved = choice.results[r];
          resolved.partial.clear();
          resolved.partial_kind = ReductionFn::kSum;
          plan_cost_ += ReshardCost(type, choice.results[r], resolved, mesh_);
        }
        info->layout = std::move(layout);
        info->decided = true;
      }
    }
  }

  // Remembers the layouts `choice` reshards the operands of `op` to, as lower-to-spmd
  // will emit them, so that later users of the same values see them as free; adds the
  // reshards not made before to the plan's cost.
  void RecordReshards(const Operation& op, const StrategyQuery& query, const Choice& choice,
                      size_t k) {
    for (int i = 0; i < op.num_operands(); ++i) {
      Value* v = op.operand(i);
      if (!v->type().is_tensor() || !query.operands[i] || choice.operands[i] == *query.operands[i]) {
        continue;
      }
      Info* info = Find(v);
      if (info == nullptr) continue;
      std::vector<Layout>& available = info->available;
      if (std::find(available.begin(), available.end(), choice.operands[i]) != available.end()) {
        continue;
      }
      int source = choice.sources[i];
      const Layout& from = source < 0 ? info->layout : available[source];
      plan_cost_ += ReshardCost(v->type(), from, choice.operands[i], mesh_);
      AllReduceCandidates(v, from, choice.operands[i], static_cast<int>(k), all_reduces_,
                          /*from_value_as_made=*/source < 0);
      moved_argument_ |= v->kind() == Value::Kind::kBlockArgument;
      available.push_back(choice.operands[i]);
    }
  }

  Function& function_;
  const Mesh& mesh_;
  PropagationOptions options_;
  DiagnosticEngine* diagnostics_;
  std::vector<Operation*> ops_;
  std::vector<OpRule> rules_;
  std::vector<std::vector<int>> sharing_;  // SharingUsers(ops_)
  Operation* ret_ = nullptr;
  // Whether this plan keeps the arguments' layouts where it can (Solve).
  bool pin_arguments_ = false;
  // Set by Forward: whether the plan reshards an argument, and what its reshards cost.
  bool moved_argument_ = false;
  double plan_cost_ = 0;
  // The all_reduces of the plan's operand reshards, for PlanCost's buckets.
  std::vector<collectives::BucketCandidate> all_reduces_;
  // Set by PlanCost, then kept for the chosen plan: its all_reduces and their buckets
  // (PropagationReport).
  int64_t priced_all_reduces_ = 0;
  int64_t priced_buckets_ = 0;
  // Each op's position in ops_, and (set by Forward) its CollectiveRound.
  absl::flat_hash_map<const Operation*, int> position_;
  std::vector<int> round_;
  // Whether Backward skips the votes LeavesSumWhole finds, and whether it met any.
  bool skip_whole_sum_votes_ = false;
  bool met_whole_sum_vote_ = false;
  absl::flat_hash_map<const Value*, Info> info_;
};

}  // namespace

absl::Status PropagateSharding(Function& function, const PropagationOptions& options,
                               DiagnosticEngine* diagnostics) {
  if (function.is_spmd() || function.mesh() == nullptr) return absl::OkStatus();
  return Propagator(function, options, diagnostics).Run();
}

absl::Status PropagateSharding(Module& module, const PropagationOptions& options,
                               DiagnosticEngine* diagnostics) {
  for (Function* function : module.functions()) {
    if (absl::Status s = PropagateSharding(*function, options, diagnostics); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("@", function->name(), ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

namespace {

// The first global function with a mesh that has an argument named `name`, or null.
const Function* GlobalFunctionWithArgument(const Module& module, absl::string_view name) {
  for (const Function* function : module.functions()) {
    if (function->is_spmd() || function->mesh() == nullptr) continue;
    const Block& body = *function->body();
    for (int i = 0; i < body.num_arguments(); ++i) {
      if (body.argument(i)->name() == name) return function;
    }
  }
  return nullptr;
}

}  // namespace

const OptionSchema<PropagateShardingPassOptions>& PropagateShardingPassOptions::Schema() {
  static const auto* schema =
      &(*new OptionSchema<PropagateShardingPassOptions>())
           .Int("iterations", &PropagateShardingPassOptions::iterations,
                "Backward/forward rounds (1 to 100); later rounds see the layouts chosen before",
                1, 100)
           .String("explain", &PropagateShardingPassOptions::explain,
                   "Values (e.g. \"%q,%k\") whose op's strategy choice is explained on stderr: "
                   "every candidate's layouts and costs, and why the chosen one won");
  return *schema;
}

const PassInfo& PropagateShardingPass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<PropagateShardingPass>(
      "propagate-sharding",
      "Complete the layout of every value of global functions from arguments, results and "
      "annotations"));
  return *info;
}

absl::Status PropagateShardingPass::Run(Module& module) {
  // Propagation sees one function at a time: calls are expanded first.
  if (absl::StatusOr<int64_t> inlined = InlineCalls(module, &diagnostics()); !inlined.ok()) {
    return inlined.status();
  }
  PropagationOptions propagation;
  PropagationReport report;
  propagation.report = &report;
  for (absl::string_view name :
       absl::StrSplit(options().explain, absl::ByAnyChar(", "), absl::SkipEmpty())) {
    propagation.explain.push_back(std::string(absl::StripPrefix(name, "%")));
  }
  // The parser and RunPipeline check the schema's range; a pass constructed directly
  // in C++ is checked here.
  const int64_t iterations = options().iterations;
  if (iterations < 1 || iterations > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("option 'iterations' must be between 1 and 100, got ", iterations));
  }
  propagation.iterations = static_cast<int>(iterations);
  if (absl::Status s = PropagateSharding(module, propagation, &diagnostics()); !s.ok()) return s;
  for (const std::string& name : propagation.explain) {
    if (report.explained_names.contains(name)) continue;
    if (const Function* function = GlobalFunctionWithArgument(module, name)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "explain: %%%s is an argument of @%s: its layout is given, not chosen", name,
          function->name()));
    }
    return absl::InvalidArgumentError(
        absl::StrFormat("explain: no value %%%s in a global function with a mesh", name));
  }
  for (const PropagationReport::Explanation& explanation : report.explanations) {
    Remark(absl::StrCat("propagate-sharding: ", explanation.text), explanation.loc);
  }
  const std::string global = NameFunctions(
      module, [](const Function& f) { return !f.is_spmd() && f.mesh() != nullptr; });
  AddToStatistic("rewrites", "Free values whose layout changed", report.layouts_changed);
  AddToStatistic("free-values", "Values whose layout propagation chose", report.free_values);
  // Free values that keep the layout the parser inferred are routine; a module with
  // nothing to propagate over is worth saying (a pipeline run on the wrong program).
  if (global.empty()) RemarkRewroteNothing("no global function with a mesh");
  return absl::OkStatus();
}

}  // namespace commir::sharding
