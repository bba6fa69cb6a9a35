#include "sim/sim_backend.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "commir/element_type.h"
#include "commir/op_cost.h"
#include "sim/attention_positions.h"
#include "sim/attention_time.h"
#include "sim/collective_op.h"
#include "sim/contention.h"
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

namespace {

bool IssuesKernels(const Operation& op) {
  if (op.def().Has(kTerminator) || op.Is(OpKind::kFor) || op.Is(OpKind::kCall)) return false;
  // Index arithmetic is computed by the interpreter itself.
  return !(op.num_results() == 1 && op.result(0)->type().is_index());
}

// The streams the kernels of `block` (and of the functions it calls) run on; `known`
// becomes false if one is a value (known only while running). Each function is visited
// once, however often it is called (a call graph that fans out is exponential in its
// call paths), with an explicit worklist rather than recursion.
void CollectStreams(const Block& block, const Module* module, std::set<int64_t>& streams,
                    bool& known) {
  absl::flat_hash_set<const Function*> visited;
  std::vector<const Block*> pending = {&block};
  while (!pending.empty()) {
    const Block* current = pending.back();
    pending.pop_back();
    for (const Operation* op : *current) {
      if (op->stream_operand() != nullptr) known = false;
      if (IssuesKernels(*op)) streams.insert(op->attrs().GetInt("stream", 0));
      for (int r = 0; r < op->num_regions(); ++r) pending.push_back(op->region(r));
      if (op->Is(OpKind::kCall)) {
        const Function* callee =
            module == nullptr ? nullptr
                              : module->FindFunction(op->attrs().Find("callee")->string_value());
        if (callee == nullptr || callee->body() == nullptr) {
          known = false;
        } else if (visited.insert(callee).second) {
          pending.push_back(callee->body());
        }
      }
    }
  }
}

}  // namespace

SimBackend::SimBackend(const HardwareSpec& hw, const Function& function, int64_t num_devices,
                       int64_t gpus_per_node, SimLimits limits)
    : hw_(hw),
      function_(function),
      gpus_per_node_(gpus_per_node),
      memory_(std::make_shared<DeviceMemoryCounter>(num_devices)),
      clocks_(num_devices),
      finish_(num_devices, 0.0),
      contending_communication_(num_devices),
      longest_communication_(num_devices, 0.0),
      compute_busy_(num_devices),
      compute_spans_(num_devices),
      communication_spans_(num_devices),
      compute_total_(num_devices, 0.0),
      communication_total_(num_devices, 0.0),
      exposed_total_(num_devices, 0.0),
      pruned_at_(num_devices, -std::numeric_limits<double>::infinity()),
      prune_threshold_(num_devices, kMinPruneThreshold),
      held_after_prune_(num_devices, 0),
      limits_(limits) {
  std::set<int64_t> streams;
  streams_known_ = function.body() != nullptr;
  if (streams_known_) {
    CollectStreams(*function.body(), function.module(), streams, streams_known_);
  }
  streams_.assign(streams.begin(), streams.end());
}

SimBackend::~SimBackend() = default;

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

namespace {

// One kernel on `hw`: attention and attention_grad priced at their positions (`indices`,
// their q_pos/k_pos values; AttentionKernelTime), every other op by OpTime. ModelOf prices
// a kernel alone with it and ContentionDelay the same kernel beside communication, so the
// two see the same mask.
struct PricedKernel {
  double seconds = 0;
  double flops = 0;
  bool positions_unknown = false;
};

absl::StatusOr<PricedKernel> PriceKernel(const HardwareSpec& hw, const Operation& op,
                                         const Function& function,
                                         absl::Span<const int64_t> indices) {
  PricedKernel priced;
  if (op.Is(OpKind::kAttention) || op.Is(OpKind::kAttentionGrad)) {
    absl::StatusOr<AttentionKernel> kernel = AttentionKernelTime(hw, op, function, indices);
    if (!kernel.ok()) return kernel.status();
    priced.seconds = kernel->seconds;
    priced.flops = kernel->flops;
    priced.positions_unknown = kernel->positions_unknown;
    return priced;
  }
  absl::StatusOr<double> seconds = OpTime(hw, op, function);
  if (!seconds.ok()) return seconds.status();
  priced.seconds = *seconds;
  priced.flops = EstimateOpCost(op, function).flops;
  return priced;
}

}  // namespace

