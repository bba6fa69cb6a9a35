#include "tools/plan_command.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "search/plan/layer_cost.h"
#include "search/plan/layer_schedule.h"
#include "search/plan/memory_headroom.h"
#include "search/plan/model_program.h"
#include "search/plan/model_spec.h"
#include "tools/plan_model_loader.h"
#include "search/plan/parallel_plan.h"
#include "search/plan/plan_check.h"
#include "search/plan/plan_cost.h"
#include "search/plan/plan_report.h"
#include "search/plan/plan_search.h"
#include "sim/hardware.h"
#include "sim/hardware_json.h"
#include "tools/command_line.h"
#include "tools/exit_codes.h"
#include "tools/hardware_file.h"
#include "tools/output_file.h"
#include "tools/sim_session.h"

namespace commir::search {
namespace {

constexpr char kUsage[] =
    R"(usage: commir-search --plan MODEL --gpus=N [--hardware=H[,H...]] [--gpus-per-node=N]
                     [--sweep=PARAM=V[,V...]] [--top=K] [--format=table|json]
                     [--threads=N] [--quiet] [--plan-eval=PLAN] [--check]
                     [--layer-schedule=none|search|PIPELINE] [--memory-headroom=GB]

Searches how to train a whole model on N GPUs: tensor, context, pipeline (interleaved)
and data parallelism, micro-batch size, ZeRO stage and recomputation, each plan costed
from its layers' partitioned CommIR programs by the sim; plans that do not fit in HBM
are dropped and counted. Prints the best plans with iteration time, tokens/s, MFU, the
time breakdown and memory, the best standard Megatron-LM setting, and the best plan as
Megatron-LM arguments.
  MODEL               a preset (gpt3-1.3b, gpt3-13b, gpt3-175b, llama3-8b, llama3-70b,
                      llama3-405b), the text form (llama3-8b,seq=4096,global_batch=64 or
                      every key), a file holding the text form (// comments allowed), or
                      a model written as CommIR, FILE.commir,global_batch=N (a top
                      function calling a layer function per layer and a head last, as
                      --emit-model writes; sizes read from the IR, the search kept to
                      its micro-batch)
  --gpus=N            GPUs to train on
  --hardware=H,...    h100-sxm (default), h200, a100-sxm-80g or JSON cluster files; several
                      for a what-if (each with its best plan)
  --gpus-per-node=N   GPUs per node (default: the hardware's)
  --sweep=P=V,...     a what-if over one parameter of the (single) hardware:
                      nvlink-bandwidth (GB/s per direction), hbm (80GiB, 141GB, ...) or
                      gpus-per-node
  --top=K             plans to report per cluster (default 5)
  --format=F          table (default) or json
  --threads=N         workers measuring layer programs (default: the machine's cores)
  --quiet             no summary line on stderr
  --plan-eval=PLAN    also cost one given plan (tp=8,pp=8,dp=12,sp,mb=1,zero=1,
                      recompute=selective; keys tp cp pp v dp sp mb zero recompute first
                      last) on the (single) cluster; a last line gives its time and MFU
                      and the search's best plan's gain over it (table format only)
  --check             run the best plan's (with --plan-eval, the given plan's) training
                      step on the cpu mesh, pipeline stages included, and compare it with
                      one device in f32: a line per tensor group and a verdict (table
                      format only; small models: a few million elements at most)
  --layer-schedule=S  the communication schedule each layer program is costed with:
                      search (default: the operator search's attention and
                      collective-matmul schedules, the fastest predicted per layer), none
                      (plain collectives) or a pass pipeline applied to every layer that
                      accepts it (e.g. ring-attention,ring-collective-matmul)
  --memory-headroom=GB memory each GPU keeps free besides the plan's tensors, 0 to 10000
                      (default: the CUDA context, NCCL's buffers for the plan's
                      communicators and 15% allocator fragmentation; see
                      search/plan/memory_headroom.h)
Exit status: 0 success; 1 bad model, hardware or value, no plan fits, or the --check
fails (a mismatch, or a model too big for it); 2 bad usage.
)";

int UsageError(const std::string& message) { return commir::UsageError("commir-search", message); }

int InputError(const std::string& message) {
  std::cerr << "commir-search: error: " << message << "\n";
  return kExitInvalidInput;
}

struct PlanRequest {
  std::string model;
  int64_t gpus = 0;
  std::vector<std::string> hardware = {"h100-sxm"};
  int64_t gpus_per_node = 0;
  std::string sweep_param;
  std::vector<std::string> sweep_values;
  int top = 5;
  int threads = 0;
  std::string format = "table";
  bool quiet = false;
  std::string plan_eval;  // a plan to cost beside the search (ParsePlan's form)
  bool check = false;     // run the plan on the cpu mesh against one device
  plan::LayerSchedule layer_schedule = plan::LayerSchedule::Search();
  double memory_headroom_bytes = -1;  // < 0: memory_headroom.h's default
};

constexpr int64_t kMaxCount = int64_t{1} << 30;

bool ParseCount(absl::string_view text, int64_t min, int64_t& out) {
  return ParseIntInRange(text, min, kMaxCount, out);
}

// "FLAG needs a count from MIN to 1073741824": the bound is said, not only the sign.
int CountError(absl::string_view flag, int64_t min) {
  return UsageError(absl::StrCat(flag, " needs a count from ", min, " to ", kMaxCount));
}

int ParseArgs(int argc, char** argv, PlanRequest& r) {
  bool have_model = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    absl::string_view value;
    auto flag = [&](absl::string_view name) { return FlagValue(arg, name, value); };
    int64_t n = 0;
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--plan" || flag("--plan")) {
      if (have_model) return UsageError("--plan takes one model");
      if (arg == "--plan") {
        if (i + 1 >= argc) return UsageError("--plan needs a model");
        value = argv[++i];
      }
      r.model = std::string(value);
      have_model = true;
    } else if (flag("--gpus")) {
      if (!ParseCount(value, 1, n)) return CountError("--gpus", 1);
      r.gpus = n;
    } else if (flag("--hardware")) {
      r.hardware = absl::StrSplit(value, ',', absl::SkipEmpty());
      if (r.hardware.empty()) return UsageError("--hardware needs a name or a file");
    } else if (flag("--gpus-per-node")) {
      if (!ParseCount(value, 1, n)) return CountError("--gpus-per-node", 1);
      r.gpus_per_node = n;
    } else if (flag("--sweep")) {
      std::pair<std::string, std::string> kv = absl::StrSplit(value, absl::MaxSplits('=', 1));
      r.sweep_param = kv.first;
      r.sweep_values = absl::StrSplit(kv.second, ',', absl::SkipEmpty());
      if (r.sweep_param != "nvlink-bandwidth" && r.sweep_param != "hbm" &&
          r.sweep_param != "gpus-per-node") {
        return UsageError("--sweep is nvlink-bandwidth=..., hbm=... or gpus-per-node=...");
      }
      if (r.sweep_values.empty()) return UsageError("--sweep needs values: --sweep=PARAM=V1,V2");
    } else if (flag("--top")) {
      if (!ParseCount(value, 1, n)) return CountError("--top", 1);
      r.top = static_cast<int>(n);
    } else if (flag("--threads")) {
      if (!ParseCount(value, 1, n) || n > 1024) return UsageError("--threads needs 1 to 1024");
      r.threads = static_cast<int>(n);
    } else if (flag("--format")) {
      if (value != "table" && value != "json")
        return UsageError("--format is table or json with --plan");
      r.format = std::string(value);
    } else if (flag("--plan-eval")) {
      if (value.empty()) return UsageError("--plan-eval needs a plan: --plan-eval=tp=8,pp=8,dp=12");
      r.plan_eval = std::string(value);
    } else if (flag("--layer-schedule")) {
      absl::StatusOr<plan::LayerSchedule> schedule = plan::ParseLayerSchedule(value);
      if (!schedule.ok()) {
        return UsageError(absl::StrCat("--layer-schedule: ", schedule.status().message()));
      }
      r.layer_schedule = *std::move(schedule);
    } else if (flag("--memory-headroom")) {
      double gb = 0;
      if (!absl::SimpleAtod(value, &gb) || !(gb >= 0 && gb <= plan::kMaxMemoryHeadroomGb)) {
        return UsageError(absl::StrCat("--memory-headroom needs GB from 0 to ",
                                       plan::kMaxMemoryHeadroomGb, ", not '", value, "'"));
      }
      r.memory_headroom_bytes = gb * 1e9;
    } else if (arg == "--quiet") {
      r.quiet = true;
    } else if (arg == "--check") {
      r.check = true;
    } else {
      return UsageError(absl::StrCat("'", arg, "' is not an option of --plan"));
    }
  }
  if (!have_model) return UsageError("--plan needs a model");
  if (r.gpus == 0) return UsageError("--plan needs --gpus=N");
  if (!r.sweep_param.empty() && r.hardware.size() > 1) {
    return UsageError("--sweep varies one hardware: give one --hardware");
  }
  if (!r.plan_eval.empty() && (r.hardware.size() > 1 || !r.sweep_param.empty())) {
    return UsageError("--plan-eval costs its plan on one cluster: give one --hardware, no --sweep");
  }
  if (!r.plan_eval.empty() && r.format != "table") {
    return UsageError("--plan-eval reports in the table format only");
  }
  if (r.check && (r.hardware.size() > 1 || !r.sweep_param.empty())) {
    return UsageError("--check runs one cluster's best plan: give one --hardware, no --sweep");
  }
  if (r.check && r.format != "table") return UsageError("--check reports in the table format only");
  return -1;
}

// "given plan ..." : the given plan's cost beside the search's best on the same cluster.
absl::StatusOr<std::string> EvaluateGivenPlan(const plan::ModelSpec& model, int64_t gpus,
                                              const std::string& text,
                                              const plan::PlanSearchResult& result,
                                              plan::LayerCostCache& layers,
                                              const plan::PlanCostOptions& cost_options) {
  absl::StatusOr<plan::ParallelPlan> given = plan::ParsePlan(text);
  if (!given.ok())
    return absl::InvalidArgumentError(absl::StrCat("--plan-eval: ", given.status().message()));
  // Before gpus(): CheckPlan refuses sizes whose product would overflow it.
  if (absl::Status s = plan::CheckPlan(model, *given); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--plan-eval: ", s.message()));
  }
  if (given->gpus() != gpus) {
    return absl::InvalidArgumentError(absl::StrCat("--plan-eval: the plan uses ", given->gpus(),
                                                   " GPUs (tp x cp x pp x dp), not --gpus=", gpus));
  }
  absl::StatusOr<plan::PlanCost> cost = plan::CostPlan(model, *given, layers, cost_options);
  if (!cost.ok())
    return absl::InvalidArgumentError(absl::StrCat("--plan-eval: ", cost.status().message()));
  const double seconds = cost->time.breakdown.total_s;
  std::string line = absl::StrFormat(
      "given plan: %s, %.1f ms (compute %.1f, recompute %.1f, exposed comm %.1f, bubble %.1f), "
      "MFU %.1f%%, peak %.2f GB, %s, layer schedule %s",
      plan::DescribePlan(*given), seconds * 1e3, cost->time.breakdown.compute_s * 1e3,
      cost->time.breakdown.recompute_s * 1e3, cost->time.breakdown.exposed_comm_s * 1e3,
      cost->time.breakdown.bubble_s * 1e3, cost->model_flops_utilization * 100,
      cost->peak_memory_bytes / 1e9, cost->fits ? "fits" : "does not fit",
      cost->layer_schedule.empty() ? "plain" : cost->layer_schedule.ToString());
  if (!result.ranked.empty() && seconds > 0) {
    const plan::RankedPlan& best = result.ranked.front();
    absl::StrAppendFormat(&line, "; best plan: %s, MFU %.1f%% (%.2fx)",
                          plan::DescribePlan(best.plan), best.cost.model_flops_utilization * 100,
                          seconds / best.cost.time.breakdown.total_s);
  }
  return absl::StrCat(line, "\n");
}

struct Cluster {
  std::string label;
  sim::HardwareSpec hardware;
  int64_t gpus_per_node = 8;
};

// One cluster per --hardware, or one per --sweep value.
absl::StatusOr<std::vector<Cluster>> Clusters(const PlanRequest& r) {
  std::vector<Cluster> out;
  for (const std::string& name : r.hardware) {
    absl::StatusOr<sim::HardwareSpec> hw = LoadHardwareArgument(name);
    if (!hw.ok())
      return absl::InvalidArgumentError(absl::StrCat("--hardware: ", hw.status().message()));
    const int64_t per_node = r.gpus_per_node > 0 ? r.gpus_per_node : hw->gpus_per_node;
    if (r.sweep_param.empty()) {
      out.push_back({hw->name, *hw, per_node});
      continue;
    }
    for (const std::string& v : r.sweep_values) {
      Cluster c{absl::StrCat(hw->name, " ", r.sweep_param, "=", v), *hw, per_node};
      if (r.sweep_param == "gpus-per-node") {
        if (!ParseCount(v, 1, c.gpus_per_node)) {
          return absl::InvalidArgumentError(absl::StrCat("--sweep: '", v, "' is not a GPU count"));
        }
      } else if (r.sweep_param == "hbm") {
        absl::StatusOr<std::optional<int64_t>> bytes = ParseMemorySize(v);
        if (!bytes.ok() || !bytes->has_value() || **bytes <= 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("--sweep: '", v, "' is not a memory size"));
        }
        c.hardware.hbm_capacity = static_cast<double>(**bytes);
      } else {
        double gbps = 0;
        if (!absl::SimpleAtod(v, &gbps) || !(gbps > 0)) {
          return absl::InvalidArgumentError(
              absl::StrCat("--sweep: '", v, "' is not a bandwidth in GB/s"));
        }
        // The hardware file's range for the same figure (no inf, no denormal).
        if (absl::Status s = sim::CheckHardwareJsonNumber(
                "nvlink_bandwidth_per_direction_gb_per_s", gbps, "--sweep");
            !s.ok()) {
          return s;
        }
        // Point-to-point copies (NCCL's and the copy engines') scale with the links.
        if (c.hardware.nvlink_bandwidth_per_direction > 0) {
          const double ratio = gbps * 1e9 / c.hardware.nvlink_bandwidth_per_direction;
          c.hardware.p2p_bandwidth *= ratio;
          c.hardware.copy_engine_bandwidth_one_way *= ratio;
          c.hardware.copy_engine_bandwidth_both_ways *= ratio;
        }
        c.hardware.nvlink_bandwidth_per_direction = gbps * 1e9;
      }
      out.push_back(std::move(c));
    }
  }
  return out;
}

