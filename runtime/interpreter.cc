#include "runtime/interpreter.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commir/call_graph.h"
#include "commir/scalar_math.h"
#include "runtime/in_place.h"

namespace commir::runtime {
namespace {

double NowMicros() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool IsIndexArithmetic(const Operation& op) {
  return op.num_results() == 1 && op.result(0)->type().is_index();
}

}  // namespace

Interpreter::Interpreter(const Function& function, Backend& backend)
    : function_(function),
      backend_(backend),
      liveness_(function),
      mesh_(function.is_spmd() ? function.mesh() : nullptr),
      num_devices_(mesh_ != nullptr ? mesh_->num_devices() : 1) {
  if (num_devices_ > kMaxDevices) return;  // Run and set_local_devices refuse it
  const bool views = backend_.ReadsSlicesInPlace();
  WalkOps(function.body(), [&](Operation* op) {
    if (UpdatesDestinationInPlace(*op)) updates_in_place_.insert(op);
    if (views && SliceReadInPlace(*op)) {
      bool every_reader = true;
      for (const Operation* user : op->result(0)->users()) {
        every_reader = every_reader && backend_.ReadsSliceInPlaceFor(*user);
      }
      if (every_reader) slices_in_place_.emplace(op, *SliceAlongOneDim(*op));
    }
    if (FillOverwrittenBeforeRead(*op)) unfilled_.insert(op);
    if (const Operation* update = MatmulWritesInto(*op); update != nullptr) {
      matmul_into_[op] = update;
    }
    if (const Operation* update = ShiftReceivesInto(*op); update != nullptr) {
      shift_into_[op] = update;
    }
    if (views) AddCarriedRing(*op);
    if (!op->Is(OpKind::kFor)) return;
    const absl::Span<const Value* const> dead = liveness_.DeadAfter(*op);
    std::vector<bool> moved(op->num_operands(), false);
    bool any = false;
    for (int i = 0; i < op->num_operands(); ++i) {
      const Value* init = op->operand(i);
      if (!init->type().is_tensor() || init->is_literal() ||
          std::find(dead.begin(), dead.end(), init) == dead.end()) {
        continue;
      }
      bool once = true;
      for (int j = 0; j < op->num_operands(); ++j) once = once && (j == i || op->operand(j) != init);
      bool read_inside = false;
      for (const Operation* user : init->users()) read_inside = read_inside || user != op;
      moved[i] = once && !read_inside;
      any = any || moved[i];
    }
    if (any) moved_inits_[op] = std::move(moved);
  });
  is_local_.assign(num_devices_, true);
  for (int64_t d = 0; d < num_devices_; ++d) local_.push_back(d);
}

absl::Status Interpreter::CheckDeviceCount() const {
  if (num_devices_ <= kMaxDevices) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "mesh @%s has %d devices; at most %d can run", mesh_->name(), num_devices_, kMaxDevices));
}

absl::Status Interpreter::set_local_devices(std::vector<int64_t> devices) {
  if (absl::Status s = CheckDeviceCount(); !s.ok()) return s;
  std::vector<bool> is_local(num_devices_, false);
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] < 0 || devices[i] >= num_devices_ || (i > 0 && devices[i] <= devices[i - 1])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "local devices must be ascending ids below %d; got %d at position %d", num_devices_,
          devices[i], i));
    }
    is_local[devices[i]] = true;
  }
  if (devices.empty()) return absl::InvalidArgumentError("no local devices");
  local_ = std::move(devices);
  is_local_ = std::move(is_local);
  return absl::OkStatus();
}

int64_t Interpreter::StreamOf(const Operation& op, const Env& env, int64_t device) const {
  return op.stream_operand() != nullptr ? Lookup(env, device, op.stream_operand()).index
                                        : op.attrs().GetInt("stream", 0);
}

absl::Status Interpreter::Fail(const Operation& op, int64_t device, absl::string_view message) {
  return Fail(op, device, absl::InvalidArgumentError(message));
}

