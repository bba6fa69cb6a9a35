#include "search/plan/pipeline_schedule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace commir::search::plan {
namespace {

// Megatron-LM's get_model_chunk_id and microbatch of virtual step k.
PipelineStep InterleavedStep(int64_t pp, int64_t v, int64_t rank, int64_t k, bool forward) {
  const int64_t in_group = k % (pp * v);
  int64_t local_chunk = in_group / pp;
  if (!forward) local_chunk = v - 1 - local_chunk;
  return {forward, local_chunk * pp + rank, k / (pp * v) * pp + k % pp};
}

}  // namespace

int64_t WarmupForwards(int64_t pp, int64_t v, int64_t microbatches, int64_t rank) {
  const int64_t total = microbatches * v;
  if (v == 1) return std::min(pp - rank - 1, microbatches);
  // megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_
  // interleaving: num_microbatches == pipeline_parallel_size runs every step as warm-up.
  return microbatches == pp ? total : std::min((pp - rank - 1) * 2 + (v - 1) * pp, total);
}

int64_t PeakChunksInFlight(int64_t pp, int64_t v, int64_t microbatches, int64_t rank) {
  const int64_t total = microbatches * v;
  const int64_t warmup = WarmupForwards(pp, v, microbatches, rank);
  return warmup >= total ? total : warmup + 1;
}

std::vector<PipelineStep> OneFOneBSchedule(int64_t pp, int64_t v, int64_t microbatches,
                                           int64_t rank) {
  const int64_t total = microbatches * v;
  const int64_t warmup = WarmupForwards(pp, v, microbatches, rank);
  auto step = [&](int64_t k, bool forward) {
    if (v == 1) return PipelineStep{forward, rank, k};
    return InterleavedStep(pp, v, rank, k, forward);
  };
  std::vector<PipelineStep> steps;
  steps.reserve(2 * total);
  for (int64_t k = 0; k < warmup; ++k) steps.push_back(step(k, true));
  for (int64_t i = 0; i < total - warmup; ++i) {
    steps.push_back(step(warmup + i, true));
    steps.push_back(step(i, false));
  }
  for (int64_t k = total - warmup; k < total; ++k) steps.push_back(step(k, false));
  return steps;
}

std::vector<PipelineStep> AllForwardAllBackwardSchedule(int64_t pp, int64_t v, int64_t microbatches,
                                                        int64_t rank) {
  std::vector<PipelineStep> steps;
  for (int64_t i = 0; i < v; ++i) {
    for (int64_t j = 0; j < microbatches; ++j) steps.push_back({true, i * pp + rank, j});
  }
  for (int64_t i = v - 1; i >= 0; --i) {
    for (int64_t j = 0; j < microbatches; ++j) steps.push_back({false, i * pp + rank, j});
  }
  return steps;
}

std::string DescribeSchedule(const std::vector<PipelineStep>& steps, int64_t v) {
  std::string out;
  for (const PipelineStep& s : steps) {
    if (!out.empty()) out += ' ';
    absl::StrAppend(&out, s.forward ? "F" : "B", s.microbatch);
    if (v > 1) absl::StrAppend(&out, ".", s.chunk);
  }
  return out;
}

}  // namespace commir::search::plan
