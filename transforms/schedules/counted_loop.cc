#include "transforms/schedules/counted_loop.h"

#include <memory>
#include <utility>

#include "commir/check.h"

namespace commir::schedules {

CountedLoop InsertCountedLoop(Block* block, Operation* before, Location loc, int64_t lower,
                              int64_t upper, absl::Span<Value* const> inits,
                              absl::string_view iv_name,
                              absl::Span<const std::string> carried_names) {
  AttrDict attrs;
  attrs.Set("lower", Attribute::Int(lower));
  attrs.Set("upper", Attribute::Int(upper));
  attrs.Set("step", Attribute::Int(1));
  std::vector<Type> types;
  for (Value* v : inits) types.push_back(v->type());
  std::unique_ptr<Operation> op =
      Operation::Create(GetOpDef(OpKind::kFor), inits, types, std::move(attrs), 1, loc);
  CountedLoop loop;
  loop.body = op->region(0);
  loop.iv = loop.body->AddArgument(Type::Index(), std::string(iv_name));
  for (size_t k = 0; k < inits.size(); ++k) {
    loop.carried.push_back(
        loop.body->AddArgument(types[k], k < carried_names.size() ? carried_names[k] : ""));
  }
  loop.op = block->InsertBefore(before, std::move(op));
  return loop;
}

void YieldFromLoop(const CountedLoop& loop, absl::Span<Value* const> values, Location loc) {
  COMMIR_CHECK(values.size() == loop.carried.size(), "yield arity must match the loop");
  loop.body->Append(
      Operation::Create(GetOpDef(OpKind::kYield), values, {}, AttrDict(), 0, loc));
}

}  // namespace commir::schedules
