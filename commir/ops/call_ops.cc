// call: runs another function of the module (a model's layer, written once and called
// once per layer). The callee, its signature and the absence of recursion are checked by
// the verifier (it needs the module); the op's definition knows only its own operands.
#include "commir/ops/op_helpers.h"

namespace commir::ops {
namespace {

// The result types are the written ones: the parser reads functions in source order, so
// a callee declared further down has no known signature yet. The verifier checks them
// against the callee's declared results.
absl::StatusOr<std::vector<Type>> InferCall(const OpSignature& sig) {
  if (sig.num_results > 0 && sig.annotated_results.empty()) {
    return OpError("'call' needs its result types written (': T' or ': (T0, T1)')");
  }
  return std::vector<Type>(sig.annotated_results.begin(), sig.annotated_results.end());
}

// The call itself moves nothing: the callee's ops carry the cost where they run (the
// interpreter, and so the sim, runs them one by one).
OpCost CallCost(const OpSignature&, absl::Span<const Type>) { return {}; }

// Autodiff sees straight-line code only: a call is differentiated once inlined.
absl::StatusOr<std::vector<Value*>> CallVjp(OpBuilder&, const VjpArgs&) {
  return OpError("calls are not differentiated: run 'inline' before 'autodiff'");
}

}  // namespace

void AppendCallOps(std::vector<OpDef>& ops) {
  ops.push_back(OpDef{
      .kind = OpKind::kCall,
      .name = "call",
      .summary = "runs another function of the module: %r = call @f(%x) : T",
      .min_operands = 0,
      .max_operands = -1,
      .min_results = 0,
      .max_results = -1,
      .attrs = {{.name = "callee", .kind = AttrKind::kSymbol, .required = true}},
      .traits = 0,
      .infer = InferCall,
      .cost = CallCost,
      .vjp = CallVjp,
  });
}

}  // namespace commir::ops
