#include "commir/ir.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "commir/check.h"

namespace commir {

// ---- Value ----------------------------------------------------------------------

void Value::RemoveUser(Operation* op) {
  auto it = std::find(users_.begin(), users_.end(), op);
  if (it != users_.end()) users_.erase(it);
}

void Value::DropUser(Operation* op) {
  for (size_t i = users_.size(); i-- > 0;) {
    if (users_[i] == op) {
      users_.erase(users_.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  }
}

void Value::ReplaceAllUsesWith(Value* replacement) {
  if (replacement == this) return;
  // Each user holds this value in one or more operand slots; rewrite them all.
  std::vector<Operation*> users = std::move(users_);
  users_.clear();
  for (Operation* user : users) {
    for (size_t i = 0; i < user->operands_.size(); ++i) {
      if (user->operands_[i] == this) {
        user->operands_[i] = replacement;
        replacement->AddUser(user);
        break;  // one slot per recorded use
      }
    }
  }
}

// ---- Operation ------------------------------------------------------------------

std::unique_ptr<Operation> Operation::Create(const OpDef& def, absl::Span<Value* const> operands,
                                             absl::Span<const Type> result_types,
                                             AttrDict attrs, int num_regions, Location loc) {
  static_assert(sizeof(Operation) % alignof(Value) == 0, "results follow the op");
  const int num_results = static_cast<int>(result_types.size());
  void* memory = ::operator new(sizeof(Operation) + result_types.size() * sizeof(Value));
  std::unique_ptr<Operation> op(new (memory) Operation(def, loc, num_results));
  for (int i = 0; i < num_results; ++i) {
    Value* result = new (op->results_begin() + i) Value(Value::Kind::kResult, result_types[i], "");
    result->op_ = op.get();
    result->index_ = i;
  }
  op->operands_.assign(operands.begin(), operands.end());
  for (Value* operand : operands) operand->AddUser(op.get());
  op->attrs_ = std::move(attrs);
  for (int r = 0; r < num_regions; ++r) {
    auto block = std::make_unique<Block>();
    block->parent_op_ = op.get();
    op->extra().regions.push_back(std::move(block));
  }
  return op;
}

Operation::~Operation() {
  // Regions first: their ops may use values this op defines (block arguments).
  if (extra_ != nullptr) extra_->regions.clear();
  for (Value* operand : operands_) operand->DropUser(this);
  for (int i = num_results_; i-- > 0;) results_begin()[i].~Value();
}

Operation::Extra& Operation::extra() {
  if (extra_ == nullptr) extra_ = std::make_unique<Extra>();
  return *extra_;
}

void Operation::SetOperand(int i, Value* value) {
  operands_[i]->RemoveUser(this);
  operands_[i] = value;
  value->AddUser(this);
}

void Operation::SetOperands(absl::Span<Value* const> values) {
  Value* stream = stream_operand();
  for (Value* operand : operands_) operand->DropUser(this);
  operands_.assign(values.begin(), values.end());
  if (stream != nullptr) operands_.push_back(stream);
  for (Value* operand : operands_) operand->AddUser(this);
}

void Operation::AddOperand(Value* value) {
  operands_.insert(operands_.begin() + num_regular_operands(), value);
  value->AddUser(this);
}

Value* Operation::AddLiteralOperand(double value, Type type) {
  std::unique_ptr<Value> literal(new Value(Value::Kind::kLiteral, type, ""));
  literal->op_ = this;
  literal->literal_ = value;
  Value* raw = literal.get();
  extra().literals.push_back(std::move(literal));
  AddOperand(raw);
  return raw;
}

void Operation::SetStreamOperand(Value* value) {
  if (has_stream_operand_) {
    operands_.back()->RemoveUser(this);
    operands_.pop_back();
    has_stream_operand_ = false;
  }
  if (value == nullptr) return;
  operands_.push_back(value);
  value->AddUser(this);
  has_stream_operand_ = true;
}

std::vector<Value*> Operation::results() const {
  std::vector<Value*> out;
  out.reserve(num_results_);
  for (int i = 0; i < num_results_; ++i) out.push_back(result(i));
  return out;
}

Operation* Operation::parent_op() const {
  return parent_ == nullptr ? nullptr : parent_->parent_op();
}

Function* Operation::parent_function() const {
  const Operation* op = this;
  while (op->parent_op() != nullptr) op = op->parent_op();
  return op->parent_ == nullptr ? nullptr : op->parent_->parent_function();
}

bool Operation::IsNestedIn(const Operation* ancestor) const {
  for (const Operation* op = this; op != nullptr; op = op->parent_op()) {
    if (op == ancestor) return true;
  }
  return false;
}

bool Operation::IsBeforeInBlock(const Operation* other) const {
  COMMIR_CHECK(parent_ != nullptr && other->parent_ == parent_,
               "IsBeforeInBlock needs two ops of one block");
  if (!parent_->ops_ordered_) parent_->RenumberOps();
  return order_ < other->order_;
}

void Operation::DropAllUses() {
  // Back to front, so that each dropped use is usually its value's newest one.
  for (int r = 0; r < num_regions(); ++r) {
    for (Operation* op = region(r)->back(); op != nullptr; op = op->prev()) op->DropAllUses();
  }
  for (Value* operand : operands_) operand->DropUser(this);
  operands_.clear();
  has_stream_operand_ = false;
}

void Operation::Erase() {
  for (int i = 0; i < num_results_; ++i) {
    COMMIR_CHECK(result(i)->use_empty(), "erasing an op whose result is still used");
  }
  COMMIR_CHECK(parent_ != nullptr, "erasing an op that has no block");
  std::unique_ptr<Operation> owned = parent_->Remove(this);
}

void Operation::EraseAll(absl::Span<Operation* const> ops) {
  // The ops and everything nested in them, whose uses all go.
  absl::flat_hash_set<const Operation*> erased;
  std::vector<Operation*> all;
  for (Operation* op : ops) {
    COMMIR_CHECK(op->parent_ != nullptr, "erasing an op that has no block");
    all.push_back(op);
    for (int r = 0; r < op->num_regions(); ++r) {
      WalkOps(op->region(r), [&](Operation* nested) { all.push_back(nested); });
    }
  }
  erased.reserve(all.size());
  erased.insert(all.begin(), all.end());
  for (Operation* op : ops) {
    for (int i = 0; i < op->num_results(); ++i) {
      for (Operation* user : op->result(i)->users_) {
        COMMIR_CHECK(erased.contains(user), "erasing an op whose result is still used");
      }
    }
  }
  // Each used value once; the order of the passes does not matter.
  absl::flat_hash_set<Value*> values;
  for (Operation* op : all) values.insert(op->operands_.begin(), op->operands_.end());
  for (Value* value : values) {
    auto& users = value->users_;
    users.erase(std::remove_if(users.begin(), users.end(),
                               [&](Operation* user) { return erased.contains(user); }),
                users.end());
  }
  for (Operation* op : all) {
    op->operands_.clear();
    op->has_stream_operand_ = false;
  }
  for (Operation* op : ops) {
    // An op nested in another erased op goes with it.
    if (op->parent_op() != nullptr && erased.contains(op->parent_op())) continue;
    std::unique_ptr<Operation> owned = op->parent_->Remove(op);
  }
}

// ---- Block ----------------------------------------------------------------------

Block::~Block() {
  // Drop uses first so that destruction order between ops does not matter; back to
  // front, so that each dropped use is its value's newest one (O(1) per use).
  for (Operation* op = last_; op != nullptr; op = op->prev_) op->DropAllUses();
  Operation* op = last_;
  while (op != nullptr) {
    Operation* prev = op->prev_;
    delete op;
    op = prev;
  }
}

Value* Block::AddArgument(Type type, std::string name, Location loc) {
  std::unique_ptr<Value> arg(new Value(Value::Kind::kBlockArgument, type, std::move(name)));
  arg->block_ = this;
  arg->index_ = static_cast<int>(arguments_.size());
  arg->loc_ = loc;
  arguments_.push_back(std::move(arg));
  return arguments_.back().get();
}

std::vector<Value*> Block::arguments() const {
  std::vector<Value*> out;
  for (const auto& a : arguments_) out.push_back(a.get());
  return out;
}

Operation* Block::terminator() const {
  return last_ != nullptr && last_->def().Has(kTerminator) ? last_ : nullptr;
}

Operation* Block::Append(std::unique_ptr<Operation> op) { return InsertBefore(nullptr, std::move(op)); }

Operation* Block::InsertBefore(Operation* position, std::unique_ptr<Operation> owned) {
  Operation* op = owned.release();
  COMMIR_CHECK(op->parent_ == nullptr, "inserting an op that already has a block");
  COMMIR_CHECK(position == nullptr || position->parent_ == this,
               "inserting before an op of another block");
  op->parent_ = this;
  if (position == nullptr) {
    // An append keeps the order numbers increasing, unless they run out.
    if (last_ != nullptr && last_->order_ == UINT32_MAX) ops_ordered_ = false;
    op->order_ = last_ == nullptr ? 0 : last_->order_ + 1;
    op->prev_ = last_;
    op->next_ = nullptr;
    if (last_ != nullptr) last_->next_ = op; else first_ = op;
    last_ = op;
  } else {
    ops_ordered_ = false;  // renumbered when next asked
    op->next_ = position;
    op->prev_ = position->prev_;
    if (position->prev_ != nullptr) position->prev_->next_ = op; else first_ = op;
    position->prev_ = op;
  }
  ++size_;
  return op;
}

void Block::RenumberOps() const {
  uint32_t order = 0;
  for (Operation* op = first_; op != nullptr; op = op->next_) op->order_ = order++;
  ops_ordered_ = true;
}

std::unique_ptr<Operation> Block::Remove(Operation* op) {
  COMMIR_CHECK(op->parent_ == this, "removing an op from a block that does not hold it");
  if (op->prev_ != nullptr) op->prev_->next_ = op->next_; else first_ = op->next_;
  if (op->next_ != nullptr) op->next_->prev_ = op->prev_; else last_ = op->prev_;
  op->prev_ = op->next_ = nullptr;
  op->parent_ = nullptr;
  --size_;
  return std::unique_ptr<Operation>(op);
}

// ---- Function -------------------------------------------------------------------

Function::Function(std::string name, bool is_spmd, Location loc)
    : name_(std::move(name)), is_spmd_(is_spmd), loc_(loc), body_(std::make_unique<Block>()) {
  body_->parent_function_ = this;
}

void Function::AddArgument(Type global_type, std::string name, Location name_loc,
                           Location type_loc) {
  arg_types_.push_back(global_type);
  arg_type_locs_.push_back(type_loc);
  Type body_type = is_spmd_ ? LocalType(global_type, mesh_) : global_type;
  body_->AddArgument(body_type, std::move(name), name_loc);
}

void Function::RefreshArgumentTypes() {
  for (size_t i = 0; i < arg_types_.size(); ++i) {
    body_->argument(static_cast<int>(i))
        ->set_type(is_spmd_ ? LocalType(arg_types_[i], mesh_) : arg_types_[i]);
  }
}

void Function::AddResult(Type global_type, Location type_loc) {
  result_types_.push_back(global_type);
  result_type_locs_.push_back(type_loc);
}

// ---- Module ---------------------------------------------------------------------

Mesh* Module::AddMesh(std::unique_ptr<Mesh> mesh) {
  meshes_.push_back(std::move(mesh));
  decls_.push_back({meshes_.back().get(), nullptr});
  return meshes_.back().get();
}

Mesh* Module::AddMeshFirst(std::unique_ptr<Mesh> mesh) {
  meshes_.insert(meshes_.begin(), std::move(mesh));
  decls_.insert(decls_.begin(), {meshes_.front().get(), nullptr});
  return meshes_.front().get();
}

Function* Module::AddFunction(std::unique_ptr<Function> function) {
  function->module_ = this;
  functions_.push_back(std::move(function));
  decls_.push_back({nullptr, functions_.back().get()});
  return functions_.back().get();
}

Function* Module::InsertFunctionAfter(const Function* after, std::unique_ptr<Function> function) {
  function->module_ = this;
  functions_.push_back(std::move(function));
  Function* added = functions_.back().get();
  auto it = std::find_if(decls_.begin(), decls_.end(),
                         [&](const Decl& d) { return d.function == after; });
  if (it == decls_.end()) {
    decls_.push_back({nullptr, added});
  } else {
    decls_.insert(it + 1, Decl{nullptr, added});
  }
  return added;
}

Mesh* Module::FindMesh(absl::string_view name) const {
  for (const auto& mesh : meshes_) {
    if (mesh->name() == name) return mesh.get();
  }
  return nullptr;
}

Function* Module::FindFunction(absl::string_view name) const {
  for (const auto& function : functions_) {
    if (function->name() == name) return function.get();
  }
  return nullptr;
}

std::vector<Mesh*> Module::meshes() const {
  std::vector<Mesh*> out;
  for (const auto& m : meshes_) out.push_back(m.get());
  return out;
}

std::vector<Function*> Module::functions() const {
  std::vector<Function*> out;
  for (const Decl& d : decls_) {
    if (d.function != nullptr) out.push_back(d.function);
  }
  return out;
}

bool Module::ResolveMeshes() {
  bool ok = true;
  for (const auto& function : functions_) {
    const Mesh* mesh = nullptr;
    if (!function->mesh_name().empty()) {
      mesh = FindMesh(function->mesh_name());
      ok &= mesh != nullptr;
    } else if (meshes_.size() == 1) {
      mesh = meshes_[0].get();
    }
    function->set_mesh(mesh);
  }
  return ok;
}

}  // namespace commir