absl::Status Interpreter::Fail(const Operation& op, int64_t device, const absl::Status& status) {
  error_location_ = op.loc();
  std::string where = num_devices_ > 1 ? absl::StrFormat("device %d: ", device) : "";
  // The code is kept: a device failure (Unavailable, ResourceExhausted, ...) is not an
  // invalid program, and commir-run exits differently for it.
  return absl::Status(status.code(),
                      absl::StrCat(where, "'", op.name(), "': ", status.message()));
}

Interpreter::Slot Interpreter::Lookup(const Env& env, int64_t device, const Value* value) const {
  if (value->is_literal()) {
    Slot slot;
    if (value->type().is_index()) {
      slot.index = static_cast<int64_t>(value->literal_value());
    } else {
      auto tensor = std::make_shared<Tensor>(value->type().element_type(), std::vector<int64_t>{});
      tensor->SetFromDouble(0, value->literal_value());
      slot.tensor = std::move(tensor);
    }
    return slot;
  }
  return env[device].at(value);
}

std::shared_ptr<const Tensor> Interpreter::TakeIfUnique(Env& env, int64_t device,
                                                        const Value* value) const {
  auto it = env[device].find(value);
  if (it == env[device].end() || it->second.tensor == nullptr) return nullptr;
  // A caller's argument is held through an empty owner: its use_count is 0.
  if (it->second.tensor.use_count() != 1) return nullptr;
  const Tensor& tensor = *it->second.tensor;
  if (tensor.on_device() && tensor.shared_storage().use_count() != 1) return nullptr;
  std::shared_ptr<const Tensor> taken = std::move(it->second.tensor);
  env[device].erase(it);
  return taken;
}

void Interpreter::Release(absl::Span<const Value* const> values, Env& env) const {
  if (values.empty()) return;
  for (int64_t d : local_) {
    for (const Value* value : values) env[d].erase(value);
  }
}

absl::StatusOr<std::vector<std::vector<Tensor>>> Interpreter::Run(
    const std::vector<std::vector<Tensor>>& inputs) {
  error_location_ = {};
  if (absl::Status s = CheckDeviceCount(); !s.ok()) return s;
  if (absl::Status s = CheckCallExpansion(); !s.ok()) return s;
  const Block& body = *function_.body();
  if (static_cast<int64_t>(inputs.size()) != num_devices_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("expected inputs for %d devices, got %d", num_devices_, inputs.size()));
  }
  Env env(num_devices_);
  for (int64_t d : local_) {
    if (static_cast<int>(inputs[d].size()) != body.num_arguments()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "@%s takes %d arguments, got %d", function_.name(), body.num_arguments(), inputs[d].size()));
    }
    for (int i = 0; i < body.num_arguments(); ++i) {
      const Tensor& input = inputs[d][i];
      Type expected = body.argument(i)->type();
      if (!expected.is_tensor()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "argument %%%s of @%s is an index; the interpreter takes tensor arguments only",
            body.argument(i)->name(), function_.name()));
      }
      if (input.element_type() != expected.element_type() || input.shape() != expected.dims()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "argument %%%s on device %d: expected %s, got %s", body.argument(i)->name(), d,
            expected.ToString(), input.DebugTypeString()));
      }
      if (backend_.uses_device_memory()) {
        absl::StatusOr<Tensor> resident = backend_.ToDevice(d, input);
        if (!resident.ok()) return resident.status();
        env[d][body.argument(i)] = Slot{std::make_shared<Tensor>(*std::move(resident)), 0};
        continue;
      }
      // The caller's tensors outlive the run, so they are referred to, not copied: a
      // non-owning pointer (aliasing constructor, empty owner), never moved from.
      env[d][body.argument(i)] =
          Slot{std::shared_ptr<const Tensor>(std::shared_ptr<const Tensor>(), &input), 0};
    }
  }
  const Operation* ret = body.terminator();
  for (int r = 0; r < ret->num_operands(); ++r) {
    if (!ret->operand(r)->type().is_tensor()) {
      error_location_ = ret->loc();
      return absl::InvalidArgumentError(absl::StrFormat(
          "result %d of @%s is an index; only tensors can be returned", r, function_.name()));
    }
  }
  start_time_us_ = NowMicros();
  if (absl::Status s = RunBlock(body, env); !s.ok()) return s;
  std::vector<std::vector<Tensor>> outputs(num_devices_);
  for (int64_t d : local_) {
    std::vector<std::shared_ptr<const Tensor>> results;
    for (const Value* v : ret->operands()) results.push_back(Lookup(env, d, v).tensor);
    env[d].clear();
    for (std::shared_ptr<const Tensor>& result : results) {
      if (backend_.uses_device_memory()) {
        absl::StatusOr<Tensor> host = backend_.ToHost(*result);
        if (!host.ok()) return host.status();
        outputs[d].push_back(*std::move(host));
        result.reset();
        continue;
      }
      // A result held only here (not an input, not returned twice, not shared with
      // another device) is moved out rather than copied. Tensors the interpreter creates
      // are non-const objects (make_shared<Tensor>), so moving from them is defined.
      if (result.use_count() == 1) {
        outputs[d].push_back(std::move(const_cast<Tensor&>(*result)));
      } else {
        outputs[d].push_back(*result);
      }
      result.reset();
    }
  }
  return outputs;
}

