#include "commir/verifier.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "commir/call_graph.h"

namespace commir {
namespace {

class FunctionVerifier {
 public:
  FunctionVerifier(Function& function, const FunctionsByName& functions,
                   DiagnosticEngine& diagnostics)
      : function_(function), functions_(functions), diagnostics_(diagnostics) {}

  void Run() {
    for (size_t i = 0; i < function_.arg_types().size(); ++i) {
      CheckLayout(function_.arg_types()[i], function_.arg_type_locs()[i]);
    }
    for (size_t i = 0; i < function_.result_types().size(); ++i) {
      CheckLayout(function_.result_types()[i], function_.result_type_locs()[i]);
    }
    VerifyBlock(function_.body(), /*loop=*/nullptr);
  }

 private:
  void Error(Location loc, std::string message) {
    diagnostics_.Error(loc.known() ? loc : function_.loc(), std::move(message));
  }

  void CheckLayout(Type type, Location loc) {
    if (type.is_null()) return;
    if (absl::Status s = ValidateLayout(type, function_.mesh()); !s.ok()) {
      Error(loc, std::string(s.message()));
    }
  }

  // Verifies `block`; `loop` is the enclosing for op.
  void VerifyBlock(Block* block, Operation* loop) {
    for (Operation* op : *block) {
      VerifyOp(op);
      bool is_last = op->next() == nullptr;
      if (op->def().Has(kTerminator) && !is_last) {
        Error(op->loc(), absl::StrFormat("'%s' must be the last op of its block", op->name()));
      }
      for (int r = 0; r < op->num_regions(); ++r) VerifyBlock(op->region(r), op);
    }
    VerifyTerminator(block, loop);
  }

  // Whether `value` is visible at `user`: an argument of the user's block or of an
  // enclosing one, or a result of an op that comes before the user in its block or
  // before the op holding the user in an enclosing block. (Decided from the IR's
  // structure: a set of the values defined so far costs a hash-table insertion per
  // value, and at a million ops, cache misses on a table of many megabytes.)
  static bool IsVisible(const Value* value, const Operation* user) {
    const Operation* def_op = value->kind() == Value::Kind::kBlockArgument ? nullptr
                                                                           : value->defining_op();
    const Block* def_block = def_op == nullptr ? value->owner_block() : def_op->parent_block();
    if (def_block == nullptr) return false;
    const Operation* holder = user;  // the op of def_block that is or holds the user
    while (holder != nullptr && holder->parent_block() != def_block) holder = holder->parent_op();
    if (holder == nullptr) return false;
    return def_op == nullptr || def_op->IsBeforeInBlock(holder);
  }

  void VerifyTerminator(Block* block, Operation* loop) {
    Operation* last = block->back();
    Location where = last != nullptr ? last->loc() : (loop ? loop->loc() : function_.loc());
    OpKind expected = loop == nullptr ? OpKind::kReturn : OpKind::kYield;
    // A terminator of the other kind (`yield` ending a function) is reported by VerifyOp.
    if (last != nullptr && !last->Is(expected) && last->def().Has(kTerminator)) return;
    if (last == nullptr || !last->Is(expected)) {
      Error(where, absl::StrFormat("the %s must end with '%s'",
                                   loop == nullptr ? "function body" : "loop body",
                                   GetOpDef(expected).name));
      return;
    }
    if (loop == nullptr) {
      VerifyReturn(last);
    } else {
      VerifyYield(last, loop);
    }
  }

