// Predicts one run of a function on a cluster: runs the interpreter with the
// sim backend (sim_backend.h) on metadata-only inputs and summarises the timeline.
#ifndef COMMIR_SIM_PREDICT_H_
#define COMMIR_SIM_PREDICT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "sim/hardware.h"
#include "sim/sim_backend.h"

namespace commir::sim {


struct DevicePrediction {
  double time_s = 0;           // when the device's last kernel ends
  double compute_s = 0;        // union of its compute kernels' intervals
  double communication_s = 0;  // union of its communication kernels' intervals
  // Communication time not covered by any compute interval of the device.
  double exposed_communication_s = 0;
  int64_t peak_memory_bytes = 0;  // inputs included
};

// One kernel of the predicted timeline, for a Perfetto/Chrome trace: one process per
// device, one track per stream.
struct TimelineEvent {
  int64_t device = 0;
  int64_t stream = 0;
  std::string op;
  double start_us = 0;
  double end_us = 0;
  bool is_communication = false;
};

struct PredictOptions {
  HardwareSpec hardware;
  int64_t gpus_per_node = 8;
  // Whether Prediction::timeline is filled (the summary never needs it).
  bool record_timeline = false;
  // Called with each kernel of the timeline as it is issued, none kept (a trace written
  // as it is made). Like record_timeline it needs every kernel simulated: loops are not
  // repeated in closed form, and a run of more than limits.max_simulated_kernels
  // kernels is refused before it starts.
  std::function<void(const TimelineEvent&)> timeline_sink;
  SimLimits limits;
};

struct Prediction {
  double time_s = 0;  // the slowest device
  std::vector<DevicePrediction> devices;
  // Hidden over total communication, summed over devices (1 when there is none).
  double overlap_fraction = 1;
  double total_flops = 0;  // over every device
  // total_flops / time_s / devices, in TFLOP/s per GPU.
  double achieved_tflops_per_gpu = 0;
  // The seconds the FLOPs would take at each op's matmul peak, over time_s x devices.
  double fraction_of_peak = 0;
  std::vector<TimelineEvent> timeline;  // in issue order, when asked for
  // How the simulation went: kernels simulated one by one, loop iterations repeated in
  // closed form, and the intervals the backend still held at the end.
  int64_t simulated_kernels = 0;
  uint64_t repeated_iterations = 0;
  int64_t retained_intervals = 0;
  // Causal attention kernels priced at the op table's average mask because their
  // positions were not known (reported when nonzero).
  int64_t attention_positions_unknown = 0;
};

// `error_location`, when given, is set to where a failure points in the function's file:
// the op that failed, or the outermost loop running when the kernel limit was passed.
absl::StatusOr<Prediction> Predict(const Function& function, const PredictOptions& options,
                                   Location* error_location = nullptr);

// The kernels a run of `function` issues on `num_devices` devices (saturating), and in
// `loop` the outermost loop that alone issues more than `limit` (null if none).
int64_t CountKernels(const Function& function, int64_t num_devices, int64_t limit,
                     const Operation*& loop);

}  // namespace commir::sim

#endif  // COMMIR_SIM_PREDICT_H_