absl::Status Interpreter::RunBlock(const Block& block, Env& env) {
  for (const Operation* op : block) {
    if (op->def().Has(kTerminator)) break;
    double start = events_ != nullptr ? NowMicros() : 0;
    if (absl::Status s = RunOp(*op, env); !s.ok()) return s;
    // A loop's or call's ops report their own events.
    if (events_ != nullptr && !op->Is(OpKind::kFor) && !op->Is(OpKind::kCall)) {
      double end = NowMicros();
      // Lockstep execution: the op ran for every local device within [start, end];
      // attribute an equal share to each so per-device traces show the op's cost.
      double share = (end - start) / static_cast<double>(local_.size());
      for (size_t i = 0; i < local_.size(); ++i) {
        int64_t d = local_[i];
        events_->push_back({d, op, start - start_time_us_ + share * static_cast<double>(i),
                            start - start_time_us_ + share * static_cast<double>(i + 1),
                            StreamOf(*op, env, d)});
      }
    }
    // After the trace event, which reads the op's stream operand.
    Release(liveness_.DeadAfter(*op), env);
  }
  return absl::OkStatus();
}

absl::Status Interpreter::RunOp(const Operation& op, Env& env) {
  // The verifier rejects a negative literal stream; a `stream = %v` value is known only
  // now, on each device, and is checked before the op is issued anywhere.
  if (const Value* stream = op.stream_operand(); stream != nullptr) {
    for (int64_t d : local_) {
      if (int64_t id = Lookup(env, d, stream).index; id < 0) {
        return Fail(op, d, absl::StrFormat("stream %%%s is %d here; streams are non-negative",
                                           stream->name(), id));
      }
    }
  }
  if (op.Is(OpKind::kFor)) return RunFor(op, env);
  if (op.Is(OpKind::kCall)) return RunCall(op, env);
  // rank, index constants and index arithmetic are scalar control values that the
  // interpreter computes itself.
  if (IsIndexArithmetic(op)) return RunIndexOp(op, env);
  if (op.def().Has(kCollective)) return RunCollective(op, env);
  return RunTensorOp(op, env);
}

