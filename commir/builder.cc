#include "commir/builder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "commir/status_macros.h"

namespace commir {
namespace {

// The function `block` belongs to (through the ops whose regions hold it); null for a
// block not yet in one.
Function* FunctionOf(Block* block) {
  while (block->parent_op() != nullptr) block = block->parent_op()->parent_block();
  return block->parent_function();
}

}  // namespace

OpBuilder::OpBuilder(Function* function) : function_(function), block_(function->body()) {}

OpBuilder::OpBuilder(Function* function, Block* block, Operation* before, Location loc)
    : function_(function), block_(block), before_(before), loc_(loc) {}

void OpBuilder::SetInsertionPoint(Operation* op) {
  block_ = op->parent_block();
  before_ = op;
  function_ = FunctionOf(block_);
}

void OpBuilder::SetInsertionPoint(Block* block, Operation* before) {
  block_ = block;
  before_ = before;
}

void OpBuilder::SetInsertionPointToEnd(Block* block) {
  block_ = block;
  before_ = nullptr;
  function_ = FunctionOf(block_);
}

Operation* OpBuilder::Insert(std::unique_ptr<Operation> op) {
  return block_->InsertBefore(before_, std::move(op));
}

absl::StatusOr<Operation*> OpBuilder::Create(OpKind kind, absl::Span<const Operand> operands,
                                             AttrDict attrs, absl::Span<const Type> result_types,
                                             int num_results) {
  return Create(kind, operands, std::move(attrs), result_types, num_results, loc_);
}

absl::StatusOr<Operation*> OpBuilder::Create(OpKind kind, absl::Span<const Operand> operands,
                                             AttrDict attrs, absl::Span<const Type> result_types,
                                             int num_results, Location loc) {
  return Build(kind, operands, std::move(attrs), result_types, num_results, loc,
               /*name_op_in_errors=*/true);
}

absl::StatusOr<Operation*> OpBuilder::Build(OpKind kind, absl::Span<const Operand> operands,
                                            AttrDict attrs, absl::Span<const Type> result_types,
                                            int num_results, Location loc,
                                            bool name_op_in_errors) {
  const OpDef& def = GetOpDef(kind);
  bool spmd = function_ != nullptr && function_->is_spmd();
  const Mesh* mesh = function_ != nullptr ? function_->mesh() : nullptr;
  if (absl::Status s = ValidateAttributes(def, attrs, spmd); !s.ok()) return s;
  std::vector<Type> operand_types;
  for (const Operand& operand : operands) {
    operand_types.push_back(operand.value != nullptr ? operand.value->type() : operand.literal_type);
  }
  OpSignature sig{operand_types, attrs, result_types, num_results, mesh, spmd};
  absl::StatusOr<std::vector<Type>> types = InferResultTypes(def, sig);
  if (!types.ok() && name_op_in_errors) {
    return absl::Status(types.status().code(), absl::StrCat(def.name, ": ", types.status().message()));
  }
  if (!types.ok()) return types.status();
  int regions = def.Has(kHasRegion) ? 1 : 0;
  std::unique_ptr<Operation> op = Operation::Create(def, {}, *types, std::move(attrs), regions, loc);
  for (const Operand& operand : operands) {
    if (operand.value != nullptr) {
      op->AddOperand(operand.value);
    } else {
      op->AddLiteralOperand(operand.literal, operand.literal_type);
    }
  }
  return Insert(std::move(op));
}

absl::StatusOr<Value*> OpBuilder::CreateValue(OpKind kind, absl::Span<const Operand> operands,
                                              AttrDict attrs, absl::Span<const Type> result_types) {
  COMMIR_ASSIGN_OR_RETURN(Operation * op, Create(kind, operands, std::move(attrs), result_types));
  return op->result(0);
}

absl::StatusOr<Operation*> OpBuilder::CreateWithLiteral(OpKind kind, Value* value, double literal,
                                                        int literal_index, Location loc) {
  Type literal_type = value->type().is_index() ? Type::Index()
                                               : Type::Scalar(value->type().element_type());
  Operand number = Operand::Literal(literal, literal_type);
  Operand operands[] = {literal_index == 0 ? number : Operand(value),
                        literal_index == 0 ? Operand(value) : number};
  return Build(kind, operands, AttrDict(), {}, 1, loc, /*name_op_in_errors=*/false);
}

Operation* OpBuilder::CreateUnchecked(OpKind kind, absl::Span<Value* const> operands,
                                      absl::Span<const Type> result_types, AttrDict attrs,
                                      int num_regions, Location loc) {
  return Insert(Operation::Create(GetOpDef(kind), operands, result_types, std::move(attrs),
                                  num_regions, loc));
}

absl::StatusOr<Value*> OpBuilder::Unary(OpKind kind, Value* x) {
  COMMIR_ASSIGN_OR_RETURN(Operation * op, Create(kind, {x}));
  return op->result(0);
}

absl::StatusOr<Value*> OpBuilder::Binary(OpKind kind, Value* a, Value* b) {
  COMMIR_ASSIGN_OR_RETURN(Operation * op, Create(kind, {a, b}));
  return op->result(0);
}

absl::StatusOr<Value*> OpBuilder::Full(Type type, double value) {
  AttrDict attrs;
  if (type.is_index() || (type.is_tensor() && IsIntegerType(type.element_type()))) {
    attrs.Set("value", Attribute::Int(static_cast<int64_t>(value)));
  } else {
    attrs.Set("value", Attribute::Float(value));
  }
  Type types[] = {type};
  COMMIR_ASSIGN_OR_RETURN(Operation * op, Create(OpKind::kFull, {}, std::move(attrs), types));
  return op->result(0);
}

void OpBuilder::Return(absl::Span<Value* const> values) {
  CreateUnchecked(OpKind::kReturn, values, {});
}

Value* OpBuilder::Op(OpKind kind, std::vector<Operand> operands, AttrDict attrs,
                     std::optional<Type> type, std::string name) {
  if (!status_.ok()) return nullptr;
  std::vector<Type> types;
  if (type.has_value()) types.push_back(*type);
  absl::StatusOr<Operation*> op = Create(kind, operands, std::move(attrs), types, 1);
  if (!op.ok()) {
    Fail(op.status());
    return nullptr;
  }
  if (!name.empty()) (*op)->result(0)->set_name(std::move(name));
  return (*op)->result(0);
}

std::vector<Value*> OpBuilder::Ops(OpKind kind, std::vector<Operand> operands, AttrDict attrs,
                                   int num_results, const std::vector<std::string>& names) {
  if (!status_.ok()) return std::vector<Value*>(num_results, nullptr);
  absl::StatusOr<Operation*> op = Create(kind, operands, std::move(attrs), {}, num_results);
  if (!op.ok()) {
    Fail(op.status());
    return std::vector<Value*>(num_results, nullptr);
  }
  for (int r = 0; r < num_results && r < static_cast<int>(names.size()); ++r) {
    if (!names[r].empty()) (*op)->result(r)->set_name(names[r]);
  }
  return (*op)->results();
}

Value* OpBuilder::IndexConstant(int64_t value, std::string name) {
  AttrDict attrs;
  attrs.Set("value", Attribute::Int(value));
  return Op(OpKind::kFull, {}, std::move(attrs), Type::Index(), std::move(name));
}

Value* OpBuilder::Convert(Value* x, ElementType type) {
  if (x == nullptr || x->type().element_type() == type) return x;
  return Op(OpKind::kConvert, {x}, {}, x->type().WithElementType(type));
}

Function* AddFunction(Module& module, std::string name, bool spmd, const Mesh* mesh,
                      absl::Span<const Type> arg_types, absl::Span<const Type> result_types,
                      absl::Span<const std::string> arg_names) {
  auto function = std::make_unique<Function>(std::move(name), spmd);
  if (mesh != nullptr) function->set_mesh_name(mesh->name());
  function->set_mesh(mesh);
  for (size_t i = 0; i < arg_types.size(); ++i) {
    function->AddArgument(arg_types[i], i < arg_names.size() ? arg_names[i] : "");
  }
  for (Type t : result_types) function->AddResult(t);
  return module.AddFunction(std::move(function));
}

}  // namespace commir
