#include "transforms/schedules/schedule_report.h"

#include "transforms/option_schema.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <optional>
#include <iostream>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "commir/op_cost.h"
#include "commir/liveness.h"
#include "transforms/loop_trip_count.h"

namespace commir::schedules {
namespace {

double Bytes(Type type) {
  if (!type.is_tensor()) return 0;
  return static_cast<double>(type.num_elements()) * ElementTypeByteWidth(type.element_type());
}

// What the program has executed so far. Counts are exact int64; bytes are doubles
// (exact below 2^53).
struct Counters {
  int64_t collectives = 0;
  int64_t shifts = 0;
  int64_t gemms = 0;
  int64_t attentions = 0;
  double bytes = 0;
  absl::flat_hash_map<int64_t, int64_t> shifts_per_stream;
  absl::flat_hash_map<int64_t, double> bytes_per_stream;
};

struct Buffer {
  double bytes = 0;
  int refs = 0;
  bool counted = false;
};

// The state of the simulation at the start of a loop iteration, as far as the iteration
// depends on it.
struct IterationStart {
  // The id of the first buffer the iteration creates (ids are sequential).
  int first_buffer = 0;
  // The carried buffers, up to renaming the ones the loop created recently.
  std::vector<int64_t> fingerprint;
  double live = 0;
  Counters counters;
};

// The starts of a loop's last iterations, to find where its iterations repeat.
//
// An iteration's effect (counts, buffers created and freed, the live bytes over time)
// is a function of the buffers it is handed: their sizes, reference counts and which
// of them alias. The index value never matters (shapes are static, and a stream given
// as a value counts as one stream). A carried buffer created by the loop within the
// last `MaxAge()` iterations is named by (age, position among the buffers its
// iteration created), any other by its id. When the start of iteration t equals the
// start of iteration t - p and of t - 2p (fingerprint and live bytes), the iterations
// from t - 2p on repeat with period p: the same counts per period, the same live bytes
// and peak in every period, and every buffer created in a period dies within MaxAge()
// iterations (one that lived longer would be named by its id and break the equality).
// So the middle periods can be counted without running them; the last Tail()
// iterations still run, because the buffers that end up returned (which the second
// simulation excludes from the peak) are created there.
class LoopHistory {
 public:
  LoopHistory(int first_buffer, int carried)
      : loop_first_buffer_(first_buffer), max_age_(carried + 2) {}

  int MaxAge() const { return max_age_; }
  // Buffers created while iterations repeat die within 2 * MaxAge() iterations.
  uint64_t Tail() const { return 2 * static_cast<uint64_t>(max_age_) + 2; }

  std::vector<int64_t> Fingerprint(const std::vector<int>& carried,
                                   const std::vector<Buffer>& buffers) const {
    std::vector<int64_t> f;
    f.reserve(carried.size() * 4);
    for (int id : carried) {
      f.push_back(buffers[id].refs);
      f.push_back(static_cast<int64_t>(buffers[id].bytes));
      // The newest iteration that created a buffer with an id at most `id`.
      int age = 0;
      for (int k = static_cast<int>(starts_.size()) - 1; k >= 0; --k) {
        if (starts_[k].first_buffer <= id) {
          age = static_cast<int>(starts_.size()) - k;
          if (age <= max_age_ && id >= loop_first_buffer_) {
            f.push_back(age);
            f.push_back(id - starts_[k].first_buffer);
          } else {
            age = 0;
          }
          break;
        }
      }
      if (age == 0) {
        f.push_back(-1);
        f.push_back(id);
      }
    }
    return f;
  }

  // The smallest period p such that `start` equals the starts p and 2p iterations ago.
  std::optional<int> FindPeriod(const IterationStart& start) const {
    int n = static_cast<int>(starts_.size());
    for (int p = 1; 2 * p <= n && p <= max_age_; ++p) {
      if (Same(start, starts_[n - p]) && Same(start, starts_[n - 2 * p])) return p;
    }
    return std::nullopt;
  }
  // The start of the iteration `period` iterations ago.
  const IterationStart& PeriodStart(int period) const {
    return starts_[starts_.size() - period];
  }

  void Push(IterationStart start) {
    starts_.push_back(std::move(start));
    if (starts_.size() > static_cast<size_t>(2 * max_age_ + 1)) starts_.pop_front();
  }

 private:
  static bool Same(const IterationStart& a, const IterationStart& b) {
    return a.fingerprint == b.fingerprint && a.live == b.live;
  }

