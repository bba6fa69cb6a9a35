#include "search/plan/layer_cost.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "commir/diagnostics.h"
#include "commir/element_type.h"
#include "commir/ir.h"
#include "commir/fingerprint.h"
#include "search/plan/embedding_program.h"
#include "search/schedule_space.h"
#include "sim/op_time.h"
#include "search/plan/megatron_layout.h"
#include "search/plan/saved_activations.h"
#include "transforms/pipeline.h"
#include "transforms/schedules/pipeline_collective_matmul.h"
#include "transforms/schedules/ring_collective_matmul.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/megatron_layout.h"
#include "transforms/sharding/spmd_pipeline.h"

namespace commir::search::plan {
namespace {

// A copy of `module` with `pipeline` run on it: each schedule gets its own, since a
// pass that refuses a program may have rewritten part of it.
absl::StatusOr<std::unique_ptr<Module>> RunOnCopy(const Module& module,
                                                  const Pipeline& pipeline) {
  std::unique_ptr<Module> copy = module.Clone();
  // Located errors stay in the engine: the status carries the pass's message alone.
  DiagnosticEngine diagnostics;
  if (absl::Status s = RunPipeline(*copy, pipeline, {.diagnostics = &diagnostics}); !s.ok()) {
    return s;
  }
  return copy;
}

// The time of an unfused attention's own kernels in `forward` (one device's ops: an spmd
// body's types are per device): its two batched GEMMs and the softmax between them, what
// Megatron-LM's selective recomputation re-runs (Korthikanti et al.'s "core attention").
// Zero for a fused attention, which the timeline's `attention` kernels time.
absl::StatusOr<double> UnfusedAttentionTime(const Function& forward, const sim::HardwareSpec& hw) {
  absl::flat_hash_set<const Value*> core;
  double seconds = 0;
  absl::Status status = absl::OkStatus();
  WalkOps(forward.body(), [&](Operation* op) {
    const bool gemm = IsUnfusedAttentionGemm(*op);
    if (!gemm && !(op->Is(OpKind::kSoftmax) && core.contains(op->operand(0)))) return;
    if (gemm) core.insert(op->result(0));
    if (op->Is(OpKind::kSoftmax)) core.insert(op->result(0));
    absl::StatusOr<double> t = sim::OpTime(hw, *op, forward);
    if (!t.ok()) {
      if (status.ok()) status = t.status();
      return;
    }
    seconds += *t;
  });
  if (!status.ok()) return status;
  return seconds;
}

double MaxExposed(const sim::Prediction& p) {
  double most = 0;
  for (const sim::DevicePrediction& d : p.devices) most = std::max(most, d.exposed_communication_s);
  return most;
}

// A layer's partitioned module with its schedule applied, and the gradient's prediction.
struct ScheduledLayer {
  std::unique_ptr<Module> module;
  Pipeline passes;  // the schedule applied (empty: plain collectives)
  sim::Prediction gradient;
  double seconds = 0;  // forward + backward, as LayerCost counts them
  int64_t programs_predicted = 0;
  int64_t skipped = 0;
};

// Predicts the forward and the gradient function of `module`.
absl::Status PredictTrainingStep(ScheduledLayer& layer, const std::string& forward_name,
                                 const std::string& gradient_name,
                                 const sim::PredictOptions& predict) {
  absl::StatusOr<sim::Prediction> f =
      sim::Predict(*layer.module->FindFunction(forward_name), predict);
  if (!f.ok()) return f.status();
  absl::StatusOr<sim::Prediction> g =
      sim::Predict(*layer.module->FindFunction(gradient_name), predict);
  if (!g.ok()) return g.status();
  layer.seconds = f->time_s + std::max(0.0, g->time_s - f->time_s);
  layer.gradient = *std::move(g);
  ++layer.programs_predicted;
  return absl::OkStatus();
}

// The partitioned layer with its schedule (see layer_cost.h): plain, the fixed one, or
// the fastest of the search space. Each schedule runs on a copy of `plain`.
absl::StatusOr<ScheduledLayer> ChooseSchedule(const Module& plain,
                                              const std::string& forward_name,
                                              const std::string& gradient_name,
                                              const LayerLayout& layout,
                                              const LayerCostOptions& options) {
  ScheduledLayer best;
  const LayerSchedule& mode = options.schedule;
  auto predict_best = [&]() -> absl::StatusOr<ScheduledLayer> {
    if (absl::Status s = PredictTrainingStep(best, forward_name, gradient_name, options.predict);
        !s.ok())
      return s;
    return std::move(best);
  };
  if (mode.mode == LayerSchedule::Mode::kNone) {
    best.module = plain.Clone();
    return predict_best();
  }
  // Programs told apart by structure: a schedule that rewrote nothing, or rewrote the
  // layer as an earlier one did, has the fingerprint of a program seen already.
  const Fingerprint plain_fingerprint = ModuleFingerprint(plain);
  if (mode.mode == LayerSchedule::Mode::kFixed) {
    absl::StatusOr<std::unique_ptr<Module>> scheduled = RunOnCopy(plain, mode.passes);
    if (scheduled.ok()) {
      // Passes with nothing to rewrite (ring attention on a layer without cp) leave the
      // layer plain, and the report says so.
      if (ModuleFingerprint(**scheduled) != plain_fingerprint) best.passes = mode.passes;
      best.module = *std::move(scheduled);
    } else if (scheduled.status().code() == absl::StatusCode::kInvalidArgument) {
      return scheduled.status();  // bad pass options: the caller's mistake
    } else {
      best.module = plain.Clone();
      best.skipped = 1;  // the passes refuse this layer: it keeps plain collectives
    }
    return predict_best();
  }

  best.module = plain.Clone();
  if (absl::Status s = PredictTrainingStep(best, forward_name, gradient_name, options.predict);
      !s.ok())
    return s;
  absl::flat_hash_set<Fingerprint> seen = {plain_fingerprint};
  int64_t programs = best.programs_predicted, skipped = 0;
  // Considers one scheduled module; keeps it when strictly faster than the best so far.
  auto consider = [&](const Pipeline& schedule, std::unique_ptr<Module> module) {
    ScheduledLayer candidate;
    candidate.module = std::move(module);
    candidate.passes = schedule;
    if (!PredictTrainingStep(candidate, forward_name, gradient_name, options.predict).ok()) {
      ++skipped;
      return false;
    }
    ++programs;
    if (candidate.seconds >= best.seconds) return false;
    best = std::move(candidate);
    return true;
  };
  // Greedy, attention first: the whole product (up to 10 attention x 8 matmul
  // schedules on a cp x tp mesh) took the Llama-3 70B search on 1,024 GPUs to 14 s, over
  // the 10 s target for a 1,024-GPU search. The two families rewrite different ops (the
  // attention and its k/v gathers; the tp gathers and scatters around the projections),
  // and the greedy choice equalled the whole product's best on every layout checked
  // (GPT-3 1.3B and Llama-3 70B layers, tp and cp in 1, 2, 4, 8, micro-batch 1 and 8).
  const LayerScheduleSpace space = LayerSchedules(layout);
  // The best attention schedule's program, which the matmul schedules start from.
  std::unique_ptr<Module> best_attention_module;
  Pipeline best_attention;
  for (const Pipeline& attention : space.attention) {
    if (attention.empty()) continue;  // plain: predicted above
    absl::StatusOr<std::unique_ptr<Module>> m = RunOnCopy(plain, attention);
    if (!m.ok()) {
      ++skipped;
      continue;
    }
    // Rewrote nothing, or like an earlier one.
    if (!seen.insert(ModuleFingerprint(**m)).second) continue;
    if (consider(attention, *std::move(m))) {
      best_attention_module = best.module->Clone();  // prediction leaves it as it was
      best_attention = attention;
    }
  }
  const Module& matmul_start =
      best_attention_module != nullptr ? *best_attention_module : plain;
  for (const Pipeline& matmul : space.matmul) {
    if (matmul.empty()) continue;  // the best attention schedule alone: predicted above
    absl::StatusOr<std::unique_ptr<Module>> m = RunOnCopy(matmul_start, matmul);
    if (!m.ok()) {
      ++skipped;
      continue;
    }
    if (!seen.insert(ModuleFingerprint(**m)).second) continue;
    consider(best_attention.Then(matmul), *std::move(m));
  }
  best.programs_predicted = programs;
  best.skipped = skipped;
  return best;
}

const char* FunctionName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kHead:
      return kHeadFunction;
    case LayerKind::kEmbedding:
      return kEmbedFunction;
    case LayerKind::kTransformer:
      break;
  }
  return kLayerFunction;
}