  void VerifyReturn(Operation* ret) {
    const std::vector<Type>& declared = function_.result_types();
    if (ret->num_operands() != static_cast<int>(declared.size())) {
      Error(ret->loc(), absl::StrFormat("return has %d value%s but @%s declares %d result%s",
                                        ret->num_operands(), ret->num_operands() == 1 ? "" : "s",
                                        function_.name(), declared.size(),
                                        declared.size() == 1 ? "" : "s"));
      return;
    }
    for (int i = 0; i < ret->num_operands(); ++i) {
      Type actual = ret->operand(i)->type();
      if (actual.is_null() || declared[i].is_null()) continue;
      if (function_.is_spmd()) {
        // An invalid declared layout is reported at the signature; no local type follows.
        if (!ValidateLayout(declared[i], function_.mesh()).ok()) continue;
        Type local = LocalType(declared[i], function_.mesh());
        if (actual != local) {
          Error(ret->loc(),
                absl::StrFormat("result %d: each device must return %s (its part of %s), got %s",
                                i, local.ToString(), declared[i].ToString(), actual.ToString()));
        }
      } else if (!actual.SameShapeAndElementType(declared[i])) {
        Error(ret->loc(), absl::StrFormat("result %d: returned %s does not match declared %s", i,
                                          actual.ToString(), declared[i].ToString()));
      }
    }
  }

  void VerifyYield(Operation* yield, Operation* loop) {
    if (yield->num_operands() != loop->num_results()) {
      Error(yield->loc(), absl::StrFormat("yield has %d value%s but the loop carries %d",
                                          yield->num_operands(),
                                          yield->num_operands() == 1 ? "" : "s",
                                          loop->num_results()));
      return;
    }
    for (int i = 0; i < yield->num_operands(); ++i) {
      Type actual = yield->operand(i)->type();
      if (actual.is_null()) continue;
      if (actual != loop->result(i)->type()) {
        Error(yield->loc(), absl::StrFormat("yield value %d is %s but the loop carries %s", i,
                                            actual.ToString(), loop->result(i)->type().ToString()));
      }
    }
  }

  void VerifyForOp(Operation* op) {
    if (op->num_regions() != 1) {
      Error(op->loc(), "a for loop needs one body");
      return;
    }
    Block* body = op->region(0);
    if (body->num_arguments() != op->num_operands() + 1) {
      Error(op->loc(), "the loop body must take the induction variable and each carried value");
      return;
    }
    if (!body->argument(0)->type().is_index()) {
      Error(op->loc(), "the induction variable must be an index");
    }
    for (int i = 0; i < op->num_operands(); ++i) {
      Type init = op->operand(i)->type();
      if (init.is_null()) continue;
      if (body->argument(i + 1)->type() != init || op->result(i)->type() != init) {
        Error(op->loc(), absl::StrFormat("carried value %d must keep its type %s", i,
                                         init.ToString()));
      }
    }
  }

  // A literal standing for an index or integer value must be a whole number that the
  // type can hold.
  void VerifyLiteral(Operation* op, Value* literal) {
    Type type = literal->type();
    double v = literal->literal_value();
    double lo = 0, hi = 0;  // the range is [lo, hi)
    if (type.is_index() || (type.is_tensor() && type.element_type() == ElementType::kI64)) {
      lo = -9223372036854775808.0;
      hi = 9223372036854775808.0;
    } else if (type.is_tensor() && type.element_type() == ElementType::kI32) {
      lo = -2147483648.0;
      hi = 2147483648.0;
    } else if (type.is_tensor() && type.element_type() == ElementType::kI1) {
      hi = 2;
    } else {
      return;  // any number (inf and nan included) is a float literal
    }
    if (!(v >= lo && v < hi) || std::trunc(v) != v) {
      Error(literal->loc().known() ? literal->loc() : op->loc(),
            absl::StrFormat("literal %s is not a valid %s value", FormatFloat(v),
                            type.is_index() ? "index" : ElementTypeName(type.element_type())));
    }
  }