  const int loop_first_buffer_;
  const int max_age_;
  std::deque<IterationStart> starts_;
};

// Executes the function's control flow once, per device (all devices run the same
// shapes), tracking buffers by reference count.
class Simulator {
 public:
  Simulator(const Function& function, const Liveness& liveness,
            const absl::flat_hash_set<int>& excluded, bool fast_forward)
      : function_(function), liveness_(liveness), excluded_(excluded), fast_forward_(fast_forward) {}

  void Run() {
    const Block& body = *function_.body();
    for (int i = 0; i < body.num_arguments(); ++i) {
      int id = NewBuffer(body.argument(i)->type());
      argument_buffers_.insert(id);
      Unaccount(id);
      binding_[body.argument(i)] = id;
    }
    returned_ = RunBlock(body);
    // Per-stream totals only grow, so the busiest stream at the end is the busiest ever.
    for (const auto& [stream, n] : counters_.shifts_per_stream) {
      stats_.ring_steps = std::max(stats_.ring_steps, n);
    }
    for (const auto& [stream, b] : counters_.bytes_per_stream) {
      stats_.ring_bytes = std::max(stats_.ring_bytes, b);
    }
    stats_.collectives = counters_.collectives;
    stats_.shifts = counters_.shifts;
    stats_.gemms = counters_.gemms;
    stats_.attentions = counters_.attentions;
    stats_.bytes_per_device = counters_.bytes;
    stats_.overflow_at = overflow_at_;
  }

  const ScheduleStats& stats() const { return stats_; }
  const std::vector<int>& returned() const { return returned_; }

 private:
  int NewBuffer(Type type) {
    int id = static_cast<int>(buffers_.size());
    Buffer b;
    b.bytes = Bytes(type);
    b.refs = 1;
    b.counted = !excluded_.contains(id);
    buffers_.push_back(b);
    if (b.counted) live_ += b.bytes;
    return id;
  }
  void Unaccount(int id) {
    if (buffers_[id].counted) live_ -= buffers_[id].bytes;
    buffers_[id].counted = false;
  }
  void Acquire(int id) { ++buffers_[id].refs; }
  void Release(int id) {
    if (--buffers_[id].refs == 0 && buffers_[id].counted) live_ -= buffers_[id].bytes;
  }
  void Peak() {
    stats_.peak_extra_bytes = std::max(stats_.peak_extra_bytes, live_);
  }

  // Releases the values whose last use is `op`. At a terminator that includes the values
  // the block hands to its runner: the buffers passed on were acquired before, and the
  // arguments nothing reads were released when the block started (no longer bound).
  void ReleaseDying(const Operation* op) {
    auto release = [&](absl::Span<const Value* const> values) {
      for (const Value* v : values) {
        auto it = binding_.find(v);
        if (it == binding_.end()) continue;
        Release(it->second);
        binding_.erase(it);
      }
    };
    release(liveness_.DeadAfter(*op));
    if (op->def().Has(kTerminator)) release(liveness_.ReleasedByOwner(*op->parent_block()));
  }

  // Whether `op` (not a terminator) is the last use of `v`.
  bool DiesAt(const Value* v, const Operation* op) const {
    absl::Span<const Value* const> d = liveness_.DeadAfter(*op);
    return std::find(d.begin(), d.end(), v) != d.end();
  }

  void Count(const Operation& op) {
    if (op.Is(OpKind::kMatmul)) ++counters_.gemms;
    if (op.Is(OpKind::kAttention) || op.Is(OpKind::kAttentionGrad)) ++counters_.attentions;
    if (!op.def().Has(kCollective)) return;
    if (op.Is(OpKind::kShift)) {
      ++counters_.shifts;
    } else {
      ++counters_.collectives;
    }
    double bytes = EstimateOpCost(op, function_).bytes_communicated;
    counters_.bytes += bytes;
    if (op.Is(OpKind::kShift)) {
      // A stream given as an index value is one stream (-1) whatever its value: the
      // simulation never depends on the loop index.
      int64_t stream = op.stream_operand() != nullptr ? -1 : op.attrs().GetInt("stream", 0);
      ++counters_.shifts_per_stream[stream];
      counters_.bytes_per_stream[stream] += bytes;
    }
  }