constexpr char kEmitModelUsage[] =
    R"(usage: commir-search --emit-model=MODEL [--micro-batch=N]

Prints the model as CommIR for one micro-batch on one device: @embed, @layer and @head
written once and a top function @model(%ids, ..., %head_labels) that looks the token ids
up with @embed, calls @layer once per layer (each with its own weights) and @head once
(final norm, logits, mean cross-entropy with the labels; GPT's head tied to the
embedding's table), returning the loss. `commir-search --plan FILE.commir,global_batch=N`
searches it.
  MODEL               a preset, the text form or a file holding it (as --plan)
  --micro-batch=N     sequences per micro-batch (default 1)
Exit status: 0 success; 1 bad model; 2 bad usage.
)";

}  // namespace

bool WantsEmitModel(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (absl::StartsWith(argv[i], "--emit-model")) return true;
  }
  return false;
}

int EmitModelMain(int argc, char** argv) {
  std::string spec;
  int64_t micro_batch = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    absl::string_view value;
    if (arg == "--help" || arg == "-h") {
      std::cout << kEmitModelUsage;
      return 0;
    } else if (FlagValue(arg, "--emit-model", value)) {
      if (value.empty()) return UsageError("--emit-model needs a model: --emit-model=llama3-8b");
      if (!spec.empty()) return UsageError("--emit-model takes one model");
      spec = std::string(value);
    } else if (FlagValue(arg, "--micro-batch", value)) {
      if (!ParseCount(value, 1, micro_batch)) return CountError("--micro-batch", 1);
    } else {
      return UsageError(absl::StrCat("'", arg, "' is not an option of --emit-model"));
    }
  }
  if (spec.empty()) return UsageError("--emit-model needs a model: --emit-model=llama3-8b");
  absl::StatusOr<LoadedModel> model = LoadPlanModel(spec);
  if (!model.ok()) return InputError(absl::StrCat("--emit-model: ", model.status().message()));
  absl::StatusOr<std::string> text = plan::ModelProgram(model->spec, micro_batch);
  if (!text.ok()) return InputError(absl::StrCat("--emit-model: ", text.status().message()));
  if (absl::Status s = WriteStandardOutput(*text); !s.ok()) {
    return InputError(std::string(s.message()));
  }
  if (absl::Status s = FinishStandardOutput(); !s.ok()) return InputError(std::string(s.message()));
  return 0;
}

