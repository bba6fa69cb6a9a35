#include "commir/dot_printer.h"
#include "commir/printer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace commir {
namespace {

// A DOT quoted string: quotes and backslashes escaped, newlines as DOT's centred `\n`.
std::string Quote(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default: out.push_back(c);
    }
  }
  out += "\"";
  return out;
}

std::string TypeList(const std::vector<Type>& types) {
  std::vector<std::string> parts;
  for (Type t : types) parts.push_back(t.ToString());
  if (parts.size() == 1) return parts[0];
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

class DotPrinter {
 public:
  explicit DotPrinter(std::string& out) : out_(out) {}

  void PrintFunction(const Function& function, int index) {
    prefix_ = absl::StrCat("f", index, "_");
    AssignNames(function);
    Line(1, absl::StrCat("subgraph cluster_f", index, " {"));
    Line(2, absl::StrCat("label=", Quote(Signature(function)), ";"));
    for (Value* arg : function.body()->arguments()) {
      Line(2, absl::StrCat(NodeFor(arg), " [shape=ellipse, label=",
                           Quote(absl::StrCat("%", Name(arg), ": ", arg->type().ToString())),
                           "];"));
    }
    PrintBlock(*function.body(), 2);
    Line(1, "}");
    for (const std::string& edge : edges_) Line(1, edge);
    edges_.clear();
  }

 private:
  void Line(int depth, absl::string_view text) {
    out_.append(2 * depth, ' ');
    absl::StrAppend(&out_, text, "\n");
  }

  // ---- Names, as the text printer assigns them ---------------------------------------

  void AssignNames(const Function& function) {
    names_.clear();
    used_.clear();
    next_number_ = 0;
    for (Value* arg : function.body()->arguments()) Claim(arg);
    AssignBlockNames(*function.body());
  }

  void AssignBlockNames(const Block& block) {
    for (const Operation* op : block) {
      for (int r = 0; r < op->num_regions(); ++r) {
        for (Value* arg : op->region(r)->arguments()) Claim(arg);
      }
      for (Value* result : op->results()) Claim(result);
      for (int r = 0; r < op->num_regions(); ++r) AssignBlockNames(*op->region(r));
    }
  }

  void Claim(const Value* value) {
    std::string name = value->name();
    if (name.empty()) {
      do name = absl::StrCat(next_number_++); while (used_.contains(name));
    } else if (used_.contains(name)) {
      std::string base = name;
      int suffix = 1;
      do name = absl::StrCat(base, "_", suffix++); while (used_.contains(name));
    }
    used_.insert(name);
    names_[value] = std::move(name);
  }

  std::string Name(const Value* value) const {
    auto it = names_.find(value);
    return it != names_.end() ? it->second : "?";
  }

  std::string Operand(const Value* value) const {
    if (!value->is_literal()) return absl::StrCat("%", Name(value));
    double v = value->literal_value();
    bool integral = value->type().is_index() ||
                    (value->type().is_tensor() && IsIntegerType(value->type().element_type()));
    if (integral && std::isfinite(v)) return absl::StrCat(static_cast<int64_t>(v));
    return FormatFloat(v);
  }

  // ---- Nodes and edges ------------------------------------------------------------

  std::string NewNode() { return absl::StrCat(prefix_, "n", next_node_++); }

  std::string NodeFor(const Value* arg) {
    std::string id = NewNode();
    arg_nodes_[arg] = id;
    return id;
  }

  // The edge from `operand`'s producer to `user_node` (none for a literal).
  void AddOperandEdge(const Value* operand, const std::string& user_node, bool stream) {
    std::string from;
    std::vector<std::string> attrs;
    if (operand->kind() == Value::Kind::kResult) {
      const Operation* producer = operand->defining_op();
      auto it = op_nodes_.find(producer);
      if (it == op_nodes_.end()) return;
      from = it->second;
      if (producer->num_results() > 1) attrs.push_back(absl::StrCat("label=\"#", operand->index(), "\""));
    } else if (operand->kind() == Value::Kind::kBlockArgument) {
      auto it = arg_nodes_.find(operand);
      if (it == arg_nodes_.end()) return;
      from = it->second;
    } else {
      return;
    }
    if (stream) {
      attrs.push_back("style=dashed");
      attrs.push_back("label=\"stream\"");
    }
    AddEdge(from, user_node, attrs);
  }

  void AddEdge(const std::string& from, const std::string& to,
               const std::vector<std::string>& attrs) {
    std::string edge = absl::StrCat(from, " -> ", to);
    if (!attrs.empty()) absl::StrAppend(&edge, " [", absl::StrJoin(attrs, ", "), "]");
    edges_.push_back(absl::StrCat(edge, ";"));
  }

  // ---- Labels ---------------------------------------------------------------------

  std::string Signature(const Function& function) const {
    std::vector<std::string> args;
    for (int i = 0; i < function.body()->num_arguments(); ++i) {
      args.push_back(absl::StrCat("%", Name(function.body()->argument(i)), ": ",
                                  function.arg_types()[i].ToString()));
    }
    std::string text = absl::StrCat(function.is_spmd() ? "spmd " : "", "func @", function.name(),
                                    "(", absl::StrJoin(args, ", "), ") -> ",
                                    TypeList(function.result_types()));
    if (function.mesh() != nullptr) absl::StrAppend(&text, " on @", function.mesh()->name());
    return text;
  }

  // Attributes in schema order, then unknown keys sorted, then the stream; loop bounds
  // are left out for loops, whose header shows them.
  std::string Attributes(const Operation& op) const {
    std::vector<std::string> parts = AttributeEntries(
        op, /*skip_loop_bounds=*/op.Is(OpKind::kFor), [&](const Value* v) { return Name(v); });
    if (parts.empty()) return "";
    return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
  }

  std::string OpLabel(const Operation& op) const {
    std::vector<std::string> results;
    for (Value* result : op.results()) results.push_back(absl::StrCat("%", Name(result)));
    std::string head = results.empty() ? "" : absl::StrCat(absl::StrJoin(results, ", "), " = ");
    std::vector<std::string> operands;
    for (Value* operand : op.operands()) operands.push_back(Operand(operand));
    if (op.Is(OpKind::kFor)) {
      const Block& body = *op.region(0);
      absl::StrAppend(&head, "for %", Name(body.argument(0)), " = ", op.attrs().GetInt("lower", 0),
                      " to ", op.attrs().GetInt("upper", 0), " step ",
                      op.IntAttr("step"));
      if (!operands.empty()) absl::StrAppend(&head, " iter(", absl::StrJoin(operands, ", "), ")");
    } else if (op.def().Has(kTerminator)) {
      absl::StrAppend(&head, op.name(), operands.empty() ? "" : " ",
                      absl::StrJoin(operands, ", "));
    } else {
      std::string callee = op.Is(OpKind::kCall) ? absl::StrCat(" @", op.attrs().GetIdent("callee", ""))
                                                : "";
      absl::StrAppend(&head, op.name(), callee, "(", absl::StrJoin(operands, ", "), ")");
    }
    std::string attrs = Attributes(op);
    if (!attrs.empty()) absl::StrAppend(&head, "\n", attrs);
    if (op.num_results() > 0) {
      std::vector<Type> types;
      for (Value* result : op.results()) types.push_back(result->type());
      absl::StrAppend(&head, "\n: ", TypeList(types));
    }
    return head;
  }

  // ---- Blocks ---------------------------------------------------------------------

  void PrintBlock(const Block& block, int depth) {
    for (const Operation* op : block) {
      std::string id = NewNode();
      op_nodes_[op] = id;
      std::string style = op->def().Has(kTerminator) ? ", style=rounded" : "";
      Line(depth, absl::StrCat(id, " [label=", Quote(OpLabel(*op)), style, "];"));
      for (Value* operand : op->operands()) AddOperandEdge(operand, id, false);
      if (const Value* stream = op->stream_operand()) AddOperandEdge(stream, id, true);
      for (int r = 0; r < op->num_regions(); ++r) PrintRegion(*op, id, *op->region(r), depth);
      if (op->def().Has(kTerminator) && block.parent_op() != nullptr) {
        // The yield feeds the next iteration of its loop.
        AddEdge(id, op_nodes_.at(block.parent_op()),
                {"style=dashed", "label=\"next\"", "constraint=false"});
      }
    }
  }

  void PrintRegion(const Operation& op, const std::string& op_id, const Block& body, int depth) {
    Line(depth, absl::StrCat("subgraph cluster_", op_id, " {"));
    Line(depth + 1, absl::StrCat("label=", Quote(absl::StrCat("body of ", op.name())),
                                 ";"));
    Line(depth + 1, "style=dashed;");
    for (int i = 0; i < body.num_arguments(); ++i) {
      const Value* arg = body.argument(i);
      std::string id = NodeFor(arg);
      Line(depth + 1,
           absl::StrCat(id, " [shape=ellipse, label=",
                        Quote(absl::StrCat("%", Name(arg), ": ", arg->type().ToString())), "];"));
      AddEdge(op_id, id, {"style=dashed", i == 0 ? "label=\"index\"" : "label=\"iter\""});
    }
    PrintBlock(body, depth + 1);
    Line(depth, "}");
  }

  std::string& out_;
  std::string prefix_;
  int next_node_ = 0;
  absl::flat_hash_map<const Value*, std::string> names_;
  absl::flat_hash_set<std::string> used_;
  int next_number_ = 0;
  absl::flat_hash_map<const Value*, std::string> arg_nodes_;
  absl::flat_hash_map<const Operation*, std::string> op_nodes_;
  std::vector<std::string> edges_;
};

}  // namespace

std::string PrintDot(const Module& module) {
  std::string out = "digraph commir {\n  node [shape=box, fontname=\"monospace\"];\n";
  int index = 0;
  for (const Function* function : module.functions()) {
    DotPrinter(out).PrintFunction(*function, index++);
  }
  out += "}\n";
  return out;
}

}  // namespace commir