  // Runs `block`; for a loop body returns the buffers its yield passes on (acquired).
  std::vector<int> RunBlock(const Block& block) {
    // Arguments that nothing reads die at once.
    if (!block.empty()) {
      for (int i = 0; i < block.num_arguments(); ++i) {
        const Value* a = block.argument(i);
        if (a->use_empty() && binding_.contains(a)) {
          Release(binding_[a]);
          binding_.erase(a);
        }
      }
    }
    std::vector<int> passed;
    for (const Operation* op : block) {
      if (op->Is(OpKind::kYield) || op->Is(OpKind::kReturn)) {
        for (const Value* v : op->operands()) {
          int id = binding_.at(v);
          Acquire(id);
          passed.push_back(id);
        }
        ReleaseDying(op);
        continue;
      }
      if (op->Is(OpKind::kFor)) {
        RunLoop(*op);
      } else {
        Count(*op);
        for (int r = 0; r < op->num_results(); ++r) {
          const Value* result = op->result(r);
          if (op->Is(OpKind::kReshape)) {
            int id = binding_.at(op->operand(0));
            Acquire(id);
            binding_[result] = id;
          } else if (op->Is(OpKind::kDynamicUpdateSlice) && DiesAt(op->operand(0), op) &&
                     buffers_[binding_.at(op->operand(0))].refs == 1) {
            int id = binding_.at(op->operand(0));
            Acquire(id);  // in place: the operand's reference goes with ReleaseDying
            binding_[result] = id;
          } else {
            binding_[result] = NewBuffer(result->type());
          }
        }
      }
      Peak();
      ReleaseDying(op);
    }
    return passed;
  }

  void RunLoop(const Operation& loop) {
    const Block& body = *loop.region(0);
    std::vector<int> carried;
    for (const Value* init : loop.operands()) {
      int id = binding_.at(init);
      Acquire(id);
      carried.push_back(id);
    }
    // An init value that nothing reads after the loop, nor inside it, is handed to the
    // loop (so that the body may update it in place).
    for (const Value* init : loop.operands()) {
      bool handed_over = DiesAt(init, &loop) && binding_.contains(init);
      for (const Operation* user : init->users()) handed_over &= user == &loop;
      if (handed_over) {
        Release(binding_.at(init));
        binding_.erase(init);
      }
    }
    const uint64_t trips = LoopTripCount(loop);
    LoopHistory history(static_cast<int>(buffers_.size()), static_cast<int>(carried.size()));
    bool fast_forwarded = !fast_forward_;
    for (uint64_t t = 0; t < trips; ++t) {
      if (!fast_forwarded) {
        IterationStart start{static_cast<int>(buffers_.size()), history.Fingerprint(carried, buffers_),
                             live_, counters_};
        if (std::optional<int> period = history.FindPeriod(start)) {
          // Iterations repeat with this period from here on (up to renaming the buffers
          // they create). Keep `Tail()` iterations, plus a partial period, to run at the
          // end, where the buffers that end up returned are created.
          uint64_t remaining = trips - t;
          uint64_t p = static_cast<uint64_t>(*period);
          if (remaining > history.Tail() + p) {
            uint64_t periods = (remaining - history.Tail()) / p;
            AddPeriods(history.PeriodStart(*period).counters, periods, loop);
            t += periods * p;
            fast_forwarded = true;
          }
        }
        if (!fast_forwarded) history.Push(std::move(start));
      }
      binding_[body.argument(0)] = NewBuffer(Type::Index());
      for (size_t c = 0; c < carried.size(); ++c) {
        binding_[body.argument(static_cast<int>(c) + 1)] = carried[c];
      }
      carried = RunBlock(body);
      // Whatever the body did not release (an argument it never read) goes now.
      for (int i = 0; i < body.num_arguments(); ++i) {
        auto it = binding_.find(body.argument(i));
        if (it != binding_.end()) {
          Release(it->second);
          binding_.erase(it);
        }
      }
    }
    for (int r = 0; r < loop.num_results(); ++r) binding_[loop.result(r)] = carried[r];
  }