  void VerifyOp(Operation* op) {
    const OpDef& def = op->def();
    bool spmd = function_.is_spmd();
    if (def.Has(kSpmdOnly) && !spmd && !def.Has(kIndexOperands)) {
      Error(op->loc(), absl::StrFormat("'%s' is only valid in spmd functions", op->name()));
      return;
    }
    if (def.Has(kGlobalOnly) && spmd) {
      Error(op->loc(), absl::StrFormat("'%s' is only valid in global functions", op->name()));
      return;
    }
    if (op->Is(OpKind::kYield) && op->parent_op() == nullptr) {
      Error(op->loc(), "'yield' is only valid in a loop body");
      return;
    }
    if (op->Is(OpKind::kReturn) && op->parent_op() != nullptr) {
      Error(op->loc(), "'return' is not valid in a loop body (use 'yield')");
      return;
    }
    // SSA: every operand is defined, visible here, and typed.
    bool typed = true;
    int literals = 0;
    for (Value* operand : op->all_operands()) {
      if (operand->is_literal()) {
        ++literals;
        continue;
      }
      if (operand->type().is_null()) {
        // A stand-in for a name that failed to parse or was never defined: already
        // reported where that happened.
        typed = false;
        continue;
      }
      if (!IsVisible(operand, op)) {
        Error(op->loc(), absl::StrFormat("operand %%%s of '%s' does not dominate its use",
                                         operand->name(), op->name()));
        return;
      }
      typed &= !operand->type().is_null();
    }
    if (literals > 0 && !def.Has(kAllowsLiteral)) {
      Error(op->loc(), absl::StrFormat("'%s' does not take number literals", op->name()));
      return;
    }
    if (literals >= op->num_operands() && op->num_operands() > 0) {
      Error(op->loc(), absl::StrFormat("'%s' needs at least one operand that is a value",
                                       op->name()));
      return;
    }
    if (!typed) return;  // already reported where the operand was defined
    for (Value* operand : op->operands()) {
      if (operand->is_literal()) VerifyLiteral(op, operand);
    }
    if (Value* stream = op->stream_operand(); stream != nullptr && !stream->type().is_index()) {
      Error(op->loc(), "'stream' must be a non-negative integer or an index value");
    }
    if (op->stream_operand() != nullptr && !spmd) {
      Error(op->loc(), "'stream' is only valid in spmd functions");
    }
    if (absl::Status s = ValidateAttributes(def, op->attrs(), spmd); !s.ok()) {
      Error(op->loc(), std::string(s.message()));
      return;
    }
    // Inline storage: no heap allocation for ops with up to four operands / results.
    absl::InlinedVector<Type, 4> operand_types;
    for (Value* operand : op->operands()) operand_types.push_back(operand->type());
    absl::InlinedVector<Type, 4> result_types;
    for (int i = 0; i < op->num_results(); ++i) {
      Type type = op->result(i)->type();
      if (type.is_null()) return;
      result_types.push_back(type);
    }
    Location type_loc = op->type_loc().known() ? op->type_loc() : op->loc();
    for (Type t : result_types) {
      if (spmd && t.has_sharding()) {
        Error(type_loc, absl::StrFormat("%s: types in a spmd function body are per-device and "
                                        "carry no sharding",
                                        t.ToString()));
        return;
      }
      if (t.zigzag_dim() >= 0) {
        Error(type_loc, absl::StrFormat("%s: a zigzag layout may be declared only in a "
                                        "function's signature, not on an op's result",
                                        t.ToString()));
        return;
      }
      if (absl::Status s = ValidateLayout(t, function_.mesh()); !s.ok()) {
        Error(type_loc, std::string(s.message()));
        return;
      }
    }
    OpSignature sig{operand_types, op->attrs(), result_types, op->num_results(),
                    function_.mesh(), spmd};
    absl::StatusOr<std::vector<Type>> inferred = InferResultTypes(def, sig);
    if (!inferred.ok()) {
      Error(op->loc(), std::string(inferred.status().message()));
      return;
    }
    if (op->Is(OpKind::kFor)) VerifyForOp(op);
    if (op->Is(OpKind::kCall)) VerifyCallOp(op);
  }

