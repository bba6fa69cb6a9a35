// The sim backend: a runtime::Backend that advances clocks instead
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
// A causal attention's time depends on its q_pos and k_pos values, which the interpreter
// passes with each run of the op: every device and ring step is priced for the block it
// computes (sim/attention_time.h), and a loop whose positions follow its iterations is
// never repeated in closed form (sim/attention_positions.h).
// Contention (contention.h): a GEMM or attention that overlaps communication on another
// stream of its device runs, over the overlapped part, at the speed it has beside that
// communication's load: an NCCL kernel keeps its SMs (hw.nccl_collective_sms, or
// nccl_p2p_sms for send/recv), so the GEMM's tiles run in waves over the SMs left; every
// transfer takes HBM bandwidth for what it reads and writes. Loads of concurrent
// transfers add up.
// Transfers: a `shift` whose peers are all in the device's node goes by the copy engines
// (hw.p2p_transport ce and hw.copy_engines > 0): no SMs, the copy-engine bandwidth
// (collective_time.h), only the HBM load; otherwise it is an NCCL send/recv.
// Approximations (why): a kernel is slowed only by communication issued before it in
// program order: re-timing an op already issued would move every value that depends on
// it, which a single pass in program order cannot do. Communication is never slowed by
// compute, and concurrent transfers of one device do not share its links (the hardware
// description has no figures for either).
#ifndef COMMIR_SIM_SIM_BACKEND_H_
#define COMMIR_SIM_SIM_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "runtime/backend.h"
#include "runtime/tensor.h"
#include "sim/collective_time.h"
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
  // Iterations repeated in closed form move a carried value's ready time on.
  void Delay(double seconds) { ready_s_ += seconds; }

 private:
  std::shared_ptr<DeviceMemoryCounter> memory_;
  int64_t device_;
  int64_t bytes_;
  double ready_s_;
};

// Length of the union of `intervals` (start, end), and of the part of it that `cover`'s
// union does not cover.
double UnionLength(std::vector<std::pair<double, double>> intervals);
double UncoveredLength(std::vector<std::pair<double, double>> intervals,
                       std::vector<std::pair<double, double>> cover);

// One kernel on the predicted timeline.
struct SimEvent {
  int64_t device = 0;
  int64_t stream = 0;
  const Operation* op = nullptr;
  double start_s = 0;
  double end_s = 0;
  bool is_communication = false;
};

// Called with each kernel as it is issued (for a trace): the backend keeps none.
using SimEventSink = std::function<void(const SimEvent&)>;

struct SimLimits {
  // The most kernels (one per device an op runs on) simulated one by one. Past it the
  // run fails, naming the outermost loop running: its iterations did not settle into a
  // repeating steady state (or every kernel was wanted, for a trace).
  int64_t max_simulated_kernels = 20'000'000;
  // Whether a loop whose iterations repeat is finished in closed form. Off when every
  // kernel is wanted (a trace), and in tests that compare with the step-by-step run.
  bool repeat_loops_in_closed_form = true;
};

class SimBackend : public runtime::Backend {
 public:
  // `function` is the function the interpreter runs; `num_devices` its device count.
  SimBackend(const HardwareSpec& hw, const Function& function, int64_t num_devices,
             int64_t gpus_per_node, SimLimits limits = {});
  ~SimBackend() override;

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

  // Loops (runtime/backend.h). Once the state of the timeline at the start of an
  // iteration is the state at the start of the one before shifted by a time delta (and
  // that one the same shift of the one before it), every later iteration repeats it:
  // they are accounted for as trips x delta without running them. See SkipIterations in
  // sim_backend.cc for what the state holds and why it decides every later iteration.
  void EnterLoop(const Operation& loop, uint64_t trips) override;
  absl::StatusOr<uint64_t> SkipIterations(
      const Operation& loop, uint64_t remaining,
      absl::Span<const runtime::Tensor* const> carried) override;
  void ExitLoop(const Operation& loop) override;

  // Every kernel is handed to `sink` as it is issued, in issue order.
  void set_event_sink(SimEventSink sink) { sink_ = std::move(sink); }
  const DeviceMemoryCounter& memory() const { return *memory_; }
  // Kernels simulated one by one, and iterations repeated in closed form.
  int64_t simulated_kernels() const { return simulated_kernels_; }
  uint64_t repeated_iterations() const { return repeated_iterations_; }
  // Intervals the backend holds now (busy compute time, communication, the spans the
  // summary still needs): those that may still matter to a later kernel. Bounded by the
  // kernels in flight, not by the kernels issued.
  int64_t retained_intervals() const;
  // The loop named by a failure of max_simulated_kernels (null if none).
  const Operation* loop_over_limit() const { return loop_over_limit_; }
  // Per device: the length of the union of its compute kernels' intervals, of its
  // communication kernels', and of the communication not covered by compute.
  double compute_s(int64_t device) const;
  double communication_s(int64_t device) const;
  double exposed_communication_s(int64_t device) const;
  // When the device's last kernel ends.
  double finish_s(int64_t device) const { return finish_[device]; }
  // FLOPs of every op run on every device, and the seconds they would take at the
  // hardware's matmul peak for their element type (for the fraction of peak).
  double total_flops() const { return total_flops_; }
  // Causal attention kernels priced at the op table's average because their position
  // values were not passed (the interpreter passes them: 0 unless a caller does not).
  int64_t attention_positions_unknown() const { return attention_positions_unknown_; }
  double flops_at_peak_s() const { return flops_at_peak_s_; }

