// The cpu-mesh check of a plan (for small models and meshes, "the chosen plan's
// training step also runs on the cpu mesh (pipeline stages included) and matches the
// single-device step").
//
// The plan's side: every model chunk (a pipeline rank's layers, from LayersPerStage; with
// v > 1 each rank's v chunks in Megatron-LM's interleaved order; the embedding on the
// first, the head on the last) is a function calling @embed on the first, @layer once per
// layer with that layer's own weights, and @head (with the labels) on the last
// (model_program.h's AddLayerChain). @layer and @head are a model file's own functions
// (PlanCheckOptions; the head must take the labels last and return the loss) or the
// generator's single-device ones (layer_program.h), @embed the generator's
// (embedding_program.h), laid out by megatron_layout.h for the plan's tp x cp layout,
// sequence parallelism and micro-batch. A chunk is inlined, differentiated
// (autodiff{seed=cotangents}, remat=blocks where its rank recomputes fully),
// partitioned by the default spmd pipeline and run on a cpu mesh of tp x cp devices. The
// inputs are random token ids and labels over the model's own vocabulary. Each
// data-parallel replica takes its share of the global batch and runs its micro-batches
// through the chunks in 1F1B order (pipeline_schedule.h): a chunk's forward output is the
// next chunk's input, the last chunk's loss (a mean over the micro-batch's tokens) seeds
// its backward with the micro-batch's share of the global batch (mb / global batch, as
// Megatron-LM scales each micro-batch's loss), a backward sends its input's cotangent to
// the previous chunk, and weight gradients accumulate over micro-batches, then sum over
// replicas.
//
// The reference: the same layer and head functions chained as ONE global function on one
// device over the whole global batch (a model file's functions, written for one
// micro-batch: over it a micro-batch at a time, weight gradients summed), differentiated
// the same way, with the same weights, ids and labels, the loss seeding the backward.
// Compared: the loss over the global batch as the forward functions give it and as the
// gradient functions re-run it, and the embedding's, each layer's and the head's weight
// gradients, each tensor against its own max |reference| (an all-zero reference fails: it would
// compare nothing). GPT's head is tied to the embedding's table on both sides: one
// weight, whose gradient is the lookup's plus the head's. In a chunk holding both (one
// pipeline rank) autodiff sums them; with pipeline stages the last chunk's head takes the
// first chunk's table and its gradient is added to the table's, the sum Megatron-LM
// all-reduces between the first and last ranks. Always in f32, whatever the model's dtype; the vocabulary is padded
// for the plan's tp on both sides.
#ifndef COMMIR_SEARCH_PLAN_PLAN_CHECK_H_
#define COMMIR_SEARCH_PLAN_PLAN_CHECK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "search/plan/model_spec.h"
#include "runtime/tensor.h"
#include "search/plan/parallel_plan.h"

namespace commir::search::plan {

// Deliberate mistakes in the pipelined run, for tests only: they show that the check
// catches a wrong pipeline rather than passing whatever runs.
enum class PlanCheckFault {
  kNone,
  // The weight gradients of data-parallel replica 0's last micro-batch are not
  // accumulated (a lost micro-batch).
  kDropMicrobatchGradient,
  // The first two model chunks run in the wrong order: chunk 1 takes the batch and
  // feeds chunk 0 (stages swapped); needs at least two chunks of the same layer count.
  kSwapFirstStages,
  // GPT's head is run untied: its copy of the embedding's table gets a gradient of its
  // own, which is not added to the table's (the tied sum Megatron-LM all-reduces between
  // the first and last pipeline ranks is lost).
  kUntieHead,
};

// The order each rank runs its steps in (pipeline_schedule.h): 1F1B as Megatron-LM does,
// or GPipe's all forwards then all backwards; the check passes either way, since the
// order changes only the rounding of the gradient sums.
enum class PipelineOrder { kOneFOneB, kAllForwardAllBackward };

struct PlanCheckOptions {
  // Pass when every tensor's max |actual - reference| / its max |reference| is at most
  // this.
  double tolerance = 1e-4;
  // A model file's own layer and head (model_reader.h: a module holding the unannotated
  // single-device functions `layer_name` and `head_name`, written for `micro_batch`,
  // which must be the plan's; their ops keep the file's positions); null: the
  // generator's for the model.
  std::shared_ptr<const Module> functions;
  std::string layer_name;
  std::string head_name;
  int64_t micro_batch = 0;
  std::string file;  // where they were written (errors are FILE:LINE:COL: ...)
  // Keep the plan's compared tensors' values in the result (tests compare runs).
  bool keep_actual = false;
  // The most elements (weights plus the reference's activations over the global batch)
  // and devices the check takes on: the cpu runs them all in one process.
  int64_t max_elements = 4'000'000;
  int64_t max_devices = 64;
  // Seeds the weights, the token ids and the labels.
  uint64_t seed = 1;
  PipelineOrder order = PipelineOrder::kOneFOneB;
  PlanCheckFault fault = PlanCheckFault::kNone;
};

// One compared group of tensors ("output", "input gradient", "layer 3 weight gradients",
// "head weight gradients").
struct TensorGroupCheck {
  std::string name;
  int64_t tensors = 0;
  int64_t elements = 0;
  double max_abs_error = 0;
  double max_reference = 0;  // max |reference| over the group
  // The largest of each tensor's max |actual - reference| / its own max |reference|.
  double max_rel_error = 0;
  std::string problem;  // why it fails other than by error: an all-zero reference, NaN
  bool pass = false;
};

struct PlanCheckResult {
  std::vector<TensorGroupCheck> groups;
  bool pass = false;
  double tolerance = 0;
  int64_t devices = 0;       // tp x cp x pp x dp
  int64_t microbatches = 0;  // per replica
  int64_t chunks = 0;        // pp x v
  // Ops the plan's gradient functions recompute (marked `remat`), summed over the
  // distinct chunk programs: > 0 exactly when full recomputation found the blocks.
  int64_t recomputed_ops = 0;
  // Each pipeline rank's steps as executed (DescribeSchedule), rank 0 first.
  std::vector<std::string> rank_schedules;
  // With keep_actual: every compared tensor's values from the plan's run, group order.
  std::vector<std::vector<float>> actual;
};

absl::StatusOr<PlanCheckResult> CheckPlanOnCpuMesh(const ModelSpec& model, const ParallelPlan& plan,
                                                   const PlanCheckOptions& options = {});

// One line per group and a verdict line:
//   "output    1 tensors  max|ref|=1.00e-02  max_abs=1.19e-07  max_rel=2.01e-06  PASS"
//   "PASS: tp=2 ... on the cpu mesh (8 devices, 2 model chunks, 4 micro-batches per
//    replica) matches one device (f32, tolerance 1e-04)"
// A 1-device plan "matches one device trivially" (it runs the reference program).
std::string FormatPlanCheck(const PlanCheckResult& result, const ParallelPlan& plan);

// One group's comparison, each f32 tensor judged against its own max |reference| (a
// small tensor beside a large one is not judged on the large one's scale). A reference
// that is all zero matches an all-zero tensor only (a gradient can be exactly zero on
// both sides, as the query weights' with a one-token sequence); a value that is not
// finite fails.
TensorGroupCheck CompareTensorGroup(const std::string& name,
                                    const std::vector<const runtime::Tensor*>& actual,
                                    const std::vector<const runtime::Tensor*>& expected,
                                    double tolerance);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_PLAN_CHECK_H_
