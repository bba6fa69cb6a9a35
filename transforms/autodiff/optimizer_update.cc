#include "transforms/autodiff/optimizer_update.h"

#include <cmath>
#include <numeric>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace commir {
namespace {

using Operand = OpBuilder::Operand;

// A number literal of `x`'s element type (rounded to it, as torch rounds a Python float
// scalar to the tensor's dtype).
Operand Number(double number, const Value* x) {
  return Operand::Literal(number, Type::Scalar(x->type().element_type()));
}

Value* Scale(OpBuilder& b, Value* x, double factor) {
  if (x == nullptr) return nullptr;
  return b.Op(OpKind::kMul, {x, Number(factor, x)});
}

absl::Status CheckRange(absl::string_view name, double value, double min, double below) {
  if (std::isfinite(value) && value >= min && value < below) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "adamw: %s must be %s, got %g", name,
      std::isinf(below) ? absl::StrFormat("a finite number >= %g", min)
                        : absl::StrFormat("at least %g and below %g", min, below),
      value));
}

}  // namespace

absl::Status CheckAdamW(const AdamWHyperparameters& h) {
  const double inf = INFINITY;
  for (absl::Status s : {CheckRange("lr", h.lr, 0, inf), CheckRange("beta1", h.beta1, 0, 1),
                         CheckRange("beta2", h.beta2, 0, 1), CheckRange("eps", h.eps, 0, inf),
                         CheckRange("weight_decay", h.weight_decay, 0, inf)}) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::vector<Value*> ClipByGlobalNorm(OpBuilder& b, const std::vector<Value*>& gradients,
                                     double max_norm) {
  // Each gradient's squared sum: on a mesh a shard's partial sum. All of them first,
  // then their total, as torch.nn.utils.clip_grad_norm_ stacks the per-tensor norms:
  // whatever all_reduces the partitioner gives the squared sums are then all read
  // after the last is made, so they run combined (combine-all-reduces) rather than one
  // latency each between the additions.
  std::vector<Value*> squared_sums;
  for (Value* g : gradients) {
    if (g == nullptr) return gradients;
    Value* squared = b.Op(OpKind::kMul, {g, g});
    if (squared != nullptr && squared->type().rank() > 0) {
      AttrDict attrs;
      std::vector<int64_t> dims(squared->type().rank());
      std::iota(dims.begin(), dims.end(), 0);
      attrs.Set("dims", Attribute::IntList(dims));
      squared = b.Op(OpKind::kReduceSum, {squared}, std::move(attrs));
    }
    squared_sums.push_back(squared);
  }
  Value* total = nullptr;
  for (Value* squared : squared_sums) {
    // Mixed gradient types (an f64 param beside f32 ones) add in the first's type.
    if (total != nullptr) squared = b.Convert(squared, total->type().element_type());
    total = total == nullptr ? squared : b.Op(OpKind::kAdd, {total, squared});
  }
  if (total == nullptr || !b.ok()) return gradients;
  Value* norm = b.Op(OpKind::kSqrt, {total});
  Value* coefficient = b.Op(OpKind::kDiv, {Number(max_norm, norm),
                                           b.Op(OpKind::kAdd, {norm, Number(1e-6, norm)})});
  coefficient = b.Op(OpKind::kMin, {coefficient, Number(1.0, norm)});
  if (!b.ok()) return gradients;
  std::vector<Value*> clipped;
  for (Value* g : gradients) {
    clipped.push_back(b.Op(OpKind::kMul, {g, b.Convert(coefficient, g->type().element_type())}));
  }
  return clipped;
}

AdamWStepScalars EmitAdamWStepScalars(OpBuilder& b, Value* step, const AdamWHyperparameters& h) {
  AdamWStepScalars scalars;
  scalars.next_step = b.Op(OpKind::kAdd, {step, Operand::Literal(1, Type::Scalar(ElementType::kF32))});
  Value* t = b.Convert(scalars.next_step, ElementType::kF64);
  const Type f64 = Type::Scalar(ElementType::kF64);
  auto bias_correction = [&](double beta) {
    // 1 - beta^t
    return b.Op(OpKind::kSub,
                {Operand::Literal(1, f64), b.Op(OpKind::kPow, {Operand::Literal(beta, f64), t})});
  };
  scalars.step_size = b.Op(OpKind::kDiv, {Operand::Literal(h.lr, f64), bias_correction(h.beta1)});
  scalars.bias2_sqrt = b.Op(OpKind::kSqrt, {bias_correction(h.beta2)});
  return scalars;
}

AdamWTypedScalars ConvertAdamWStepScalars(OpBuilder& b, const AdamWStepScalars& scalars,
                                          ElementType type) {
  return {b.Convert(scalars.step_size, type), b.Convert(scalars.bias2_sqrt, type)};
}

AdamWParamUpdate EmitAdamWUpdate(OpBuilder& b, const AdamWHyperparameters& h,
                                 const AdamWTypedScalars& scalars, Value* weight,
                                 Value* gradient, Value* m, Value* v) {
  AdamWParamUpdate update;
  if (weight == nullptr) return update;
  const ElementType type = weight->type().element_type();
  Value* g = b.Convert(gradient, type);
  Value* decayed = Scale(b, weight, 1 - h.lr * h.weight_decay);
  update.m = b.Op(OpKind::kAdd, {Scale(b, m, h.beta1), Scale(b, g, 1 - h.beta1)});
  update.v = b.Op(OpKind::kAdd, {Scale(b, v, h.beta2), b.Op(OpKind::kMul, {Scale(b, g, 1 - h.beta2), g})});
  Value* denominator =
      b.Op(OpKind::kDiv, {b.Op(OpKind::kSqrt, {update.v}), scalars.bias2_sqrt});
  if (denominator != nullptr) denominator = b.Op(OpKind::kAdd, {denominator, Number(h.eps, denominator)});
  Value* step = b.Op(OpKind::kDiv,
                     {b.Op(OpKind::kMul, {update.m, scalars.step_size}), denominator});
  update.weight = b.Op(OpKind::kSub, {decayed, step});
  return update;
}

}  // namespace commir
