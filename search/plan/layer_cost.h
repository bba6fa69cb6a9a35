// Per-layer costs for the plan search, measured by the sim on the layer's
// real CommIR program (layer_program.h): the program for one micro-batch on the tp x cp
// mesh, its gradient by `autodiff{seed=cotangents}`, both partitioned by the spmd
// pipeline (propagate-sharding, lower-to-spmd, canonicalize, cse, dce) and a
// communication schedule (layer_schedule.h), then predicted by sim::Predict. A weight
// gradient's all-reduce over cp alone is taken out of the gradient function first:
// Megatron-LM reduces weight gradients once per iteration over dp x cp, which
// pipeline_model.h's data-parallel term costs, not in every micro-batch's layer.
//
// The schedule (LayerCostOptions::schedule): by default the best of the operator
// search's space (LayerSchedules). The layer is partitioned once and each schedule runs
// on a copy of the partitioned module, forward and gradient functions alike; the one
// with the least predicted forward + backward time is kept, ties to the earlier in
// enumeration (plain collectives first). Chosen greedily: the best attention schedule
// first, then the best collective-matmul schedule composed after it (the whole product
// took the Llama-3 70B search on 1,024 GPUs to 14 s; see layer_cost.cc). A schedule a
// pass refuses (or the sim cannot predict) is skipped and counted; one whose program
// has the structural fingerprint of an earlier one (nothing to rewrite) is not predicted
// again. The copies are Module::Clone's of the laid-out module, built in memory (no
// program text is printed or parsed). A fixed schedule is
// applied where its passes accept the program; where they refuse it the layer keeps
// plain collectives (the refusal is counted).
//
//  * forward_s: @layer's predicted time (the slowest device).
//  * backward_s: @layer_grad's time minus forward_s. The gradient function recomputes
//    the forward before its backward ops, so this is the backward alone; a fully
//    recomputed layer's backward is @layer_grad's whole time.
//  * selective_recompute_s: the attention kernels' time in the forward timeline (device
//    0), what Megatron-LM's selective recomputation re-runs (its "core attention"); with
//    the model's attention=unfused, its two batched GEMMs and the softmax between them.
//  * activation_bytes: per device, the forward values the gradient function's backward
//    ops read (the layer input included; saved_activations.h, which tells the forward
//    part of @layer_grad from its backward by identity, not by value names): what a
//    layer keeps for its backward without
//    recomputation, measured on the partitioned programs as Megatron-LM keeps them: a tp
//    all_gather's result as its sharded operand (gathered again in the backward), a
//    reshaped or transposed copy of a kept value once, not the layer's output (the next
//    layer's input), and with a collective-matmul schedule what the layer without it
//    keeps (TransformerEngine keeps the same sharded inputs).
//  * selective_saved_bytes: of those, the attention's output and its reshaped or
//    transposed views (the output projection's input), which selective recomputation
//    re-runs the attention (from the kept q, k, v) to get. With a fused attention kernel
//    the s^2 scores of Korthikanti et al. are never stored (attention_grad recomputes
//    them inside the backward already), so this is all selective recomputation saves.
//    An unfused attention (attention=unfused) keeps its softmax's [b, heads, s, s]
//    output too, which selective recomputation drops, as Korthikanti et al. describe.
//  * input_bytes: per device, the layer input (the residual stream): what full
//    recomputation keeps, and what a pipeline stage sends its neighbour per micro-batch.
//
// The input embedding (LayerKind::kEmbedding) is costed the same way from its own program
// (embedding_program.h: the vocabulary-parallel lookup, GPT's positions): its forward,
// the autodiff backward (the table's gradient by scatter_add) and whatever communication
// the partitioner gives them (the partial rows' all_reduce or reduce_scatter over tp). It
// is always the generated program (a model file's own embedding is not read yet); its
// token ids have no gradient, so every gradient it returns is a weight's.
#ifndef COMMIR_SEARCH_PLAN_LAYER_COST_H_
#define COMMIR_SEARCH_PLAN_LAYER_COST_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "commir/ir.h"
#include "search/plan/layer_program.h"
#include "search/plan/layer_schedule.h"
#include "search/plan/model_spec.h"
#include "sim/predict.h"
#include "transforms/pipeline.h"

