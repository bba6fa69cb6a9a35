// OpBuilder: the one way passes and tests create ops. It inserts at a point of a block
// (before an op, or at the end), stamps ops with a location, infers result types from
// the op definitions (and so checks them), and takes number literals as operands.
//
// Two ways to see failures:
//  - Create / CreateValue / Unary / Binary / Full return them (absl::StatusOr);
//  - Op / Ops / IndexConstant / Convert are for long emission sequences: the first
//    failure is kept in status(), and every later call is a no-op that returns nullptr
//    (null values), so the caller checks status() once at the end.
#ifndef COMMIR_COMMIR_BUILDER_H_
#define COMMIR_COMMIR_BUILDER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "commir/ir.h"

namespace commir {

class OpBuilder {
 public:
  // An operand: a value, or a number literal of type `literal_type`.
  struct Operand {
    Operand(Value* v) : value(v) {}  // NOLINT: implicit on purpose
    static Operand Literal(double number, Type type) {
      Operand operand(nullptr);
      operand.literal = number;
      operand.literal_type = type;
      return operand;
    }
    Value* value = nullptr;
    double literal = 0;
    Type literal_type;
  };

  // Inserts at the end of `function`'s body.
  explicit OpBuilder(Function* function);
  // Inserts before `before` in `block` (appends when null); `function` (the one holding
  // `block`) gives the mesh and whether the code is spmd.
  OpBuilder(Function* function, Block* block, Operation* before, Location loc = {});

  // Inserts before `op` (in op's block).
  void SetInsertionPoint(Operation* op);
  // Inserts before `before` in `block` (appends when null).
  void SetInsertionPoint(Block* block, Operation* before);
  // Appends to `block`.
  void SetInsertionPointToEnd(Block* block);
  Block* block() const { return block_; }
  Operation* before() const { return before_; }
  Function* function() const { return function_; }
  // The location of the ops created from here on (unless one is passed explicitly).
  void set_loc(Location loc) { loc_ = loc; }
  Location loc() const { return loc_; }

  // ---- Failures returned -------------------------------------------------------------

  // Creates an op whose result types are inferred (or, where the op requires one, taken
  // from `result_types`). Fails with the op definition's message if the op is invalid.
  // The op gets location loc().
  absl::StatusOr<Operation*> Create(OpKind kind, absl::Span<const Operand> operands,
                                    AttrDict attrs = {}, absl::Span<const Type> result_types = {},
                                    int num_results = 1);
  // The same at location `loc`.
  absl::StatusOr<Operation*> Create(OpKind kind, absl::Span<const Operand> operands, AttrDict attrs,
                                    absl::Span<const Type> result_types, int num_results,
                                    Location loc);
  // Single-result shorthand of Create.
  absl::StatusOr<Value*> CreateValue(OpKind kind, absl::Span<const Operand> operands,
                                     AttrDict attrs = {}, absl::Span<const Type> result_types = {});
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

  // ---- Sticky failures ---------------------------------------------------------------

  // A one-result op named `name` (empty: unnamed); `type` where the op needs one.
  Value* Op(OpKind kind, std::vector<Operand> operands, AttrDict attrs = {},
            std::optional<Type> type = std::nullopt, std::string name = "");
  // An op with `num_results` results, named by `names`.
  std::vector<Value*> Ops(OpKind kind, std::vector<Operand> operands, AttrDict attrs,
                          int num_results, const std::vector<std::string>& names);
  // `full() {value = v} : index`.
  Value* IndexConstant(int64_t value, std::string name = "");
  // `x` converted to `type` (x itself when it has that element type already).
  Value* Convert(Value* x, ElementType type);

  // Records a failure from elsewhere (a loop body's builder); the first one is kept.
  void Fail(absl::Status status) {
    if (status_.ok()) status_ = std::move(status);
  }
  const absl::Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }

 private:
  Operation* Insert(std::unique_ptr<Operation> op);
  // Create's body. CreateWithLiteral reports type errors without the op's name, as it
  // always has.
  absl::StatusOr<Operation*> Build(OpKind kind, absl::Span<const Operand> operands, AttrDict attrs,
                                   absl::Span<const Type> result_types, int num_results,
                                   Location loc, bool name_op_in_errors);

  Function* function_ = nullptr;
  Block* block_ = nullptr;
  Operation* before_ = nullptr;  // null: append
  Location loc_;
  absl::Status status_;
};

// Creates a function in `module` with the given signature; its body is empty.
Function* AddFunction(Module& module, std::string name, bool spmd, const Mesh* mesh,
                      absl::Span<const Type> arg_types, absl::Span<const Type> result_types,
                      absl::Span<const std::string> arg_names = {});

}  // namespace commir

#endif  // COMMIR_COMMIR_BUILDER_H_