absl::StatusOr<int64_t> Interpreter::IndexOpValue(const Operation& op, int64_t device,
                                                   int64_t a, int64_t b) const {
  int64_t value = 0;
  bool overflow = false;
  switch (op.kind()) {
    case OpKind::kRank:
      return mesh_ == nullptr ? 0 : mesh_->GroupCoordinate(device, op.attrs().Find("axis")->axes());
    case OpKind::kFull:
      return op.RequiredIntAttr("value");
    case OpKind::kAdd: overflow = __builtin_add_overflow(a, b, &value); break;
    case OpKind::kSub: overflow = __builtin_sub_overflow(a, b, &value); break;
    case OpKind::kMul: overflow = __builtin_mul_overflow(a, b, &value); break;
    case OpKind::kDiv:
    case OpKind::kRem:
      if (b == 0) {
        return absl::InvalidArgumentError(absl::StrFormat("index division by zero (%d / 0)", a));
      }
      // The one quotient that does not fit in an int64.
      overflow = op.Is(OpKind::kDiv) && a == std::numeric_limits<int64_t>::min() && b == -1;
      if (overflow) break;
      value = op.Is(OpKind::kDiv) ? scalar_math::FloorDiv(a, b) : scalar_math::FloorRem(a, b);
      break;
    default:
      return absl::InvalidArgumentError("is not an index operation");
  }
  if (overflow) {
    return absl::InvalidArgumentError(
        absl::StrFormat("index arithmetic overflows int64 (operands %d and %d)", a, b));
  }
  return value;
}

absl::Status Interpreter::RunIndexOp(const Operation& op, Env& env) {
  const bool binary = !op.Is(OpKind::kRank) && !op.Is(OpKind::kFull);
  for (int64_t d : local_) {
    const int64_t a = binary ? Lookup(env, d, op.operand(0)).index : 0;
    const int64_t b = binary ? Lookup(env, d, op.operand(1)).index : 0;
    absl::StatusOr<int64_t> value = IndexOpValue(op, d, a, b);
    if (!value.ok()) return Fail(op, d, value.status());
    env[d][op.result(0)] = Slot{nullptr, *value};
  }
  return absl::OkStatus();
}

absl::Status Interpreter::RunFor(const Operation& op, Env& env) {
  const Block& body = *op.region(0);
  int64_t lower = op.RequiredIntAttr("lower");
  int64_t upper = op.RequiredIntAttr("upper");
  int64_t step = op.IntAttr("step");
  // Carried values start as the init operands.
  std::vector<std::vector<Slot>> carried(num_devices_);
  auto moved = moved_inits_.find(&op);
  for (int64_t d : local_) {
    for (int i = 0; i < op.num_operands(); ++i) {
      const Value* init = op.operand(i);
      // An init that dies here is moved, not shared: the loop's first in-place update
      // may then reuse its buffer.
      auto it = moved == moved_inits_.end() || !moved->second[i] ? env[d].end()
                                                                 : env[d].find(init);
      if (it == env[d].end()) {
        carried[d].push_back(Lookup(env, d, init));
        continue;
      }
      carried[d].push_back(std::move(it->second));
      env[d].erase(it);
    }
  }
  if (step <= 0) return Fail(op, local_.front(), "the loop step must be positive");
  // Iterate by trip count: `i += step` would overflow past an upper bound near the
  // int64 limit and never end. The distance and the count fit in unsigned 64 bits.
  const uint64_t trips =
      upper <= lower ? 0
                     : (static_cast<uint64_t>(upper) - static_cast<uint64_t>(lower) - 1) /
                               static_cast<uint64_t>(step) +
                           1;
  backend_.EnterLoop(op, trips);
  PlanCarriedRings(op, carried, lower, step, trips, env);
  const auto rings = carried_by_loop_.find(&op);
  std::vector<const Tensor*> carried_tensors;
  for (uint64_t trip = 0; trip < trips; ++trip) {
    carried_tensors.clear();
    for (int64_t d : local_) {
      for (const Slot& slot : carried[d]) carried_tensors.push_back(slot.tensor.get());
    }
    absl::StatusOr<uint64_t> skipped = backend_.SkipIterations(op, trips - trip, carried_tensors);
    if (!skipped.ok()) {
      backend_.ExitLoop(op);
      return Fail(op, local_.front(), skipped.status());
    }
    if (*skipped > 0 && rings != carried_by_loop_.end()) {
      for (size_t r : rings->second) {
        for (bool active : carried_runs_[r].active) {
          if (!active) continue;
          backend_.ExitLoop(op);
          return Fail(op, local_.front(),
                      absl::InternalError("a ring's carried block lives in its slot, so no "
                                          "iteration of its loop can be skipped"));
        }
      }
    }
    if (*skipped >= trips - trip) break;
    trip += *skipped;
    if (rings != carried_by_loop_.end()) {
      for (size_t r : rings->second) carried_runs_[r].trip = trip;
    }
    // lower + trip * step < upper, so it is representable; computed modulo 2^64.
    const int64_t i = static_cast<int64_t>(static_cast<uint64_t>(lower) +
                                           trip * static_cast<uint64_t>(step));
    for (int64_t d : local_) {
      env[d][body.argument(0)] = Slot{nullptr, i};
      // Moved, not shared: the yield below sets them again, and a carried value held
      // only by the body may be updated in place.
      for (size_t c = 0; c < carried[d].size(); ++c) {
        env[d][body.argument(static_cast<int>(c) + 1)] = std::move(carried[d][c]);
      }
    }
    if (absl::Status s = RunBlock(body, env); !s.ok()) {
      backend_.ExitLoop(op);
      return s;
    }
    const Operation* yield = body.terminator();
    for (int64_t d : local_) {
      for (size_t c = 0; c < carried[d].size(); ++c) {
        carried[d][c] = Lookup(env, d, yield->operand(static_cast<int>(c)));
      }
    }
    // The iteration's values are dead now; `carried` holds what the next one needs.
    Release(liveness_.ReleasedByOwner(body), env);
  }
  backend_.ExitLoop(op);
  for (int64_t d : local_) {
    for (int r = 0; r < op.num_results(); ++r) env[d][op.result(r)] = carried[d][r];
  }
  return absl::OkStatus();
}

