// Derivative rules of the elementwise ops. Each computes d(result)/d(operand) times the
// cotangent g in g's element type; broadcast operands get their cotangent summed back
// to their shape (SumToShape).
#include <cmath>

#include "commir/ops/vjp_helpers.h"
#include "commir/ops/vjp_rules.h"

namespace commir::ops {
namespace {

using Operand = OpBuilder::Operand;

Value* Mul(OpBuilder& b, Operand x, Operand y) { return b.Op(OpKind::kMul, {x, y}); }
Value* Div(OpBuilder& b, Operand x, Operand y) { return b.Op(OpKind::kDiv, {x, y}); }
Value* Sub(OpBuilder& b, Operand x, Operand y) { return b.Op(OpKind::kSub, {x, y}); }
Value* Add(OpBuilder& b, Operand x, Operand y) { return b.Op(OpKind::kAdd, {x, y}); }
Value* Cmp(OpBuilder& b, Operand x, Operand y, const char* cmp) {
  AttrDict attrs;
  attrs.Set("cmp", Attribute::Ident(cmp));
  return b.Op(OpKind::kCompare, {x, y}, std::move(attrs));
}

// d/dx of a unary op at x (its result y), times g.
Value* UnaryDerivativeTimes(OpBuilder& b, const Operation& op, Value* g) {
  const ElementType et = g->type().element_type();
  Operand x = PrimalAs(b, op, 0, et);
  Value* y = ResultAs(b, op, 0, et);
  switch (op.kind()) {
    case OpKind::kNeg:
      return b.Op(OpKind::kNeg, {g});
    case OpKind::kAbs:
      return b.Op(OpKind::kSelect, {Cmp(b, x, Literal(0, et), "ge"), g, b.Op(OpKind::kNeg, {g})});
    case OpKind::kExp:
      return Mul(b, g, y);
    case OpKind::kLog:
      return Div(b, g, x);
    case OpKind::kSqrt:
      return Div(b, g, Mul(b, y, Literal(2, et)));
    // y = x^-1/2, dy/dx = -y / (2x).
    case OpKind::kRsqrt:
      return Mul(b, g, Div(b, Mul(b, y, Literal(-0.5, et)), x));
    case OpKind::kTanh:
      return Mul(b, g, Sub(b, Literal(1, et), Mul(b, y, y)));
    case OpKind::kSigmoid:
      return Mul(b, g, Mul(b, y, Sub(b, Literal(1, et), y)));
    case OpKind::kRelu:
      return SelectOrZero(b, Cmp(b, x, Literal(0, et), "gt"), g);
    case OpKind::kSilu: {
      // y = x s, s = sigmoid(x): dy/dx = s (1 + x (1 - s)).
      Value* s = b.Op(OpKind::kSigmoid, {x});
      Value* inner = Add(b, Literal(1, et), Mul(b, x, Sub(b, Literal(1, et), s)));
      return Mul(b, g, Mul(b, s, inner));
    }
    case OpKind::kGelu: {
      if (op.EnumAttr("approximate") == "tanh") {
        // y = x/2 (1 + t), t = tanh(c (x + a x^3)):
        // dy/dx = (1 + t)/2 + x/2 (1 - t^2) c (1 + 3 a x^2).
        const double c = std::sqrt(2.0 / M_PI);
        const double a = 0.044715;
        Value* x2 = Mul(b, x, x);
        Value* t = b.Op(OpKind::kTanh,
                        {Mul(b, Literal(c, et), Add(b, x, Mul(b, Literal(a, et), Mul(b, x2, x))))});
        Value* first = Mul(b, Literal(0.5, et), Add(b, Literal(1, et), t));
        Value* dt =
            Mul(b, Sub(b, Literal(1, et), Mul(b, t, t)),
                Mul(b, Literal(c, et), Add(b, Literal(1, et), Mul(b, Literal(3 * a, et), x2))));
        return Mul(b, g, Add(b, first, Mul(b, Mul(b, Literal(0.5, et), x), dt)));
      }
      // y = x Phi(x): dy/dx = Phi(x) + x phi(x). There is no erf op, so Phi(x) is read
      // back from the forward result as y / x (1/2 at x = 0, where that is 0/0).
      Value* is_zero = Cmp(b, x, Literal(0, et), "eq");
      Value* safe_x = b.Op(OpKind::kSelect, {is_zero, Filled(b, 1, et, {}), x});
      Value* phi_cdf = b.Op(OpKind::kSelect, {is_zero, Filled(b, 0.5, et, {}), Div(b, y, safe_x)});
      Value* pdf = Mul(b, Literal(1 / std::sqrt(2 * M_PI), et),
                       b.Op(OpKind::kExp, {Mul(b, Literal(-0.5, et), Mul(b, x, x))}));
      return Mul(b, g, Add(b, phi_cdf, Mul(b, x, pdf)));
    }
    default:
      return nullptr;
  }
}

absl::StatusOr<std::vector<Value*>> UnaryVjp(OpBuilder& b, const VjpArgs& args) {
  Value* g = args.result_cotangents[0];
  return Finish(b, {UnaryDerivativeTimes(b, args.op, g)});
}

// convert: the gradient converted back to the operand's element type (or kept in the
// gradient type of grad-type=f32).
absl::StatusOr<std::vector<Value*>> ConvertVjp(OpBuilder& b, const VjpArgs& args) {
  Value* g = args.result_cotangents[0];
  return Finish(b,
                {b.Convert(g, CotangentElementType(args.op.operand(0)->type(), args.grad_type))});
}

// The cotangent of operand `i` unless it is a literal, summed back to its shape.
Value* ToOperand(OpBuilder& b, const Operation& op, int i, Value* ct) {
  if (op.operand(i)->is_literal()) return nullptr;
  return SumToShape(b, ct, op.operand(i)->type().dims());
}

absl::StatusOr<std::vector<Value*>> BinaryVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  Value* g = args.result_cotangents[0];
  const ElementType et = g->type().element_type();
  Operand x = PrimalAs(b, op, 0, et);
  Operand y = PrimalAs(b, op, 1, et);
  Value* dx = nullptr;
  Value* dy = nullptr;
  switch (op.kind()) {
    case OpKind::kAdd:
      dx = g;
      dy = g;
      break;
    case OpKind::kSub:
      dx = g;
      dy = b.Op(OpKind::kNeg, {g});
      break;
    case OpKind::kMul:
      dx = Mul(b, g, y);
      dy = Mul(b, g, x);
      break;
    case OpKind::kDiv: {
      dx = Div(b, g, y);
      // d(x/y)/dy = -(x/y)/y.
      dy = b.Op(OpKind::kNeg, {Mul(b, g, Div(b, ResultAs(b, op, 0, et), y))});
      break;
    }
    // Ties send the gradient to the first operand (as select(x >= y) would pick it).
    case OpKind::kMax: {
      Value* first = Cmp(b, x, y, "ge");
      dx = SelectOrZero(b, first, g);
      dy = ZeroOrSelect(b, first, g);
      break;
    }
    case OpKind::kMin: {
      Value* first = Cmp(b, x, y, "le");
      dx = SelectOrZero(b, first, g);
      dy = ZeroOrSelect(b, first, g);
      break;
    }
    case OpKind::kPow: {
      // d(x^y)/dx = y x^(y-1); d(x^y)/dy = x^y log x.
      dx = Mul(b, g, Mul(b, y, b.Op(OpKind::kPow, {x, Sub(b, y, Literal(1, et))})));
      if (!op.operand(1)->is_literal()) {
        dy = Mul(b, g, Mul(b, ResultAs(b, op, 0, et), b.Op(OpKind::kLog, {x})));
      }
      break;
    }
    default:
      break;
  }
  return Finish(b, {ToOperand(b, op, 0, dx), ToOperand(b, op, 1, dy)});
}

// select(c, a, b): the cotangent goes to the chosen side; the predicate gets none.
absl::StatusOr<std::vector<Value*>> SelectVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  Value* g = args.result_cotangents[0];
  Value* cond = op.operand(0);
  return Finish(b, {nullptr, ToOperand(b, op, 1, SelectOrZero(b, cond, g)),
                    ToOperand(b, op, 2, ZeroOrSelect(b, cond, g))});
}

}  // namespace

VjpRule ElementwiseVjpRule(OpKind kind) {
  switch (kind) {
    case OpKind::kNeg:
      return UnaryVjp;
    case OpKind::kAbs:
      return UnaryVjp;
    case OpKind::kExp:
      return UnaryVjp;
    case OpKind::kLog:
      return UnaryVjp;
    case OpKind::kSqrt:
      return UnaryVjp;
    case OpKind::kRsqrt:
      return UnaryVjp;
    case OpKind::kTanh:
      return UnaryVjp;
    case OpKind::kSigmoid:
      return UnaryVjp;
    case OpKind::kRelu:
      return UnaryVjp;
    case OpKind::kSilu:
      return UnaryVjp;
    case OpKind::kGelu:
      return UnaryVjp;
    case OpKind::kConvert:
      return ConvertVjp;
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kMax:
    case OpKind::kMin:
    case OpKind::kPow:
      return BinaryVjp;
    case OpKind::kSelect:
      return SelectVjp;
    default:
      return nullptr;
  }
}

}  // namespace commir::ops