 private:
  struct OpModel {
    double seconds = 0;
    double flops = 0;
    double flops_at_peak_s = 0;
    bool slowed_by_communication = false;  // a GEMM or attention
  };
  // `indices`: the op's index operand values (a causal attention's time depends on its
  // positions: one model per offset).
  absl::StatusOr<const OpModel*> ModelOf(const Operation& op, absl::Span<const int64_t> indices);
  double& Clock(int64_t device, int64_t stream);
  // How much longer `op` (a kernel of `seconds` alone) takes when it starts at `start` on
  // `device` and `stream`: over each stretch of its span where communication already
  // issued on other streams of the device runs, the difference between its time beside
  // that communication's summed load and alone.
  // `model` is the op's model for this run and `indices` its index operands (a causal
  // attention beside communication is re-priced at the same positions).
  absl::StatusOr<double> ContentionDelay(const Operation& op, const OpModel* model,
                                         absl::Span<const int64_t> indices, int64_t device,
                                         int64_t stream, double start, double seconds);
  bool UsesCopyEngine(const Operation& op, int64_t device) const;
  void Record(int64_t device, int64_t stream, const Operation& op, double start, double end,
              bool is_communication);
  // No later kernel on `device` starts before this (see Prune); -inf when unknown.
  double Floor(int64_t device) const;
  // Forgets what no later kernel can meet, adding the finished spans to the totals.
  void Prune(int64_t device);
  struct Snapshot;
  bool TakeSnapshot(absl::Span<const runtime::Tensor* const> carried, Snapshot& snapshot) const;
  void Shift(double seconds, absl::Span<const runtime::Tensor* const> carried,
             const Snapshot& now, const Snapshot& before, uint64_t iterations);

  const HardwareSpec& hw_;
  const Function& function_;
  int64_t gpus_per_node_;
  std::shared_ptr<DeviceMemoryCounter> memory_;
  std::vector<absl::flat_hash_map<int64_t, double>> clocks_;
  std::vector<double> finish_;
  absl::flat_hash_map<const Operation*, OpModel> op_models_;
  // Causal attention by (op, q_pos - k_pos clamped): each ring step's block has its own.
  absl::flat_hash_map<std::pair<const Operation*, int64_t>, OpModel> attention_models_;
  // Per loop: whether an attention position inside it changes with its iterations.
  absl::flat_hash_map<const Operation*, bool> positions_vary_;
  int64_t attention_positions_unknown_ = 0;
  // A collective's time for a group (and whether a copy engine moves it), keyed by the op
  // and the group's first device (each member for a shift).
  struct CollectiveCost {
    double seconds = 0;
    bool copy_engine = false;  // UsesCopyEngine for this member
    CommunicationLoad load;    // what it takes from the device's compute kernels
  };
  absl::flat_hash_map<std::pair<const Operation*, int64_t>, CollectiveCost> collective_seconds_;
  // Per device, the communication issued so far (start, end, stream, load) that a later
  // kernel may still overlap, sorted by start, and the longest one's length.
  struct Interval {
    double start, end;
    int64_t stream;
    CommunicationLoad load;
  };
  std::vector<std::vector<Interval>> contending_communication_;
  // An op's time beside a load (SMs taken, HBM bytes/s taken), worked out once.
  absl::flat_hash_map<std::tuple<const OpModel*, int, double>, double> beside_seconds_;
  std::vector<double> longest_communication_;
  // Per device, the intervals its compute kernels occupy, sorted and disjoint.
  std::vector<std::vector<std::pair<double, double>>> compute_busy_;
  // Per device, the compute and communication spans not yet added to the totals, and the
  // totals: union lengths and communication not covered by compute, of the spans that
  // end before the device's floor (no later span reaches back before it).
  std::vector<std::vector<std::pair<double, double>>> compute_spans_, communication_spans_;
  std::vector<double> compute_total_, communication_total_, exposed_total_;
  std::vector<double> pruned_at_;
  static constexpr size_t kMinPruneThreshold = 1024;
  std::vector<size_t> prune_threshold_;
  std::vector<size_t> held_after_prune_;
  double total_flops_ = 0;
  double flops_at_peak_s_ = 0;

  SimLimits limits_;
  SimEventSink sink_;
  // Every stream an op of the function (or a callee) names, when all are literals.
  std::vector<int64_t> streams_;
  bool streams_known_ = false;
  int64_t simulated_kernels_ = 0;
  uint64_t repeated_iterations_ = 0;
  const Operation* loop_over_limit_ = nullptr;
  struct LoopFrame;
  std::vector<std::unique_ptr<LoopFrame>> loops_;
};

}  // namespace commir::sim

#endif  // COMMIR_SIM_SIM_BACKEND_H_
