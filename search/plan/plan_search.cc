#include "search/plan/plan_search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "search/plan/stage_split.h"

namespace commir::search::plan {
namespace {

// Ascending; in O(sqrt(n)) steps, as --gpus may be up to 2^30.
std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

constexpr Recompute kRecomputes[] = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
constexpr int kChoices = static_cast<int>(std::size(kRecomputes));

double Seconds(const PlanCost& c) { return c.time.breakdown.total_s; }

// The recomputation chosen for one plan: per rank, and the best uniform one.
struct RecomputeChoice {
  std::optional<RankedPlan> best;          // per rank; none when some rank fits no choice
  std::optional<RankedPlan> best_uniform;  // one recomputation for every rank
  int64_t costed = 0;                      // CostPlan calls
  int64_t dropped = 0;                     // of those, uniform ones that do not fit
  int64_t pruned = 0;                      // uniform recomputations never costed
};

// Per rank, the recomputation of the fastest plan that fits: the lightest that fits on
// each rank. It is exact because a rank's memory, its time per micro-batch T_s (forward +
// backward + recompute) and its exposed data-parallel time D_s depend on its own choice
// only, and the iteration is
//   (m - 1/v) max_s T_s + sum_s T_s / v + max_s D_s + hops.
// A heavier choice adds some d to T_s, so at least d / v to the iteration, and takes less
// than that off D_s: the reduction chain runs over the L / v layers of the rank's first
// chunk, each hidden by 1/L of the rank's backward, so at most (L/v - 1) d / L (ZeRO 3,
// only with p = v = 1, at most m d (L - 1) / L against m d more). So when recomputing
// nothing fits on every rank, nothing heavier is costed.
absl::StatusOr<RecomputeChoice> ChooseRecomputation(const ModelSpec& model, ParallelPlan plan,
                                                    LayerCostCache& layers,
                                                    const PlanCostOptions& options) {
  RecomputeChoice out;
  plan.stage_recompute.clear();
  std::vector<PlanCost> uniform;  // by kRecomputes' order, lightest first
  for (int r = 0; r < kChoices; ++r) {
    plan.recompute = kRecomputes[r];
    absl::StatusOr<PlanCost> cost = CostPlan(model, plan, layers, options);
    if (!cost.ok()) return cost.status();
    ++out.costed;
    if (!cost->fits) {
      ++out.dropped;
    } else if (!out.best_uniform) {
      out.best_uniform = RankedPlan{plan, *cost, false};  // the lightest that fits
      if (r == 0) {
        out.pruned = kChoices - 1;
        out.best = out.best_uniform;
        return out;
      }
      // Every rank fits under this one, so no rank's lightest fitting choice is heavier:
      // the heavier uniform ones are never needed.
      uniform.push_back(*std::move(cost));
      out.pruned = kChoices - 1 - r;
      break;
    }
    uniform.push_back(*std::move(cost));
  }
  // Each rank's lightest recomputation that fits (its memory depends on nothing else).
  std::vector<Recompute> per_rank;
  for (int64_t s = 0; s < plan.pp; ++s) {
    int pick = 0;
    while (pick < kChoices && !uniform[pick].memory[s].fits) ++pick;
    if (pick == kChoices) return out;  // this rank does not fit even with full recomputation
    per_rank.push_back(kRecomputes[pick]);
  }
  SetStageRecompute(plan, per_rank);
  if (!plan.mixed_recompute()) {
    out.best = out.best_uniform;  // every rank's lightest is the same one
    return out;
  }
  absl::StatusOr<PlanCost> cost = CostPlan(model, plan, layers, options);
  if (!cost.ok()) return cost.status();
  ++out.costed;
  out.best = RankedPlan{plan, *std::move(cost), false};
  return out;
}

// The data-parallel schemes Megatron-LM runs: 0 plain, 1 its distributed optimizer, 3
// FSDP2 (only without pipelining). ZeRO 2 (gradients sharded) is none of them: its
// distributed optimizer keeps the whole gradient buffer. Sharding over dp x cp = 1
// changes nothing.
std::vector<int> ZeroStages(const ParallelPlan& p) {
  if (p.dp * p.cp == 1) return {0};
  if (p.pp > 1) return {0, 1};
  return {0, 1, 3};
}

// Keeps the `top` fastest plans; ties go to the smaller peak memory, then to the plan
// found first, so the ranking depends on nothing but the enumeration order.
class TopPlans {
 public:
  explicit TopPlans(int top) : top_(top) {}
  void Offer(RankedPlan plan) {
    Entry e{plan.cost.time.breakdown.total_s, plan.cost.peak_memory_bytes, next_++,
            std::move(plan)};
    heap_.push_back(std::move(e));
    std::push_heap(heap_.begin(), heap_.end(), Slower);
    if (static_cast<int>(heap_.size()) > top_) {
      std::pop_heap(heap_.begin(), heap_.end(), Slower);
      heap_.pop_back();
    }
  }
  // Whether a plan taking at least `seconds` could still enter the ranking.
  bool CouldEnter(double seconds) const {
    return static_cast<int>(heap_.size()) < top_ || seconds <= heap_.front().seconds;
  }
  std::vector<RankedPlan> Sorted() && {
    std::sort(heap_.begin(), heap_.end(), Slower);
    std::vector<RankedPlan> out;
    for (Entry& e : heap_) out.push_back(std::move(e.plan));
    return out;
  }

