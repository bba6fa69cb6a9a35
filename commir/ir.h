// The CommIR SSA graph: values with use lists, operations with operands, results,
// attributes and regions, blocks, functions and modules.
//
// Ownership: a Module owns its meshes and functions, a Function its body block, a Block
// its arguments and operations (an intrusive list, so passes can insert and erase in
// O(1) while iterating), an Operation its results, literal operands and region blocks.
#ifndef COMMIR_COMMIR_IR_H_
#define COMMIR_COMMIR_IR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "commir/attribute.h"
#include "commir/location.h"
#include "commir/mesh.h"
#include "commir/op_def.h"
#include "commir/type.h"

namespace commir {

class Block;
class Function;
class Module;
class Operation;
class Value;

// Each value of a source to its copy: what cloning fills (commir/clone.h).
using ValueMap = absl::flat_hash_map<const Value*, Value*>;

class Value {
 public:
  enum class Kind { kResult, kBlockArgument, kLiteral };

  Kind kind() const { return kind_; }
  Type type() const { return type_; }
  void set_type(Type type) { type_ = type; }
  // The name without '%' as written or assigned; may be empty (the printer numbers it).
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  Location loc() const { return loc_; }
  void set_loc(Location loc) { loc_ = loc; }

  // For results: the defining op. For literals: the op that owns (and uses) it.
  Operation* defining_op() const { return op_; }
  // For block arguments.
  Block* owner_block() const { return block_; }
  // Result number or argument number.
  int index() const { return index_; }
  bool is_literal() const { return kind_ == Kind::kLiteral; }
  // The number a literal operand stands for (`mul(%x, 0.125)`).
  double literal_value() const { return literal_; }

  // One entry per use (an op using the value twice appears twice).
  const std::vector<Operation*>& users() const { return users_; }
  bool use_empty() const { return users_.empty(); }
  void ReplaceAllUsesWith(Value* replacement);

 private:
  friend class Operation;
  friend class Block;
  Value(Kind kind, Type type, std::string name) : type_(type), name_(std::move(name)), kind_(kind) {}
  void AddUser(Operation* op) { users_.push_back(op); }
  // Removes the first entry for `op`.
  void RemoveUser(Operation* op);
  // Removes one entry for `op`, searching from the back: O(1) when `op` is the newest
  // user. Only for callers that drop every use `op` makes of this value, where which
  // entry goes first does not change the result (tearing down blocks back to front
  // would otherwise be quadratic in the number of users of a widely used value).
  void DropUser(Operation* op);

  Type type_;
  std::string name_;
  Location loc_;
  Operation* op_ = nullptr;
  Block* block_ = nullptr;
  int index_ = 0;
  Kind kind_;
  double literal_ = 0;
  std::vector<Operation*> users_;
};

class Operation {
 public:
  friend class Value;
  // Creates a detached op. Results get `result_types`; `num_regions` empty blocks.
  static std::unique_ptr<Operation> Create(const OpDef& def, absl::Span<Value* const> operands,
                                           absl::Span<const Type> result_types, AttrDict attrs,
                                           int num_regions = 0, Location loc = {});
  ~Operation();
  // An op and its results are one allocation: the results are constructed right after
  // the Operation (Create allocates, the destructor destroys them, and this frees the
  // block). Parsing makes millions of ops; one allocation per op instead of three
  // (op, result vector, result) is a large part of its time and memory.
  static void operator delete(void* memory) { ::operator delete(memory); }
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  const OpDef& def() const { return *def_; }
  OpKind kind() const { return def_->kind; }
  absl::string_view name() const { return def_->name; }
  bool Is(OpKind kind) const { return def_->kind == kind; }

