#include "tools/input_init.h"

#include <cmath>
#include <optional>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "commir/ir.h"
#include "commir/op_def.h"
#include "runtime/random_inputs.h"

namespace commir {
namespace {

using runtime::InitRule;

// Ops whose result holds the same global values as their operand.
bool PreservesValues(const Operation& op) {
  return op.Is(OpKind::kAllGather) || op.Is(OpKind::kReshard) || op.Is(OpKind::kConvert);
}

// A matmul's product, possibly summed or scattered across devices first.
bool IsMatmulProduct(const Value* value) {
  const Operation* op = value->defining_op();
  if (op == nullptr || value->is_literal()) return false;
  if (op->Is(OpKind::kMatmul)) return true;
  if (op->Is(OpKind::kAllReduce) || op->Is(OpKind::kReduceScatter)) {
    return op->num_operands() > 0 && IsMatmulProduct(op->operand(0));
  }
  return false;
}

// The rule `value`'s uses imply, `arg_dims` being the argument's global shape.
std::optional<InitRule> RuleFromUses(const Value* value, absl::Span<const int64_t> arg_dims,
                                     int depth) {
  if (depth > 8) return std::nullopt;
  for (const Operation* user : value->users()) {
    for (int i = 0; i < user->num_operands(); ++i) {
      if (user->operand(i) != value) continue;
      if (user->Is(OpKind::kMatmul) && i == 1 && arg_dims.size() >= 2) {
        const bool transposed = user->BoolAttr("transpose_b");
        const int64_t fan_in = arg_dims[arg_dims.size() - (transposed ? 1 : 2)];
        if (fan_in > 0) return InitRule{InitRule::Kind::kScaledUniform, std::sqrt(3.0 / fan_in)};
      }
      if ((user->Is(OpKind::kLayerNorm) || user->Is(OpKind::kRmsNorm)) && i == 1) {
        return InitRule{InitRule::Kind::kConstant, 1.0};
      }
      if (user->Is(OpKind::kLayerNorm) && i == 2) return InitRule{InitRule::Kind::kConstant, 0.0};
      if (user->Is(OpKind::kAdd) && user->num_operands() == 2 &&
          IsMatmulProduct(user->operand(1 - i))) {
        return InitRule{InitRule::Kind::kConstant, 0.0};
      }
    }
    if (PreservesValues(*user) && user->num_results() > 0) {
      if (auto rule = RuleFromUses(user->result(0), arg_dims, depth + 1)) return rule;
    }
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<InitScheme> ParseInitScheme(absl::string_view name) {
  if (name == "uniform") return InitScheme::kUniform;
  if (name == "scaled") return InitScheme::kScaled;
  return absl::InvalidArgumentError(
      absl::StrFormat("--init must be one of uniform, scaled; got '%s'", name));
}

std::vector<InitRule> InitRulesFor(const Function& function, InitScheme scheme) {
  const Block& body = *function.body();
  std::vector<InitRule> rules(body.num_arguments());
  if (scheme == InitScheme::kUniform) return rules;
  for (int i = 0; i < body.num_arguments(); ++i) {
    const Type type = function.arg_types()[i];
    if (type.is_index()) continue;
    if (auto rule = RuleFromUses(body.argument(i), type.dims(), 0)) rules[i] = *rule;
  }
  return rules;
}

}  // namespace commir