 private:
  struct Entry {
    double seconds;
    double peak_memory_bytes;
    int64_t order;
    RankedPlan plan;
  };
  // The heap's front is the slowest; among equally fast plans the one needing the most
  // memory (ZeRO stages often tie on time), then the last found.
  static bool Slower(const Entry& a, const Entry& b) {
    return std::tie(a.seconds, a.peak_memory_bytes, a.order) <
           std::tie(b.seconds, b.peak_memory_bytes, b.order);
  }
  int top_;
  int64_t next_ = 0;
  std::vector<Entry> heap_;
};

// A (tp, cp, pp, dp, micro-batch) group: the plans sharing one layer layout and stage size.
struct Group {
  int64_t tp, cp, pp, dp, micro_batch;
  ParallelPlan Base() const {
    ParallelPlan p;
    p.tp = tp;
    p.cp = cp;
    p.pp = pp;
    p.dp = dp;
    p.sequence_parallel = tp > 1;
    p.micro_batch = micro_batch;
    return p;
  }
};

std::vector<Group> EnumerateGroups(const ModelSpec& m, const PlanSearchOptions& o,
                                   int64_t gpus_per_node) {
  std::vector<int64_t> micro_batches;
  if (o.only_micro_batch > 0) {
    micro_batches.push_back(o.only_micro_batch);
  } else {
    for (int64_t mb = 1; mb <= o.max_micro_batch; mb *= 2) micro_batches.push_back(mb);
  }
  std::vector<Group> out;
  for (int64_t tp : Divisors(o.gpus)) {
    if (tp > gpus_per_node || m.heads % tp != 0 || m.ffn % tp != 0) continue;
    for (int64_t cp : Divisors(o.gpus / tp)) {
      if (cp > o.max_context_parallel) continue;
      // An unfused attention's scores need every key on the rank (layer_program.h).
      if (cp > 1 && m.attention == AttentionKind::kUnfused) continue;
      if (m.sequence % (cp * (tp > 1 ? tp : 1)) != 0) continue;
      for (int64_t pp : Divisors(o.gpus / (tp * cp))) {
        if (pp > m.layers) continue;
        const int64_t dp = o.gpus / (tp * cp * pp);
        for (int64_t mb : micro_batches) {
          if (m.global_batch % (mb * dp) != 0) continue;
          out.push_back({tp, cp, pp, dp, mb});
        }
      }
    }
  }
  return out;
}

// Measures every distinct layer program the groups need, on `threads` workers, so that
// the costing after only reads the cache. Returns the first error, in group order.
absl::Status MeasureLayers(const ModelSpec& m, const std::vector<Group>& groups, int threads,
                           LayerCostCache& layers) {
  std::vector<std::pair<LayerKind, LayerLayout>> keys;
  absl::flat_hash_set<std::tuple<int64_t, int64_t, int64_t>> seen;
  for (const Group& g : groups) {
    if (!seen.insert({g.tp, g.cp, g.micro_batch}).second) continue;
    const LayerLayout layout{g.tp, g.cp, g.tp > 1, g.micro_batch};
    keys.push_back({LayerKind::kTransformer, layout});
    keys.push_back({LayerKind::kHead, layout});
  }
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, std::min<int>(threads, static_cast<int>(keys.size())));
  std::vector<absl::Status> status(keys.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < keys.size(); i = next++) {
      absl::StatusOr<LayerCost> c = layers.Get(m, keys[i].first, keys[i].second);
      status[i] = c.status();
    }
  };
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) workers.emplace_back(work);
  work();
  for (std::thread& t : workers) t.join();
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// The lower bound of every plan in the group: the slowest rank's steady state alone.
double GroupBound(const ModelSpec& m, const Group& g, LayerCostCache& layers) {
  absl::StatusOr<LayerCost> layer =
      layers.Get(m, LayerKind::kTransformer, LayerLayout{g.tp, g.cp, g.tp > 1, g.micro_batch});
  if (!layer.ok()) return 0;
  const double microbatches = static_cast<double>(m.global_batch) / (g.micro_batch * g.dp);
  return microbatches * static_cast<double>(m.layers) / static_cast<double>(g.pp) *
         (layer->forward_s + layer->backward_s);
}

