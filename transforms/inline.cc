#include "transforms/inline.h"

#include "transforms/option_schema.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "commir/call_graph.h"
#include "commir/clone.h"

namespace commir {
namespace {

// `value` resharded to `declared` before `position` when a global function's signature
// declares a layout `value` lacks (a zigzag layout exists only in signatures: left to
// the caller).
Value* ToDeclaredLayout(Value* value, Type declared, bool spmd, Block* block, Operation* position) {
  if (spmd || !declared.is_tensor() || !declared.has_sharding() || declared.zigzag_dim() >= 0 ||
      value->type() == declared) {
    return value;
  }
  std::unique_ptr<Operation> reshard = Operation::Create(
      GetOpDef(OpKind::kReshard), {value}, {declared}, AttrDict(), 0, position->loc());
  Value* result = block->InsertBefore(position, std::move(reshard))->result(0);
  result->set_name(value->name());
  return result;
}

// Replaces `call` by a copy of `callee`'s body (as it is now: calls it holds are copied
// as calls).
absl::Status InlineCall(Operation* call, const Function* callee) {
  const std::string& name = call->attrs().Find("callee")->string_value();
  Function* caller = call->parent_function();
  const Block* body = callee == nullptr ? nullptr : callee->body();
  const Operation* ret = body == nullptr ? nullptr : body->terminator();
  if (ret == nullptr || caller == nullptr || body->num_arguments() != call->num_operands() ||
      ret->num_operands() != call->num_results() || callee->is_spmd() != caller->is_spmd()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot inline the call of @%s: no such function fits it", name));
  }
  bool spmd = caller->is_spmd();
  Block* block = call->parent_block();
  ValueMap map;
  for (int i = 0; i < call->num_operands(); ++i) {
    map[body->argument(i)] =
        ToDeclaredLayout(call->operand(i), callee->arg_types()[i], spmd, block, call);
  }
  for (const Operation* op : *body) {
    if (op != ret) CloneOp(*op, *block, call, map);
  }
  for (int r = 0; r < call->num_results(); ++r) {
    Value* mapped = map.at(ret->operand(r));
    Value* returned = ToDeclaredLayout(mapped, callee->result_types()[r], spmd, block, call);
    // A layout written on the call's result is a constraint too (it may write one the
    // callee's signature leaves free).
    returned = ToDeclaredLayout(returned, call->result(r)->type(), spmd, block, call);
    // A value made by the inlining takes the call result's name; a value of the caller
    // passed straight through keeps its own.
    if (returned != mapped || ret->operand(r)->kind() == Value::Kind::kResult) {
      returned->set_name(call->result(r)->name());
      returned->set_loc(call->result(r)->loc());
    }
    call->result(r)->ReplaceAllUsesWith(returned);
  }
  call->Erase();
  return absl::OkStatus();
}

// The bound on inlining is computed before anything changes, from the functions as
// written. A type "keeps" through inlining when it is a tensor with a written layout
// other than zigzag: ToDeclaredLayout gives a value of such a declared type exactly that
// type, and a call result of it is replaced by a value of it. Any other value may come
// out of inlining with another layout.
bool KeepsItsType(Type type) {
  return type.is_tensor() && type.has_sharding() && type.zigzag_dim() < 0;
}

// At most how many reshards inlining `call` of `callee` inserts (see InlineCall).
uint64_t ReshardsAtMost(const Operation& call, const Function& callee) {
  const Function* caller = call.parent_function();
  if (caller == nullptr || caller->is_spmd() || callee.body() == nullptr ||
      callee.body()->terminator() == nullptr) {
    return 0;
  }
  uint64_t reshards = 0;
  for (int i = 0; i < call.num_operands() && i < static_cast<int>(callee.arg_types().size());
       ++i) {
    Type declared = callee.arg_types()[i];
    Type operand = call.operand(i)->type();
    if (KeepsItsType(declared) && !(KeepsItsType(operand) && operand == declared)) ++reshards;
  }
  const Operation& ret = *callee.body()->terminator();
  for (int r = 0; r < call.num_results() && r < ret.num_operands() &&
                  r < static_cast<int>(callee.result_types().size());
       ++r) {
    Type declared = callee.result_types()[r];
    Type returned = ret.operand(r)->type();
    bool known = KeepsItsType(returned);
    if (KeepsItsType(declared)) {
      if (!(known && returned == declared)) ++reshards;
      returned = declared;
      known = true;
    }
    Type wanted = call.result(r)->type();
    if (KeepsItsType(wanted) && !(known && returned == wanted)) ++reshards;
  }
  return reshards;
}

uint64_t AddSaturating(uint64_t a, uint64_t b) {
  uint64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

std::string OpCount(uint64_t n) {
  return n == UINT64_MAX ? "more than 2^64" : absl::StrCat(n);
}

absl::Status Fail(DiagnosticEngine* diagnostics, Location loc, std::string message) {
  if (diagnostics != nullptr) diagnostics->Error(loc, message);
  return absl::FailedPreconditionError(std::move(message));
}

// The functions `roots` reach, callees first; recursion is an error at the call that
// closes the first cycle found.
absl::StatusOr<std::vector<Function*>> CalleesFirstOrRecursion(
    const Module& module, absl::Span<Function* const> roots, DiagnosticEngine* diagnostics) {
  Operation* closing = nullptr;
  std::string cycle;
  std::vector<Function*> order =
      CalleesFirst(module, roots, [&](Operation& call, const Function& callee,
                                      absl::Span<Function* const> path) {
        if (closing != nullptr) return;
        closing = &call;
        cycle = absl::StrCat("@", path.back()->name(), " calls @", callee.name());
      });
  if (closing == nullptr) return order;
  return Fail(diagnostics, closing->loc(),
              absl::StrFormat("cannot inline: %s, which calls it back (recursion)", cycle));
}

// The error for the call at which the ops inlining copies pass kMaxExpandedOps.
absl::Status TooLarge(DiagnosticEngine* diagnostics, const Operation& call,
                      const Function& callee, uint64_t brings) {
  return Fail(diagnostics, call.loc(),
              absl::StrFormat("inlining would copy more than %d ops, the most it copies; "
                              "this call of @%s brings %s of them (its calls expanded)",
                              kMaxExpandedOps, callee.name(), OpCount(brings)));
}

}  // namespace

bool HasCalls(const Function& function) { return !CallsIn(function).empty(); }

absl::StatusOr<int64_t> InlineCalls(Function& function, DiagnosticEngine* diagnostics) {
  const Module* module = function.module();
  if (module == nullptr) {
    if (!HasCalls(function)) return 0;
    return Fail(diagnostics, function.loc(),
                absl::StrFormat("@%s is in no module: its calls cannot be inlined",
                                function.name()));
  }
  // The callees stay as they are, so a call copied in from a callee is inlined in turn.
  // Before anything changes, bound the ops this makes, callees first: what expanding
  // one call of each function creates (its body less the return, the calls it holds
  // included, then their expansions).
  Function* root = &function;
  absl::StatusOr<std::vector<Function*>> order = CalleesFirstOrRecursion(*module, {&root, 1},
                                                                         diagnostics);
  if (!order.ok()) return order.status();
  const FunctionsByName functions(*module);
  absl::flat_hash_map<const Function*, uint64_t> expansion;
  for (Function* f : *order) {
    uint64_t created = 0;
    WalkOps(f->body(), [&](Operation* op) {
      if (op->Is(OpKind::kReturn) && op->parent_op() == nullptr) return;
      created = AddSaturating(created, 1);
      const Function* callee = functions.Callee(*op);
      if (callee == nullptr) return;
      created = AddSaturating(created,
                              AddSaturating(expansion[callee], ReshardsAtMost(*op, *callee)));
    });
    expansion[f] = created;
  }
  uint64_t copied = 0;
  for (Operation* call : CallsIn(function)) {
    const Function* callee = functions.Callee(*call);
    if (callee == nullptr) continue;
    uint64_t brings = AddSaturating(expansion[callee], ReshardsAtMost(*call, *callee));
    copied = AddSaturating(copied, brings);
    if (copied > kMaxExpandedOps) return TooLarge(diagnostics, *call, *callee, brings);
  }
  // Level by level: the calls each level's copies hold make the next level. A call is
  // found once, when it is copied, not by walking the growing body again.
  int64_t inlined = 0;
  std::vector<Operation*> level = CallsIn(function);
  while (!level.empty()) {
    std::vector<Operation*> next;
    for (Operation* call : level) {
      Operation* before = call->prev();
      Operation* after = call->next();
      Block* block = call->parent_block();
      if (absl::Status s = InlineCall(call, functions.Callee(*call)); !s.ok()) {
        return Fail(diagnostics, call->loc(), std::string(s.message()));
      }
      ++inlined;
      // The copy lies between `before` and `after`.
      for (Operation* op = before == nullptr ? block->front() : before->next(); op != after;
           op = op->next()) {
        if (op->Is(OpKind::kCall)) next.push_back(op);
        for (int r = 0; r < op->num_regions(); ++r) {
          WalkOps(op->region(r), [&](Operation* nested) {
            if (nested->Is(OpKind::kCall)) next.push_back(nested);
          });
        }
      }
    }
    level = std::move(next);
  }
  return inlined;
}

absl::StatusOr<int64_t> InlineCalls(Module& module, DiagnosticEngine* diagnostics) {
  // Callees first: a call then copies a body whose calls are already inlined, so each
  // op of the result is copied once, and the time is linear in the inlined module.
  absl::StatusOr<std::vector<Function*>> order =
      CalleesFirstOrRecursion(module, module.functions(), diagnostics);
  if (!order.ok()) return order.status();
  const FunctionsByName functions(module);
  // Before anything changes, bound what the calls copy: the ops of each function once
  // inlined, less its return, callees first.
  absl::flat_hash_map<const Function*, uint64_t> inlined_size;
  uint64_t copied = 0;
  for (Function* f : *order) {
    uint64_t size = 0;
    WalkOps(f->body(), [&](Operation* op) {
      bool returns = op->Is(OpKind::kReturn) && op->parent_op() == nullptr;
      if (!returns && (!op->Is(OpKind::kCall) || functions.Callee(*op) == nullptr)) ++size;
    });
    for (Operation* call : CallsIn(*f)) {
      const Function* callee = functions.Callee(*call);
      if (callee == nullptr) continue;
      uint64_t brings = AddSaturating(inlined_size[callee], ReshardsAtMost(*call, *callee));
      size = AddSaturating(size, brings);
      copied = AddSaturating(copied, brings);
      if (copied > kMaxExpandedOps) return TooLarge(diagnostics, *call, *callee, brings);
    }
    inlined_size[f] = size;
  }
  int64_t inlined = 0;
  for (Function* f : *order) {
    for (Operation* call : CallsIn(*f)) {
      if (absl::Status s = InlineCall(call, functions.Callee(*call)); !s.ok()) {
        return Fail(diagnostics, call->loc(), std::string(s.message()));
      }
      ++inlined;
    }
  }
  return inlined;
}

const PassInfo& InlinePass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<InlinePass>(
      "inline",
      "Replace every call by a copy of its callee's body (the callees stay in the module)"));
  return *info;
}

absl::Status InlinePass::Run(Module& module) {
  absl::StatusOr<int64_t> inlined = InlineCalls(module, &diagnostics());
  if (!inlined.ok()) return inlined.status();
  AddToStatistic("calls-inlined", "Calls replaced by a copy of their callee's body", *inlined);
  return absl::OkStatus();
}

}  // namespace commir
