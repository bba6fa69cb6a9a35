#include "sim/predict.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commir/mesh.h"
#include "runtime/interpreter.h"
#include "sim/sim_backend.h"

namespace commir::sim {

namespace {

// Trip count of a loop, as the interpreter counts it.
uint64_t TripCount(const Operation& loop) {
  const int64_t lower = loop.RequiredIntAttr("lower");
  const int64_t upper = loop.RequiredIntAttr("upper");
  const int64_t step = loop.IntAttr("step");
  if (step <= 0 || upper <= lower) return 0;
  return (static_cast<uint64_t>(upper) - static_cast<uint64_t>(lower) - 1) /
             static_cast<uint64_t>(step) +
         1;
}

int64_t SaturatingMultiply(int64_t a, uint64_t b) {
  if (a == 0 || b == 0) return 0;
  if (b > static_cast<uint64_t>(INT64_MAX) / static_cast<uint64_t>(a)) return INT64_MAX;
  return a * static_cast<int64_t>(b);
}

// Kernels per device of one run of `block`. `per_callee` keeps each called function's
// count, so a call graph that fans out costs one walk per function, not per call path.
int64_t CountBlock(const Block& block, const Module* module, int depth, int64_t num_devices,
                   int64_t limit, const Operation*& loop,
                   absl::flat_hash_map<const Function*, int64_t>& per_callee) {
  int64_t total = 0;
  auto add = [&](int64_t n) { total = n > INT64_MAX - total ? INT64_MAX : total + n; };
  if (depth > 256) return 0;  // the interpreter refuses calls nested deeper
  for (const Operation* op : block) {
    if (op->def().Has(kTerminator)) continue;
    if (op->Is(OpKind::kFor)) {
      const int64_t body =
          CountBlock(*op->region(0), module, depth, num_devices, limit, loop, per_callee);
      const int64_t kernels = SaturatingMultiply(body, TripCount(*op));
      // Set after the loops inside it: the outermost one over the limit stays.
      if (SaturatingMultiply(kernels, static_cast<uint64_t>(num_devices)) > limit) loop = op;
      add(kernels);
    } else if (op->Is(OpKind::kCall)) {
      const Function* callee =
          module == nullptr ? nullptr
                            : module->FindFunction(op->attrs().Find("callee")->string_value());
      if (callee != nullptr && callee->body() != nullptr) {
        auto known = per_callee.find(callee);
        if (known == per_callee.end()) {
          const int64_t count = CountBlock(*callee->body(), module, depth + 1, num_devices,
                                           limit, loop, per_callee);
          known = per_callee.emplace(callee, count).first;
        }
        add(known->second);
      }
    } else if (!(op->num_results() == 1 && op->result(0)->type().is_index())) {
      add(1);
    }
  }
  return total;
}

}  // namespace

int64_t CountKernels(const Function& function, int64_t num_devices, int64_t limit,
                     const Operation*& loop) {
  loop = nullptr;
  if (function.body() == nullptr) return 0;
  absl::flat_hash_map<const Function*, int64_t> per_callee;
  const int64_t per_device =
      CountBlock(*function.body(), function.module(), 0, num_devices, limit, loop, per_callee);
  return SaturatingMultiply(per_device, static_cast<uint64_t>(num_devices));
}

absl::StatusOr<Prediction> Predict(const Function& function, const PredictOptions& options,
                                   Location* error_location) {
  Location unused;
  Location& where = error_location != nullptr ? *error_location : unused;
  where = {};
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
  // A timeline needs every kernel: none is repeated in closed form, and one too long to
  // hold (or write) is refused before anything runs.
  const bool every_kernel = options.record_timeline || options.timeline_sink != nullptr;
  SimLimits limits = options.limits;
  if (every_kernel) {
    limits.repeat_loops_in_closed_form = false;
    const Operation* loop = nullptr;
    const int64_t kernels = CountKernels(function, num_devices, limits.max_simulated_kernels, loop);
    if (kernels > limits.max_simulated_kernels) {
      if (loop != nullptr) where = loop->loc();
      return absl::InvalidArgumentError(absl::StrFormat(
          "a timeline of every kernel would hold %s kernels, more than the %d the sim "
          "backend simulates one by one%s",
          kernels == INT64_MAX ? "over 9.2e18" : absl::StrCat(kernels),
          limits.max_simulated_kernels,
          loop == nullptr
              ? ""
              : absl::StrFormat(" (the loop here runs %d iterations)", TripCount(*loop))));
    }
  }
  SimBackend backend(options.hardware, function, num_devices, options.gpus_per_node, limits);
  Prediction prediction;
  if (every_kernel) {
    backend.set_event_sink([&](const SimEvent& e) {
      TimelineEvent event{e.device, e.stream, std::string(e.op->name()), e.start_s * 1e6,
                          e.end_s * 1e6, e.is_communication};
      if (options.timeline_sink) options.timeline_sink(event);
      if (options.record_timeline) prediction.timeline.push_back(std::move(event));
    });
  }
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
    if (const Operation* loop = backend.loop_over_limit(); loop != nullptr) {
      where = loop->loc();
      return absl::InvalidArgumentError(absl::StrFormat(
          "the loop here (%d iterations) needs more than %d kernels simulated one by one: "
          "its iterations do not settle into a repeating steady state that the sim "
          "backend can repeat in closed form",
          TripCount(*loop), limits.max_simulated_kernels));
    }
    where = interpreter.error_location();
    return outputs.status();
  }
  outputs->clear();
  inputs.clear();

  prediction.devices.resize(num_devices);
  double total_communication = 0, total_exposed = 0;
  for (int64_t d = 0; d < num_devices; ++d) {
    DevicePrediction& p = prediction.devices[d];
    p.time_s = backend.finish_s(d);
    p.compute_s = backend.compute_s(d);
    p.communication_s = backend.communication_s(d);
    p.exposed_communication_s = backend.exposed_communication_s(d);
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
  prediction.simulated_kernels = backend.simulated_kernels();
  prediction.repeated_iterations = backend.repeated_iterations();
  prediction.retained_intervals = backend.retained_intervals();
  prediction.attention_positions_unknown = backend.attention_positions_unknown();
  return prediction;
}

}  // namespace commir::sim