// The plans of a group before recomputation: every v and ZeRO stage with even stages.
std::vector<ParallelPlan> EvenGroupPlans(const ModelSpec& m, const Group& g,
                                         const PlanSearchOptions& o) {
  std::vector<ParallelPlan> out;
  const ParallelPlan base = g.Base();
  for (int64_t v : Divisors(m.layers / g.pp)) {
    if (v > o.max_virtual_stages || (v > 1 && g.pp == 1)) continue;
    ParallelPlan p = base;
    p.virtual_stages = v;
    for (int zero : ZeroStages(p)) {
      p.zero_stage = zero;
      if (CheckPlan(m, p).ok()) out.push_back(p);
    }
  }
  return out;
}

// With pp > 1 (v = 1), per ZeRO stage the fastest split of the layers over the ranks
// (stage_split.h: exact over every composition), when it is not the even one (costed by
// EvenGroupPlans) or pp does not divide the layers.
absl::StatusOr<std::vector<ParallelPlan>> UnevenGroupPlans(const ModelSpec& m, const Group& g,
                                                           LayerCostCache& layers,
                                                           const PlanCostOptions& options) {
  std::vector<ParallelPlan> out;
  if (g.pp < 2) return out;
  ParallelPlan p = g.Base();
  for (int zero : ZeroStages(p)) {
    p.zero_stage = zero;
    absl::StatusOr<std::optional<StageSplit>> split = BestStageSplit(m, p, layers, options);
    if (!split.ok()) return split.status();
    if (!split->has_value()) continue;  // no split fits
    const std::vector<int64_t>& counts = (*split)->layers;
    if (std::all_of(counts.begin(), counts.end(), [&](int64_t n) { return n == counts[0]; })) {
      continue;  // the even split
    }
    ParallelPlan uneven = p;
    uneven.stage_layers = counts;
    out.push_back(std::move(uneven));
  }
  return out;
}

}  // namespace

std::vector<ParallelPlan> StandardPlans(const ModelSpec& model, int64_t gpus,
                                        int64_t gpus_per_node, int64_t micro_batch) {
  std::vector<ParallelPlan> out;
  std::vector<int64_t> micro_batches = {1, 2};
  if (micro_batch > 0) micro_batches = {micro_batch};
  std::vector<int64_t> context = {1};
  if (model.sequence >= kRecipeContextParallelSequence &&
      model.attention != AttentionKind::kUnfused) {
    context.push_back(2);
  }
  for (int64_t tp = 1; tp <= std::min<int64_t>(8, gpus_per_node); tp *= 2) {
    for (int64_t cp : context) {
      if (gpus % (tp * cp) != 0) continue;
      for (int64_t pp : Divisors(gpus / (tp * cp))) {
        // Interleaving as the recipes use it: 1 to 4 layers per virtual stage.
        std::vector<int64_t> interleave = {1};
        if (pp > 1 && model.layers % pp == 0) {
          for (int64_t v : Divisors(model.layers / pp)) {
            const int64_t per_chunk = model.layers / (pp * v);
            if (v > 1 && per_chunk <= kRecipeMaxLayersPerVirtualStage) interleave.push_back(v);
          }
        }
        for (int64_t mb : micro_batches) {
          for (int64_t v : interleave) {
            ParallelPlan p;
            p.tp = tp;
            p.cp = cp;
            p.pp = pp;
            p.virtual_stages = v;
            p.dp = gpus / (tp * cp * pp);
            p.sequence_parallel = tp > 1;
            p.micro_batch = mb;
            p.zero_stage = p.dp * p.cp > 1 ? 1 : 0;
            if (CheckPlan(model, p).ok()) out.push_back(p);
          }
        }
      }
    }
  }
  return out;
}

