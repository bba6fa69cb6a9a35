#include "search/plan/stage_split.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "search/plan/memory_model.h"

namespace commir::search::plan {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr Recompute kLightestFirst[] = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};

// The scan of stage_split.h over one plan's ranks.
class SplitSearch {
 public:
  SplitSearch(const RankCoster& ranks, int64_t pp, int64_t layers, int64_t microbatches)
      : ranks_(ranks), p_(pp), layers_(layers), m_(static_cast<double>(microbatches)),
        most_(layers - (pp - 1)) {}

  // Per rank, the most layers each recomputation fits (memory grows with the layers),
  // and the per-micro-batch time of every count it can hold.
  absl::Status Prepare() {
    fit_.assign(p_, {0, 0, 0});
    limit_.assign(p_, 0);
    time_.assign(p_, {});
    dp_time_.assign(p_, {});
    for (int64_t s = 0; s < p_; ++s) {
      for (int r = 0; r < 3; ++r) {
        absl::StatusOr<int64_t> most = MostThatFit(s, kLightestFirst[r]);
        if (!most.ok()) return most.status();
        fit_[s][r] = *most;
        limit_[s] = std::max(limit_[s], *most);
      }
      time_[s].assign(limit_[s] + 1, 0);
      dp_time_[s].assign(limit_[s] + 1, std::nan(""));
      for (int64_t n = 1; n <= limit_[s]; ++n) {
        time_[s][n] = ranks_.MicrobatchSeconds(s, n, RecomputeFor(s, n));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<StageSplit>> Run() {
    int64_t room = 0;
    for (int64_t s = 0; s < p_; ++s) {
      if (limit_[s] < 1) return std::optional<StageSplit>();  // not even one layer fits
      room += limit_[s];
    }
    if (room < layers_) return std::optional<StageSplit>();
    // No split's ranks sum to less than every layer's forward + backward and the ends'.
    const LayerCost& layer = ranks_.layer();
    double sum_min = static_cast<double>(layers_ - p_) * (layer.forward_s + layer.backward_s);
    for (int64_t s = 0; s < p_; ++s) sum_min += ranks_.MicrobatchSeconds(s, 1, Recompute::kNone);
    sum_min *= 1 - 1e-12;  // rounding must not prune an equal plan's better twin

    std::vector<int64_t> cap(p_, 1);
    double t = 0;
    for (int64_t s = 0; s < p_; ++s) t = std::max(t, time_[s][1]);
    if (m_ <= 1) {
      cap = limit_;  // (m - 1) max T vanishes: only the widest caps matter
    } else {
      RaiseCaps(t, cap);
    }
    double t_first = -1;
    while (true) {
      int64_t admitted = 0;
      for (int64_t n : cap) admitted += n;
      if (admitted >= layers_) {
        if (t_first < 0) t_first = m_ <= 1 ? 0 : t;
        if (best_ && (m_ - 1) * t + sum_min >= best_->seconds) break;
        if (absl::Status s = Evaluate(cap, t_first); !s.ok()) return s;
      }
      if (m_ <= 1) break;
      double next = kInf;
      for (int64_t s = 0; s < p_; ++s) {
        if (cap[s] < limit_[s]) next = std::min(next, time_[s][cap[s] + 1]);
      }
      if (next == kInf) break;
      t = next;
      RaiseCaps(t, cap);
    }
    return best_;
  }

 private:
  absl::StatusOr<int64_t> MostThatFit(int64_t s, Recompute r) const {
    auto fits = [&](int64_t n) -> absl::StatusOr<bool> {
      absl::StatusOr<StageMemory> memory = ranks_.Memory(s, n, r);
      if (!memory.ok()) return memory.status();
      return memory->fits;
    };
    int64_t lo = 0, hi = most_;  // lo fits (0: vacuously), answer in [lo, hi]
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      absl::StatusOr<bool> ok = fits(mid);
      if (!ok.ok()) return ok.status();
      if (*ok) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }

  // The lightest recomputation under which rank s fits n layers (n <= limit_[s]).
  Recompute RecomputeFor(int64_t s, int64_t n) const {
    for (int r = 0; r < 3; ++r) {
      if (n <= fit_[s][r]) return kLightestFirst[r];
    }
    return Recompute::kFull;
  }

  void RaiseCaps(double t, std::vector<int64_t>& cap) const {
    for (int64_t s = 0; s < p_; ++s) {
      while (cap[s] < limit_[s] && time_[s][cap[s] + 1] <= t) ++cap[s];
    }
  }

  absl::StatusOr<double> DataParallel(int64_t s, int64_t n) {
    double& d = dp_time_[s][n];
    if (std::isnan(d)) {
      absl::StatusOr<double> got = ranks_.DataParallelTime(s, n, RecomputeFor(s, n));
      if (!got.ok()) return got.status();
      d = *got;
    }
    return d;
  }

  // The least sum of rank times over the splits within `cap` whose ranks expose less than
  // `d_cap` of data-parallel time (every D_s(n) up to the caps is known when d_cap is
  // finite); empty when there is none.
  std::vector<int64_t> LeastSum(const std::vector<int64_t>& cap, double d_cap) {
    std::vector<double> before(layers_ + 1, kInf), after(layers_ + 1);
    before[0] = 0;
    choice_.assign(p_, std::vector<int32_t>(layers_ + 1, 0));
    // Before rank s the first s ranks hold k layers: at most their caps' sum, and at least
    // what the other ranks' caps leave (a narrow band near the first feasible cap).
    std::vector<int64_t> rest(p_ + 1, 0);
    for (int64_t s = p_ - 1; s >= 0; --s) rest[s] = rest[s + 1] + cap[s];
    int64_t reach = 0;
    for (int64_t s = 0; s < p_; ++s) {
      const int64_t lo = std::max<int64_t>(0, layers_ - rest[s]);
      const int64_t hi = std::min(layers_ - 1, reach);
      reach += cap[s];
      std::fill(after.begin() + lo, after.begin() + std::min(layers_, reach) + 1, kInf);
      for (int64_t k = lo; k <= hi; ++k) {
        if (before[k] == kInf) continue;
        const int64_t most = std::min(cap[s], layers_ - k);
        const int64_t least = std::max<int64_t>(1, layers_ - rest[s + 1] - k);
        for (int64_t n = least; n <= most; ++n) {
          if (d_cap != kInf && !(dp_time_[s][n] < d_cap)) continue;
          const double v = before[k] + time_[s][n];
          if (v < after[k + n]) {
            after[k + n] = v;
            choice_[s][k + n] = static_cast<int32_t>(n);
          }
        }
      }
      std::swap(before, after);
    }
    if (before[layers_] == kInf) return {};
    std::vector<int64_t> split(p_);
    int64_t k = layers_;
    for (int64_t s = p_ - 1; s >= 0; --s) {
      split[s] = choice_[s][k];
      k -= split[s];
    }
    return split;
  }

  // The Pareto walk of stage_split.h at one cap on the slowest rank.
  absl::Status Evaluate(const std::vector<int64_t>& cap, double t_first) {
    double d_cap = kInf;
    while (true) {
      const std::vector<int64_t> split = LeastSum(cap, d_cap);
      if (split.empty()) break;
      double sum = 0, slowest = 0, exposed = 0;
      for (int64_t s = 0; s < p_; ++s) {
        sum += time_[s][split[s]];
        slowest = std::max(slowest, time_[s][split[s]]);
        absl::StatusOr<double> d = DataParallel(s, split[s]);
        if (!d.ok()) return d.status();
        exposed = std::max(exposed, *d);
      }
      const double seconds = (m_ - 1) * slowest + sum + exposed;
      if (!best_ || seconds < best_->seconds) best_ = StageSplit{split, seconds};
      // Later walks admit fewer splits: their sums are no smaller.
      if ((m_ - 1) * t_first + sum >= best_->seconds || exposed <= 0) break;
      if (d_cap == kInf) {  // the next walks read every admitted rank's D
        for (int64_t s = 0; s < p_; ++s) {
          for (int64_t n = 1; n <= cap[s]; ++n) {
            if (absl::StatusOr<double> d = DataParallel(s, n); !d.ok()) return d.status();
          }
        }
      }
      d_cap = exposed;
    }
    return absl::OkStatus();
  }

  const RankCoster& ranks_;
  const int64_t p_;
  const int64_t layers_;
  const double m_;
  const int64_t most_;  // the most layers one rank can hold: the others hold one each
  std::vector<std::array<int64_t, 3>> fit_;
  std::vector<int64_t> limit_;
  std::vector<std::vector<double>> time_;     // T_s(n)
  std::vector<std::vector<double>> dp_time_;  // D_s(n), NaN until needed
  std::vector<std::vector<int32_t>> choice_;
  std::optional<StageSplit> best_;
};

}  // namespace

absl::StatusOr<std::optional<StageSplit>> BestStageSplit(const ModelSpec& model,
                                                          const ParallelPlan& plan,
                                                          LayerCostCache& layers,
                                                          const PlanCostOptions& options) {
  if (plan.pp < 2 || plan.virtual_stages != 1 || plan.pp > model.layers) {
    return absl::InvalidArgumentError(
        "stage split: needs 2 .. layers pipeline ranks without interleaving");
  }
  absl::StatusOr<RankCoster> ranks = RankCoster::Create(model, plan, layers, options);
  if (!ranks.ok()) return ranks.status();
  SplitSearch search(*ranks, plan.pp, model.layers, Microbatches(model, plan));
  if (absl::Status s = search.Prepare(); !s.ok()) return s;
  return search.Run();
}

}  // namespace commir::search::plan