absl::StatusOr<const SimBackend::OpModel*> SimBackend::ModelOf(const Operation& op,
                                                               absl::Span<const int64_t> indices) {
  const bool by_position = AttentionTimeDependsOnPositions(op) && !indices.empty();
  std::pair<const Operation*, int64_t> key(&op, 0);
  if (by_position) {
    // Only the offset of the positions matters, and only up to the block's extents.
    const int64_t queries = op.operand(0)->type().dims()[2];
    const int64_t keys = op.operand(1)->type().dims()[2];
    key.second = ClampedOffset(indices[0], indices.size() > 1 ? indices[1] : 0, queries, keys);
    auto it = attention_models_.find(key);
    if (it != attention_models_.end()) return &it->second;
  } else {
    auto it = op_models_.find(&op);
    if (it != op_models_.end()) return &it->second;
  }
  absl::StatusOr<PricedKernel> kernel = PriceKernel(hw_, op, function_, indices);
  if (!kernel.ok()) return kernel.status();
  if (kernel->positions_unknown) ++attention_positions_unknown_;
  OpModel model;
  model.seconds = kernel->seconds;
  model.flops = kernel->flops;
  model.slowed_by_communication = op.Is(OpKind::kMatmul) || op.Is(OpKind::kAttention);
  if (model.flops > 0 && op.num_results() > 0 && op.result(0)->type().is_tensor()) {
    double peak = MatmulPeakFlops(hw_, op.result(0)->type().element_type());
    if (peak > 0) model.flops_at_peak_s = model.flops / peak;
  }
  if (by_position) return &attention_models_.emplace(key, model).first->second;
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

absl::StatusOr<double> SimBackend::ContentionDelay(const Operation& op, const OpModel* model,
                                                   absl::Span<const int64_t> indices,
                                                   int64_t device, int64_t stream, double start,
                                                   double seconds) {
  // The overlapping communication, clipped to the op's span. Sorted by start: only those
  // starting before `end`, and (none being longer than the longest) after
  // start - longest, can overlap.
  struct Clipped {
    double start, end;
    CommunicationLoad load;
  };
  std::vector<Clipped> clipped;
  const double end = start + seconds;
  const std::vector<Interval>& communication = contending_communication_[device];
  auto last = std::lower_bound(communication.begin(), communication.end(), end,
                               [](const Interval& c, double t) { return c.start < t; });
  const double earliest = start - longest_communication_[device];
  for (auto it = last; it != communication.begin();) {
    const Interval& c = *--it;
    if (c.start < earliest) break;
    if (c.stream == stream || c.end <= start) continue;
    clipped.push_back({std::max(c.start, start), std::min(c.end, end), c.load});
  }
  if (clipped.empty()) return 0.0;
  // Sweep the clipped intervals' ends: between two consecutive ends the same transfers
  // run, and their loads add up.
  std::vector<double> cuts;
  for (const Clipped& c : clipped) {
    cuts.push_back(c.start);
    cuts.push_back(c.end);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  double delay = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const double mid = 0.5 * (cuts[i] + cuts[i + 1]);
    CommunicationLoad load;
    for (const Clipped& c : clipped) {
      if (c.start <= mid && mid < c.end) {
        load.sms += c.load.sms;
        load.hbm_bytes_per_s += c.load.hbm_bytes_per_s;
      }
    }
    load.sms = std::min(load.sms, std::max(hw_.sm_count - 1, 0));
    if (load.sms == 0 && load.hbm_bytes_per_s == 0) continue;
    // Keyed by the model, not the op: a causal attention has one model per position offset.
    auto key = std::make_tuple(model, load.sms, load.hbm_bytes_per_s);
    auto it = beside_seconds_.find(key);
    if (it == beside_seconds_.end()) {
      absl::StatusOr<PricedKernel> beside =
          PriceKernel(HardwareBeside(hw_, load), op, function_, indices);
      if (!beside.ok()) return beside.status();
      it = beside_seconds_.emplace(key, beside->seconds).first;
    }
    // The stretch runs at seconds / beside of the kernel's speed alone.
    delay += (cuts[i + 1] - cuts[i]) * (it->second / seconds - 1);
  }
  return std::max(delay, 0.0);
}

void SimBackend::Record(int64_t device, int64_t stream, const Operation& op, double start,
                        double end, bool is_communication) {
  if (sink_) sink_({device, stream, &op, start, end, is_communication});
  finish_[device] = std::max(finish_[device], end);
  (is_communication ? communication_spans_ : compute_spans_)[device].emplace_back(start, end);
  // Straight-line code has no iteration starts to prune at: prune when the spans double.
  size_t held = compute_spans_[device].size() + communication_spans_[device].size();
  if (held > prune_threshold_[device]) {
    Prune(device);
    held = compute_spans_[device].size() + communication_spans_[device].size();
    prune_threshold_[device] = std::max(kMinPruneThreshold, 2 * held);
  }
}

absl::StatusOr<std::vector<Tensor>> SimBackend::RunOp(const Operation& op,
                                                      const runtime::OpContext& context,
                                                      absl::Span<const Tensor* const> tensors,
                                                      absl::Span<const int64_t> indices) {
  absl::StatusOr<const OpModel*> model = ModelOf(op, indices);
  if (!model.ok()) return model.status();
  ++simulated_kernels_;
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
      // Stretch over the overlapped part (see the header: contention, approximations).
      absl::StatusOr<double> delay = ContentionDelay(op, *model, indices, d, context.stream, fit, seconds);
      if (!delay.ok()) return delay.status();
      double stretched = seconds + *delay;
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
  if (!op.Is(OpKind::kShift) || hw_.copy_engines <= 0 ||
      hw_.p2p_transport != P2pTransport::kCopyEngine) {
    return false;
  }
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
  simulated_kernels_ += static_cast<int64_t>(parts.size());
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
      CollectiveCost cost;
      cost.copy_engine = UsesCopyEngine(op, member);
      if (cost.copy_engine) {
        absl::StatusOr<CopyEngineEstimate> estimate =
            EstimateCopyEngineShift(hw_, op, function_, member);
        if (!estimate.ok()) return estimate.status();
        cost.seconds = estimate->seconds;
        cost.load = CopyEngineLoad(estimate->bytes, estimate->seconds);
      } else {
        absl::StatusOr<CollectiveEstimate> estimate =
            EstimateCollectiveOp(hw_, op, function_, member, gpus_per_node_);
        if (!estimate.ok()) return estimate.status();
        cost.seconds = estimate->seconds;
        cost.load = NcclLoad(hw_, *CollectiveKindOf(op.kind()), *estimate);
      }
      it = collective_seconds_.emplace(key, cost).first;
    }
    double end = start + it->second.seconds;
    Clock(member, stream) = end;
    if (it->second.seconds > 0) {
      Record(member, stream, op, start, end, /*is_communication=*/true);
      if (it->second.load.sms > 0 || it->second.load.hbm_bytes_per_s > 0) {
        std::vector<Interval>& communication = contending_communication_[member];
        communication.insert(std::upper_bound(communication.begin(), communication.end(), start,
                                              [](double t, const Interval& c) {
                                                return t < c.start;
                                              }),
                             {start, end, stream, it->second.load});
        longest_communication_[member] = std::max(longest_communication_[member], end - start);
      }
    }
    Type type = op.result(0)->type();
    results.push_back(MakeValue(member, type.element_type(), type.dims(), end));
  }
  return results;
}