absl::StatusOr<PlanSearchResult> SearchPlans(const ModelSpec& model,
                                             const PlanSearchOptions& options,
                                             LayerCostCache& layers) {
  const auto start = std::chrono::steady_clock::now();
  if (absl::Status s = Validate(model); !s.ok()) return s;
  if (options.gpus < 1) return absl::InvalidArgumentError("the plan search needs at least 1 GPU");
  if (options.gpus > kMaxPlanGpus) {
    return absl::InvalidArgumentError(absl::StrCat("the plan search takes at most ", kMaxPlanGpus,
                                                   " GPUs, not ", options.gpus));
  }
  if (options.top < 1) return absl::InvalidArgumentError("the plan search reports at least 1 plan");
  const int64_t gpus_per_node = std::max<int64_t>(1, layers.options().predict.gpus_per_node);
  const int64_t measured_before = layers.measured();

  PlanSearchResult result;
  TopPlans top(options.top);
  absl::flat_hash_set<std::string> standard_seen;

  // Costs `plan` with the best recomputation per rank (ChooseRecomputation) and offers
  // it. A standard setting is offered with its best uniform recomputation (Megatron-LM
  // takes one for every rank), and its per-rank best too when that is strictly faster.
  // Returns whether any fitted.
  auto try_plan = [&](const ParallelPlan& plan, bool standard) -> absl::StatusOr<bool> {
    absl::StatusOr<RecomputeChoice> choice = ChooseRecomputation(model, plan, layers, options.cost);
    if (!choice.ok()) return choice.status();
    result.costed += choice->costed;
    result.pruned_dominated += choice->pruned;
    result.dropped_memory += choice->dropped;
    if (!choice->best) return false;
    if (standard && choice->best_uniform) {
      RankedPlan uniform = *choice->best_uniform;
      uniform.standard = true;
      const double t = uniform.cost.time.breakdown.total_s;
      if (!result.best_standard || t < result.best_standard->cost.time.breakdown.total_s) {
        result.best_standard = uniform;
      }
      top.Offer(std::move(uniform));
      if (Seconds(choice->best->cost) < t) top.Offer(*std::move(choice->best));
      return true;
    }
    top.Offer(*std::move(choice->best));
    return true;
  };

  const std::vector<ParallelPlan> standard =
      StandardPlans(model, options.gpus, gpus_per_node, options.only_micro_batch);
  std::vector<Group> groups = EnumerateGroups(model, options, gpus_per_node);
  if (standard.empty() && groups.empty()) {
    // Nothing to cost at all: say which constraints leave no shape, not "nothing fits".
    return absl::InvalidArgumentError(absl::StrFormat(
        "no tp x cp x pp x dp shape of %d GPUs suits %s: tp must divide the heads (%d) and "
        "the FFN width (%d) within a node of %d GPUs, cp x tp must divide the sequence (%d), "
        "pp may not exceed the layers (%d), and dp x the micro-batch must divide the global "
        "batch (%d)",
        options.gpus, model.name, model.heads, model.ffn, gpus_per_node, model.sequence,
        model.layers, model.global_batch));
  }
  for (const ParallelPlan& p : standard) groups.push_back({p.tp, p.cp, p.pp, p.dp, p.micro_batch});
  if (absl::Status s = MeasureLayers(model, groups, options.threads, layers); !s.ok()) return s;
  groups.resize(groups.size() - standard.size());

  for (const ParallelPlan& p : standard) {
    standard_seen.insert(DescribePlan(p));
    ++result.standard_tried;
    if (absl::StatusOr<bool> fit = try_plan(p, /*standard=*/true); !fit.ok()) return fit.status();
  }

  // Cheapest groups first, so the bound prunes as early as it can.
  std::vector<std::pair<double, size_t>> order;
  for (size_t i = 0; i < groups.size(); ++i)
    order.push_back({GroupBound(model, groups[i], layers), i});
  std::sort(order.begin(), order.end());
  for (const auto& [bound, i] : order) {
    std::vector<ParallelPlan> plans = EvenGroupPlans(model, groups[i], options);
    if (!top.CouldEnter(bound)) {
      // The uneven plans (one per ZeRO stage) are counted without searching their split.
      const int64_t uneven = groups[i].pp > 1 ? ZeroStages(groups[i].Base()).size() : 0;
      result.pruned_bound += (static_cast<int64_t>(plans.size()) + uneven) * kChoices;
      continue;
    }
    absl::StatusOr<std::vector<ParallelPlan>> uneven =
        UnevenGroupPlans(model, groups[i], layers, options.cost);
    if (!uneven.ok()) return uneven.status();
    plans.insert(plans.end(), uneven->begin(), uneven->end());
    for (const ParallelPlan& p : plans) {
      if (standard_seen.contains(DescribePlan(p))) continue;
      if (absl::StatusOr<bool> fit = try_plan(p, /*standard=*/false); !fit.ok()) {
        return fit.status();
      }
    }
  }

  result.ranked = std::move(top).Sorted();
  result.layer_programs = layers.measured() - measured_before;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace commir::search::plan
