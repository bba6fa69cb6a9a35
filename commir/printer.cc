#include "commir/printer.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commir/name_hash.h"

namespace commir {
namespace {

// Value names are not reference-checked in the IR, so the printer makes them unique
// within a function, keeping written names where it can. Only the names that differ
// from the written one (unnamed values, clashes) are stored; the others are read from
// the values themselves, which the taken-name set also points into (a module being
// printed does not change).
class NameTable {
 public:
  void Assign(const Function& function) {
    // About one name per top-level op: sized once instead of rehashed as it grows.
    used_.reserve(function.body()->num_arguments() + function.body()->size());
    for (int i = 0; i < function.body()->num_arguments(); ++i) Claim(function.body()->argument(i));
    AssignBlock(function.body());
  }
  // Calls `fn(value, name)` for each value printed under another name than its own.
  template <typename Fn>
  void ForEachRenamed(Fn&& fn) const {
    for (const auto& [value, name] : renamed_) fn(value, *name);
  }
  const std::string& Name(const Value* value) const {
    if (!renamed_.empty()) {
      auto it = renamed_.find(value);
      if (it != renamed_.end()) return *it->second;
    }
    return value->name();
  }

 private:
  void AssignBlock(const Block* block) {
    for (const Operation* op : *block) {
      for (int r = 0; r < op->num_regions(); ++r) {
        const Block* region = op->region(r);
        for (int i = 0; i < region->num_arguments(); ++i) Claim(region->argument(i));
      }
      for (int i = 0; i < op->num_results(); ++i) Claim(op->result(i));
      for (int r = 0; r < op->num_regions(); ++r) AssignBlock(op->region(r));
    }
  }

  void Claim(const Value* value) {
    const std::string& written = value->name();
    if (!written.empty() && used_.insert(&written).second) return;  // kept as written
    std::string name;
    if (written.empty()) {
      do name = absl::StrCat(next_number_++); while (used_.contains(name));
    } else {
      // Resume where the last clash of this name stopped: the suffixes below were taken
      // then and still are (names are never released), so the first free one is the
      // same as when counting from 1, without rescanning them (quadratic when thousands
      // of values share a name, as the loops of a schedule pass do).
      int& suffix = next_suffix_.try_emplace(written, 1).first->second;
      do name = absl::StrCat(written, "_", suffix++); while (used_.contains(name));
    }
    const std::string& stored = storage_.emplace_back(std::move(name));
    renamed_[value] = &stored;
    used_.insert(&stored);
  }

  // The names that differ from the written ones; a deque keeps them in place, as the
  // taken-name set points at them.
  std::deque<std::string> storage_;
  absl::flat_hash_map<const Value*, const std::string*> renamed_;
  // The taken names: pointers to the values' names and to storage_ (8-byte slots, a
  // third of a table of string_views), hashed and compared by the names.
  struct NameOf {
    static absl::string_view Get(const std::string* name) { return *name; }
    static absl::string_view Get(absl::string_view name) { return name; }
  };
  absl::flat_hash_set<const std::string*, NameKeyHash<NameOf>, NameKeyEq<NameOf>> used_;
  int next_number_ = 0;
  // Per written name, the next suffix to try when it clashes.
  absl::flat_hash_map<std::string, int> next_suffix_;
};

class Printer {
 public:
  explicit Printer(std::string& out) : out_(out) {}

  void PrintMesh(const Mesh& mesh) {
    absl::StrAppend(&out_, "mesh @", mesh.name(), "(");
    for (size_t i = 0; i < mesh.axes().size(); ++i) {
      if (i > 0) out_ += ", ";
      absl::StrAppend(&out_, mesh.axes()[i].name, "=", mesh.axes()[i].size);
    }
    out_ += ")\n";
  }

  void PrintFunction(const Function& function) {
    names_.Assign(function);
    if (function.is_spmd()) out_ += "spmd ";
    absl::StrAppend(&out_, "func @", function.name(), "(");
    for (int i = 0; i < function.body()->num_arguments(); ++i) {
      if (i > 0) out_ += ", ";
      absl::StrAppend(&out_, "%", names_.Name(function.body()->argument(i)), ": ",
                      function.arg_types()[i].ToString());
    }
    out_ += ") -> ";
    const std::vector<Type>& results = function.result_types();
    if (results.size() == 1) {
      out_ += results[0].ToString();
    } else {
      out_ += "(";
      for (size_t i = 0; i < results.size(); ++i) {
        if (i > 0) out_ += ", ";
        out_ += results[i].ToString();
      }
      out_ += ")";
    }
    if (function.mesh() != nullptr) {
      absl::StrAppend(&out_, " on @", function.mesh()->name());
    } else if (!function.mesh_name().empty()) {
      absl::StrAppend(&out_, " on @", function.mesh_name());
    }
    out_ += " {\n";
    PrintBlock(*function.body(), 1);
    out_ += "}\n";
  }

