#include "transforms/inline.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace commir {
namespace {

using ValueMap = absl::flat_hash_map<const Value*, Value*>;

// A copy of `op` (and its regions) whose operands are mapped through `map`, inserted
// into `block` before `position`; `map` learns the copy's results and region arguments.
Operation* CloneOp(const Operation& op, Block* block, Operation* position, ValueMap& map) {
  std::vector<Type> result_types;
  for (int i = 0; i < op.num_results(); ++i) result_types.push_back(op.result(i)->type());
  std::unique_ptr<Operation> copy =
      Operation::Create(op.def(), {}, result_types, op.attrs(), op.num_regions(), op.loc());
  copy->set_type_loc(op.type_loc());
  for (Value* operand : op.operands()) {
    if (operand->is_literal()) {
      copy->AddLiteralOperand(operand->literal_value(), operand->type())->set_loc(operand->loc());
    } else {
      copy->AddOperand(map.at(operand));
    }
  }
  if (Value* stream = op.stream_operand()) copy->SetStreamOperand(map.at(stream));
  for (int r = 0; r < op.num_regions(); ++r) {
    const Block* region = op.region(r);
    Block* copied = copy->region(r);
    for (int i = 0; i < region->num_arguments(); ++i) {
      const Value* arg = region->argument(i);
      map[arg] = copied->AddArgument(arg->type(), arg->name(), arg->loc());
    }
    for (const Operation* nested : *region) CloneOp(*nested, copied, nullptr, map);
  }
  for (int i = 0; i < op.num_results(); ++i) {
    Value* result = copy->result(i);
    result->set_name(op.result(i)->name());
    result->set_loc(op.result(i)->loc());
    map[op.result(i)] = result;
  }
  return block->InsertBefore(position, std::move(copy));
}

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

absl::Status InlineCall(Operation* call) {
  const std::string& name = call->attrs().Find("callee")->string_value();
  Function* caller = call->parent_function();
  const Module* module = caller == nullptr ? nullptr : caller->module();
  const Function* callee = module == nullptr ? nullptr : module->FindFunction(name);
  const Block* body = callee == nullptr ? nullptr : callee->body();
  const Operation* ret = body == nullptr ? nullptr : body->terminator();
  if (ret == nullptr || body->num_arguments() != call->num_operands() ||
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
    if (op != ret) CloneOp(*op, block, call, map);
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

void CollectCalls(Block* block, std::vector<Operation*>& calls) {
  WalkOps(block, [&](Operation* op) {
    if (op->Is(OpKind::kCall)) calls.push_back(op);
  });
}

}  // namespace

bool HasCalls(const Function& function) {
  std::vector<Operation*> calls;
  CollectCalls(function.body(), calls);
  return !calls.empty();
}

absl::StatusOr<int64_t> InlineCalls(Function& function) {
  // Each sweep inlines one level of calls; a chain of calls without recursion is at
  // most as long as the module has functions.
  size_t max_sweeps = function.module() == nullptr ? 1 : function.module()->functions().size();
  int64_t inlined = 0;
  for (size_t sweep = 0;; ++sweep) {
    std::vector<Operation*> calls;
    CollectCalls(function.body(), calls);
    if (calls.empty()) return inlined;
    if (sweep >= max_sweeps) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "@%s: calls nest deeper than the module has functions (recursion)", function.name()));
    }
    for (Operation* call : calls) {
      if (absl::Status s = InlineCall(call); !s.ok()) return s;
      ++inlined;
    }
  }
}

absl::StatusOr<int64_t> InlineCalls(Module& module) {
  int64_t inlined = 0;
  for (Function* function : module.functions()) {
    absl::StatusOr<int64_t> n = InlineCalls(*function);
    if (!n.ok()) return n.status();
    inlined += *n;
  }
  return inlined;
}

absl::Status InlinePass::Run(Module& module) {
  absl::StatusOr<int64_t> inlined = InlineCalls(module);
  if (!inlined.ok()) return inlined.status();
  AddToStatistic("calls-inlined", "Calls replaced by a copy of their callee's body", *inlined);
  return absl::OkStatus();
}

}  // namespace commir