double SimBackend::Floor(int64_t device) const {
  // A kernel starts no earlier than its stream's clock, and clocks only move forward; a
  // stream not used yet has its clock at 0. With a stream chosen by a value, any stream
  // may come next: nothing is known.
  if (!streams_known_ || streams_.empty()) return -std::numeric_limits<double>::infinity();
  const absl::flat_hash_map<int64_t, double>& clocks = clocks_[device];
  double floor = std::numeric_limits<double>::infinity();
  for (int64_t stream : streams_) {
    auto it = clocks.find(stream);
    floor = std::min(floor, it == clocks.end() ? 0.0 : it->second);
  }
  return floor;
}

void SimBackend::Prune(int64_t device) {
  const double floor = Floor(device);
  if (!(floor > pruned_at_[device])) return;
  // A device with much in flight beyond its floor (a stream running ahead of another)
  // is pruned when what it holds has doubled, not at every call: the passes below are
  // linear in it.
  const size_t held = compute_busy_[device].size() + contending_communication_[device].size() +
                      compute_spans_[device].size() + communication_spans_[device].size();
  if (held > kMinPruneThreshold && held < 2 * held_after_prune_[device]) return;
  pruned_at_[device] = floor;
  // Busy compute time and communication that end by the floor meet no later kernel.
  std::vector<std::pair<double, double>>& busy = compute_busy_[device];
  busy.erase(busy.begin(), std::find_if(busy.begin(), busy.end(), [&](const auto& b) {
               return b.second > floor;
             }));
  // Sorted by start: only those starting before the floor can end by it.
  std::vector<Interval>& communication = contending_communication_[device];
  auto started = std::lower_bound(communication.begin(), communication.end(), floor,
                                  [](const Interval& c, double t) { return c.start < t; });
  communication.erase(std::remove_if(communication.begin(), started,
                                     [&](const Interval& c) { return c.end <= floor; }),
                      started);
  // The spans' parts before the floor are final (every later span starts after it):
  // their union and exposed communication go into the totals; the parts after stay.
  auto split = [&](std::vector<std::pair<double, double>>& spans, Intervals& done) {
    std::vector<std::pair<double, double>> kept;
    for (const auto& [s, e] : spans) {
      if (s < floor) done.emplace_back(s, std::min(e, floor));
      if (e > floor) kept.emplace_back(std::max(s, floor), e);
    }
    spans = std::move(kept);
  };
  Intervals compute, communicated;
  split(compute_spans_[device], compute);
  split(communication_spans_[device], communicated);
  compute_total_[device] += UnionLength(compute);
  communication_total_[device] += UnionLength(communicated);
  exposed_total_[device] += UncoveredLength(std::move(communicated), std::move(compute));
  held_after_prune_[device] = compute_busy_[device].size() + contending_communication_[device].size() +
                              compute_spans_[device].size() +
                              communication_spans_[device].size();
}

