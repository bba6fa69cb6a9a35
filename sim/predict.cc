#include "sim/predict.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "commir/mesh.h"
#include "runtime/interpreter.h"
#include "sim/sim_backend.h"

namespace commir::sim {

namespace {

using Intervals = std::vector<std::pair<double, double>>;

// Sorted, disjoint intervals with the same union.
Intervals Merge(Intervals intervals) {
  std::sort(intervals.begin(), intervals.end());
  Intervals merged;
  for (const auto& [s, e] : intervals) {
    if (e <= s) continue;
    if (!merged.empty() && s <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, e);
    } else {
      merged.emplace_back(s, e);
    }
  }
  return merged;
}

}  // namespace

double UnionLength(Intervals intervals) {
  double total = 0;
  for (const auto& [s, e] : Merge(std::move(intervals))) total += e - s;
  return total;
}

double UncoveredLength(Intervals intervals, Intervals cover) {
  Intervals a = Merge(std::move(intervals));
  Intervals b = Merge(std::move(cover));
  double uncovered = 0;
  size_t j = 0;
  for (const auto& [s, e] : a) {
    double covered = 0;
    while (j < b.size() && b[j].second <= s) ++j;
    for (size_t k = j; k < b.size() && b[k].first < e; ++k) {
      covered += std::min(e, b[k].second) - std::max(s, b[k].first);
    }
    uncovered += (e - s) - covered;
  }
  return uncovered;
}

absl::StatusOr<Prediction> Predict(const Function& function, const PredictOptions& options) {
  if (options.gpus_per_node < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("gpus per node must be at least 1, got %d", options.gpus_per_node));
  }
  if (function.body() == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("@%s has no body", function.name()));
  }
  const Mesh* mesh = function.is_spmd() ? function.mesh() : nullptr;
  if (function.is_spmd() && mesh == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("spmd @%s has no mesh", function.name()));
  }
  const int64_t num_devices = mesh != nullptr ? mesh->num_devices() : 1;
  // Checked before the per-device tables are sized (the interpreter checks it again).
  if (num_devices < 1 || num_devices > runtime::Interpreter::kMaxDevices) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot simulate a mesh of %d devices", num_devices));
  }
  SimBackend backend(options.hardware, function, num_devices, options.gpus_per_node);
  runtime::Interpreter interpreter(function, backend);

  // Metadata-only inputs from the body's argument types (per-device types in spmd functions).
  const Block& body = *function.body();
  std::vector<std::vector<runtime::Tensor>> inputs(num_devices);
  for (int64_t d = 0; d < num_devices; ++d) {
    for (int i = 0; i < body.num_arguments(); ++i) {
      Type type = body.argument(i)->type();
      if (!type.is_tensor()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "argument %%%s of @%s is an index; only tensor arguments can be simulated",
            body.argument(i)->name(), function.name()));
      }
      // Type and shape only, no storage and no bytes: ToDevice turns it into a counted
      // SimStorage the interpreter alone holds, so an input's memory is freed after its
      // last use like any other value's (the caller hands its inputs over).
      inputs[d].push_back(runtime::Tensor::OnDevice(type.element_type(), type.dims(), nullptr));
    }
  }
  absl::StatusOr<std::vector<std::vector<runtime::Tensor>>> outputs = interpreter.Run(inputs);
  if (!outputs.ok()) {
    if (options.error_location != nullptr) *options.error_location = interpreter.error_location();
    return outputs.status();
  }
  outputs->clear();
  inputs.clear();

  Prediction prediction;
  prediction.devices.resize(num_devices);
  std::vector<Intervals> compute(num_devices), communication(num_devices);
  for (const SimEvent& e : backend.events()) {
    (e.is_communication ? communication : compute)[e.device].emplace_back(e.start_s, e.end_s);
  }
  double total_communication = 0, total_exposed = 0;
  for (int64_t d = 0; d < num_devices; ++d) {
    DevicePrediction& p = prediction.devices[d];
    p.time_s = backend.finish_s(d);
    p.compute_s = UnionLength(compute[d]);
    p.communication_s = UnionLength(communication[d]);
    p.exposed_communication_s = UncoveredLength(communication[d], compute[d]);
    p.peak_memory_bytes = backend.memory().peak_bytes(d);
    prediction.time_s = std::max(prediction.time_s, p.time_s);
    total_communication += p.communication_s;
    total_exposed += p.exposed_communication_s;
  }
  // An infinite or NaN time is no prediction: it comes from a hardware figure or a size
  // the cost model cannot price, and is an error rather than "inf ms".
  for (int64_t d = 0; d < num_devices; ++d) {
    const DevicePrediction& p = prediction.devices[d];
    if (!std::isfinite(p.time_s) || !std::isfinite(p.compute_s) ||
        !std::isfinite(p.communication_s) || !std::isfinite(p.exposed_communication_s)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "the predicted time of device %d on %s is not finite (%g s); check the hardware "
          "description and the sizes",
          d, options.hardware.name, p.time_s));
    }
  }
  if (total_communication > 0) {
    prediction.overlap_fraction = (total_communication - total_exposed) / total_communication;
  }
  prediction.total_flops = backend.total_flops();
  if (prediction.time_s > 0) {
    double device_seconds = prediction.time_s * static_cast<double>(num_devices);
    prediction.achieved_tflops_per_gpu = prediction.total_flops / device_seconds / 1e12;
    prediction.fraction_of_peak = backend.flops_at_peak_s() / device_seconds;
  }
  if (options.record_timeline) {
    prediction.timeline.reserve(backend.events().size());
    for (const SimEvent& e : backend.events()) {
      prediction.timeline.push_back({e.device, e.stream, std::string(e.op->name()),
                                     e.start_s * 1e6, e.end_s * 1e6, e.is_communication});
    }
  }
  return prediction;
}

}  // namespace commir::sim
