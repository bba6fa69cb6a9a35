#include "search/plan/plan_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "search/plan/layer_program.h"
#include "search/plan/memory_headroom.h"

namespace commir::search::plan {
namespace {

// Byte and parameter counts of a stage saturate instead of overflowing: a stage too big
// for int64 does not fit in any HBM, and must read so rather than as a negative size.
int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::numeric_limits<int64_t>::max();
  return out;
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::numeric_limits<int64_t>::max();
  return out;
}

// Parameters of one layer on one device: the matrices split over tp, norms replicated.
int64_t LayerParametersPerDevice(const ModelSpec& m, int64_t tp) {
  const int64_t norms = (m.architecture == Architecture::kGpt ? 4 : 2) * m.hidden;
  return (LayerParameters(m) - norms) / tp + norms;
}

int64_t TableParametersPerDevice(const ModelSpec& m, int64_t tp) {
  return PaddedVocabulary(m.vocabulary, tp) * m.hidden / tp;
}

}  // namespace

absl::StatusOr<RankCoster> RankCoster::Create(const ModelSpec& model, const ParallelPlan& plan,
                                               LayerCostCache& layers,
                                               const PlanCostOptions& options,
                                               bool plain_layers) {
  RankCoster out;
  out.model_ = model;
  out.plan_ = plan;
  out.options_ = options;
  out.hardware_ = layers.options().predict.hardware;
  out.gpus_per_node_ = layers.options().predict.gpus_per_node;
  const LayerLayout layout{plan.tp, plan.cp, plan.sequence_parallel, plan.micro_batch};
  absl::StatusOr<LayerCost> layer = layers.Get(model, LayerKind::kTransformer, layout);
  if (!layer.ok()) return layer.status();
  absl::StatusOr<LayerCost> head = layers.Get(model, LayerKind::kHead, layout);
  if (!head.ok()) return head.status();
  out.layer_ = plain_layers && layer->plain != nullptr ? *layer->plain : *layer;
  out.head_ = plain_layers && head->plain != nullptr ? *head->plain : *head;
  absl::StatusOr<LayerCost> embedding = layers.Get(model, LayerKind::kEmbedding, layout);
  if (!embedding.ok()) return embedding.status();
  out.embedding_ = *embedding;
  PipelineConfig& pc = out.pipeline_;
  pc.tp = plan.tp;
  pc.cp = plan.cp;
  pc.dp = plan.dp;
  pc.virtual_stages = plan.virtual_stages;
  pc.microbatches = Microbatches(model, plan);
  pc.zero_stage = plan.zero_stage;
  pc.boundary_bytes = layer->input_bytes;
  // GPT's table is tied to its head: with pp > 1 the last rank holds a copy, whose
  // gradient and the first rank's are all-reduced once per iteration.
  if (model.architecture == Architecture::kGpt && plan.pp > 1) {
    pc.tied_embedding_parameters = TableParametersPerDevice(model, plan.tp);
  }
  pc.grad_bytes_per_param = options.grad_bytes_per_param;
  pc.overlap_dp_comm = options.overlap_dp_comm;
  return out;
}

StageCost RankCoster::Cost(int64_t s, int64_t n, Recompute recompute) const {
  const ModelSpec& model = model_;
  const LayerCost* layer = &layer_;
  const LayerCost* head = &head_;
  StageCost c;
  c.forward_s = n * layer->forward_s;
  c.backward_s = n * layer->backward_s;
  c.exposed_tp_comm_s = n * (layer->forward_exposed_comm_s + layer->backward_exposed_comm_s);
  // Each rank's own recomputation (ParallelPlan::stage_recompute): it sets this rank's
  // backward time and activation memory and nothing of the other ranks'.
  if (recompute == Recompute::kSelective) c.recompute_s = n * layer->selective_recompute_s;
  if (recompute == Recompute::kFull) c.recompute_s = n * layer->forward_s;
  c.parameters_per_device = SaturatingMul(n, LayerParametersPerDevice(model, plan_.tp));
  // Data-parallel communication goes layer by layer (the embedding and head ride with
  // the first and last layer's share: a rank with no layer still sends them as one unit).
  c.layers = std::max<int64_t>(1, n);
  if (s == 0) {
    c.forward_s += embedding_.forward_s;
    c.backward_s += embedding_.backward_s;
    c.exposed_tp_comm_s += embedding_.forward_exposed_comm_s + embedding_.backward_exposed_comm_s;
    c.parameters_per_device =
        SaturatingAdd(c.parameters_per_device, TableParametersPerDevice(model, plan_.tp));
    if (model.architecture == Architecture::kGpt) {
      c.parameters_per_device = SaturatingAdd(c.parameters_per_device,
                                              model.sequence * model.hidden);  // learned positions
    }
  }
  if (s == plan_.pp - 1) {
    c.forward_s += head->forward_s;
    c.backward_s += head->backward_s;
    c.exposed_tp_comm_s += head->forward_exposed_comm_s + head->backward_exposed_comm_s;
    c.parameters_per_device = SaturatingAdd(c.parameters_per_device, model.hidden);  // final norm
    // Llama's untied output table; GPT's tied table again when it is on another rank.
    if (model.architecture == Architecture::kLlama || plan_.pp > 1) {
      c.parameters_per_device =
          SaturatingAdd(c.parameters_per_device, TableParametersPerDevice(model, plan_.tp));
    }
  }
  return c;
}