std::string Describe(LayerKind kind, const LayerLayout& l) {
  return absl::StrCat(FunctionName(kind) == kLayerFunction ? "layer" : FunctionName(kind),
                      " (tp=", l.tp, ", cp=", l.cp,
                      l.sequence_parallel ? ", sp" : "", ", micro-batch ", l.micro_batch, ")");
}

// The program to measure: the file's own function laid out (on a clone), or the
// generated one.
absl::StatusOr<std::unique_ptr<Module>> LaidOutProgram(const ModelSpec& model, LayerKind kind,
                                                       const LayerLayout& layout,
                                                       const LayerCostOptions& options,
                                                       const std::string& name) {
  // A model file has no embedding function the reader hands on: the generated one, from
  // the sizes read from the file.
  if (kind == LayerKind::kEmbedding) return EmbeddingProgram(model, layout);
  if (options.functions == nullptr) {
    return kind == LayerKind::kHead ? HeadProgram(model, layout)
                                    : TransformerLayerProgram(model, layout);
  }
  const std::string& own = kind == LayerKind::kHead ? options.head_name : options.layer_name;
  const Function* function = options.functions->FindFunction(own);
  if (function == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("the model's functions have no @", own));
  }
  MegatronLayoutOptions o;
  o.layout = layout;
  o.vocabulary = kind == LayerKind::kHead ? model.vocabulary : 0;
  o.name = name;  // the name autodiff and the lookups below use
  o.file = options.functions_file;
  return MegatronLayoutModule(*function, o);
}

