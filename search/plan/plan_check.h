// The cpu-mesh check of a plan (issue 15: "for small models and meshes the chosen plan's
// training step also runs on the cpu mesh (pipeline stages included) and matches the
// single-device step").
//
// The plan's side: every model chunk (a pipeline rank's layers, from LayersPerStage; with
// v > 1 each rank's v chunks in Megatron-LM's interleaved order; the head on the last) is
// a function calling @layer (layer_program.h, for the plan's tp x cp layout, sequence
// parallelism and micro-batch) once per layer with that layer's own weights, and @head
// on the last. It is inlined, differentiated (autodiff{seed=cotangents}, remat=blocks
// for full recomputation), partitioned by the default spmd pipeline and run on a cpu mesh
// of tp x cp devices. Each data-parallel replica takes its share of the global batch and
// runs its micro-batches through the chunks in 1F1B order (pipeline_schedule.h): a
// chunk's forward output is the next chunk's input, its backward sends the input's
// cotangent to the previous chunk, and weight gradients accumulate over micro-batches,
// then sum over replicas.
//
// The reference: the same layers and head as ONE global function over the whole global
// batch on one device, differentiated the same way, with the same weights and output
// cotangent. Compared: the output (softmax over the padded vocabulary), the input's
// gradient, and each layer's and the head's weight gradients. Always in f32, whatever
// the model's dtype; the vocabulary is padded for the plan's tp on both sides.
#ifndef COMMIR_SEARCH_PLAN_PLAN_CHECK_H_
#define COMMIR_SEARCH_PLAN_PLAN_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "search/plan/model_spec.h"
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
};

// The order each rank runs its steps in (pipeline_schedule.h): 1F1B as Megatron-LM does,
// or GPipe's all forwards then all backwards; the check passes either way, since the
// order changes only the rounding of the gradient sums.
enum class PipelineOrder { kOneFOneB, kAllForwardAllBackward };

struct PlanCheckOptions {
  // Pass when every group's max |actual - reference| / max |reference| is at most this.
  double tolerance = 1e-4;
  // The most elements (weights plus the reference's activations over the global batch)
  // and devices the check takes on: the cpu runs them all in one process.
  int64_t max_elements = 4'000'000;
  int64_t max_devices = 64;
  // Seeds the weights, the input and the output cotangent.
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
  double max_reference = 0;  // max |reference|
  double max_rel_error = 0;  // max_abs_error / max_reference (max_abs_error if that is 0)
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
};

absl::StatusOr<PlanCheckResult> CheckPlanOnCpuMesh(const ModelSpec& model, const ParallelPlan& plan,
                                                   const PlanCheckOptions& options = {});

// One line per group and a verdict line:
//   "output                      1 tensors  max_abs=1.19e-07  max_rel=2.01e-06  PASS"
//   "PASS: tp=2 ... on the cpu mesh (8 devices, 2 model chunks, 4 micro-batches per
//    replica) matches one device (f32, tolerance 1e-04)"
std::string FormatPlanCheck(const PlanCheckResult& result, const ParallelPlan& plan);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_PLAN_CHECK_H_
