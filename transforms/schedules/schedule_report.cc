#include "transforms/schedules/schedule_report.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/str_format.h"
#include "commir/op_cost.h"

namespace commir::schedules {
namespace {

int64_t TripCount(const Operation& loop) {
  int64_t lower = loop.attrs().GetInt("lower", 0);
  int64_t upper = loop.attrs().GetInt("upper", 0);
  int64_t step = loop.attrs().GetInt("step", 1);
  if (step <= 0 || upper <= lower) return 0;
  return (upper - lower + step - 1) / step;
}

double Bytes(Type type) {
  if (!type.is_tensor()) return 0;
  return static_cast<double>(type.num_elements()) * ElementTypeByteWidth(type.element_type());
}

// Executes the function's control flow once, per device (all devices run the same
// shapes), tracking buffers by reference count.
class Simulator {
 public:
  Simulator(const Function& function, const absl::flat_hash_set<int>& excluded)
      : function_(function), excluded_(excluded) {}

  void Run() {
    const Block& body = *function_.body();
    Prepare(body);
    for (int i = 0; i < body.num_arguments(); ++i) {
      int id = NewBuffer(body.argument(i)->type());
      argument_buffers_.insert(id);
      Unaccount(id);
      binding_[body.argument(i)] = id;
    }
    returned_ = RunBlock(body);
  }

  const ScheduleStats& stats() const { return stats_; }
  const std::vector<int>& returned() const { return returned_; }

 private:
  struct Buffer {
    double bytes = 0;
    int refs = 0;
    bool counted = false;
  };

  // For each op position of `block`, the values of the block whose last use it is.
  void Prepare(const Block& block) {
    absl::flat_hash_map<const Operation*, int> position;
    int p = 0;
    for (const Operation* op : block) position[op] = p++;
    auto& dying = dying_[&block];
    dying.assign(p + 1, {});
    auto last_use = [&](const Value* v, int def_position) {
      int last = def_position;
      for (const Operation* user : v->users()) {
        const Operation* a = user;
        while (a != nullptr && a->parent_block() != &block) a = a->parent_op();
        if (a != nullptr) last = std::max(last, position.at(a));
      }
      return last;
    };
    for (int i = 0; i < block.num_arguments(); ++i) {
      dying[std::max(0, last_use(block.argument(i), 0))].push_back(block.argument(i));
    }
    for (const Operation* op : block) {
      for (const Value* r : op->results()) dying[last_use(r, position.at(op))].push_back(r);
      for (int i = 0; i < op->num_regions(); ++i) Prepare(*op->region(i));
    }
    for (const Operation* op : block) dies_at_[op] = &dying[position.at(op)];
  }

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
  void Peak() { stats_.peak_extra_bytes = std::max(stats_.peak_extra_bytes, live_); }

  void ReleaseDying(const Operation* op) {
    for (const Value* v : *dies_at_.at(op)) {
      auto it = binding_.find(v);
      if (it == binding_.end()) continue;
      Release(it->second);
      binding_.erase(it);
    }
  }

  bool DiesAt(const Value* v, const Operation* op) const {
    const std::vector<const Value*>& d = *dies_at_.at(op);
    return std::find(d.begin(), d.end(), v) != d.end();
  }

  void Count(const Operation& op) {
    if (op.Is(OpKind::kMatmul)) ++stats_.gemms;
    if (op.Is(OpKind::kAttention)) ++stats_.attentions;
    if (!op.def().Has(kCollective)) return;
    if (op.Is(OpKind::kShift)) {
      ++stats_.shifts;
    } else {
      ++stats_.collectives;
    }
    double bytes = EstimateOpCost(op, function_).bytes_communicated;
    stats_.bytes_per_device += bytes;
    if (op.Is(OpKind::kShift)) {
      int64_t stream = op.stream_operand() != nullptr ? -1 : op.attrs().GetInt("stream", 0);
      stats_.ring_steps = std::max(stats_.ring_steps, ++shifts_per_stream_[stream]);
      stats_.ring_bytes = std::max(stats_.ring_bytes, bytes_per_stream_[stream] += bytes);
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
    int64_t trips = TripCount(loop);
    for (int64_t t = 0; t < trips; ++t) {
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

  // The buffers the function's return passes.
  std::vector<int> returned_;
  const Function& function_;
  const absl::flat_hash_set<int>& excluded_;
  std::vector<Buffer> buffers_;
  absl::flat_hash_set<int> argument_buffers_;
  absl::flat_hash_map<const Value*, int> binding_;
  // Node-based: dies_at_ points into the vectors while nested blocks are added.
  absl::node_hash_map<const Block*, std::vector<std::vector<const Value*>>> dying_;
  absl::flat_hash_map<const Operation*, std::vector<const Value*>*> dies_at_;
  double live_ = 0;
  absl::flat_hash_map<int64_t, int64_t> shifts_per_stream_;
  absl::flat_hash_map<int64_t, double> bytes_per_stream_;
  ScheduleStats stats_;
};

}  // namespace

ScheduleStats ComputeScheduleStats(const Function& function) {
  if (!function.is_spmd()) return {};
  // First run: which buffers end up returned. Second run: the peak without them (the
  // simulation is deterministic, so buffer ids agree).
  absl::flat_hash_set<int> none;
  Simulator first(function, none);
  first.Run();
  absl::flat_hash_set<int> excluded(first.returned().begin(), first.returned().end());
  Simulator second(function, excluded);
  second.Run();
  return second.stats();
}

std::string FormatScheduleReport(const Module& module) {
  std::string out;
  for (const Function* function : module.functions()) {
    if (!function->is_spmd()) {
      absl::StrAppendFormat(&out, "// schedule-report @%s: global function, nothing scheduled\n",
                            function->name());
      continue;
    }
    ScheduleStats s = ComputeScheduleStats(*function);
    absl::StrAppendFormat(
        &out,
        "// schedule-report @%s: collectives %d  shifts %d  ring-steps %d  ring-bytes %.0f  "
        "gemms %d  attentions %d  bytes/device %.0f  peak-extra/device %.0f\n",
        function->name(), s.collectives, s.shifts, s.ring_steps, std::round(s.ring_bytes),
        s.gemms, s.attentions, std::round(s.bytes_per_device), std::round(s.peak_extra_bytes));
  }
  return out;
}

absl::Status ScheduleReportPass::Run(Module& module) {
  std::ostream& out = out_ != nullptr ? *out_ : std::cerr;
  out << FormatScheduleReport(module);
  out.flush();
  return absl::OkStatus();
}

}  // namespace commir::schedules
