#include "commir/builder.h"

#include "absl/strings/str_cat.h"

namespace commir {

OpBuilder::OpBuilder(Function* function) : block_(function->body()) {}

void OpBuilder::SetInsertionPoint(Operation* op) {
  block_ = op->parent_block();
  before_ = op;
}

void OpBuilder::SetInsertionPointToEnd(Block* block) {
  block_ = block;
  before_ = nullptr;
}

Function* OpBuilder::function() const {
  Block* block = block_;
  while (block->parent_op() != nullptr) block = block->parent_op()->parent_block();
  return block->parent_function();
}

Operation* OpBuilder::Insert(std::unique_ptr<Operation> op) {
  return block_->InsertBefore(before_, std::move(op));
}

absl::StatusOr<Operation*> OpBuilder::Create(OpKind kind, absl::Span<Value* const> operands,
                                             AttrDict attrs, absl::Span<const Type> result_types,
                                             int num_results, Location loc) {
  const OpDef& def = GetOpDef(kind);
  Function* fn = function();
  bool spmd = fn != nullptr && fn->is_spmd();
  const Mesh* mesh = fn != nullptr ? fn->mesh() : nullptr;
  if (absl::Status s = ValidateAttributes(def, attrs, spmd); !s.ok()) return s;
  std::vector<Type> operand_types;
  for (Value* v : operands) operand_types.push_back(v->type());
  OpSignature sig{operand_types, attrs, result_types, num_results, mesh, spmd};
  absl::StatusOr<std::vector<Type>> types = InferResultTypes(def, sig);
  if (!types.ok()) {
    return absl::Status(types.status().code(), absl::StrCat(def.name, ": ", types.status().message()));
  }
  int regions = def.Has(kHasRegion) ? 1 : 0;
  return Insert(Operation::Create(def, operands, *types, std::move(attrs), regions, loc));
}

absl::StatusOr<Operation*> OpBuilder::CreateWithLiteral(OpKind kind, Value* value, double literal,
                                                        int literal_index, Location loc) {
  const OpDef& def = GetOpDef(kind);
  Type literal_type = value->type().is_index() ? Type::Index()
                                               : Type::Scalar(value->type().element_type());
  Function* fn = function();
  bool spmd = fn != nullptr && fn->is_spmd();
  std::vector<Type> operand_types = {value->type(), literal_type};
  if (literal_index == 0) std::swap(operand_types[0], operand_types[1]);
  AttrDict attrs;
  OpSignature sig{operand_types, attrs, {}, 1, fn != nullptr ? fn->mesh() : nullptr, spmd};
  absl::StatusOr<std::vector<Type>> types = InferResultTypes(def, sig);
  if (!types.ok()) return types.status();
  std::unique_ptr<Operation> op = Operation::Create(def, {}, *types, AttrDict(), 0, loc);
  if (literal_index == 0) {
    op->AddLiteralOperand(literal, literal_type);
    op->AddOperand(value);
  } else {
    op->AddOperand(value);
    op->AddLiteralOperand(literal, literal_type);
  }
  return Insert(std::move(op));
}

Operation* OpBuilder::CreateUnchecked(OpKind kind, absl::Span<Value* const> operands,
                                      absl::Span<const Type> result_types, AttrDict attrs,
                                      int num_regions, Location loc) {
  return Insert(Operation::Create(GetOpDef(kind), operands, result_types, std::move(attrs),
                                  num_regions, loc));
}

absl::StatusOr<Value*> OpBuilder::Unary(OpKind kind, Value* x) {
  absl::StatusOr<Operation*> op = Create(kind, {x});
  if (!op.ok()) return op.status();
  return (*op)->result(0);
}

absl::StatusOr<Value*> OpBuilder::Binary(OpKind kind, Value* a, Value* b) {
  absl::StatusOr<Operation*> op = Create(kind, {a, b});
  if (!op.ok()) return op.status();
  return (*op)->result(0);
}

absl::StatusOr<Value*> OpBuilder::Full(Type type, double value) {
  AttrDict attrs;
  if (type.is_index() || (type.is_tensor() && IsIntegerType(type.element_type()))) {
    attrs.Set("value", Attribute::Int(static_cast<int64_t>(value)));
  } else {
    attrs.Set("value", Attribute::Float(value));
  }
  Type types[] = {type};
  absl::StatusOr<Operation*> op = Create(OpKind::kFull, {}, std::move(attrs), types);
  if (!op.ok()) return op.status();
  return (*op)->result(0);
}

void OpBuilder::Return(absl::Span<Value* const> values) {
  CreateUnchecked(OpKind::kReturn, values, {});
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