// Megatron-LM accumulates a layer's weight gradients over the micro-batches and reduces
// them once per iteration over the data-parallel-with-context-parallel group (dp x cp:
// the cp ranks hold the same weights), which pipeline_model.h costs as the data-parallel
// term. The spmd-partitioned gradient function instead all-reduces each weight gradient
// over cp itself, once per micro-batch: counted here it would be paid m times per
// iteration and twice over. So a weight gradient's all_reduce over cp alone is left out
// of the layer (the gradient returned is the local partial sum that the data-parallel
// reduction sums). The layer input's gradient (the first after the forward's results)
// needs no such reduction and keeps whatever it has.
void LeaveWeightGradientsToDataParallel(Module& module, const std::string& name,
                                        const std::string& gradient_name) {
  const Function* forward = module.FindFunction(name);
  Function* gradient = module.FindFunction(gradient_name);
  if (forward == nullptr || gradient == nullptr) return;
  Operation* ret = gradient->body()->terminator();
  if (ret == nullptr || !ret->Is(OpKind::kReturn)) return;
  // The input's gradient follows the forward's results, when the input has one (the
  // embedding's token ids have none).
  const bool input_gradient =
      !forward->arg_types().empty() && IsFloatType(forward->arg_types()[0].element_type());
  const int first_weight =
      static_cast<int>(forward->result_types().size()) + (input_gradient ? 1 : 0);
  for (int i = first_weight; i < ret->num_operands(); ++i) {
    Value* value = ret->operand(i);
    if (value->kind() != Value::Kind::kResult) continue;
    Operation* reduce = value->defining_op();
    if (reduce == nullptr || !reduce->Is(OpKind::kAllReduce)) continue;
    const Attribute* axis = reduce->attrs().Find("axis");
    if (axis == nullptr || axis->axes() != AxisList{sharding::kMegatronCpAxis}) continue;
    ret->SetOperand(i, reduce->operand(0));
    if (value->use_empty()) reduce->Erase();
  }
}

// The cost of a partitioned (and scheduled) layer whose gradient is predicted.
absl::StatusOr<LayerCost> CostOf(const ScheduledLayer& chosen, const std::string& name,
                                 const std::string& gradient_name,
                                 const LayerCostOptions& options) {
  const Function* forward = chosen.module->FindFunction(name);
  const Function* gradient = chosen.module->FindFunction(gradient_name);
  if (forward == nullptr || gradient == nullptr) {
    return absl::InternalError("the forward or gradient function is missing");
  }
  sim::PredictOptions predict = options.predict;
  predict.record_timeline = true;  // for the attention kernels' time
  absl::StatusOr<sim::Prediction> f = sim::Predict(*forward, predict);
  if (!f.ok()) return f.status();
  const sim::Prediction& g = chosen.gradient;

  LayerCost cost;
  cost.forward_s = f->time_s;
  cost.backward_s = std::max(0.0, g.time_s - f->time_s);
  cost.forward_exposed_comm_s = MaxExposed(*f);
  cost.backward_exposed_comm_s = std::max(0.0, MaxExposed(g) - cost.forward_exposed_comm_s);
  cost.forward_flops = f->total_flops;
  for (const sim::TimelineEvent& e : f->timeline) {
    if (e.device == 0 && e.op == "attention") {
      cost.selective_recompute_s += (e.end_us - e.start_us) * 1e-6;
    }
  }
  absl::StatusOr<double> unfused = UnfusedAttentionTime(*forward, predict.hardware);
  if (!unfused.ok()) return unfused.status();
  cost.selective_recompute_s += *unfused;
  const SavedActivations saved = MeasureSaved(*forward, *gradient);
  cost.activation_bytes = saved.all_bytes;
  cost.selective_saved_bytes = saved.attention_bytes;
  cost.input_bytes = DeviceBytes(forward->arg_types()[0], *forward);
  cost.schedule = chosen.passes;
  cost.programs_predicted = chosen.programs_predicted;
  cost.schedules_skipped = chosen.skipped;
  return cost;
}