bool WantsPlanSearch(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (absl::string_view(argv[i]) == "--plan" || absl::StartsWith(argv[i], "--plan=")) return true;
  }
  return false;
}

int PlanSearchMain(int argc, char** argv) {
  PlanRequest r;
  if (int status = ParseArgs(argc, argv, r); status >= 0) return status;
  if (IsCommirModel(r.model)) {
    // The IR holds no global batch: a missing or malformed suffix is bad usage, not a
    // bad model.
    absl::StatusOr<int64_t> global_batch = CommirModelGlobalBatch(r.model);
    if (!global_batch.ok()) {
      return UsageError(absl::StrCat("--plan: ", global_batch.status().message()));
    }
    if (*global_batch == 0) {
      return UsageError(absl::StrCat("--plan: a model written as CommIR needs its global batch: ",
                                     r.model, ",global_batch=N"));
    }
  }
  absl::StatusOr<LoadedModel> loaded = LoadPlanModel(r.model);
  if (!loaded.ok()) return InputError(absl::StrCat("--plan: ", loaded.status().message()));
  const plan::ModelSpec* model = &loaded->spec;
  if (!r.plan_eval.empty() && loaded->micro_batch > 0) {
    // A model file is written for one micro-batch: a given plan must use it (said now,
    // not as a layout error deep in the costing).
    absl::StatusOr<plan::ParallelPlan> given = plan::ParsePlan(r.plan_eval);
    if (given.ok() && given->micro_batch != loaded->micro_batch) {
      return InputError(absl::StrCat("--plan-eval: mb=", given->micro_batch, ", but ",
                                     loaded->file,
                                     " is written for micro-batch ", loaded->micro_batch,
                                     ": give mb=", loaded->micro_batch));
    }
  }
  absl::StatusOr<std::vector<Cluster>> clusters = Clusters(r);
  if (!clusters.ok()) return InputError(std::string(clusters.status().message()));

  std::vector<plan::PlanScenario> scenarios;
  std::string given_line;
  bool any_fits = false;
  for (const Cluster& c : *clusters) {
    plan::LayerCostOptions layer_options;
    layer_options.predict.hardware = c.hardware;
    layer_options.predict.gpus_per_node = static_cast<int>(c.gpus_per_node);
    layer_options.schedule = r.layer_schedule;
    // A CommIR file's own functions (clones that keep its positions), laid out for each
    // plan (null: the generated ones).
    layer_options.functions = loaded->functions;
    layer_options.layer_name = loaded->layer_name;
    layer_options.head_name = loaded->head_name;
    if (!loaded->file.empty()) layer_options.functions_file = loaded->file;
    plan::LayerCostCache layers(layer_options);
    plan::PlanSearchOptions options;
    options.gpus = r.gpus;
    options.top = r.top;
    options.threads = r.threads;
    options.only_micro_batch = loaded->micro_batch;  // a CommIR file's (0: any)
    options.cost.memory_headroom_bytes = r.memory_headroom_bytes;
    absl::StatusOr<plan::PlanSearchResult> result = plan::SearchPlans(*model, options, layers);
    if (!result.ok()) return InputError(std::string(result.status().message()));
    if (!r.quiet) {
      std::cerr << absl::StrFormat(
          "commir-search: %s on %d x %s: %d plans costed, %d layer programs, %.2f s\n", model->name,
          r.gpus, c.label, result->costed, result->layer_programs, result->seconds);
    }
    if (!r.plan_eval.empty()) {
      absl::StatusOr<std::string> line =
          EvaluateGivenPlan(*model, r.gpus, r.plan_eval, *result, layers, options.cost);
      if (!line.ok()) return InputError(std::string(line.status().message()));
      given_line = *line;
    }
    any_fits = any_fits || !result->ranked.empty();
    scenarios.push_back({c.label, c.gpus_per_node, c.hardware.hbm_capacity, *std::move(result)});
  }
  if (!any_fits) {
    const plan::PlanSearchResult& last = scenarios.back().result;
    return InputError(
        absl::StrFormat("no plan of %s on %d GPUs fits in HBM (%d plans costed, %d dropped)",
                        model->name, r.gpus, last.costed, last.dropped_memory));
  }
  const std::string report = r.format == "json" ? plan::FormatPlanJson(*model, r.gpus, scenarios)
                                                : plan::FormatPlanTable(*model, r.gpus, scenarios);
  std::string check_text;
  bool check_failed = false;
  if (r.check) {
    // The given plan was parsed and costed above, so it parses here.
    const plan::ParallelPlan checked = r.plan_eval.empty()
                                           ? scenarios.back().result.ranked.front().plan
                                           : *plan::ParsePlan(r.plan_eval);
    // A model file's own layer and head are what runs, on both sides.
    plan::PlanCheckOptions check_options;
    check_options.functions = loaded->functions;
    check_options.layer_name = loaded->layer_name;
    check_options.head_name = loaded->head_name;
    check_options.micro_batch = loaded->micro_batch;
    check_options.file = loaded->file;
    absl::StatusOr<plan::PlanCheckResult> result =
        plan::CheckPlanOnCpuMesh(*model, checked, check_options);
    if (!result.ok()) return InputError(absl::StrCat("--check: ", result.status().message()));
    check_text = absl::StrCat("\ncpu-mesh check of ", plan::DescribePlan(checked), ":\n",
                              plan::FormatPlanCheck(*result, checked));
    check_failed = !result->pass;
  }
  if (absl::Status s =
          WriteStandardOutput(report + (given_line.empty() ? "" : "\n" + given_line) + check_text);
      !s.ok())
    return InputError(std::string(s.message()));
  if (absl::Status s = FinishStandardOutput(); !s.ok()) return InputError(std::string(s.message()));
  if (check_failed) {
    std::cerr << "commir-search: error: the plan's training step on the cpu mesh does not match "
                 "one device\n";
    return kExitInvalidInput;
  }
  return 0;
}

}  // namespace commir::search