  // Regular operands; the `stream = %v` operand, if any, is separate.
  absl::Span<Value* const> operands() const {
    return absl::MakeConstSpan(operands_.data(), num_regular_operands());
  }
  int num_operands() const { return num_regular_operands(); }
  Value* operand(int i) const { return operands_[i]; }
  void SetOperand(int i, Value* value);
  void SetOperands(absl::Span<Value* const> values);
  // Appends a literal number operand typed `type` (a scalar tensor or index).
  Value* AddLiteralOperand(double value, Type type);
  // Appends a regular operand.
  void AddOperand(Value* value);

  // `stream = %v`: an index value choosing the stream (null when none or an integer).
  Value* stream_operand() const { return has_stream_operand_ ? operands_.back() : nullptr; }
  void SetStreamOperand(Value* value);
  // Every operand including the stream operand: what SSA and use lists see.
  absl::Span<Value* const> all_operands() const { return operands_; }

  int num_results() const { return num_results_; }
  Value* result(int i) const { return results_begin() + i; }
  std::vector<Value*> results() const;

  const AttrDict& attrs() const { return attrs_; }
  AttrDict& mutable_attrs() { return attrs_; }
  // Typed reads that fall back to the default in the op's definition (see OpDef).
  int64_t IntAttr(absl::string_view key) const { return def_->IntAttr(attrs_, key); }
  double NumberAttr(absl::string_view key) const { return def_->NumberAttr(attrs_, key); }
  bool BoolAttr(absl::string_view key) const { return def_->BoolAttr(attrs_, key); }
  const std::string& EnumAttr(absl::string_view key) const { return def_->EnumAttr(attrs_, key); }
  // Reads of required attributes after verification (see OpDef::RequiredIntAttr).
  int64_t RequiredIntAttr(absl::string_view key) const {
    return def_->RequiredIntAttr(attrs_, key);
  }
  double RequiredNumberAttr(absl::string_view key) const {
    return def_->RequiredNumberAttr(attrs_, key);
  }
  std::vector<int64_t> RequiredIntListAttr(absl::string_view key) const {
    return def_->RequiredIntListAttr(attrs_, key);
  }
  const std::string& RequiredEnumAttr(absl::string_view key) const {
    return def_->RequiredEnumAttr(attrs_, key);
  }

  int num_regions() const {
    return extra_ == nullptr ? 0 : static_cast<int>(extra_->regions.size());
  }
  Block* region(int i) const { return extra_->regions[i].get(); }

  Location loc() const { return loc_; }
  void set_loc(Location loc) { loc_ = loc; }
  // Where the result type annotation was written (unknown if it was inferred).
  Location type_loc() const { return type_loc_; }
  void set_type_loc(Location loc) { type_loc_ = loc; }

  Block* parent_block() const { return parent_; }
  // The op whose region holds this op, or null at function level.
  Operation* parent_op() const;
  Function* parent_function() const;
  Operation* next() const { return next_; }
  Operation* prev() const { return prev_; }

  // True if `this` is `ancestor` or nested in one of its regions.
  bool IsNestedIn(const Operation* ancestor) const;
  // Whether this op comes before `other`, an op of the same block. O(1): ops carry
  // order numbers, which a block renumbers (once, on the next query) after an
  // insertion other than an append. Not safe to call from several threads at once.
  bool IsBeforeInBlock(const Operation* other) const;

  // Drops all operand uses (this op's and its regions').
  void DropAllUses();
  // Unlinks the op from its block and destroys it. Its results must be unused.
  void Erase();
  // Erases every op of `ops` (from any blocks): the same as calling Erase() on each in
  // turn, except that a result may also be used by ops of `ops`. Removing their entries
  // from their operands' user lists takes one pass over each such list, where one
  // Erase() per op searches a list per use: quadratic when many erased ops share an
  // operand (CSE of a million ops that all read one function argument).
  static void EraseAll(absl::Span<Operation* const> ops);