absl::Status Interpreter::CheckCallExpansion() {
  const Module* module = function_.module();
  if (calls_checked_ || module == nullptr) return absl::OkStatus();
  // The ops one run of each function executes, its calls' included, callees first. A
  // call that closes a cycle (an unverified program) counts as one op: the call depth
  // bound stops it when it runs.
  const FunctionsByName functions(*module);
  absl::flat_hash_map<const Function*, uint64_t> executed;
  auto add = [](uint64_t a, uint64_t b) {
    uint64_t sum;
    return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
  };
  auto through_call = [&](const Operation& op) -> uint64_t {
    const Function* callee = functions.Callee(op);
    auto it = callee == nullptr ? executed.end() : executed.find(callee);
    return it == executed.end() ? 0 : it->second;
  };
  Function* root = const_cast<Function*>(&function_);
  for (const Function* f : CalleesFirst(*module, {&root, 1},
                                        [](Operation&, const Function&,
                                           absl::Span<Function* const>) {})) {
    uint64_t ops = 0;
    WalkOps(f->body(), [&](Operation* op) { ops = add(ops, add(1, through_call(*op))); });
    executed[f] = ops;
  }
  // Only what calls add is bounded (a long program without calls is run as written),
  // and the error is at the call where it passes the bound.
  uint64_t by_calls = 0;
  for (Operation* call : CallsIn(function_)) {
    const uint64_t ops = add(1, through_call(*call));
    by_calls = add(by_calls, ops);
    if (by_calls > kMaxExpandedOps) {
      const std::string& name = call->attrs().Find("callee")->string_value();
      return Fail(*call, local_.empty() ? 0 : local_.front(),
                  absl::StrFormat("a run would execute more than %d ops through calls, the "
                                  "most it may; this call of @%s runs %s of them (its calls "
                                  "expanded)",
                                  kMaxExpandedOps, name,
                                  ops == UINT64_MAX ? "more than 2^64" : absl::StrCat(ops)));
    }
  }
  calls_checked_ = true;
  return absl::OkStatus();
}

