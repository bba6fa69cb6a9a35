#include "commir/call_graph.h"

#include <utility>

namespace commir {

FunctionsByName::FunctionsByName(const Module& module) {
  // The first of two functions of one name, as Module::FindFunction finds.
  for (Function* f : module.functions()) by_name_.try_emplace(f->name(), f);
}

Function* FunctionsByName::Find(absl::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Function* FunctionsByName::Callee(const Operation& call) const {
  if (!call.Is(OpKind::kCall)) return nullptr;
  const Attribute* name = call.attrs().Find("callee");
  if (name == nullptr || name->kind() != Attribute::Kind::kIdent) return nullptr;
  return Find(name->string_value());
}

std::vector<Operation*> CallsIn(const Function& function) {
  std::vector<Operation*> calls;
  if (function.body() == nullptr) return calls;
  // Calls hold no regions, so WalkOps's post-order visits them in program order.
  WalkOps(function.body(), [&](Operation* op) {
    if (op->Is(OpKind::kCall)) calls.push_back(op);
  });
  return calls;
}

std::vector<Function*> CalleesFirst(const Module& module, absl::Span<Function* const> roots,
                                    CycleCallback on_cycle) {
  const FunctionsByName functions(module);
  enum class State { kOnPath, kDone };
  absl::flat_hash_map<const Function*, State> state;
  // The search's path, each function with its calls and the next one to follow.
  struct Frame {
    Function* function;
    std::vector<Operation*> calls;
    size_t next = 0;
  };
  std::vector<Frame> stack;
  std::vector<Function*> path;
  std::vector<Function*> order;
  auto enter = [&](Function* f) {
    state[f] = State::kOnPath;
    stack.push_back(Frame{f, CallsIn(*f)});
    path.push_back(f);
  };
  for (Function* root : roots) {
    if (root == nullptr || state.contains(root)) continue;
    enter(root);
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next == top.calls.size()) {
        state[top.function] = State::kDone;
        order.push_back(top.function);
        stack.pop_back();
        path.pop_back();
        continue;
      }
      Operation& call = *top.calls[top.next++];
      Function* callee = functions.Callee(call);
      if (callee == nullptr) continue;
      auto it = state.find(callee);
      if (it == state.end()) {
        enter(callee);  // invalidates `top`
      } else if (it->second == State::kOnPath) {
        on_cycle(call, *callee, path);
      }
    }
  }
  return order;
}

std::vector<Function*> CalleesFirst(const Module& module, CycleCallback on_cycle) {
  std::vector<Function*> functions = module.functions();
  return CalleesFirst(module, functions, on_cycle);
}

}  // namespace commir