// A collective-matmul schedule changes how the gathers and scatters around the
// projections run, not what the layer keeps for its backward: TransformerEngine's
// overlapped layers keep the same sequence-sharded inputs as plain collectives and gather
// them again in the backward. In the scheduled program the gathered value is assembled
// block by block (no all_gather for KeptType to see), so the kept bytes are measured
// on the program without the collective-matmul passes: plain, or with the attention
// schedule alone (which does change what is kept: ring attention's per-step blocks).
absl::Status KeepWhatTheLayerWithoutMatmulScheduleKeeps(const Module& plain,
                                                       const Pipeline& schedule,
                                                       const std::string& name,
                                                       const std::string& gradient_name,
                                                       LayerCost& cost) {
  Pipeline attention;
  bool has_matmul_schedule = false;
  for (const PassStep& step : schedule.steps) {
    // By name: a parsed pipeline's steps point at the registry's copies of the PassInfo.
    if (step.name() == schedules::RingCollectiveMatmulPass::Info().name ||
        step.name() == schedules::PipelineCollectiveMatmulPass::Info().name) {
      has_matmul_schedule = true;
    } else {
      attention.steps.push_back(step);
    }
  }
  if (!has_matmul_schedule) return absl::OkStatus();
  std::unique_ptr<Module> scheduled;
  if (!attention.empty()) {
    absl::StatusOr<std::unique_ptr<Module>> module = RunOnCopy(plain, attention);
    if (!module.ok()) return module.status();
    scheduled = *std::move(module);
  }
  const Module& measured = scheduled != nullptr ? *scheduled : plain;
  const Function* forward = measured.FindFunction(name);
  const Function* gradient = measured.FindFunction(gradient_name);
  if (forward == nullptr || gradient == nullptr) {
    return absl::InternalError("the forward or gradient function is missing");
  }
  const SavedActivations saved = MeasureSaved(*forward, *gradient);
  cost.activation_bytes = saved.all_bytes;
  cost.selective_saved_bytes = saved.attention_bytes;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LayerCost> MeasureLayerCost(const ModelSpec& model, LayerKind kind,
                                           const LayerLayout& layout,
                                           const LayerCostOptions& options) {
  const std::string what = Describe(kind, layout);
  auto fail = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  };
  const std::string name = FunctionName(kind);
  // The laid-out module (the generator's, or the model file's function laid out), built
  // in memory; the schedules below run on its clones.
  absl::StatusOr<std::unique_ptr<Module>> partitioned =
      LaidOutProgram(model, kind, layout, options, name);
  if (!partitioned.ok()) return fail(partitioned.status());
  // Partitioned without combine-all-reduces: LeaveWeightGradientsToDataParallel finds
  // each weight gradient's own cp all_reduce at the return, which a bucket would hide,
  // and pipeline_model.h prices the gradients' reduction itself, once per iteration over
  // dp x cp and layer by layer as Megatron-LM's buckets issue it. Combined here, the
  // layer's per-micro-batch all_reduces would be bucketed twice and the ones that term
  // replaces hidden from it.
  const Pipeline pipeline =
      Pipeline{{PassStep::Of<AutodiffPass>(
                   {.func = name, .seed = AutodiffPassOptions::Seed::kCotangents})}}
          .Then(sharding::PartitionPipeline());
  DiagnosticEngine diagnostics;
  if (absl::Status s = RunPipeline(**partitioned, pipeline, {.diagnostics = &diagnostics});
      !s.ok()) {
    return fail(s);
  }
  const std::string gradient_name = absl::StrCat(name, "_grad");
  if ((*partitioned)->FindFunction(name) == nullptr ||
      (*partitioned)->FindFunction(gradient_name) == nullptr) {
    return fail(absl::InternalError("the forward or gradient function is missing"));
  }
  LeaveWeightGradientsToDataParallel(**partitioned, name, gradient_name);
  // Kept for the plain variant (see LayerCost::plain); each schedule runs on a copy.
  const Module& plain_module = **partitioned;
  absl::StatusOr<ScheduledLayer> chosen =
      ChooseSchedule(plain_module, name, gradient_name, layout, options);
  if (!chosen.ok()) return fail(chosen.status());
  absl::StatusOr<LayerCost> cost = CostOf(*chosen, name, gradient_name, options);
  if (!cost.ok()) return fail(cost.status());
  if (absl::Status s = KeepWhatTheLayerWithoutMatmulScheduleKeeps(plain_module, chosen->passes,
                                                                  name, gradient_name, *cost);
      !s.ok()) {
    return fail(s);
  }
  if (!chosen->passes.empty()) {
    // A schedule can keep more activations than plain collectives: the plain variant
    // too, for plans the scheduled one does not fit.
    ScheduledLayer plain;
    plain.module = plain_module.Clone();
    if (absl::Status s = PredictTrainingStep(plain, name, gradient_name, options.predict); !s.ok()) {
      return fail(s);
    }
    absl::StatusOr<LayerCost> plain_cost = CostOf(plain, name, gradient_name, options);
    if (!plain_cost.ok()) return fail(plain_cost.status());
    // Only a variant that needs no more memory in any recomputation is a fallback: then a
    // plan the scheduled layer fits, the plain one fits too (the search's per-rank choice
    // relies on it), and it is never faster (the schedule was chosen on time).
    const bool lighter =
        plain_cost->activation_bytes <= cost->activation_bytes &&
        plain_cost->activation_bytes - plain_cost->selective_saved_bytes <=
            cost->activation_bytes - cost->selective_saved_bytes &&
        plain_cost->input_bytes <= cost->input_bytes &&
        (plain_cost->activation_bytes < cost->activation_bytes ||
         plain_cost->activation_bytes - plain_cost->selective_saved_bytes <
             cost->activation_bytes - cost->selective_saved_bytes);
    if (lighter) {
      // The plain program was predicted (and counted) in the schedule search already.
      plain_cost->programs_predicted = 0;
      cost->plain = std::make_shared<const LayerCost>(*std::move(plain_cost));
    }
  }
  return cost;
}

