#include "sim/moe_exchange_views.h"

namespace commir::sim {
namespace {

// Every user of `v`, looking through reshapes, is an all_to_all (and there is one).
bool OnlyExchanged(const Value* v, int depth = 0) {
  if (v->users().empty() || depth > 4) return false;
  for (const Operation* user : v->users()) {
    if (user->Is(OpKind::kAllToAll)) continue;
    if (user->Is(OpKind::kReshape) && OnlyExchanged(user->result(0), depth + 1)) continue;
    return false;
  }
  return true;
}

}  // namespace

bool IsExchangeBlockInPlace(const Operation& op) {
  if (op.Is(OpKind::kDynamicSlice)) return OnlyExchanged(op.result(0));
  if (!op.Is(OpKind::kDynamicUpdateSlice) || op.num_operands() < 2) return false;
  const Value* update = op.operand(1);
  for (int hop = 0; hop < 2; ++hop) {
    if (update->kind() != Value::Kind::kResult || update->users().size() != 1) return false;
    const Operation* def = update->defining_op();
    if (def->Is(OpKind::kAllToAll)) return true;
    if (!def->Is(OpKind::kReshape)) return false;
    update = def->operand(0);
  }
  return false;
}

}  // namespace commir::sim