  // `what` (an operand or result of a call) against the callee's declared `declared`
  // type. In a spmd function values are per-device: they must be exactly the callee's
  // local types. In a global function shape and element type must match, and where both
  // the caller's value and the callee's signature write a layout, it must be the same
  // (an unwritten one is free, as everywhere in global functions: a layer written
  // without layouts takes whatever the model gives it). An empty message means they
  // agree.
  std::string CallTypeMismatch(Type actual, Type declared, const Function& callee) {
    if (actual.is_null() || declared.is_null()) return "";
    if (!ValidateLayout(declared, callee.mesh()).ok()) return "";  // reported at the callee
    if (function_.is_spmd()) {
      Type local = LocalType(declared, callee.mesh());
      if (actual == local) return "";
      return absl::StrFormat("per device %s (the part of %s) is expected, got %s",
                             local.ToString(), declared.ToString(), actual.ToString());
    }
    bool same_index = actual.is_index() && declared.is_index();
    if (!same_index && (actual.is_index() != declared.is_index() ||
                        !actual.SameShapeAndElementType(declared))) {
      return absl::StrFormat("%s does not match the declared %s", actual.ToString(),
                             declared.ToString());
    }
    if (actual.is_tensor() && actual.has_sharding() && declared.has_sharding() &&
        actual.WithZigzag(-1) != declared.WithZigzag(-1)) {
      return absl::StrFormat("layout %s differs from the declared %s", actual.ToString(),
                             declared.ToString());
    }
    return "";
  }

  // The callee exists, is of the caller's kind and mesh, and the operands and results
  // agree with its signature. Recursion is checked over the whole module
  // (VerifyNoCallCycles).
  void VerifyCallOp(Operation* op) {
    const std::string& name = op->attrs().Find("callee")->string_value();
    const Function* callee = functions_.Find(name);
    if (callee == nullptr) {
      Error(op->loc(), absl::StrFormat("call of unknown function @%s", name));
      return;
    }
    if (callee->is_spmd() != function_.is_spmd()) {
      Error(op->loc(), absl::StrFormat("%s function @%s cannot call %s function @%s",
                                       function_.is_spmd() ? "spmd" : "global", function_.name(),
                                       callee->is_spmd() ? "spmd" : "global", name));
      return;
    }
    if (callee->mesh() != function_.mesh()) {
      auto mesh_name = [](const Function& f) {
        return f.mesh() == nullptr ? std::string("no mesh") : absl::StrCat("mesh @", f.mesh()->name());
      };
      Error(op->loc(), absl::StrFormat("@%s runs on %s but @%s calls it on %s", name,
                                       mesh_name(*callee), function_.name(), mesh_name(function_)));
      return;
    }
    const std::vector<Type>& params = callee->arg_types();
    const std::vector<Type>& results = callee->result_types();
    if (op->num_operands() != static_cast<int>(params.size())) {
      Error(op->loc(), absl::StrFormat("@%s takes %d argument%s, the call passes %d", name,
                                       params.size(), params.size() == 1 ? "" : "s",
                                       op->num_operands()));
      return;
    }
    if (op->num_results() != static_cast<int>(results.size())) {
      Error(op->loc(), absl::StrFormat("@%s returns %d result%s, the call names %d", name,
                                       results.size(), results.size() == 1 ? "" : "s",
                                       op->num_results()));
      return;
    }
    for (int i = 0; i < op->num_operands(); ++i) {
      std::string mismatch = CallTypeMismatch(op->operand(i)->type(), params[i], *callee);
      if (!mismatch.empty()) {
        Error(op->loc(), absl::StrFormat("argument %d of @%s: %s", i, name, mismatch));
      }
    }
    Location type_loc = op->type_loc().known() ? op->type_loc() : op->loc();
    for (int i = 0; i < op->num_results(); ++i) {
      std::string mismatch = CallTypeMismatch(op->result(i)->type(), results[i], *callee);
      if (!mismatch.empty()) {
        Error(type_loc, absl::StrFormat("result %d of @%s: %s", i, name, mismatch));
      }
    }
  }