std::string LayerCostCache::Key(const ModelSpec& model, LayerKind kind,
                                const LayerLayout& layout) const {
  return absl::StrCat(FormatModelSpec(model), "|", static_cast<int>(kind), "|", layout.tp, ",",
                      layout.cp, ",", layout.sequence_parallel, ",", layout.micro_batch, "|",
                      options_.predict.hardware.name, ",", options_.predict.gpus_per_node, "|",
                      options_.schedule.ToString(), "|", FunctionsFingerprint());
}

absl::StatusOr<LayerCost> LayerCostCache::Get(const ModelSpec& model, LayerKind kind,
                                              const LayerLayout& layout) {
  const std::string key = Key(model, kind, layout);
  {
    absl::MutexLock lock(&mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  // Measured outside the lock: two threads may measure the same key once each, which
  // gives the same answer; holding the lock would serialise every measurement.
  absl::StatusOr<LayerCost> cost = MeasureLayerCost(model, kind, layout, options_);
  absl::MutexLock lock(&mutex_);
  return cache_.try_emplace(key, std::move(cost)).first->second;
}

void LayerCostCache::Put(const ModelSpec& model, LayerKind kind, const LayerLayout& layout,
                         LayerCost cost) {
  const std::string key = Key(model, kind, layout);
  absl::MutexLock lock(&mutex_);
  cache_.insert_or_assign(key, std::move(cost));
}

std::string LayerCostCache::FunctionsFingerprint() const {
  if (options_.functions == nullptr) return "generated";
  // By structure, not text: the same functions written with other value names or
  // spacing cost the same.
  const Fingerprint f = ModuleFingerprint(*options_.functions);
  return absl::StrCat(options_.layer_name, ",", options_.head_name, ",", f.a, ":", f.b);
}

int64_t LayerCostCache::measured() const {
  absl::MutexLock lock(&mutex_);
  return static_cast<int64_t>(cache_.size());
}

int64_t LayerCostCache::programs_predicted() const {
  absl::MutexLock lock(&mutex_);
  int64_t programs = 0;
  for (const auto& [key, cost] : cache_) {
    if (cost.ok()) programs += cost->programs_predicted;
  }
  return programs;
}

}  // namespace commir::search::plan