absl::Status Interpreter::RunCall(const Operation& op, Env& env) {
  const std::string& name = op.attrs().Find("callee")->string_value();
  const Module* module = function_.module();
  const Function* callee = module == nullptr ? nullptr : module->FindFunction(name);
  if (callee == nullptr) {
    return Fail(op, local_.front(), absl::StrFormat("no function @%s in the module", name));
  }
  const Block& body = *callee->body();
  if (callee->is_spmd() != function_.is_spmd() || callee->mesh() != function_.mesh() ||
      body.num_arguments() != op.num_operands() ||
      body.terminator() == nullptr || body.terminator()->num_operands() != op.num_results()) {
    return Fail(op, local_.front(),
                absl::StrFormat("@%s does not fit the call (the program was not verified)", name));
  }
  if (call_depth_ >= kMaxCallDepth) {
    return Fail(op, local_.front(),
                absl::StrFormat("calls nest more than %d deep (recursion?)", kMaxCallDepth));
  }
  std::unique_ptr<Interpreter>& child = callees_[callee];
  if (child == nullptr) child = std::make_unique<Interpreter>(*callee, backend_);
  child->local_ = local_;
  child->is_local_ = is_local_;
  child->events_ = events_;
  child->start_time_us_ = start_time_us_;
  child->call_depth_ = call_depth_ + 1;
  Env callee_env(num_devices_);
  for (int64_t d : local_) {
    for (int i = 0; i < op.num_operands(); ++i) {
      callee_env[d][body.argument(i)] = Lookup(env, d, op.operand(i));
    }
  }
  if (absl::Status s = child->RunBlock(body, callee_env); !s.ok()) {
    error_location_ = child->error_location_;
    return s;
  }
  const Operation* ret = body.terminator();
  for (int64_t d : local_) {
    for (int r = 0; r < op.num_results(); ++r) {
      env[d][op.result(r)] = Lookup(callee_env, d, ret->operand(r));
    }
    callee_env[d].clear();
  }
  return absl::OkStatus();
}