int64_t SimBackend::retained_intervals() const {
  size_t held = 0;
  for (size_t d = 0; d < clocks_.size(); ++d) {
    held += compute_busy_[d].size() + contending_communication_[d].size() + compute_spans_[d].size() +
            communication_spans_[d].size();
  }
  return static_cast<int64_t>(held);
}

double SimBackend::compute_s(int64_t device) const {
  return compute_total_[device] + UnionLength(compute_spans_[device]);
}
double SimBackend::communication_s(int64_t device) const {
  return communication_total_[device] + UnionLength(communication_spans_[device]);
}
double SimBackend::exposed_communication_s(int64_t device) const {
  return exposed_total_[device] +
         UncoveredLength(communication_spans_[device], compute_spans_[device]);
}

// ---- Loops in closed form --------------------------------------------------------------
//
// The state of the timeline at the start of an iteration, as far as that iteration and
// every later one depend on it. Ops run in program order on every device, each on the
// stream its literal attribute names (a loop whose kernels choose a stream by a value is
// never repeated), so an iteration issues the same kernels as the one before. Where and
// when each runs depends only on:
//  * each device's stream clocks (a kernel starts at or after its stream's clock);
//  * the busy compute time and the SM-using communication of the device that end after
//    its floor (the earliest stream clock: nothing earlier can meet a later kernel, so
//    Prune has dropped the rest);
//  * the ready times of the carried values; one at or before every device's floor never
//    decides a start, so only whether it is one of those counts;
//  * the ready times of the values from before the loop: at most the latest finish when
//    the loop started, so once every floor is past that, they decide nothing either;
//  * memory: the live bytes, and which carried values share storage with values held
//    elsewhere (decides what an iteration frees).
// `times` holds every absolute time of that state and `shape` everything else. When the
// starts of iterations t-2, t-1 and t have the same shape and memory, and each time moved
// by the same delta from t-2 to t-1 and from t-1 to t (up to rounding), iteration t runs
// exactly as t-1 did, delta later, and so does every later one: the rest of the loop
// moves every time by (remaining x delta) and adds (remaining x one iteration's growth)
// to the totals.
struct SimBackend::Snapshot {
  double base = 0;  // the latest finish over the devices
  double min_floor = 0;
  std::vector<double> times;
  std::vector<int64_t> shape;
  std::vector<int64_t> live, peak;
  // What grows with each iteration: per device the compute, communication and exposed
  // totals, then the FLOPs and the seconds at peak.
  std::vector<double> totals;
};

struct SimBackend::LoopFrame {
  const Operation* loop = nullptr;
  double entry_finish = 0;
  bool eligible = false;
  std::vector<Snapshot> history;  // the starts of the last iterations, oldest first
};

namespace {

// Past this many intervals held, a snapshot per iteration would cost more than the
// iteration: the loop is simulated one iteration at a time.
constexpr size_t kMaxSnapshotTimes = 1 << 16;

// Whether `b` - `a` equals `delta` up to the rounding of times of magnitude `scale`.
bool MovedBy(double a, double b, double delta, double tolerance) {
  return std::abs((b - a) - delta) <= tolerance;
}

}  // namespace