  // counters_ += periods * (counters_ - period_start), checked.
  void AddPeriods(const Counters& period_start, uint64_t periods, const Operation& loop) {
    auto add = [&](int64_t& total, int64_t before) {
      std::optional<int64_t> extra = CheckedMultiply(total - before, periods);
      std::optional<int64_t> sum = extra.has_value() ? CheckedAdd(total, *extra) : std::nullopt;
      if (!sum.has_value()) {
        if (overflow_at_ == nullptr) overflow_at_ = &loop;
        return;
      }
      total = *sum;
    };
    auto add_bytes = [&](double& total, double before) {
      total += static_cast<double>(periods) * (total - before);
    };
    add(counters_.collectives, period_start.collectives);
    add(counters_.shifts, period_start.shifts);
    add(counters_.gemms, period_start.gemms);
    add(counters_.attentions, period_start.attentions);
    add_bytes(counters_.bytes, period_start.bytes);
    for (auto& [stream, n] : counters_.shifts_per_stream) {
      auto it = period_start.shifts_per_stream.find(stream);
      add(n, it == period_start.shifts_per_stream.end() ? 0 : it->second);
    }
    for (auto& [stream, b] : counters_.bytes_per_stream) {
      auto it = period_start.bytes_per_stream.find(stream);
      add_bytes(b, it == period_start.bytes_per_stream.end() ? 0 : it->second);
    }
  }

  // The buffers the function's return passes.
  std::vector<int> returned_;
  const Function& function_;
  const Liveness& liveness_;
  const absl::flat_hash_set<int>& excluded_;
  std::vector<Buffer> buffers_;
  absl::flat_hash_set<int> argument_buffers_;
  absl::flat_hash_map<const Value*, int> binding_;
  double live_ = 0;
  const bool fast_forward_;
  Counters counters_;
  const Operation* overflow_at_ = nullptr;
  ScheduleStats stats_;
};

}  // namespace

ScheduleStats ComputeScheduleStats(const Function& function, LoopSimulation loops) {
  if (!function.is_spmd()) return {};
  bool fast_forward = loops == LoopSimulation::kFastForward;
  // First run: which buffers end up returned. Second run: the peak without them (the
  // simulation is deterministic, so buffer ids agree).
  const Liveness liveness(function);
  absl::flat_hash_set<int> none;
  Simulator first(function, liveness, none, fast_forward);
  first.Run();
  absl::flat_hash_set<int> excluded(first.returned().begin(), first.returned().end());
  Simulator second(function, liveness, excluded, fast_forward);
  second.Run();
  return second.stats();
}

namespace {

std::string FormatFunctionLine(const Function& function, const ScheduleStats& s) {
  if (!function.is_spmd()) {
    return absl::StrFormat("// schedule-report @%s: global function, nothing scheduled\n",
                           function.name());
  }
  if (s.overflow_at != nullptr) {
    // The counts stopped short of the overflow: printing them would be a wrong figure.
    return absl::StrFormat(
        "// schedule-report @%s: counts do not fit in int64 (the loop at %d:%d)\n",
        function.name(), s.overflow_at->loc().line, s.overflow_at->loc().col);
  }
  return absl::StrFormat(
      "// schedule-report @%s: collectives %d  shifts %d  ring-steps %d  ring-bytes %.0f  "
      "gemms %d  attentions %d  bytes/device %.0f  peak-extra/device %.0f\n",
      function.name(), s.collectives, s.shifts, s.ring_steps, std::round(s.ring_bytes), s.gemms,
      s.attentions, std::round(s.bytes_per_device), std::round(s.peak_extra_bytes));
}

}  // namespace

std::string FormatScheduleReport(const Module& module) {
  std::string out;
  for (const Function* function : module.functions()) {
    out += FormatFunctionLine(*function, ComputeScheduleStats(*function));
  }
  return out;
}

const PassInfo& ScheduleReportPass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<ScheduleReportPass>(
      "schedule-report",
      "Print to stderr, per spmd function, the steps executed, bytes sent and peak extra "
      "memory per device"));
  return *info;
}

absl::Status ScheduleReportPass::Run(Module& module) {
  // Counts beyond int64 are an error rather than a wrapped or saturated number
  // (docs/format-decisions.md). Each function is simulated once, for both.
  absl::Status status;
  std::string report;
  for (const Function* function : module.functions()) {
    ScheduleStats stats = ComputeScheduleStats(*function);
    report += FormatFunctionLine(*function, stats);
    if (stats.overflow_at == nullptr) continue;
    std::string message = absl::StrFormat(
        "the ops of @%s execute more than %d times here: the count does not fit in int64",
        function->name(), std::numeric_limits<int64_t>::max());
    diagnostics().Error(stats.overflow_at->loc(), message);
    status = absl::FailedPreconditionError(absl::StrCat("schedule-report: ", message));
  }
  if (!status.ok()) return status;
  Emit(report);
  return absl::OkStatus();
}

}  // namespace commir::schedules
