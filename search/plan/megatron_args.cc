#include "search/plan/megatron_args.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "search/plan/megatron_schedule_args.h"
#include "transforms/sharding/megatron_layout.h"

namespace commir::search::plan {

namespace {

// Whether a split is first/last plus an even middle (what
// --decoder-first/last-pipeline-num-layers express).
bool EndsOnly(const std::vector<int64_t>& split) {
  for (size_t i = 2; i + 1 < split.size(); ++i) {
    if (split[i] != split[1]) return false;
  }
  return true;
}

// Any split as Megatron-LM's --pipeline-model-parallel-layout, read in NVIDIA/Megatron-LM
// (commit d98e8a6, 2026-08-22): megatron/training/arguments.py declares the flag
// ("E|(t|)*3,m|m||L": E the embedding, L the loss, t a transformer decoder layer, stages
// split by "|", x*n repeats) and checks that its stages are a multiple of pp (the
// multiple is the virtual pipeline size: one stage per rank here); the string is parsed
// by megatron/core/transformer/pipeline_parallel_layer_layout.py. 9,8,8,7 is
// "Et*9|t*8|t*8|t*7L": the embedding on the first rank, the loss (our head) on the last.
std::string PipelineLayout(const std::vector<int64_t>& split) {
  std::vector<std::string> stages;
  for (int64_t n : split) {
    stages.push_back(n == 0 ? "" : n == 1 ? "t" : absl::StrCat("t*", n));
  }
  stages.front() = absl::StrCat("E", stages.front());
  stages.back() = absl::StrCat(stages.back(), "L");
  return absl::StrJoin(stages, "|");
}

// A value the shell must not split or glob ("|", "*") goes in single quotes.
std::string ShellWord(const std::string& word) {
  for (char c : word) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && !absl::StrContains("-_.,=/+:", c)) {
      return absl::StrCat("'", word, "'");
    }
  }
  return word;
}

}  // namespace

