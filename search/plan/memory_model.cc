#include "search/plan/memory_model.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "search/plan/pipeline_schedule.h"

namespace commir::search::plan {

double InFlightMicrobatches(int64_t p, int64_t s, int64_t v, int64_t m) {
  // The schedule's own count, so that memory follows the order the ranks run (with
  // interleaving and m == p every forward runs before the first backward).
  return static_cast<double>(PeakChunksInFlight(p, std::max<int64_t>(v, 1), m, s)) /
         static_cast<double>(std::max<int64_t>(v, 1));
}

absl::StatusOr<StageMemory> StageMemoryUse(const StageFootprint& f, const MemoryConfig& c) {
  if (c.pipeline_size < 1 || c.virtual_stages < 1 || c.microbatches < 1 || c.dp < 1) {
    return absl::InvalidArgumentError(
        "memory: pipeline size, virtual stages, micro-batches and dp must be at least 1");
  }
  if (c.stage < 0 || c.stage >= c.pipeline_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory: stage ", c.stage, " outside 0..", c.pipeline_size - 1));
  }
  if (c.zero_stage < 0 || c.zero_stage > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory: ZeRO stage ", c.zero_stage, " (expected 0, 1, 2 or 3)"));
  }
  if (f.parameters_per_device < 0 || f.activation_bytes < 0 || f.selective_saved_bytes < 0 ||
      f.input_bytes < 0 || f.largest_layer_activation_bytes < 0 ||
      f.selective_saved_bytes > f.activation_bytes) {
    return absl::InvalidArgumentError("memory: negative or inconsistent footprint");
  }
  if (!(c.headroom_bytes >= 0) || !(c.fragmentation >= 0 && c.fragmentation < 1)) {
    return absl::InvalidArgumentError(
        "memory: headroom must be non-negative and fragmentation in [0, 1)");
  }
  const double params = static_cast<double>(f.parameters_per_device);
  const double dp = static_cast<double>(c.dp);
  StageMemory out;
  out.weights = params * c.weight_bytes_per_param / (c.zero_stage >= 3 ? dp : 1);
  out.gradients = params * c.grad_bytes_per_param / (c.zero_stage >= 2 ? dp : 1);
  out.optimizer = params * c.optimizer_bytes_per_param / (c.zero_stage >= 1 ? dp : 1);
  out.in_flight_microbatches =
      InFlightMicrobatches(c.pipeline_size, c.stage, c.virtual_stages, c.microbatches);
  switch (c.recompute) {
    case Recompute::kNone:
      out.activations = out.in_flight_microbatches * static_cast<double>(f.activation_bytes);
      break;
    case Recompute::kSelective:
      out.activations = out.in_flight_microbatches *
                        static_cast<double>(f.activation_bytes - f.selective_saved_bytes);
      break;
    case Recompute::kFull:
      out.activations = out.in_flight_microbatches * static_cast<double>(f.input_bytes) +
                        static_cast<double>(f.largest_layer_activation_bytes);
      break;
  }
  out.total = out.weights + out.gradients + out.optimizer + out.activations;
  out.headroom = c.headroom_bytes + out.total * c.fragmentation / (1 - c.fragmentation);
  out.fits = c.hbm_capacity_bytes <= 0 || out.total + out.headroom <= c.hbm_capacity_bytes;
  return out;
}

double KorthikantiLayerActivationBytes(int64_t s, int64_t b, int64_t h, int64_t a, int64_t t,
                                       bool selective) {
  const double sbh = static_cast<double>(s) * b * h;
  const double attention = selective ? 0 : 5.0 * a * s / h;
  return sbh * (34 + attention) / t;
}

}  // namespace commir::search::plan