bool SimBackend::TakeSnapshot(absl::Span<const Tensor* const> carried, Snapshot& snap) const {
  const int64_t num_devices = static_cast<int64_t>(clocks_.size());
  snap.base = 0;
  snap.min_floor = std::numeric_limits<double>::infinity();
  for (int64_t d = 0; d < num_devices; ++d) {
    snap.base = std::max(snap.base, finish_[d]);
    snap.min_floor = std::min(snap.min_floor, Floor(d));
  }
  if (retained_intervals() * 2 + num_devices * 8 > static_cast<int64_t>(kMaxSnapshotTimes)) {
    return false;
  }
  for (int64_t d = 0; d < num_devices; ++d) {
    std::vector<std::pair<int64_t, double>> clocks(clocks_[d].begin(), clocks_[d].end());
    std::sort(clocks.begin(), clocks.end());
    snap.shape.push_back(static_cast<int64_t>(clocks.size()));
    for (const auto& [stream, clock] : clocks) {
      snap.shape.push_back(stream);
      snap.times.push_back(clock);
    }
    snap.times.push_back(finish_[d]);
    auto add = [&](const std::vector<std::pair<double, double>>& intervals) {
      snap.shape.push_back(static_cast<int64_t>(intervals.size()));
      for (const auto& [s, e] : intervals) {
        snap.times.push_back(s);
        snap.times.push_back(e);
      }
    };
    add(compute_busy_[d]);
    add(compute_spans_[d]);
    add(communication_spans_[d]);
    snap.shape.push_back(static_cast<int64_t>(contending_communication_[d].size()));
    for (const Interval& c : contending_communication_[d]) {
      snap.shape.push_back(c.stream);
      snap.shape.push_back(c.load.sms);
      snap.times.push_back(c.start);
      snap.times.push_back(c.end);
    }
    snap.live.push_back(memory_->live_bytes(d));
    snap.peak.push_back(memory_->peak_bytes(d));
    snap.totals.push_back(compute_total_[d]);
    snap.totals.push_back(communication_total_[d]);
    snap.totals.push_back(exposed_total_[d]);
  }
  snap.totals.push_back(total_flops_);
  snap.totals.push_back(flops_at_peak_s_);
  for (size_t i = 0; i < carried.size(); ++i) {
    const Tensor* t = carried[i];
    if (t == nullptr) {
      snap.shape.push_back(-1);  // an index
      continue;
    }
    auto* storage = dynamic_cast<const SimStorage*>(t->device_storage());
    if (storage == nullptr) {
      snap.shape.push_back(-2);  // a host value, ready at once
      continue;
    }
    // Which earlier carried value shares the storage (aliasing decides what is freed),
    // and how many hold it.
    int64_t same = -1;
    for (size_t j = 0; j < i && same < 0; ++j) {
      if (carried[j] != nullptr && carried[j]->device_storage() == storage) {
        same = static_cast<int64_t>(j);
      }
    }
    snap.shape.push_back(same);
    snap.shape.push_back(storage->device());
    snap.shape.push_back(storage->bytes());
    snap.shape.push_back(static_cast<int64_t>(t->shared_storage().use_count()));
    const bool decides = storage->ready_s() > snap.min_floor;
    snap.shape.push_back(decides ? 1 : 0);
    if (decides) snap.times.push_back(storage->ready_s());
  }
  return true;
}

void SimBackend::EnterLoop(const Operation& loop, uint64_t /*trips*/) {
  auto frame = std::make_unique<LoopFrame>();
  frame->loop = &loop;
  for (double f : finish_) frame->entry_finish = std::max(frame->entry_finish, f);
  // An index carried from one iteration to the next may differ in each; one that
  // overflowed would fail the run, which a closed form would not notice.
  frame->eligible = limits_.repeat_loops_in_closed_form && streams_known_;
  // Attention whose positions follow the iterations prices each one differently: a
  // repeating state says nothing about the next.
  if (frame->eligible) {
    auto known = positions_vary_.find(&loop);
    if (known == positions_vary_.end()) {
      known = positions_vary_.emplace(&loop, AttentionPositionsVaryIn(loop, function_.module())).first;
    }
    frame->eligible = !known->second;
  }
  for (const Value* init : loop.operands()) {
    if (init->type().is_index()) frame->eligible = false;
  }
  loops_.push_back(std::move(frame));
}

void SimBackend::ExitLoop(const Operation& loop) {
  if (!loops_.empty() && loops_.back()->loop == &loop) loops_.pop_back();
}