 private:
  friend class Block;
  Operation(const OpDef& def, Location loc, int num_results)
      : def_(&def), num_results_(num_results), loc_(loc) {}
  Value* results_begin() const {
    return std::launder(reinterpret_cast<Value*>(
        reinterpret_cast<char*>(const_cast<Operation*>(this)) + sizeof(Operation)));
  }
  int num_regular_operands() const {
    return static_cast<int>(operands_.size()) - (has_stream_operand_ ? 1 : 0);
  }
  // What few ops have, allocated when first needed.
  struct Extra {
    std::vector<std::unique_ptr<Value>> literals;
    std::vector<std::unique_ptr<Block>> regions;
  };
  Extra& extra();

  const OpDef* def_;
  // Inline storage for the usual one to three operands (binary ops, plus a stream).
  absl::InlinedVector<Value*, 3> operands_;
  bool has_stream_operand_ = false;
  int num_results_;
  // Position in the block, valid while the block's ops_ordered_ is (IsBeforeInBlock).
  uint32_t order_ = 0;
  std::unique_ptr<Extra> extra_;
  AttrDict attrs_;
  Location loc_;
  Location type_loc_;
  Block* parent_ = nullptr;
  Operation* prev_ = nullptr;
  Operation* next_ = nullptr;
};

class Block {
 public:
  Block() = default;
  ~Block();
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  Value* AddArgument(Type type, std::string name, Location loc = {});
  int num_arguments() const { return static_cast<int>(arguments_.size()); }
  Value* argument(int i) const { return arguments_[i].get(); }
  std::vector<Value*> arguments() const;

  Operation* front() const { return first_; }
  Operation* back() const { return last_; }
  bool empty() const { return first_ == nullptr; }
  size_t size() const { return size_; }
  // The last op if it is a terminator.
  Operation* terminator() const;

  Operation* Append(std::unique_ptr<Operation> op);
  // Inserts before `position` (append when null).
  Operation* InsertBefore(Operation* position, std::unique_ptr<Operation> op);
  // Unlinks `op` and hands ownership back.
  std::unique_ptr<Operation> Remove(Operation* op);

  Operation* parent_op() const { return parent_op_; }
  Function* parent_function() const { return parent_function_; }

  // Iteration over a snapshot-free list: erasing the current op while iterating is safe
  // only with the `next` saved first (see ForEachOpSafe).
  class Iterator {
   public:
    explicit Iterator(Operation* op) : op_(op) {}
    Operation* operator*() const { return op_; }
    Iterator& operator++() {
      op_ = op_->next();
      return *this;
    }
    bool operator!=(const Iterator& other) const { return op_ != other.op_; }
    bool operator==(const Iterator& other) const { return op_ == other.op_; }

   private:
    Operation* op_;
  };
  Iterator begin() const { return Iterator(first_); }
  Iterator end() const { return Iterator(nullptr); }

 private:
  friend class Operation;
  friend class Function;
  std::vector<std::unique_ptr<Value>> arguments_;
  Operation* first_ = nullptr;
  Operation* last_ = nullptr;
  size_t size_ = 0;
  // Whether the ops' order_ numbers increase along the list (see IsBeforeInBlock).
  mutable bool ops_ordered_ = true;
  void RenumberOps() const;
  Operation* parent_op_ = nullptr;
  Function* parent_function_ = nullptr;
};

// Calls `fn(op)` for every op of `block` and, recursively, of nested regions, in
// post-order: an op after the ops nested in its regions, so that `fn` may erase the op
// it is given.
template <typename Fn>
void WalkOps(Block* block, Fn&& fn) {
  for (Operation* op = block->front(); op != nullptr;) {
    Operation* next = op->next();
    for (int r = 0; r < op->num_regions(); ++r) WalkOps(op->region(r), fn);
    fn(op);
    op = next;
  }
}

class Function {
 public:
  Function(std::string name, bool is_spmd, Location loc = {});

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  bool is_spmd() const { return is_spmd_; }
  void set_spmd(bool spmd) { is_spmd_ = spmd; }
  Location loc() const { return loc_; }

