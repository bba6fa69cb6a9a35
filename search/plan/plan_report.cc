#include "search/plan/plan_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "search/plan/megatron_args.h"
#include "transforms/pipeline.h"

namespace commir::search::plan {
namespace {

// A layer schedule as the report shows it: "plain" for plain collectives.
std::string ScheduleName(const Pipeline& schedule) {
  return schedule.empty() ? "plain" : schedule.ToString();
}

std::string Ms(double seconds) { return absl::StrFormat("%.1f ms", seconds * 1e3); }
std::string Gb(double bytes) { return absl::StrFormat("%.2f", bytes / 1e9); }

std::string Counts(const PlanSearchResult& r) {
  return absl::StrCat(
      r.costed, " plans costed (", r.standard_tried, " standard settings, as published recipes), ",
      r.dropped_memory, " dropped (do not fit in HBM), ", r.pruned_dominated + r.pruned_bound,
      " pruned (", r.pruned_dominated, " by a lighter recomputation that fits, ", r.pruned_bound,
      " by the time bound); ", r.layer_programs, " layer programs measured");
}

void AppendScenarioTable(const ModelSpec& model, int64_t gpus, const PlanScenario& s,
                         std::string& out) {
  const PlanSearchResult& r = s.result;
  absl::StrAppendFormat(&out, "== %s on %d x %s (%d GPUs per node, %s GB HBM) ==\n", model.name,
                        gpus, s.label, s.gpus_per_node, Gb(s.hbm_bytes));
  absl::StrAppend(&out, Counts(r), "\n");
  if (r.ranked.empty()) {
    absl::StrAppend(&out, "no plan fits\n");
    return;
  }
  absl::StrAppendFormat(&out, "\n%4s  %-58s %11s %11s %6s %11s %11s %11s %11s %8s  %s\n", "rank",
                        "plan (* standard setting)", "time/iter", "tokens/s", "MFU", "compute",
                        "exp. comm", "bubble", "recompute", "peak GB", "layer schedule");
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const RankedPlan& p = r.ranked[i];
    const TimeBreakdown& b = p.cost.time.breakdown;
    absl::StrAppendFormat(
        &out, "%4d  %-58s %11s %11.0f %5.1f%% %11s %11s %11s %11s %8s  %s\n", i + 1,
        absl::StrCat(p.standard ? "* " : "  ", DescribePlan(p.plan)), Ms(b.total_s),
        p.cost.tokens_per_second, 100 * p.cost.model_flops_utilization, Ms(b.compute_s),
        Ms(b.exposed_comm_s), Ms(b.bubble_s), Ms(b.recompute_s), Gb(p.cost.peak_memory_bytes),
        ScheduleName(p.cost.layer_schedule));
  }
  const RankedPlan& best = r.ranked.front();
  const double best_s = best.cost.time.breakdown.total_s;
  if (r.best_standard) {
    const double standard_s = r.best_standard->cost.time.breakdown.total_s;
    absl::StrAppendFormat(&out,
                          "\nbest standard setting (Megatron-LM/NeMo recipes' micro-batch, "
                          "interleaving, recomputation): %s, %s, MFU %.1f%% (plan 1: %.2fx)\n",
                          DescribePlan(r.best_standard->plan), Ms(standard_s),
                          100 * r.best_standard->cost.model_flops_utilization,
                          best_s > 0 ? standard_s / best_s : 0.0);
  } else {
    absl::StrAppend(&out, "\nno standard setting fits\n");
  }
  absl::StrAppend(&out, "\nzero=0 plain data parallelism, zero=1 Megatron-LM's distributed "
                       "optimizer (--use-distributed-optimizer), zero=3 FSDP2\n");
  absl::StrAppend(&out, "\nplan 1, memory per pipeline stage (GB, per GPU; headroom: CUDA "
                       "context, NCCL buffers, allocator fragmentation):\n");
  absl::StrAppendFormat(&out, "%5s %9s %9s %9s %11s %9s %9s %9s  %s\n", "stage", "weights",
                        "grads", "optimizer", "activations", "total", "headroom", "in flight",
                        "recompute");
  for (size_t i = 0; i < best.cost.memory.size(); ++i) {
    const StageMemory& m = best.cost.memory[i];
    absl::StrAppendFormat(&out, "%5d %9s %9s %9s %11s %9s %9s %9.2f  %s\n", i, Gb(m.weights),
                          Gb(m.gradients), Gb(m.optimizer), Gb(m.activations), Gb(m.total),
                          Gb(m.headroom), m.in_flight_microbatches,
                          RecomputeName(best.plan.RecomputeOf(static_cast<int64_t>(i))));
  }
  absl::StatusOr<MegatronArgs> args =
      ToMegatronArgs(model, best.plan, best.cost.layer_schedule, best.cost.head_schedule);
  absl::StrAppend(&out, "\nplan 1 as Megatron-LM arguments:\n",
                  args.ok() ? FormatMegatronArgs(*args) : std::string(args.status().message()),
                  "\n");
}

nlohmann::ordered_json PlanJson(const ModelSpec& model, const RankedPlan& p) {
  nlohmann::ordered_json j;
  j["plan"] = DescribePlan(p.plan);
  j["standard"] = p.standard;
  j["tp"] = p.plan.tp;
  j["cp"] = p.plan.cp;
  j["pp"] = p.plan.pp;
  j["virtual_stages"] = p.plan.virtual_stages;
  j["dp"] = p.plan.dp;
  j["sequence_parallel"] = p.plan.sequence_parallel;
  j["micro_batch"] = p.plan.micro_batch;
  j["zero_stage"] = p.plan.zero_stage;
  j["data_parallel"] = p.plan.zero_stage == 1   ? "distributed optimizer"
                       : p.plan.zero_stage == 3 ? "fsdp2"
                       : p.plan.zero_stage == 0 ? "plain"
                                                : "zero2";
  j["recompute"] = std::string(RecomputeName(p.plan.HeaviestRecompute()));  // the heaviest rank's
  const TimeBreakdown& b = p.cost.time.breakdown;
  j["iteration_s"] = b.total_s;
  j["tokens_per_second"] = p.cost.tokens_per_second;
  j["mfu"] = p.cost.model_flops_utilization;
  j["breakdown"] = {{"compute_s", b.compute_s},
                    {"exposed_comm_s", b.exposed_comm_s},
                    {"bubble_s", b.bubble_s},
                    {"recompute_s", b.recompute_s}};
  j["peak_memory_bytes"] = p.cost.peak_memory_bytes;
  j["layer_schedule"] = ScheduleName(p.cost.layer_schedule);
  j["head_schedule"] = ScheduleName(p.cost.head_schedule);
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (size_t i = 0; i < p.cost.memory.size(); ++i) {
    const StageMemory& m = p.cost.memory[i];
    stages.push_back(
        {{"recompute", std::string(RecomputeName(p.plan.RecomputeOf(static_cast<int64_t>(i))))},
         {"weights", m.weights},
         {"gradients", m.gradients},
         {"optimizer", m.optimizer},
         {"activations", m.activations},
         {"total", m.total},
         {"headroom", m.headroom}});
  }
  j["memory_per_stage"] = std::move(stages);
  absl::StatusOr<MegatronArgs> args =
      ToMegatronArgs(model, p.plan, p.cost.layer_schedule, p.cost.head_schedule);
  if (args.ok()) {
    j["megatron_args"] = args->args;
    j["megatron_notes"] = args->notes;
  } else {
    j["megatron_error"] = std::string(args.status().message());
  }
  return j;
}

}  // namespace

