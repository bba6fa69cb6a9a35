// OpBuilder: creates ops at an insertion point with their result types inferred by the
// op definitions, for passes and tests.
#ifndef COMMIR_COMMIR_BUILDER_H_
#define COMMIR_COMMIR_BUILDER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "commir/ir.h"

namespace commir {

class OpBuilder {
 public:
  // Inserts at the end of `function`'s body.
  explicit OpBuilder(Function* function);

  // Inserts before `op` (in op's block).
  void SetInsertionPoint(Operation* op);
  // Appends to `block`.
  void SetInsertionPointToEnd(Block* block);
  Block* block() const { return block_; }

  // Creates an op whose result types are inferred (or, where the op requires one, taken
  // from `result_types`). Fails with the op definition's message if the op is invalid.
  absl::StatusOr<Operation*> Create(OpKind kind, absl::Span<Value* const> operands,
                                    AttrDict attrs = {}, absl::Span<const Type> result_types = {},
                                    int num_results = 1, Location loc = {});
  // Like Create, for a binary op with a number literal as operand `literal_index`.
  absl::StatusOr<Operation*> CreateWithLiteral(OpKind kind, Value* value, double literal,
                                               int literal_index, Location loc = {});
  // Creates an op with exactly the given result types, without inference (for passes
  // that already know them, such as cloning).
  Operation* CreateUnchecked(OpKind kind, absl::Span<Value* const> operands,
                             absl::Span<const Type> result_types, AttrDict attrs = {},
                             int num_regions = 0, Location loc = {});

  // Shorthands that return the single result.
  absl::StatusOr<Value*> Unary(OpKind kind, Value* x);
  absl::StatusOr<Value*> Binary(OpKind kind, Value* a, Value* b);
  absl::StatusOr<Value*> Full(Type type, double value);
  void Return(absl::Span<Value* const> values);

 private:
  Function* function() const;
  Operation* Insert(std::unique_ptr<Operation> op);

  Block* block_ = nullptr;
  Operation* before_ = nullptr;  // null: append
};

// Creates a function in `module` with the given signature; its body is empty.
Function* AddFunction(Module& module, std::string name, bool spmd, const Mesh* mesh,
                      absl::Span<const Type> arg_types, absl::Span<const Type> result_types,
                      absl::Span<const std::string> arg_names = {});

}  // namespace commir

#endif  // COMMIR_COMMIR_BUILDER_H_
