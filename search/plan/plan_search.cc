#include "search/plan/plan_search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace commir::search::plan {
namespace {

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

constexpr Recompute kRecomputes[] = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};

// The ZeRO stages worth trying: sharding over dp x cp = 1 changes nothing, and
// Megatron-LM runs ZeRO 3 (FSDP2) only without pipelining.
std::vector<int> ZeroStages(const ParallelPlan& p) {
  if (p.dp * p.cp == 1) return {0};
  if (p.pp > 1) return {0, 1, 2};
  return {0, 1, 2, 3};
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

// The plans of a group before recomputation: every v and ZeRO stage.
std::vector<ParallelPlan> GroupPlans(const ModelSpec& m, const Group& g,
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
  if (g.pp < 2) return out;
  // Uneven stages: first and last ranks of e - kUnevenSlack .. e layers, the others
  // even (an all-even split is tried above).
  const int64_t e = (m.layers + g.pp - 1) / g.pp;
  for (int64_t first = std::max<int64_t>(1, e - kUnevenSlack); first <= e; ++first) {
    for (int64_t last = std::max<int64_t>(1, e - kUnevenSlack); last <= e; ++last) {
      ParallelPlan p = base;
      p.first_stage_layers = first;
      p.last_stage_layers = last;
      if (!CheckPlan(m, p).ok()) continue;
      const std::vector<int64_t> layers = LayersPerStage(m, p);
      if (std::all_of(layers.begin(), layers.end(), [&](int64_t n) { return n == layers[0]; })) {
        continue;  // the even split
      }
      for (int zero : ZeroStages(p)) {
        p.zero_stage = zero;
        out.push_back(p);
      }
    }
  }
  return out;
}

}  // namespace

std::vector<ParallelPlan> StandardPlans(const ModelSpec& model, int64_t gpus,
                                        int64_t gpus_per_node, int64_t micro_batch) {
  std::vector<ParallelPlan> out;
  for (int64_t tp = 1; tp <= std::min<int64_t>(8, gpus_per_node); tp *= 2) {
    if (gpus % tp != 0) continue;
    for (int64_t pp : Divisors(gpus / tp)) {
      ParallelPlan p;
      p.tp = tp;
      p.pp = pp;
      p.dp = gpus / (tp * pp);
      p.sequence_parallel = tp > 1;
      p.micro_batch = micro_batch;
      p.zero_stage = p.dp > 1 ? 1 : 0;
      if (CheckPlan(model, p).ok()) out.push_back(p);
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
  if (options.top < 1) return absl::InvalidArgumentError("the plan search reports at least 1 plan");
  const int64_t gpus_per_node = std::max<int64_t>(1, layers.options().predict.gpus_per_node);
  const int64_t measured_before = layers.measured();

  PlanSearchResult result;
  TopPlans top(options.top);
  absl::flat_hash_set<std::string> standard_seen;

  // Costs `plan` under each recomputation, lightest first, until one fits. Returns
  // whether one did.
  auto try_plan = [&](ParallelPlan plan, bool standard) -> absl::StatusOr<bool> {
    for (size_t r = 0; r < std::size(kRecomputes); ++r) {
      plan.recompute = kRecomputes[r];
      absl::StatusOr<PlanCost> cost = CostPlan(model, plan, layers, options.cost);
      if (!cost.ok()) return cost.status();
      ++result.costed;
      if (!cost->fits) {
        ++result.dropped_memory;
        continue;
      }
      result.pruned_dominated += static_cast<int64_t>(std::size(kRecomputes) - r - 1);
      RankedPlan ranked{plan, *std::move(cost), standard};
      if (standard) {
        const double t = ranked.cost.time.breakdown.total_s;
        if (!result.best_standard || t < result.best_standard->cost.time.breakdown.total_s) {
          result.best_standard = ranked;
        }
      }
      top.Offer(std::move(ranked));
      return true;
    }
    return false;
  };

  const std::vector<ParallelPlan> standard = StandardPlans(
      model, options.gpus, gpus_per_node, std::max<int64_t>(1, options.only_micro_batch));
  std::vector<Group> groups = EnumerateGroups(model, options, gpus_per_node);
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
    std::vector<ParallelPlan> plans = GroupPlans(model, groups[i], options);
    if (!top.CouldEnter(bound)) {
      result.pruned_bound += static_cast<int64_t>(plans.size() * std::size(kRecomputes));
      continue;
    }
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