 private:
  void Indent(int depth) { out_.append(2 * depth, ' '); }

  void PrintOperand(const Value* value) {
    if (!value->is_literal()) {
      out_ += '%';
      out_ += names_.Name(value);
      return;
    }
    double v = value->literal_value();
    bool integral = value->type().is_index() ||
                    (value->type().is_tensor() && IsIntegerType(value->type().element_type()));
    // Whole numbers in the int64 range print as integers; anything else (invalid IR,
    // which the verifier reports) prints exactly rather than through a lossy or
    // undefined conversion.
    if (integral && v >= -9223372036854775808.0 && v < 9223372036854775808.0 &&
        std::trunc(v) == v) {
      absl::StrAppend(&out_, static_cast<int64_t>(v));
    } else {
      out_ += FormatFloat(v);
    }
  }

  void PrintAttributes(const Operation& op, bool skip_loop_bounds) {
    if (op.attrs().empty() && op.stream_operand() == nullptr) return;  // nothing to print
    std::vector<std::string> parts = AttributeEntries(
        op, skip_loop_bounds, [&](const Value* v) { return names_.Name(v); });
    if (!parts.empty()) absl::StrAppend(&out_, " {", absl::StrJoin(parts, ", "), "}");
  }

  // Type::ToString, memoized: a program uses few distinct types, many times each (and
  // mostly the type of the op before).
  const std::string& TypeText(Type type) {
    if (type == last_type_ && last_type_text_ != nullptr) return *last_type_text_;
    auto it = type_text_.find(type);
    if (it == type_text_.end()) it = type_text_.emplace(type, type.ToString()).first;
    last_type_ = type;
    last_type_text_ = &it->second;  // node_hash_map: stays in place
    return it->second;
  }

  void PrintResultTypes(const Operation& op) {
    if (op.num_results() == 0) return;
    out_ += " : ";
    if (op.num_results() == 1) {
      out_ += TypeText(op.result(0)->type());
      return;
    }
    out_ += "(";
    for (int i = 0; i < op.num_results(); ++i) {
      if (i > 0) out_ += ", ";
      out_ += TypeText(op.result(i)->type());
    }
    out_ += ")";
  }

  void PrintResults(const Operation& op) {
    if (op.num_results() == 0) return;
    for (int i = 0; i < op.num_results(); ++i) {
      if (i > 0) out_ += ", ";
      out_ += '%';
      out_ += names_.Name(op.result(i));
    }
    out_ += " = ";
  }

  void PrintFor(const Operation& op, int depth) {
    const Block& body = *op.region(0);
    absl::StrAppend(&out_, "for %", names_.Name(body.argument(0)), " = ",
                    op.attrs().GetInt("lower", 0), " to ", op.attrs().GetInt("upper", 0),
                    " step ", op.IntAttr("step"));
    if (op.num_operands() > 0) {
      out_ += " iter(";
      for (int i = 0; i < op.num_operands(); ++i) {
        if (i > 0) out_ += ", ";
        absl::StrAppend(&out_, "%", names_.Name(body.argument(i + 1)), " = ");
        PrintOperand(op.operand(i));
      }
      out_ += ")";
    }
    // Attributes other than the bounds (a stream, for example).
    std::vector<std::string> extra;
    for (const auto& [key, value] : op.attrs().entries()) {
      if (key != "lower" && key != "upper" && key != "step") extra.push_back(key);
    }
    if (!extra.empty() || op.stream_operand() != nullptr) PrintAttributes(op, true);
    out_ += " {\n";
    PrintBlock(body, depth + 1);
    Indent(depth);
    out_ += "}";
    PrintResultTypes(op);
    out_ += "\n";
  }