absl::StatusOr<MegatronArgs> ToMegatronArgs(const ModelSpec& model, const ParallelPlan& plan,
                                            const Pipeline& layer_schedule,
                                            const Pipeline& head_schedule) {
  if (absl::Status s = CheckPlan(model, plan); !s.ok()) return s;
  if (plan.zero_stage == 2) {
    return absl::InvalidArgumentError(
        "ZeRO 2 (torch FSDP's SHARD_GRAD_OP: gradients sharded, parameters gathered every "
        "micro-batch) has no Megatron-LM equivalent: its distributed optimizer (zero=1) shards "
        "the optimizer state and keeps the whole gradient buffer");
  }
  ScheduleMesh mesh;
  mesh.tp = plan.tp;
  mesh.sequence_parallel = plan.sequence_parallel && plan.tp > 1;
  if (plan.cp > 1) mesh.context_axes = {{sharding::kMegatronCpAxis, plan.cp}};
  const ScheduleArgs schedule = MegatronScheduleArgs(layer_schedule, head_schedule, mesh);
  if (plan.zero_stage == 3 && plan.pp > 1) {
    return absl::InvalidArgumentError(
        "ZeRO 3 is torch FSDP2 in Megatron-LM (--use-torch-fsdp2), which does not support "
        "pipeline parallelism (pp > 1)");
  }
  MegatronArgs out;
  auto flag = [&](absl::string_view name) { out.args.emplace_back(name); };
  auto value = [&](absl::string_view name, auto v) {
    out.args.emplace_back(name);
    out.args.push_back(absl::StrCat(v));
  };
  // The model.
  value("--num-layers", model.layers);
  value("--hidden-size", model.hidden);
  value("--ffn-hidden-size", model.ffn);
  value("--num-attention-heads", model.heads);
  if (model.kv_heads != model.heads) {
    flag("--group-query-attention");
    value("--num-query-groups", model.kv_heads);
  }
  value("--seq-length", model.sequence);
  value("--max-position-embeddings", model.sequence);
  if (model.architecture == Architecture::kLlama) {
    flag("--swiglu");
    value("--normalization", "RMSNorm");
    value("--position-embedding-type", "rope");
    flag("--untie-embeddings-and-output-weights");
    flag("--disable-bias-linear");
  }
  if (model.dtype == ElementType::kBF16) flag("--bf16");
  if (model.dtype == ElementType::kF16) flag("--fp16");
  // The parallel plan.
  value("--tensor-model-parallel-size", plan.tp);
  value("--pipeline-model-parallel-size", plan.pp);
  value("--context-parallel-size", plan.cp);
  if (plan.sequence_parallel) flag("--sequence-parallel");
  out.args.insert(out.args.end(), schedule.args.begin(), schedule.args.end());
  out.notes.insert(out.notes.end(), schedule.notes.begin(), schedule.notes.end());
  if (plan.uneven() && plan.virtual_stages > 1) {
    // Interleaved with uneven ends: the layout names every virtual stage (its stage count
    // over pp is the virtual pipeline size), an end chunk with no layer as "E" or "L" alone.
    value("--pipeline-model-parallel-layout", PipelineLayout(ChunkLayers(model, plan)));
  } else if (plan.uneven()) {
    const std::vector<int64_t> split = LayersPerStage(model, plan);
    if (EndsOnly(split)) {
      // The ranks between the ends hold equal counts: Megatron-LM's ends-only flags.
      value("--decoder-first-pipeline-num-layers", split.front());
      value("--decoder-last-pipeline-num-layers", split.back());
    } else {
      value("--pipeline-model-parallel-layout", PipelineLayout(split));
    }
  }
  if (plan.virtual_stages > 1 && !plan.uneven()) {
    value("--num-layers-per-virtual-pipeline-stage",
          model.layers / (plan.pp * plan.virtual_stages));
  }
  value("--micro-batch-size", plan.micro_batch);
  value("--global-batch-size", model.global_batch);
  // Megatron-LM takes one recomputation for every stage (--recompute-method block's K
  // layers are the same K on each), so a per-rank choice runs as its heaviest rank's. That
  // usually fits where the plan does, but not always: full recomputation keeps each layer's
  // input besides the recomputed layer, more than none on a rank with one layer and one
  // micro-batch in flight. Its time is the plan's plus the lighter ranks' extra recompute.
  const Recompute recompute = plan.HeaviestRecompute();
  if (plan.mixed_recompute()) {
    out.notes.push_back(absl::StrCat(
        "the plan recomputes per pipeline rank (", DescribeStageRecompute(plan),
        ", rank 0 first); Megatron-LM takes one setting for every stage, so these arguments "
        "use the heaviest rank's (",
        RecomputeName(recompute),
        ") on all: slower than the plan's time by the lighter ranks' extra recomputation, and "
        "its memory is not the plan's (cost it with --plan-eval)"));
  }
  switch (recompute) {
    case Recompute::kNone:
      break;
    case Recompute::kSelective:
      value("--recompute-granularity", "selective");
      break;
    case Recompute::kFull:
      // Every layer recomputed from its input: the memory model's "full".
      value("--recompute-granularity", "full");
      value("--recompute-method", "uniform");
      value("--recompute-num-layers", 1);
      break;
  }
  if (plan.zero_stage == 1) {
    flag("--use-distributed-optimizer");
    flag("--overlap-param-gather");
  }
  if (plan.zero_stage == 3) flag("--use-torch-fsdp2");
  if (plan.dp * plan.cp > 1) flag("--overlap-grad-reduce");  // gradients reduce over dp x cp
  out.notes.push_back(absl::StrCat("data-parallel size ", plan.dp,
                                   " follows from the world size: launch ", plan.gpus(),
                                   " processes"));
  return out;
}

std::string FormatMegatronArgs(const MegatronArgs& args) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < args.args.size(); ++i) {
    std::string line = args.args[i];
    if (i + 1 < args.args.size() && !absl::StartsWith(args.args[i + 1], "--")) {
      absl::StrAppend(&line, " ", ShellWord(args.args[++i]));
    }
    lines.push_back(std::move(line));
  }
  std::string text = absl::StrJoin(lines, " \\\n");
  for (const std::string& note : args.notes) absl::StrAppend(&text, "\n# ", note);
  return text;
}

}  // namespace commir::search::plan