StageFootprint RankCoster::Footprint(int64_t s, int64_t n) const {
  StageFootprint f;
  f.activation_bytes = SaturatingMul(n, layer_.activation_bytes);
  f.selective_saved_bytes = std::min(f.activation_bytes,
                                     SaturatingMul(n, layer_.selective_saved_bytes));
  f.input_bytes = SaturatingMul(n, layer_.input_bytes);
  f.largest_layer_activation_bytes = layer_.activation_bytes;
  if (s == 0) {
    // What the embedding's backward reads (its token ids), never recomputed.
    f.activation_bytes = SaturatingAdd(f.activation_bytes, embedding_.activation_bytes);
    f.input_bytes = SaturatingAdd(f.input_bytes, embedding_.activation_bytes);
  }
  if (s == plan_.pp - 1) {
    // The head's activations stay whatever the recomputation (it is not recomputed).
    f.activation_bytes = SaturatingAdd(f.activation_bytes, head_.activation_bytes);
    f.input_bytes = SaturatingAdd(f.input_bytes, head_.activation_bytes);
  }
  return f;
}

absl::StatusOr<StageMemory> RankCoster::Memory(int64_t s, int64_t n, Recompute r) const {
  MemoryConfig mc;
  mc.pipeline_size = plan_.pp;
  mc.stage = s;
  mc.virtual_stages = plan_.virtual_stages;
  mc.microbatches = pipeline_.microbatches;
  mc.dp = plan_.dp * plan_.cp;  // the distributed optimizer shards over dp x cp
  mc.zero_stage = plan_.zero_stage;
  mc.recompute = r;
  mc.grad_bytes_per_param = options_.grad_bytes_per_param;
  mc.hbm_capacity_bytes = hardware_.hbm_capacity;
  const MemoryHeadroom headroom = HeadroomFor(plan_, options_.memory_headroom_bytes);
  mc.headroom_bytes = headroom.fixed_bytes;
  mc.fragmentation = headroom.fragmentation;
  StageFootprint f = Footprint(s, n);
  f.parameters_per_device = Cost(s, n, r).parameters_per_device;
  return StageMemoryUse(f, mc);
}

absl::StatusOr<double> RankCoster::DataParallelTime(int64_t s, int64_t n, Recompute r) const {
  const int64_t stride = plan_.tp * plan_.cp * plan_.dp;  // devices per pipeline rank
  return DataParallelExposed(Cost(s, n, r), s * stride, pipeline_, hardware_, gpus_per_node_);
}

double RankCoster::MicrobatchSeconds(int64_t s, int64_t n, Recompute r) const {
  const StageCost c = Cost(s, n, r);
  return c.forward_s + c.backward_s + c.recompute_s;
}

namespace {

// With `plain_layers`, the layers' and head's plain variants where they have one
// (LayerCost::plain).
absl::StatusOr<PlanCost> CostPlanWith(const ModelSpec& model, const ParallelPlan& plan,
                                      LayerCostCache& layers, const PlanCostOptions& options,
                                      bool plain_layers) {
  if (absl::Status s = CheckPlan(model, plan); !s.ok()) return s;
  absl::StatusOr<RankCoster> ranks =
      RankCoster::Create(model, plan, layers, options, plain_layers);
  if (!ranks.ok()) return ranks.status();
  const sim::HardwareSpec& hardware = layers.options().predict.hardware;
  const int64_t gpus_per_node = layers.options().predict.gpus_per_node;
  const std::vector<int64_t> stage_layers = LayersPerStage(model, plan);

  PlanCost out;
  out.layer_schedule = ranks->layer().schedule;
  out.head_schedule = ranks->head().schedule;
  for (int64_t s = 0; s < plan.pp; ++s) {
    out.stages.push_back(ranks->Cost(s, stage_layers[s], plan.RecomputeOf(s)));
  }
  absl::StatusOr<PipelineTime> time =
      PredictIteration(out.stages, ranks->pipeline(), hardware, gpus_per_node);
  if (!time.ok()) return time.status();
  out.time = *time;

  for (int64_t s = 0; s < plan.pp; ++s) {
    absl::StatusOr<StageMemory> memory = ranks->Memory(s, stage_layers[s], plan.RecomputeOf(s));
    if (!memory.ok()) return memory.status();
    out.peak_memory_bytes = std::max(out.peak_memory_bytes, memory->total);
    out.fits = out.fits && memory->fits;
    out.memory.push_back(*memory);
  }

  const double seconds = out.time.breakdown.total_s;
  // An infinite or NaN time is no rank: it comes from a cost model fed a value it cannot
  // cost (a hardware figure out of every meaningful range), and is said as an error.
  if (!std::isfinite(seconds) || seconds < 0 || !std::isfinite(out.peak_memory_bytes)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "plan %s on %s: the predicted iteration time (%g s) or peak memory (%g bytes) is not a "
        "finite non-negative number; check the hardware description",
        DescribePlan(plan), hardware.name, seconds, out.peak_memory_bytes));
  }
  if (seconds > 0) {
    out.tokens_per_second = static_cast<double>(model.global_batch) * model.sequence / seconds;
    const double peak = static_cast<double>(plan.gpus()) * hardware.peak_flops_bf16;
    if (peak > 0) out.model_flops_utilization = ModelFlopsPerIteration(model) / seconds / peak;
  }
  return out;
}

}  // namespace

absl::StatusOr<PlanCost> CostPlan(const ModelSpec& model, const ParallelPlan& plan,
                                  LayerCostCache& layers, const PlanCostOptions& options) {
  absl::StatusOr<PlanCost> scheduled = CostPlanWith(model, plan, layers, options, false);
  if (!scheduled.ok() || scheduled->fits) return scheduled;
  // A schedule may keep more activations than plain collectives: a plan the scheduled
  // layers overflow is costed again with the plain ones, which may fit (slower).
  absl::StatusOr<PlanCost> plain = CostPlanWith(model, plan, layers, options, true);
  if (plain.ok() && plain->fits) return plain;
  return scheduled;
}

}  // namespace commir::search::plan
