#include "commir/clone.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "commir/check.h"

namespace commir {
namespace {

Value* Mapped(const Value* value, const ValueMap& map, const ValueMap* fallback) {
  auto it = map.find(value);
  if (it != map.end()) return it->second;
  COMMIR_CHECK(fallback != nullptr, "cloning an op whose operand has no copy");
  auto in_fallback = fallback->find(value);
  COMMIR_CHECK(in_fallback != fallback->end(), "cloning an op whose operand has no copy");
  return in_fallback->second;
}

}  // namespace

Operation* CloneOp(const Operation& op, Block& block, Operation* position, ValueMap& map,
                   const CloneOpOptions& options) {
  std::vector<Type> result_types;
  result_types.reserve(op.num_results() + options.extra_result_types.size());
  for (int i = 0; i < op.num_results(); ++i) result_types.push_back(op.result(i)->type());
  result_types.insert(result_types.end(), options.extra_result_types.begin(),
                      options.extra_result_types.end());
  std::unique_ptr<Operation> copy =
      Operation::Create(op.def(), {}, result_types,
                        options.attrs != nullptr ? *options.attrs : op.attrs(),
                        op.num_regions(), op.loc());
  copy->set_type_loc(op.type_loc());
  for (Value* operand : op.operands()) {
    if (operand->is_literal()) {
      copy->AddLiteralOperand(operand->literal_value(), operand->type())->set_loc(operand->loc());
    } else {
      copy->AddOperand(Mapped(operand, map, options.fallback));
    }
  }
  if (Value* stream = op.stream_operand()) {
    copy->SetStreamOperand(Mapped(stream, map, options.fallback));
  }
  // Regions see the values defined outside the op through `map` (and the fallback).
  CloneOpOptions nested;
  nested.fallback = options.fallback;
  for (int r = 0; r < op.num_regions(); ++r) {
    const Block* region = op.region(r);
    Block* copied = copy->region(r);
    for (int i = 0; i < region->num_arguments(); ++i) {
      const Value* arg = region->argument(i);
      map[arg] = copied->AddArgument(arg->type(), arg->name(), arg->loc());
    }
    for (const Operation* inside : *region) CloneOp(*inside, *copied, nullptr, map, nested);
  }
  for (int i = 0; i < op.num_results(); ++i) {
    Value* result = copy->result(i);
    result->set_name(op.result(i)->name());
    result->set_loc(op.result(i)->loc());
    map[op.result(i)] = result;
  }
  return block.InsertBefore(position, std::move(copy));
}

std::unique_ptr<Function> Function::Clone(ValueMap* map) const {
  auto copy = std::make_unique<Function>(name_, is_spmd_, loc_);
  copy->mesh_name_ = mesh_name_;
  copy->mesh_name_loc_ = mesh_name_loc_;
  copy->mesh_ = mesh_;
  copy->arg_types_ = arg_types_;
  copy->result_types_ = result_types_;
  copy->arg_type_locs_ = arg_type_locs_;
  copy->result_type_locs_ = result_type_locs_;
  ValueMap local;
  ValueMap& values = map != nullptr ? *map : local;
  // The body's arguments keep their types (a spmd function's are per device), not
  // re-derived from the mesh.
  for (int i = 0; i < body_->num_arguments(); ++i) {
    const Value* arg = body_->argument(i);
    values[arg] = copy->body_->AddArgument(arg->type(), arg->name(), arg->loc());
  }
  for (const Operation* op : *body_) CloneOp(*op, *copy->body_, nullptr, values);
  return copy;
}

std::unique_ptr<Module> Module::Clone() const {
  auto copy = std::make_unique<Module>();
  absl::flat_hash_map<const Mesh*, const Mesh*> meshes;
  for (const Decl& decl : decls_) {
    if (decl.mesh != nullptr) {
      meshes[decl.mesh] = copy->AddMesh(std::make_unique<Mesh>(*decl.mesh));
    } else {
      copy->AddFunction(decl.function->Clone());
    }
  }
  // A function's mesh is one of this module's (or, unresolved, none): the copy's is the
  // copy of it.
  for (Function* function : copy->functions()) {
    auto it = meshes.find(function->mesh());
    if (it != meshes.end()) function->set_mesh(it->second);
  }
  return copy;
}

}  // namespace commir