namespace commir::search::plan {

struct LayerCost {
  double forward_s = 0;
  double backward_s = 0;
  double forward_exposed_comm_s = 0;   // the slowest device's, within forward_s
  double backward_exposed_comm_s = 0;  // the gradient function's less the forward's
  double selective_recompute_s = 0;
  int64_t activation_bytes = 0;
  int64_t selective_saved_bytes = 0;
  int64_t input_bytes = 0;
  double forward_flops = 0;  // over the layer's devices
  // The schedule passes the layer was costed with (empty for plain collectives), as
  // commir-opt takes them after the spmd pipeline (ToString: their text).
  Pipeline schedule;
  int64_t programs_predicted = 0;  // distinct (scheduled) programs predicted, plain included
  int64_t schedules_skipped = 0;   // compositions a pass refused or the sim could not predict
  // With a schedule that keeps more activations than plain collectives: the plain
  // variant's cost, slower but lighter in every recomputation, which plan_cost.h falls
  // back to when the scheduled layer does not fit. Null otherwise (ring attention keeps
  // less than the plain gathers: each device's own key/value blocks).
  std::shared_ptr<const LayerCost> plain;
};

enum class LayerKind { kTransformer, kHead, kEmbedding };

struct LayerCostOptions {
  sim::PredictOptions predict;
  LayerSchedule schedule = LayerSchedule::Search();
  // A model file's own unannotated single-device layer and head (model_reader.h's
  // ModelFromIr::functions: Function::Clone copies that keep the file's positions, read
  // only, shared by the search's threads), each laid out by megatron_layout.h for each
  // layout on a clone. Null: layer_program.h's generated programs (built in memory).
  std::shared_ptr<const Module> functions;
  std::string layer_name;
  std::string head_name;
  // Where they were written (layout errors are FILE:LINE:COL: ...).
  std::string functions_file;
};

// Measures one layer's cost (no cache). Errors are the generator's, the spmd
// pipeline's, a fixed schedule's bad pass options, or the sim's on the plain program,
// prefixed with the layer and layout.
absl::StatusOr<LayerCost> MeasureLayerCost(const ModelSpec& model, LayerKind kind,
                                           const LayerLayout& layout,
                                           const LayerCostOptions& options);

// MeasureLayerCost with a cache keyed by the model's sizes, the kind, the layout, the
// hardware's name, the schedule mode (none, search or the fixed pipeline) and a model
// file's functions (their names and structural fingerprint, commir/fingerprint.h): a plan
// search asks for the same few layers many times. Thread-safe.
class LayerCostCache {
 public:
  explicit LayerCostCache(LayerCostOptions options) : options_(std::move(options)) {}
  absl::StatusOr<LayerCost> Get(const ModelSpec& model, LayerKind kind, const LayerLayout& layout);
  // Records a cost known already (kept over any entry for the same key): what Get then
  // answers without measuring. For costs constructed directly, e.g. plan_cost's tests of
  // its choice between a layer's scheduled and plain variants.
  void Put(const ModelSpec& model, LayerKind kind, const LayerLayout& layout, LayerCost cost);
  int64_t measured() const;  // layers measured so far (cache misses)
  // Distinct programs predicted for them (each layer's scheduled variants included).
  int64_t programs_predicted() const;
  // The cache key of a layer (exposed so tests can check what it distinguishes).
  std::string Key(const ModelSpec& model, LayerKind kind, const LayerLayout& layout) const;
  const LayerCostOptions& options() const { return options_; }

 private:
  std::string FunctionsFingerprint() const;  // of the file's functions, if any

  LayerCostOptions options_;
  mutable absl::Mutex mutex_;
  absl::flat_hash_map<std::string, absl::StatusOr<LayerCost>> cache_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_LAYER_COST_H_
