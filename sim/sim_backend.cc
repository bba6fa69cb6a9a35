#include "sim/sim_backend.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_format.h"
#include "commir/element_type.h"
#include "commir/op_cost.h"
#include "sim/collective_op.h"
#include "sim/op_time.h"
#include "sim/placement.h"

namespace commir::sim {

using runtime::Tensor;

void DeviceMemoryCounter::Allocate(int64_t device, int64_t bytes) {
  live_[device] += bytes;
  peak_[device] = std::max(peak_[device], live_[device]);
}

SimStorage::SimStorage(std::shared_ptr<DeviceMemoryCounter> memory, int64_t device, int64_t bytes,
                       double ready_s)
    : memory_(std::move(memory)), device_(device), bytes_(bytes), ready_s_(ready_s) {
  memory_->Allocate(device_, bytes_);
}

SimStorage::~SimStorage() { memory_->Free(device_, bytes_); }

namespace {

// Bytes of a tensor of this type and shape (saturating: the verifier rejects types whose
// element count overflows, so this only guards the multiplication).
int64_t ByteSize(ElementType type, absl::Span<const int64_t> shape) {
  int64_t bytes = ElementTypeByteWidth(type);
  for (int64_t d : shape) {
    if (d != 0 && bytes > INT64_MAX / d) return INT64_MAX;
    bytes *= d;
  }
  return bytes;
}

double ReadyTime(const Tensor* tensor) {
  if (tensor == nullptr || !tensor->on_device()) return 0;  // host literals are ready
  auto* storage = dynamic_cast<const SimStorage*>(tensor->device_storage());
  return storage != nullptr ? storage->ready_s() : 0;
}

}  // namespace

SimBackend::SimBackend(const HardwareSpec& hw, const Function& function, int64_t num_devices,
                       int64_t gpus_per_node)
    : hw_(hw),
      function_(function),
      gpus_per_node_(gpus_per_node),
      memory_(std::make_shared<DeviceMemoryCounter>(num_devices)),
      clocks_(num_devices),
      finish_(num_devices, 0.0),
      sm_communication_(num_devices),
      compute_busy_(num_devices) {}

Tensor SimBackend::MakeValue(int64_t device, ElementType type, std::vector<int64_t> shape,
                             double ready_s) {
  int64_t bytes = ByteSize(type, shape);
  return Tensor::OnDevice(type, std::move(shape),
                          std::make_shared<SimStorage>(memory_, device, bytes, ready_s));
}

absl::StatusOr<Tensor> SimBackend::ToDevice(int64_t device, const Tensor& host) {
  if (device < 0 || device >= static_cast<int64_t>(clocks_.size())) {
    return absl::InvalidArgumentError(absl::StrFormat("device %d is not simulated", device));
  }
  if (auto* storage = dynamic_cast<const SimStorage*>(host.device_storage());
      storage != nullptr && storage->device() == device) {
    return host;  // already a metadata-only value on this device: shared, not copied
  }
  return MakeValue(device, host.element_type(), host.shape(), 0.0);
}

double& SimBackend::Clock(int64_t device, int64_t stream) { return clocks_[device][stream]; }

absl::StatusOr<const SimBackend::OpModel*> SimBackend::ModelOf(const Operation& op) {
  auto it = op_models_.find(&op);
  if (it != op_models_.end()) return &it->second;
  absl::StatusOr<double> seconds = OpTime(hw_, op, function_);
  if (!seconds.ok()) return seconds.status();
  OpModel model;
  model.seconds = *seconds;
  model.flops = EstimateOpCost(op, function_).flops;
  model.slowed_by_communication = op.Is(OpKind::kMatmul) || op.Is(OpKind::kAttention);
  if (model.flops > 0 && op.num_results() > 0 && op.result(0)->type().is_tensor()) {
    double peak = MatmulPeakFlops(hw_, op.result(0)->type().element_type());
    if (peak > 0) model.flops_at_peak_s = model.flops / peak;
  }
  return &op_models_.emplace(&op, model).first->second;
}

namespace {

// The earliest start >= `ready` at which [start, start + seconds) meets none of `busy`
// (sorted, disjoint), and the index where that interval belongs. Kernels mostly arrive in
// time order, so the search starts from the first interval that ends after `ready`.
std::pair<double, size_t> EarliestFit(const std::vector<std::pair<double, double>>& busy,
                                      double ready, double seconds) {
  size_t i = std::upper_bound(busy.begin(), busy.end(), ready,
                              [](double t, const std::pair<double, double>& b) {
                                return t < b.second;
                              }) -
             busy.begin();
  double start = ready;
  for (; i < busy.size(); ++i) {
    if (start + seconds <= busy[i].first) break;
    start = std::max(start, busy[i].second);
  }
  return {start, i};
}

}  // namespace

double SimBackend::OverlapWithCommunication(int64_t device, int64_t stream, double start,
                                            double seconds) const {
  // The union of the overlapping communication intervals, clipped to the op's span.
  std::vector<std::pair<double, double>> clipped;
  double end = start + seconds;
  for (const Interval& c : sm_communication_[device]) {
    if (c.stream == stream || c.end <= start || c.start >= end) continue;
    clipped.emplace_back(std::max(c.start, start), std::min(c.end, end));
  }
  if (clipped.empty()) return 0;
  std::sort(clipped.begin(), clipped.end());
  double covered = 0, run_start = clipped[0].first, run_end = clipped[0].second;
  for (const auto& [s, e] : clipped) {
    if (s > run_end) {
      covered += run_end - run_start;
      run_start = s;
    }
    run_end = std::max(run_end, e);
  }
  return covered + (run_end - run_start);
}

void SimBackend::Record(int64_t device, int64_t stream, const Operation& op, double start,
                        double end, bool is_communication) {
  events_.push_back({device, stream, &op, start, end, is_communication});
  finish_[device] = std::max(finish_[device], end);
}

absl::StatusOr<std::vector<Tensor>> SimBackend::RunOp(const Operation& op,
                                                      const runtime::OpContext& context,
                                                      absl::Span<const Tensor* const> tensors,
                                                      absl::Span<const int64_t> /*indices*/) {
  absl::StatusOr<const OpModel*> model = ModelOf(op);
  if (!model.ok()) return model.status();
  const int64_t d = context.device;
  double& clock = Clock(d, context.stream);
  double start = clock;
  for (const Tensor* t : tensors) start = std::max(start, ReadyTime(t));
  double seconds = (*model)->seconds;
  std::vector<std::pair<double, double>>& busy = compute_busy_[d];
  if (seconds > 0) {
    // The SMs are free for the kernel's whole (possibly stretched) span.
    auto [fit, slot] = EarliestFit(busy, start, seconds);
    if ((*model)->slowed_by_communication) {
      // Stretch by the slowdown over the overlapped part (see the header: approximations).
      double stretched = seconds + hw_.gemm_comm_overlap_slowdown *
                                       OverlapWithCommunication(d, context.stream, fit, seconds);
      std::tie(fit, slot) = EarliestFit(busy, fit, stretched);
      seconds = stretched;
    }
    start = fit;
    busy.insert(busy.begin() + static_cast<std::ptrdiff_t>(slot), {start, start + seconds});
  }
  double end = start + seconds;
  if (seconds > 0) {
    clock = end;
    Record(d, context.stream, op, start, end, /*is_communication=*/false);
  }
  total_flops_ += (*model)->flops;
  flops_at_peak_s_ += (*model)->flops_at_peak_s;

  std::vector<Tensor> results;
  results.reserve(op.num_results());
  // A reshape is a view: it shares its operand's storage (and bytes) rather than new memory.
  if (op.Is(OpKind::kReshape) && !tensors.empty() && tensors[0]->on_device() &&
      op.result(0)->type().is_tensor()) {
    results.push_back(Tensor::OnDevice(op.result(0)->type().element_type(),
                                       op.result(0)->type().dims(),
                                       tensors[0]->shared_storage()));
    return results;
  }
  for (int r = 0; r < op.num_results(); ++r) {
    Type type = op.result(r)->type();
    if (!type.is_tensor()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: result %d is not a tensor", op.name(), r));
    }
    results.push_back(MakeValue(d, type.element_type(), type.dims(), end));
  }
  return results;
}

bool SimBackend::UsesCopyEngine(const Operation& op, int64_t device) const {
  if (!op.Is(OpKind::kShift) || hw_.copy_engines <= 0) return false;
  // Copy engines move data over NVLink only: a shift to another node needs the network.
  absl::StatusOr<CollectiveOpInfo> info = DescribeCollectiveOp(op, function_, device);
  if (!info.ok()) return false;
  int64_t node = NodeOfDevice(device, gpus_per_node_);
  for (int64_t peer : info->devices) {
    if (NodeOfDevice(peer, gpus_per_node_) != node) return false;
  }
  return true;
}

absl::StatusOr<std::vector<Tensor>> SimBackend::RunCollective(
    const Operation& op, const runtime::CollectiveContext& context,
    absl::Span<const Tensor* const> parts) {
  if (context.group.empty() || context.local.size() != parts.size() ||
      context.streams.size() != parts.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: inconsistent collective group", op.name()));
  }
  // The slowest participant decides when the group starts.
  double start = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    int64_t member = context.group[context.local[i]];
    start = std::max({start, Clock(member, context.streams[i]), ReadyTime(parts[i])});
  }
  const bool is_shift = op.Is(OpKind::kShift);
  std::vector<Tensor> results;
  results.reserve(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    int64_t member = context.group[context.local[i]];
    int64_t stream = context.streams[i];
    // Every member of a group sees the same collective; a shift's peers differ per member.
    std::pair<const Operation*, int64_t> key(&op, is_shift ? member : context.group[0]);
    // Loops run a collective many times: its cost (and whether a copy engine moves it)
    // is worked out once.
    auto it = collective_seconds_.find(key);
    if (it == collective_seconds_.end()) {
      absl::StatusOr<CollectiveEstimate> estimate =
          EstimateCollectiveOp(hw_, op, function_, member, gpus_per_node_);
      if (!estimate.ok()) return estimate.status();
      it = collective_seconds_.emplace(key, CollectiveCost{estimate->seconds, UsesCopyEngine(op, member)})
               .first;
    }
    double end = start + it->second.seconds;
    Clock(member, stream) = end;
    if (it->second.seconds > 0) {
      Record(member, stream, op, start, end, /*is_communication=*/true);
      if (!it->second.copy_engine) sm_communication_[member].push_back({start, end, stream});
    }
    Type type = op.result(0)->type();
    results.push_back(MakeValue(member, type.element_type(), type.dims(), end));
  }
  return results;
}

}  // namespace commir::sim