  // The mesh named with `on @mesh` (empty if left out) and the mesh it resolved to.
  const std::string& mesh_name() const { return mesh_name_; }
  void set_mesh_name(std::string name, Location loc = {}) {
    mesh_name_ = std::move(name);
    mesh_name_loc_ = loc;
  }
  Location mesh_name_loc() const { return mesh_name_loc_; }
  const Mesh* mesh() const { return mesh_; }
  void set_mesh(const Mesh* mesh) { mesh_ = mesh; }

  // Declared (global) signature. Body arguments carry these types in a global function
  // and the per-device types in a spmd function.
  const std::vector<Type>& arg_types() const { return arg_types_; }
  const std::vector<Type>& result_types() const { return result_types_; }
  const std::vector<Location>& arg_type_locs() const { return arg_type_locs_; }
  const std::vector<Location>& result_type_locs() const { return result_type_locs_; }
  void AddArgument(Type global_type, std::string name, Location name_loc = {},
                   Location type_loc = {});
  void AddResult(Type global_type, Location type_loc = {});
  // Re-derives the body arguments' types from the declared types and the mesh (after
  // the mesh is resolved or a declared type changes).
  void RefreshArgumentTypes();
  void SetResultType(int i, Type type) { result_types_[i] = type; }
  void SetArgType(int i, Type type) { arg_types_[i] = type; }

  Block* body() const { return body_.get(); }

  // A copy of the function (commir/clone.h): the same signature, names, locations and
  // ops; `map` (if given) learns each value's copy. The copy is in no module and points
  // at this function's mesh until the module it is added to resolves its meshes.
  std::unique_ptr<Function> Clone(ValueMap* map = nullptr) const;

  // The module that holds the function (null until it is added to one): where a
  // `call` in its body finds its callee.
  Module* module() const { return module_; }

 private:
  friend class Module;
  std::string name_;
  bool is_spmd_;
  Module* module_ = nullptr;
  Location loc_;
  std::string mesh_name_;
  Location mesh_name_loc_;
  const Mesh* mesh_ = nullptr;
  std::vector<Type> arg_types_;
  std::vector<Type> result_types_;
  std::vector<Location> arg_type_locs_;
  std::vector<Location> result_type_locs_;
  std::unique_ptr<Block> body_;
};

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // A deep copy (commir/clone.h): meshes and functions in declaration order, each
  // function on the copy of its mesh; value names and locations as they are. Printing
  // the copy prints what printing this module prints.
  std::unique_ptr<Module> Clone() const;

  Mesh* AddMesh(std::unique_ptr<Mesh> mesh);
  // Declares `mesh` before every other declaration: for a pass that puts the functions
  // already in the module on a new mesh (the text declares a mesh before its users).
  Mesh* AddMeshFirst(std::unique_ptr<Mesh> mesh);
  Function* AddFunction(std::unique_ptr<Function> function);
  // Inserts `function` right after `after` in declaration order.
  Function* InsertFunctionAfter(const Function* after, std::unique_ptr<Function> function);

  Mesh* FindMesh(absl::string_view name) const;
  Function* FindFunction(absl::string_view name) const;

  std::vector<Mesh*> meshes() const;
  std::vector<Function*> functions() const;

  // Declarations in source order.
  struct Decl {
    Mesh* mesh = nullptr;
    Function* function = nullptr;
  };
  const std::vector<Decl>& decls() const { return decls_; }

  // Sets each function's mesh from `on @name`, or the module's only mesh. Returns false
  // if a name does not resolve (the verifier reports it).
  bool ResolveMeshes();

 private:
  std::vector<std::unique_ptr<Mesh>> meshes_;
  std::vector<std::unique_ptr<Function>> functions_;
  std::vector<Decl> decls_;
};

}  // namespace commir

#endif  // COMMIR_COMMIR_IR_H_