  void PrintOp(const Operation& op, int depth) {
    Indent(depth);
    PrintResults(op);
    if (op.Is(OpKind::kFor)) {
      PrintFor(op, depth);
      return;
    }
    out_.append(op.name().data(), op.name().size());
    if (op.Is(OpKind::kCall)) {
      // `call @f(...)`: the callee is printed as a symbol, not in the attributes.
      out_ += " @";
      if (const Attribute* callee = op.attrs().Find("callee")) out_ += callee->string_value();
    }
    if (op.def().Has(kTerminator)) {
      for (int i = 0; i < op.num_operands(); ++i) {
        out_ += i == 0 ? " " : ", ";
        PrintOperand(op.operand(i));
      }
      out_ += "\n";
      return;
    }
    out_ += "(";
    for (int i = 0; i < op.num_operands(); ++i) {
      if (i > 0) out_ += ", ";
      PrintOperand(op.operand(i));
    }
    out_ += ")";
    PrintAttributes(op, false);
    PrintResultTypes(op);
    out_ += "\n";
  }

  void PrintBlock(const Block& block, int depth) {
    for (const Operation* op : block) PrintOp(*op, depth);
  }

  std::string& out_;
  NameTable names_;
  absl::node_hash_map<Type, std::string> type_text_;
  Type last_type_;
  const std::string* last_type_text_ = nullptr;
};

}  // namespace

void NameValuesAsPrinted(Function& function) {
  // Collected first: the table points into the names being replaced.
  std::vector<std::pair<Value*, std::string>> renamed;
  {
    NameTable names;
    names.Assign(function);
    names.ForEachRenamed([&](const Value* value, const std::string& name) {
      // The table only reads; the function it read is ours to change.
      renamed.emplace_back(const_cast<Value*>(value), name);
    });
  }
  for (auto& [value, name] : renamed) value->set_name(std::move(name));
}

std::string PrintModule(const Module& module) {
  std::string out;
  // Room for the whole text up front (growing a string of many megabytes copies it
  // each time; untouched reserved pages cost no memory): top-level ops rarely take
  // more than 64 bytes a line.
  size_t top_level_ops = 0;
  for (const Module::Decl& decl : module.decls()) {
    if (decl.function != nullptr) top_level_ops += decl.function->body()->size();
  }
  out.reserve(64 * top_level_ops + 4096);
  Printer printer(out);
  bool first = true;
  const Module::Decl* previous = nullptr;
  for (const Module::Decl& decl : module.decls()) {
    // Consecutive meshes stay together; everything else is separated by a blank line.
    bool grouped_mesh = previous != nullptr && previous->mesh != nullptr && decl.mesh != nullptr;
    if (!first && !grouped_mesh) out += "\n";
    first = false;
    if (decl.mesh != nullptr) {
      printer.PrintMesh(*decl.mesh);
    } else {
      Printer(out).PrintFunction(*decl.function);
    }
    previous = &decl;
  }
  return out;
}

std::string PrintFunction(const Function& function) {
  std::string out;
  Printer(out).PrintFunction(function);
  return out;
}

std::vector<std::string> AttributeEntries(const Operation& op, bool skip_loop_bounds,
                                          absl::FunctionRef<std::string(const Value*)> value_name) {
  std::vector<std::string> parts;
  auto append = [&](absl::string_view key, const Attribute& value) {
    if (value.kind() == Attribute::Kind::kBool && value.bool_value()) {
      parts.push_back(std::string(key));
    } else {
      parts.push_back(absl::StrCat(key, " = ", value.ToString()));
    }
  };
  if (!skip_loop_bounds) {
    for (const AttrSpec& spec : op.def().attrs) {
      // A symbol (call's callee) is printed in the op's own syntax, `call @f(...)`.
      if (spec.kind == AttrKind::kSymbol) continue;
      if (const Attribute* value = op.attrs().Find(spec.name)) append(spec.name, *value);
    }
  }
  std::vector<std::string> unknown;
  for (const auto& [key, value] : op.attrs().entries()) {
    if (key != "stream" && op.def().FindAttr(key) == nullptr) unknown.push_back(key);
  }
  std::sort(unknown.begin(), unknown.end());
  for (const std::string& key : unknown) append(key, *op.attrs().Find(key));
  if (const Value* stream = op.stream_operand()) {
    parts.push_back(absl::StrCat("stream = %", value_name(stream)));
  } else if (const Attribute* value = op.attrs().Find("stream")) {
    append("stream", *value);
  }
  return parts;
}

}  // namespace commir
