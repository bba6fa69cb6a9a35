// Predicts one run of a function on a cluster (issue 12): runs the interpreter with the
// sim backend (sim_backend.h) on metadata-only inputs and summarises the timeline.
#ifndef COMMIR_SIM_PREDICT_H_
#define COMMIR_SIM_PREDICT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "sim/hardware.h"

namespace commir::sim {

struct PredictOptions {
  HardwareSpec hardware;
  int64_t gpus_per_node = 8;
  // Whether Prediction::timeline is filled (the summary never needs it).
  bool record_timeline = false;
  // When given, set to the op a failed run stopped at (unknown if none), so that the
  // error can point into the source.
  Location* error_location = nullptr;
};

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
};

absl::StatusOr<Prediction> Predict(const Function& function, const PredictOptions& options);

// Length of the union of `intervals` (start, end), and of the part of it that `cover`'s
// union does not cover. Exposed for tests.
double UnionLength(std::vector<std::pair<double, double>> intervals);
double UncoveredLength(std::vector<std::pair<double, double>> intervals,
                       std::vector<std::pair<double, double>> cover);

}  // namespace commir::sim

#endif  // COMMIR_SIM_PREDICT_H_
