// The sim backend (issue 12, "Timeline"): a runtime::Backend that advances clocks instead
// of computing. The interpreter keeps owning control flow, loops, liveness and collective
// grouping; this backend only answers "when is each value ready" and "how many bytes are
// live", with the times from op_time.h and collective_op.h.
//
// Values are metadata-only device tensors (Tensor::OnDevice with a SimStorage): no tensor
// data is ever allocated, inputs included.
//
// The schedule, per device d and stream s a clock:
//  * an op starts at max(clock[d][s], ready time of each operand) and ends OpTime later;
//  * a collective starts when its slowest group member is ready (max over the members of
//    their stream clock and operand ready time) and ends, for every member, after the
//    collective's time;
//  * compute kernels of one device share its SMs: a compute kernel runs in the earliest
//    gap of the device's busy compute time that fits it after its start (so a kernel
//    issued later on another stream may fill an earlier idle gap), never beside another
//    compute kernel;
//  * communication overlaps compute and other communication on other streams.
// Approximations (why): a GEMM or attention that overlaps a communication kernel on another
// stream of its device is slowed by hw.gemm_comm_overlap_slowdown over the overlapped part,
// but only when the communication was issued first in program order: re-timing an op
// already issued would move every value that depends on it, which a single pass in
// program order cannot do. A `shift` inside one node takes the copy-engine path when the
// hardware has copy engines: it uses no SMs and slows nothing. Communication kernels are
// never slowed by compute (the hardware description has no figure for that).
#ifndef COMMIR_SIM_SIM_BACKEND_H_
#define COMMIR_SIM_SIM_BACKEND_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "runtime/backend.h"
#include "runtime/tensor.h"
#include "sim/hardware.h"

namespace commir::sim {

// Bytes live on each device now and at their peak. Shared by every SimStorage, so a
// storage that outlives the backend still has somewhere to count down.
class DeviceMemoryCounter {
 public:
  explicit DeviceMemoryCounter(int64_t num_devices)
      : live_(num_devices, 0), peak_(num_devices, 0) {}
  void Allocate(int64_t device, int64_t bytes);
  void Free(int64_t device, int64_t bytes) { live_[device] -= bytes; }
  int64_t live_bytes(int64_t device) const { return live_[device]; }
  int64_t peak_bytes(int64_t device) const { return peak_[device]; }

 private:
  std::vector<int64_t> live_;
  std::vector<int64_t> peak_;
};

// A value's storage in the simulation: no bytes, only when the value is ready, where it
// lives and how large it is (counted into the device's memory while it lives).
class SimStorage : public runtime::DeviceStorage {
 public:
  SimStorage(std::shared_ptr<DeviceMemoryCounter> memory, int64_t device, int64_t bytes,
             double ready_s);
  ~SimStorage() override;
  SimStorage(const SimStorage&) = delete;
  SimStorage& operator=(const SimStorage&) = delete;

  int64_t device() const { return device_; }
  int64_t bytes() const { return bytes_; }
  double ready_s() const { return ready_s_; }

 private:
  std::shared_ptr<DeviceMemoryCounter> memory_;
  int64_t device_;
  int64_t bytes_;
  double ready_s_;
};

// One kernel on the predicted timeline.
struct SimEvent {
  int64_t device = 0;
  int64_t stream = 0;
  const Operation* op = nullptr;
  double start_s = 0;
  double end_s = 0;
  bool is_communication = false;
};

class SimBackend : public runtime::Backend {
 public:
  // `function` is the function the interpreter runs; `num_devices` its device count.
  SimBackend(const HardwareSpec& hw, const Function& function, int64_t num_devices,
             int64_t gpus_per_node);

  absl::string_view name() const override { return "sim"; }
  absl::StatusOr<std::vector<runtime::Tensor>> RunOp(
      const Operation& op, const runtime::OpContext& context,
      absl::Span<const runtime::Tensor* const> tensors,
      absl::Span<const int64_t> indices) override;
  absl::StatusOr<std::vector<runtime::Tensor>> RunCollective(
      const Operation& op, const runtime::CollectiveContext& context,
      absl::Span<const runtime::Tensor* const> parts) override;
  bool uses_device_memory() const override { return true; }
  // Shares a SimStorage input's metadata (no copy); any other tensor (Predict passes
  // metadata-only ones with no storage) becomes a SimStorage tensor of its size, ready at
  // time 0, without reading or copying bytes.
  absl::StatusOr<runtime::Tensor> ToDevice(int64_t device, const runtime::Tensor& host) override;
  // The metadata-only tensor itself: there are no bytes to bring back.
  absl::StatusOr<runtime::Tensor> ToHost(const runtime::Tensor& value) override { return value; }

  // A metadata-only tensor on `device`, counted in its memory, ready at `ready_s`.
  runtime::Tensor MakeValue(int64_t device, ElementType type, std::vector<int64_t> shape,
                            double ready_s);

  // Every kernel issued, in issue order.
  const std::vector<SimEvent>& events() const { return events_; }
  const DeviceMemoryCounter& memory() const { return *memory_; }
  // When the device's last kernel ends.
  double finish_s(int64_t device) const { return finish_[device]; }
  // FLOPs of every op run on every device, and the seconds they would take at the
  // hardware's matmul peak for their element type (for the fraction of peak).
  double total_flops() const { return total_flops_; }
  double flops_at_peak_s() const { return flops_at_peak_s_; }

 private:
  struct OpModel {
    double seconds = 0;
    double flops = 0;
    double flops_at_peak_s = 0;
    bool slowed_by_communication = false;  // a GEMM or attention
  };
  absl::StatusOr<const OpModel*> ModelOf(const Operation& op);
  double& Clock(int64_t device, int64_t stream);
  // Seconds of [start, start + seconds) that overlap SM-using communication already issued
  // on `device` on a stream other than `stream`.
  double OverlapWithCommunication(int64_t device, int64_t stream, double start,
                                  double seconds) const;
  bool UsesCopyEngine(const Operation& op, int64_t device) const;
  void Record(int64_t device, int64_t stream, const Operation& op, double start, double end,
              bool is_communication);

  const HardwareSpec& hw_;
  const Function& function_;
  int64_t gpus_per_node_;
  std::shared_ptr<DeviceMemoryCounter> memory_;
  std::vector<absl::flat_hash_map<int64_t, double>> clocks_;
  std::vector<double> finish_;
  absl::flat_hash_map<const Operation*, OpModel> op_models_;
  // A collective's time for a group (and whether a copy engine moves it), keyed by the op
  // and the group's first device (each member for a shift).
  struct CollectiveCost {
    double seconds = 0;
    bool copy_engine = false;  // UsesCopyEngine for this member
  };
  absl::flat_hash_map<std::pair<const Operation*, int64_t>, CollectiveCost> collective_seconds_;
  // Per device, the SM-using communication kernels issued so far (start, end, stream).
  struct Interval {
    double start, end;
    int64_t stream;
  };
  std::vector<std::vector<Interval>> sm_communication_;
  // Per device, the intervals its compute kernels occupy, sorted and disjoint.
  std::vector<std::vector<std::pair<double, double>>> compute_busy_;
  std::vector<SimEvent> events_;
  double total_flops_ = 0;
  double flops_at_peak_s_ = 0;
};

}  // namespace commir::sim

#endif  // COMMIR_SIM_SIM_BACKEND_H_
