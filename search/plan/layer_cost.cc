#include "search/plan/layer_cost.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "commir/diagnostics.h"
#include "commir/element_type.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "parser/parser.h"
#include "search/schedule_space.h"
#include "sim/op_time.h"
#include "search/plan/megatron_layout.h"
#include "transforms/registry/pass_registry.h"
#include "transforms/pipeline.h"
#include "transforms/schedules/pipeline_collective_matmul.h"
#include "transforms/schedules/ring_collective_matmul.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/spmd_pipeline.h"

namespace commir::search::plan {
namespace {

absl::StatusOr<std::unique_ptr<Module>> ParseAndRun(const std::string& text,
                                                    const Pipeline& pipeline) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(text, diagnostics);
  if (module == nullptr) return diagnostics.ToStatus("layer.commir", text);
  if (absl::Status s = RunPipeline(*module, pipeline, {.diagnostics = &diagnostics}); !s.ok()) {
    return s;
  }
  return module;
}

// Bytes one device holds of `type` in `function`: spmd bodies carry per-device types, but
// a type that still names axes (a signature's) is divided by their sizes on the
// function's mesh, whatever the axes are called.
int64_t DeviceBytes(Type type, const Function& function) {
  if (!type.is_tensor()) return 0;
  int64_t elements = type.num_elements();
  if (function.mesh() != nullptr) {
    for (const AxisList& axes : type.dim_axes()) elements /= function.mesh()->GroupSize(axes);
  }
  return elements * ElementTypeByteWidth(type.element_type());
}

// An unfused attention's batched GEMM (layer_program.h: the scores q k^T and the
// probabilities times v): the layer's only matmuls with a [b, heads, s, *] result (its
// projections' are [b, s, width]).
bool IsUnfusedAttentionGemm(const Operation& op) {
  return op.Is(OpKind::kMatmul) && op.num_results() == 1 && op.result(0)->type().rank() == 4;
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

struct SavedValues {
  int64_t all_bytes = 0;
  int64_t attention_bytes = 0;
};

// What a layer keeps of a value its backward reads. With sequence parallelism
// Megatron-LM keeps the sequence-sharded input of a column-parallel GEMM (the norm's
// output) and all-gathers it again in the backward (Korthikanti et al., "Reducing
// Activation Recomputation in Large Transformer Models", section 4.2.2), launching that
// gather before the input-gradient GEMM so that the two overlap
// (LinearWithGradAccumulationAndAsyncCommunication); TransformerEngine's overlapped
// layers do the same. So a gather over tp is kept as its operand, 1/tp of it.
Type KeptType(const Value* value) {
  const Operation* def =
      value->kind() == Value::Kind::kResult ? value->defining_op() : nullptr;
  if (def != nullptr && def->Is(OpKind::kAllGather)) {
    const Attribute* axis = def->attrs().Find("axis");
    if (axis != nullptr && axis->axes() == AxisList{"tp"}) return def->operand(0)->type();
  }
  return value->type();
}

// What the backward reads from the forward, measured on the partitioned programs: the
// gradient function recomputes the forward under the forward's value names (the
// partitioner keeps a result's name), so a value of @layer_grad named like a value of
// @layer, or the layer input, that an op outside the forward uses is an activation the
// layer keeps for its backward. Values only the forward uses are transient.
SavedValues MeasureSaved(const Function& forward, const Function& gradient) {
  absl::flat_hash_set<std::string> forward_names;
  WalkOps(forward.body(), [&](Operation* op) {
    for (Value* result : op->results()) forward_names.insert(result->name());
  });
  forward_names.erase("");
  auto is_backward = [&](const Operation* op) {
    if (op->Is(OpKind::kReturn)) return true;  // a forward value returned as a gradient
    for (Value* result : op->results()) {
      if (forward_names.contains(result->name())) return false;
    }
    return true;
  };
  // The gradient function returns the forward's results first (the re-run forward's
  // output, which the next layer keeps as its input), then the gradients: only a forward
  // value returned among the gradients is kept for this layer's backward.
  const int forward_results = static_cast<int>(forward.result_types().size());
  auto backward_use = [&](const Operation* user, const Value* value) {
    if (!user->Is(OpKind::kReturn)) return is_backward(user);
    for (int i = forward_results; i < user->num_operands(); ++i) {
      if (user->operand(i) == value) return true;
    }
    return false;
  };
  // A reshape or transpose of a kept value is the same tensor in another layout (the
  // attention's [b, s, heads, d] and [b, heads, s, d] views: FlashAttention reads and
  // writes either with strides), kept once: each value's layout root.
  absl::flat_hash_map<const Value*, const Value*> root;
  absl::flat_hash_set<const Value*> kept_roots;
  auto root_of = [&](const Value* v) {
    auto it = root.find(v);
    return it == root.end() ? v : it->second;
  };
  SavedValues saved;
  auto visit = [&](Value* value, bool attention) {
    for (const Operation* user : value->users()) {
      if (!backward_use(user, value)) continue;
      if (!kept_roots.insert(root_of(value)).second) return;  // its layout is kept already
      const int64_t bytes = DeviceBytes(KeptType(value), gradient);
      saved.all_bytes += bytes;
      if (attention) saved.attention_bytes += bytes;
      return;
    }
  };
  // The attention's output and its reshaped and transposed views (the output
  // projection's input): what selective recomputation re-runs the attention to get.
  absl::flat_hash_set<const Value*> attention_outputs;
  auto from_attention = [&](const Operation* op) {
    if (op->Is(OpKind::kAttention) || IsUnfusedAttentionGemm(*op)) return true;
    return (op->Is(OpKind::kReshape) || op->Is(OpKind::kTranspose) ||
            op->Is(OpKind::kSoftmax)) &&
           attention_outputs.contains(op->operand(0));
  };
  visit(gradient.body()->argument(0), false);
  WalkOps(gradient.body(), [&](Operation* op) {
    if (is_backward(op)) return;
    const bool attention = from_attention(op);
    if (op->Is(OpKind::kReshape) || op->Is(OpKind::kTranspose)) {
      root[op->result(0)] = root_of(op->operand(0));
    }
    for (Value* result : op->results()) {
      if (attention) attention_outputs.insert(result);
      visit(result, attention);
    }
  });
  return saved;
}

double MaxExposed(const sim::Prediction& p) {
  double most = 0;
  for (const sim::DevicePrediction& d : p.devices) most = std::max(most, d.exposed_communication_s);
  return most;
}

// A layer's partitioned module with its schedule applied, and the gradient's prediction.
struct ScheduledLayer {
  std::unique_ptr<Module> module;
  std::string schedule;
  Pipeline passes;  // the schedule as a value (schedule is its text)
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
// the fastest of the search space.
absl::StatusOr<ScheduledLayer> ChooseSchedule(std::unique_ptr<Module> partitioned,
                                              const std::string& forward_name,
                                              const std::string& gradient_name,
                                              const LayerLayout& layout,
                                              const LayerCostOptions& options) {
  ScheduledLayer best;
  best.module = std::move(partitioned);
  const LayerSchedule& mode = options.schedule;
  if (mode.mode == LayerSchedule::Mode::kNone) {
    if (absl::Status s = PredictTrainingStep(best, forward_name, gradient_name, options.predict);
        !s.ok())
      return s;
    return best;
  }
  // Each schedule runs on a copy of the partitioned module (printed and parsed back): a
  // pass that refuses a program may have rewritten part of it.
  const std::string plain_text = PrintModule(*best.module);
  if (mode.mode == LayerSchedule::Mode::kFixed) {
    // The fixed schedule is --layer-schedule's text.
    absl::StatusOr<Pipeline> fixed = ParsePipeline(mode.pipeline, RegisteredPasses());
    if (!fixed.ok()) return fixed.status();  // bad pipeline text: the caller's mistake
    absl::StatusOr<std::unique_ptr<Module>> scheduled = ParseAndRun(plain_text, *fixed);
    if (scheduled.ok()) {
      // Passes with nothing to rewrite (ring attention on a layer without cp) leave the
      // layer plain, and the report says so.
      if (PrintModule(**scheduled) != plain_text) {
        best.schedule = mode.pipeline;
        best.passes = *fixed;
      }
      best.module = *std::move(scheduled);
    } else if (scheduled.status().code() == absl::StatusCode::kInvalidArgument) {
      return scheduled.status();  // bad pipeline text: the caller's mistake
    } else {
      best.skipped = 1;  // the passes refuse this layer: it keeps plain collectives
    }
    if (absl::Status s = PredictTrainingStep(best, forward_name, gradient_name, options.predict);
        !s.ok())
      return s;
    return best;
  }

  if (absl::Status s = PredictTrainingStep(best, forward_name, gradient_name, options.predict);
      !s.ok())
    return s;
  absl::flat_hash_set<std::string> seen = {plain_text};
  int64_t programs = best.programs_predicted, skipped = 0;
  // Considers one scheduled module; keeps it when strictly faster than the best so far.
  auto consider = [&](const Pipeline& schedule, std::unique_ptr<Module> module) {
    ScheduledLayer candidate;
    candidate.module = std::move(module);
    candidate.schedule = schedule.ToString();
    candidate.passes = schedule;
    if (!PredictTrainingStep(candidate, forward_name, gradient_name, options.predict).ok()) {
      ++skipped;
      return;
    }
    ++programs;
    if (candidate.seconds < best.seconds) best = std::move(candidate);
  };
  // Greedy, attention first: the whole product (up to 10 attention x 8 matmul
  // schedules on a cp x tp mesh) took the Llama-3 70B search on 1,024 GPUs to 14 s, over
  // the 10 s. The two families rewrite different ops (the attention and its k/v
  // gathers; the tp gathers and scatters around the projections), and the greedy choice
  // equalled the whole product's best on every layout checked (GPT-3 1.3B and Llama-3
  // 70B layers, tp and cp in 1, 2, 4, 8, micro-batch 1 and 8).
  const LayerScheduleSpace space = LayerSchedules(layout);
  std::string best_attention_text = plain_text;
  Pipeline best_attention;
  for (const Pipeline& attention : space.attention) {
    if (attention.empty()) continue;  // plain: predicted above
    absl::StatusOr<std::unique_ptr<Module>> m = ParseAndRun(plain_text, attention);
    if (!m.ok()) {
      ++skipped;
      continue;
    }
    std::string text = PrintModule(**m);
    if (!seen.insert(text).second) continue;  // rewrote nothing, or like an earlier one
    const std::string before = best.schedule;
    consider(attention, *std::move(m));
    if (best.schedule != before) {
      best_attention_text = std::move(text);
      best_attention = attention;
    }
  }
  for (const Pipeline& matmul : space.matmul) {
    if (matmul.empty()) continue;  // the best attention schedule alone: predicted above
    absl::StatusOr<std::unique_ptr<Module>> m = ParseAndRun(best_attention_text, matmul);
    if (!m.ok()) {
      ++skipped;
      continue;
    }
    if (!seen.insert(PrintModule(**m)).second) continue;
    consider(best_attention.Then(matmul), *std::move(m));
  }
  best.programs_predicted = programs;
  best.skipped = skipped;
  return best;
}

std::string Describe(LayerKind kind, const LayerLayout& l) {
  return absl::StrCat(kind == LayerKind::kHead ? "head" : "layer", " (tp=", l.tp, ", cp=", l.cp,
                      l.sequence_parallel ? ", sp" : "", ", micro-batch ", l.micro_batch, ")");
}

// The program to measure: the file's own function laid out, or the generated one.
absl::StatusOr<std::string> LaidOutProgram(const ModelSpec& model, LayerKind kind,
                                           const LayerLayout& layout,
                                           const LayerCostOptions& options,
                                           const std::string& name) {
  const std::string& own =
      kind == LayerKind::kHead ? options.head_function : options.layer_function;
  if (own.empty()) {
    return kind == LayerKind::kHead ? HeadProgram(model, layout)
                                    : TransformerLayerProgram(model, layout);
  }
  MegatronLayoutOptions o;
  o.layout = layout;
  o.vocabulary = kind == LayerKind::kHead ? model.vocabulary : 0;
  o.name = name;  // the name autodiff and the lookups below use
  o.file = options.functions_file;
  return MegatronLayoutText(own, o);
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
  const int first_weight = static_cast<int>(forward->result_types().size()) + 1;
  for (int i = first_weight; i < ret->num_operands(); ++i) {
    Value* value = ret->operand(i);
    if (value->kind() != Value::Kind::kResult) continue;
    Operation* reduce = value->defining_op();
    if (reduce == nullptr || !reduce->Is(OpKind::kAllReduce)) continue;
    const Attribute* axis = reduce->attrs().Find("axis");
    if (axis == nullptr || axis->axes() != AxisList{"cp"}) continue;
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
  const SavedValues saved = MeasureSaved(*forward, *gradient);
  cost.activation_bytes = saved.all_bytes;
  cost.selective_saved_bytes = saved.attention_bytes;
  cost.input_bytes = DeviceBytes(forward->arg_types()[0], *forward);
  cost.schedule = chosen.schedule;
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
absl::Status KeepWhatTheLayerWithoutMatmulScheduleKeeps(const std::string& plain_text,
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
  absl::StatusOr<std::unique_ptr<Module>> module =
      attention.empty() ? ParseModuleOrError(plain_text, "layer.commir")
                        : ParseAndRun(plain_text, attention);
  if (!module.ok()) return module.status();
  const Function* forward = (*module)->FindFunction(name);
  const Function* gradient = (*module)->FindFunction(gradient_name);
  if (forward == nullptr || gradient == nullptr) {
    return absl::InternalError("the forward or gradient function is missing");
  }
  const SavedValues saved = MeasureSaved(*forward, *gradient);
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
  const std::string name = kind == LayerKind::kHead ? kHeadFunction : kLayerFunction;
  absl::StatusOr<std::string> text = LaidOutProgram(model, kind, layout, options, name);
  if (!text.ok()) return fail(text.status());
  const Pipeline pipeline =
      Pipeline{{PassStep::Of<AutodiffPass>(
                   {.func = name, .seed = AutodiffPassOptions::Seed::kCotangents})}}
          .Then(sharding::DefaultSpmdPipeline());
  absl::StatusOr<std::unique_ptr<Module>> partitioned = ParseAndRun(*text, pipeline);
  if (!partitioned.ok()) return fail(partitioned.status());
  const std::string gradient_name = absl::StrCat(name, "_grad");
  if ((*partitioned)->FindFunction(name) == nullptr ||
      (*partitioned)->FindFunction(gradient_name) == nullptr) {
    return fail(absl::InternalError("the forward or gradient function is missing"));
  }
  LeaveWeightGradientsToDataParallel(**partitioned, name, gradient_name);
  // Kept for the plain variant (see LayerCost::plain).
  const std::string plain_text = PrintModule(**partitioned);
  absl::StatusOr<ScheduledLayer> chosen =
      ChooseSchedule(*std::move(partitioned), name, gradient_name, layout, options);
  if (!chosen.ok()) return fail(chosen.status());
  absl::StatusOr<LayerCost> cost = CostOf(*chosen, name, gradient_name, options);
  if (!cost.ok()) return fail(cost.status());
  if (absl::Status s = KeepWhatTheLayerWithoutMatmulScheduleKeeps(plain_text, chosen->passes,
                                                                  name, gradient_name, *cost);
      !s.ok()) {
    return fail(s);
  }
  if (!chosen->schedule.empty()) {
    // A schedule can keep more activations than plain collectives (ring attention's
    // per-step blocks): the plain variant too, for plans the scheduled one does not fit.
    ScheduledLayer plain;
    absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(plain_text, "layer.commir");
    if (!module.ok()) return fail(module.status());
    plain.module = *std::move(module);
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

LayerCost EmbeddingCost(const ModelSpec& model, const LayerLayout& layout,
                        const sim::HardwareSpec& hardware) {
  LayerCost cost;
  const int64_t tokens =
      layout.micro_batch * model.sequence / layout.cp / (layout.sequence_parallel ? layout.tp : 1);
  const int64_t bytes = tokens * model.hidden * ElementTypeByteWidth(model.dtype);
  // A row read and the output written; the backward's scatter-add reads the output's
  // gradient and updates the rows.
  const double move_s = hardware.hbm_bandwidth > 0 ? 2.0 * bytes / hardware.hbm_bandwidth : 0;
  cost.forward_s = move_s + hardware.kernel_launch_overhead_s;
  cost.backward_s = move_s + hardware.kernel_launch_overhead_s;
  cost.activation_bytes = 0;  // the lookup's backward needs only the token ids
  cost.input_bytes = bytes;   // what the first stage sends on, like any layer output
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

std::string LayerCostCache::FunctionsFingerprint() const {
  if (options_.layer_function.empty() && options_.head_function.empty()) return "generated";
  return absl::StrCat(absl::Hash<std::pair<std::string, std::string>>()(
      {options_.layer_function, options_.head_function}));
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