absl::StatusOr<uint64_t> SimBackend::SkipIterations(const Operation& loop, uint64_t remaining,
                                                    absl::Span<const Tensor* const> carried) {
  if (loops_.empty() || loops_.back()->loop != &loop) return 0;
  if (simulated_kernels_ > limits_.max_simulated_kernels) {
    // The outermost loop running: the one whose iterations multiply the rest.
    loop_over_limit_ = loops_.front()->loop;
    return absl::ResourceExhaustedError(absl::StrFormat(
        "more than %d kernels simulated one by one", limits_.max_simulated_kernels));
  }
  for (size_t d = 0; d < clocks_.size(); ++d) Prune(static_cast<int64_t>(d));
  LoopFrame& frame = *loops_.back();
  if (!frame.eligible) return 0;
  Snapshot now;
  if (!TakeSnapshot(carried, now)) {
    frame.history.clear();
    return 0;
  }
  frame.history.push_back(std::move(now));
  if (frame.history.size() > 3) frame.history.erase(frame.history.begin());
  if (frame.history.size() < 3) return 0;
  const Snapshot& a = frame.history[0];
  const Snapshot& b = frame.history[1];
  const Snapshot& c = frame.history[2];
  // From iteration t-2 on, no value from before the loop decides a start.
  if (!(a.min_floor >= frame.entry_finish)) return 0;
  if (a.shape != b.shape || b.shape != c.shape || a.live != b.live || b.live != c.live ||
      b.peak != c.peak || a.times.size() != c.times.size()) {
    return 0;
  }
  const double delta = c.base - b.base;
  double scale = std::abs(c.base);
  for (double t : c.times) scale = std::max(scale, std::abs(t));
  // A few operations' rounding of times of this magnitude.
  const double tolerance = 64 * DBL_EPSILON * scale;
  if (!MovedBy(a.base, b.base, delta, tolerance)) return 0;
  for (size_t i = 0; i < c.times.size(); ++i) {
    if (!MovedBy(a.times[i], b.times[i], delta, tolerance) ||
        !MovedBy(b.times[i], c.times[i], delta, tolerance)) {
      return 0;
    }
  }
  for (size_t i = 0; i < c.totals.size(); ++i) {
    const double growth = c.totals[i] - b.totals[i];
    if (std::abs((b.totals[i] - a.totals[i]) - growth) >
        64 * DBL_EPSILON * std::max(std::abs(c.totals[i]), DBL_MIN)) {
      return 0;
    }
  }
  Shift(static_cast<double>(remaining) * delta, carried, c, b, remaining);
  repeated_iterations_ += remaining;
  frame.history.clear();
  return remaining;
}

void SimBackend::Shift(double seconds, absl::Span<const Tensor* const> carried,
                       const Snapshot& now, const Snapshot& before, uint64_t iterations) {
  const double k = static_cast<double>(iterations);
  for (size_t d = 0; d < clocks_.size(); ++d) {
    for (auto& [stream, clock] : clocks_[d]) clock += seconds;
    finish_[d] += seconds;
    pruned_at_[d] += seconds;
    for (auto* intervals : {&compute_busy_[d], &compute_spans_[d], &communication_spans_[d]}) {
      for (auto& [s, e] : *intervals) {
        s += seconds;
        e += seconds;
      }
    }
    for (Interval& c : contending_communication_[d]) {
      c.start += seconds;
      c.end += seconds;
    }
    compute_total_[d] += k * (now.totals[3 * d] - before.totals[3 * d]);
    communication_total_[d] += k * (now.totals[3 * d + 1] - before.totals[3 * d + 1]);
    exposed_total_[d] += k * (now.totals[3 * d + 2] - before.totals[3 * d + 2]);
  }
  const size_t n = now.totals.size();
  total_flops_ += k * (now.totals[n - 2] - before.totals[n - 2]);
  flops_at_peak_s_ += k * (now.totals[n - 1] - before.totals[n - 1]);
  // The carried values that decide starts move on with the clocks, each storage once.
  absl::flat_hash_set<SimStorage*> moved;
  for (const Tensor* t : carried) {
    if (t == nullptr) continue;
    auto* storage = dynamic_cast<SimStorage*>(t->device_storage());
    if (storage == nullptr || storage->ready_s() <= now.min_floor) continue;
    if (moved.insert(storage).second) storage->Delay(seconds);
  }
}

}  // namespace commir::sim