std::string FormatPlanTable(const ModelSpec& model, int64_t gpus,
                            const std::vector<PlanScenario>& scenarios) {
  std::string out;
  for (size_t i = 0; i < scenarios.size(); ++i) {
    if (i > 0) out += "\n";
    AppendScenarioTable(model, gpus, scenarios[i], out);
  }
  if (scenarios.size() > 1) {
    absl::StrAppendFormat(
        &out, "\n== hardware what-if: the best plan on each ==\n%-36s %-58s %11s %11s %6s\n",
        "cluster", "plan", "time/iter", "tokens/s", "MFU");
    for (const PlanScenario& s : scenarios) {
      if (s.result.ranked.empty()) {
        absl::StrAppendFormat(&out, "%-36s %-58s\n", s.label, "no plan fits");
        continue;
      }
      const RankedPlan& p = s.result.ranked.front();
      absl::StrAppendFormat(&out, "%-36s %-58s %11s %11.0f %5.1f%%\n", s.label,
                            DescribePlan(p.plan), Ms(p.cost.time.breakdown.total_s),
                            p.cost.tokens_per_second, 100 * p.cost.model_flops_utilization);
    }
  }
  return out;
}

std::string FormatPlanJson(const ModelSpec& model, int64_t gpus,
                           const std::vector<PlanScenario>& scenarios) {
  nlohmann::ordered_json j;
  j["model"] = FormatModelSpec(model);
  j["gpus"] = gpus;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const PlanScenario& s : scenarios) {
    const PlanSearchResult& r = s.result;
    nlohmann::ordered_json sj;
    sj["hardware"] = s.label;
    sj["gpus_per_node"] = s.gpus_per_node;
    sj["hbm_bytes"] = s.hbm_bytes;
    sj["costed"] = r.costed;
    sj["standard_tried"] = r.standard_tried;
    sj["dropped_memory"] = r.dropped_memory;
    sj["pruned_dominated"] = r.pruned_dominated;
    sj["pruned_bound"] = r.pruned_bound;
    sj["layer_programs"] = r.layer_programs;
    sj["best_standard"] = r.best_standard ? PlanJson(model, *r.best_standard) : nullptr;
    nlohmann::ordered_json plans = nlohmann::ordered_json::array();
    for (const RankedPlan& p : r.ranked) plans.push_back(PlanJson(model, p));
    sj["plans"] = std::move(plans);
    list.push_back(std::move(sj));
  }
  j["scenarios"] = std::move(list);
  return j.dump(2) + "\n";
}

}  // namespace commir::search::plan