absl::Status Interpreter::RunCollective(const Operation& op, Env& env) {
  AxisList axes = op.attrs().Find("axis")->axes();
  absl::flat_hash_set<int64_t> done;
  for (int64_t d : local_) {
    if (done.contains(d)) continue;
    CollectiveContext context;
    context.group = mesh_ == nullptr ? std::vector<int64_t>{0} : mesh_->GroupMembers(d, axes);
    std::vector<std::shared_ptr<const Tensor>> held;
    std::vector<const Tensor*> parts;
    for (size_t m = 0; m < context.group.size(); ++m) {
      int64_t member = context.group[m];
      if (!is_local_[member]) continue;
      context.local.push_back(static_cast<int64_t>(m));
      context.streams.push_back(StreamOf(op, env, member));
      held.push_back(Lookup(env, member, op.operand(0)).tensor);
      parts.push_back(held.back().get());
      done.insert(member);
    }
    if (carried_by_op_.contains(&op)) {
      absl::StatusOr<bool> carried = ReceiveCarried(op, context, env);
      if (!carried.ok()) return Fail(op, d, carried.status());
      if (*carried) continue;
    }
    absl::StatusOr<bool> received = ReceiveInPlace(op, context, parts, env);
    if (!received.ok()) return Fail(op, d, received.status());
    if (*received) continue;
    absl::StatusOr<std::vector<Tensor>> results = backend_.RunCollective(op, context, parts);
    if (!results.ok()) return Fail(op, d, results.status());
    if (results->size() != parts.size()) {
      return Fail(op, d, absl::StrFormat("backend produced %d results for %d group members",
                                         results->size(), parts.size()));
    }
    for (size_t i = 0; i < context.local.size(); ++i) {
      env[context.group[context.local[i]]][op.result(0)] =
          Slot{std::make_shared<Tensor>(std::move((*results)[i])), 0};
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Interpreter::ReceiveInPlace(const Operation& op,
                                                  const CollectiveContext& context,
                                                  absl::Span<const Tensor* const> parts,
                                                  Env& env) {
  auto into = shift_into_.find(&op);
  if (into == shift_into_.end()) return false;
  const Operation& update = *into->second;
  // Every local member's destination, handed over; none is taken unless all are.
  std::vector<std::shared_ptr<const Tensor>> taken;
  std::vector<Tensor*> destinations;
  std::vector<int64_t> offsets;
  auto give_back = [&] {
    for (size_t i = 0; i < taken.size(); ++i) {
      env[context.group[context.local[i]]][update.operand(0)] = Slot{std::move(taken[i]), 0};
    }
  };
  for (int64_t position : context.local) {
    const int64_t member = context.group[position];
    std::shared_ptr<const Tensor> destination = TakeIfUnique(env, member, update.operand(0));
    if (destination == nullptr) {
      give_back();
      return false;
    }
    destinations.push_back(const_cast<Tensor*>(destination.get()));
    offsets.push_back(Lookup(env, member, update.operand(2)).index);
    taken.push_back(std::move(destination));
  }
  absl::StatusOr<bool> received =
      backend_.RunShiftInto(op, context, parts, update, offsets, destinations);
  if (!received.ok() || !*received) {
    give_back();
    return received;
  }
  for (size_t i = 0; i < taken.size(); ++i) {
    env[context.group[context.local[i]]][op.result(0)] = Slot{std::move(taken[i]), 0, true};
  }
  return true;
}

absl::StatusOr<Interpreter::Slot> Interpreter::Materialize(const Slot& view, int64_t device,
                                                           Env& env) {
  const Operation& slice = *view.slice;
  if (!slice.Is(OpKind::kSlice) && !slice.Is(OpKind::kDynamicSlice)) {
    // A carried ring block (CarriedBlockInSlot): every reader takes it in place.
    return Fail(slice, device, absl::InternalError("a ring's carried block in its slot was "
                                                   "read by an op that takes no view"));
  }
  const Tensor* base = view.tensor.get();
  const int64_t offset = view.index;
  OpContext context{device, StreamOf(slice, env, device)};
  absl::StatusOr<std::vector<Tensor>> results =
      backend_.RunOp(slice, context, absl::MakeConstSpan(&base, 1), absl::MakeConstSpan(&offset, 1));
  if (!results.ok()) return Fail(slice, device, results.status());
  if (results->size() != 1) {
    return Fail(slice, device,
                absl::StrFormat("backend produced %d results, expected 1", results->size()));
  }
  return Slot{std::make_shared<Tensor>(std::move((*results)[0])), 0};
}

absl::Status Interpreter::RunTensorOp(const Operation& op, Env& env) {
  const bool in_place = updates_in_place_.contains(&op);
  auto into = matmul_into_.find(&op);
  const bool reads_views = backend_.ReadsSliceInPlaceFor(op);
  const auto kept_view = slices_in_place_.find(&op);
  const SliceExtent* extent =
      kept_view != slices_in_place_.end() ? &kept_view->second : nullptr;
  const bool carried_update = op.Is(OpKind::kDynamicUpdateSlice) && carried_by_op_.contains(&op);
  if (unfilled_.contains(&op)) {
    for (int64_t d : local_) {
      OpContext context{d, StreamOf(op, env, d), {}, {}};
      absl::StatusOr<std::vector<Tensor>> results = backend_.AllocateUnfilled(op, context);
      if (!results.ok()) return Fail(op, d, results.status());
      if (results->size() != 1) {
        return Fail(op, d, absl::StrFormat("backend produced %d results, expected 1",
                                           results->size()));
      }
      env[d][op.result(0)] = Slot{std::make_shared<Tensor>(std::move((*results)[0])), 0};
    }
    return absl::OkStatus();
  }
  for (int64_t d : local_) {
    if (carried_update) {
      absl::StatusOr<bool> done = UpdateCarried(op, d, env);
      if (!done.ok()) return Fail(op, d, done.status());
      if (*done) continue;
    }
    // A block its readers read in place: no kernel, no copy. One that does not fit runs
    // as the op, which reports the offset.
    if (extent != nullptr) {
      Slot base = Lookup(env, d, op.operand(0));
      const int64_t offset =
          extent->start.has_value() ? *extent->start : Lookup(env, d, op.operand(1)).index;
      if (base.tensor != nullptr && base.slice == nullptr &&
          SliceAsMatrices(base.tensor->shape(), extent->dim, offset, extent->size).has_value()) {
        Slot view{std::move(base.tensor), offset};
        view.slice = &op;
        env[d][op.result(0)] = std::move(view);
        continue;
      }
    }
    // A matmul already wrote this update's block into its destination: pass it on.
    if (in_place) {
      Slot block = Lookup(env, d, op.operand(1));
      if (block.written_into_destination) {
        env[d][op.result(0)] = Slot{std::move(block.tensor), 0};
        continue;
      }
    }
    // The destination's buffer, handed over when nothing else holds it.
    std::shared_ptr<const Tensor> donated;
    if (in_place) donated = TakeIfUnique(env, d, op.operand(0));
    // Ops have a handful of operands: keep the per-op bookkeeping off the heap.
    absl::InlinedVector<Slot, 4> slots;
    absl::InlinedVector<const Tensor*, 4> tensors;
    absl::InlinedVector<int64_t, 2> indices;
    // Blocks a matmul reads in place, one per tensor operand (null for a whole tensor).
    absl::InlinedVector<SlicedOperand, 2> views;
    absl::InlinedVector<const SlicedOperand*, 2> sliced;
    bool any_view = false;
    views.reserve(op.num_operands());
    for (int i = 0; i < op.num_operands(); ++i) {
      const Value* operand = op.operand(i);
      slots.push_back(i == 0 && donated != nullptr ? Slot{donated, 0} : Lookup(env, d, operand));
      if (operand->type().is_index()) {
        indices.push_back(slots.back().index);
        continue;
      }
      if (slots.back().slice != nullptr && !reads_views) {
        absl::StatusOr<Slot> block = Materialize(slots.back(), d, env);
        if (!block.ok()) return block.status();
        slots.back() = *std::move(block);
      }
      tensors.push_back(slots.back().tensor.get());
      const Slot& slot = slots.back();
      if (slot.slice == nullptr) {
        sliced.push_back(nullptr);
        continue;
      }
      const Operation& slice = *slot.slice;
      SlicedOperand view;
      view.base = slot.tensor.get();
      view.slice = &slice;
      view.offset = slot.index;
      view.shape = operand->type().dims();  // the block's type; the module outlives the run
      // Checked when the slice was kept as a view (or the carried block's slot planned).
      const auto kept = slices_in_place_.find(&slice);
      const SliceExtent& cut = kept != slices_in_place_.end()
                                   ? kept->second
                                   : carried_extents_[carried_by_op_.at(&slice)];
      view.dim = cut.dim;
      view.block = *SliceAsMatrices(view.base->shape(), cut.dim, view.offset, cut.size);
      views.push_back(std::move(view));
      sliced.push_back(&views.back());
      any_view = true;
    }
    OpContext context{d, StreamOf(op, env, d)};
    if (any_view) context.sliced = sliced;
    if (donated != nullptr) context.donated = const_cast<Tensor*>(donated.get());
    if (into != matmul_into_.end()) {
      const Operation& update = *into->second;
      std::shared_ptr<const Tensor> destination = TakeIfUnique(env, d, update.operand(0));
      if (destination != nullptr) {
        const int64_t offset = Lookup(env, d, update.operand(2)).index;
        absl::StatusOr<bool> wrote =
            backend_.RunMatmulInto(op, context, tensors, update, offset,
                                   const_cast<Tensor&>(*destination));
        if (!wrote.ok()) return Fail(op, d, wrote.status());
        if (*wrote) {
          env[d][op.result(0)] = Slot{std::move(destination), 0, true};
          continue;
        }
        env[d][update.operand(0)] = Slot{std::move(destination), 0};
      }
    }
    absl::StatusOr<std::vector<Tensor>> results = backend_.RunOp(op, context, tensors, indices);
    if (!results.ok()) return Fail(op, d, results.status());
    if (static_cast<int>(results->size()) != op.num_results()) {
      return Fail(op, d, absl::StrFormat("backend produced %d results, expected %d",
                                         results->size(), op.num_results()));
    }
    for (int r = 0; r < op.num_results(); ++r) {
      env[d][op.result(r)] = Slot{std::make_shared<Tensor>(std::move((*results)[r])), 0};
    }
  }
  return absl::OkStatus();
}

}  // namespace commir::runtime