  Function& function_;
  const FunctionsByName& functions_;
  DiagnosticEngine& diagnostics_;
};

// Reports duplicate symbols and invalid meshes.
void VerifyMeshes(Module& module, DiagnosticEngine& diagnostics) {
  absl::flat_hash_set<std::string> symbols;
  for (const Module::Decl& decl : module.decls()) {
    const std::string& name = decl.mesh != nullptr ? decl.mesh->name() : decl.function->name();
    Location loc = decl.mesh != nullptr ? decl.mesh->loc() : decl.function->loc();
    if (!symbols.insert(name).second) {
      diagnostics.Error(loc, absl::StrFormat("redefinition of @%s", name));
    }
    if (decl.mesh == nullptr) continue;
    absl::flat_hash_set<std::string> axes;
    for (const MeshAxis& axis : decl.mesh->axes()) {
      if (!axes.insert(axis.name).second) {
        diagnostics.Error(axis.loc, absl::StrFormat("mesh @%s has axis '%s' twice", name, axis.name));
      }
      if (axis.size < 1) {
        diagnostics.Error(axis.loc, absl::StrFormat("mesh axis '%s' must have size >= 1, got %d",
                                                    axis.name, axis.size));
      }
    }
    int64_t devices = 1;
    bool overflow = false;
    for (const MeshAxis& axis : decl.mesh->axes()) {
      if (axis.size >= 1) overflow |= __builtin_mul_overflow(devices, axis.size, &devices);
    }
    if (overflow) {
      diagnostics.Error(decl.mesh->loc(),
                        absl::StrFormat("mesh @%s has too many devices: the product of its axis "
                                        "sizes does not fit in 64 bits",
                                        name));
    }
  }
}

// Reports each cycle of calls once, at the call that closes it (a depth-first search
// over the call graph, from the functions in declaration order). Calls of unknown
// functions are reported by the function's verifier.
void VerifyNoCallCycles(const Module& module, DiagnosticEngine& diagnostics) {
  CalleesFirst(module, [&](Operation& call, const Function& callee,
                           absl::Span<Function* const> path) {
    // The cycle from the callee round to it again. A long one is shortened in the
    // middle: one error per cycle, each naming every function, would be quadratic.
    constexpr size_t kShownEnds = 8;
    size_t first = 0;
    while (path[first] != &callee) ++first;
    const size_t length = path.size() - first;
    std::string cycle;
    for (size_t i = first; i < path.size(); ++i) {
      const size_t k = i - first;
      if (length > 2 * kShownEnds && k == kShownEnds) {
        absl::StrAppend(&cycle, "... (", length - 2 * kShownEnds, " more) -> ");
        i = path.size() - kShownEnds - 1;
        continue;
      }
      absl::StrAppend(&cycle, "@", path[i]->name(), " -> ");
    }
    absl::StrAppend(&cycle, "@", callee.name());
    diagnostics.Error(call.loc(),
                      absl::StrFormat("recursive call: %s (calls may not form a cycle)", cycle));
  });
}

}  // namespace

void VerifyModule(Module& module, DiagnosticEngine& diagnostics) {
  VerifyMeshes(module, diagnostics);
  module.ResolveMeshes();
  size_t mesh_count = module.meshes().size();
  // Looked up once: a module may hold tens of thousands of functions and calls.
  const FunctionsByName functions(module);
  for (Function* function : module.functions()) {
    if (!function->mesh_name().empty() && function->mesh() == nullptr) {
      Location loc = function->mesh_name_loc().known() ? function->mesh_name_loc() : function->loc();
      diagnostics.Error(loc, absl::StrFormat("unknown mesh @%s", function->mesh_name()));
      continue;
    }
    if (function->mesh_name().empty() && mesh_count > 1) {
      diagnostics.Error(function->loc(),
                        absl::StrFormat("@%s must name its mesh with 'on @MESH': the module "
                                        "declares %d meshes",
                                        function->name(), mesh_count));
      continue;
    }
    // The body of a function on an invalid mesh (reported above) cannot be checked
    // without cascades of errors, nor safely (group sizes may be 0).
    if (function->mesh() != nullptr && !function->mesh()->IsWellFormed()) continue;
    FunctionVerifier(*function, functions, diagnostics).Run();
  }
  VerifyNoCallCycles(module, diagnostics);
}

absl::Status VerifyModule(Module& module) {
  DiagnosticEngine diagnostics;
  VerifyModule(module, diagnostics);
  if (!diagnostics.has_errors()) return absl::OkStatus();
  std::string text;
  for (const Diagnostic& d : diagnostics.Sorted()) {
    absl::StrAppendFormat(&text, "%d:%d: error: %s\n", d.loc.line, d.loc.col, d.message);
  }
  return absl::InvalidArgumentError(text);
}

}  // namespace commir
