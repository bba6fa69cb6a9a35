#include "commir/fingerprint.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace commir {
namespace {

// Writes the module as a byte string from which its structure can be read back: every
// variable-length part is length-prefixed, so different structures never encode alike.
class Encoder {
 public:
  Encoder() = default;
  // Values defined outside what is encoded, numbered by the caller.
  explicit Encoder(const ValueNumbers& outer) : outer_(&outer) {}

  // A top-level op without its results: they are the caller's to number.
  std::string EncodeOpAlone(const Operation& op) {
    EncodeOp(op, /*with_results=*/false);
    return std::move(out_);
  }

  std::string Encode(const Module& module) {
    for (const Module::Decl& decl : module.decls()) {
      if (decl.mesh != nullptr) {
        Tag('M');
        String(decl.mesh->name());
        Int(static_cast<int64_t>(decl.mesh->axes().size()));
        for (const MeshAxis& axis : decl.mesh->axes()) {
          String(axis.name);
          Int(axis.size);
        }
      } else {
        EncodeFunction(*decl.function);
      }
    }
    return std::move(out_);
  }

 private:
  void EncodeFunction(const Function& f) {
    Tag('F');
    String(f.name());
    Int(f.is_spmd() ? 1 : 0);
    // The mesh as the printer names it.
    String(f.mesh() != nullptr ? f.mesh()->name() : f.mesh_name());
    Int(static_cast<int64_t>(f.arg_types().size()));
    for (Type t : f.arg_types()) EncodeType(t);
    Int(static_cast<int64_t>(f.result_types().size()));
    for (Type t : f.result_types()) EncodeType(t);
    values_.clear();
    EncodeBlock(*f.body());
  }

  void EncodeBlock(const Block& block) {
    Tag('B');
    Int(block.num_arguments());
    for (int i = 0; i < block.num_arguments(); ++i) Define(block.argument(i));
    Int(static_cast<int64_t>(block.size()));
    for (const Operation* op : block) EncodeOp(*op, /*with_results=*/true);
  }

  void EncodeOp(const Operation& op, bool with_results) {
    Tag('O');
    String(op.name());
    Int(op.num_operands());
    for (const Value* operand : op.operands()) Use(operand);
    if (const Value* stream = op.stream_operand()) {
      Tag('S');
      Use(stream);
    } else {
      Tag('N');
    }
    // Attribute order carries no meaning (the printer writes the schema's order).
    std::vector<const AttrDict::Entry*> attrs;
    for (const AttrDict::Entry& entry : op.attrs().entries()) attrs.push_back(&entry);
    std::sort(attrs.begin(), attrs.end(),
              [](const AttrDict::Entry* x, const AttrDict::Entry* y) { return x->first < y->first; });
    Int(static_cast<int64_t>(attrs.size()));
    for (const AttrDict::Entry* entry : attrs) {
      String(entry->first);
      // Canonical text keeps kinds apart: 1 and 1.0, an identifier and a string.
      String(entry->second.ToString());
    }
    Int(op.num_regions());
    for (int r = 0; r < op.num_regions(); ++r) EncodeBlock(*op.region(r));
    if (!with_results) return;
    Int(op.num_results());
    for (int i = 0; i < op.num_results(); ++i) Define(op.result(i));
  }

  void Define(const Value* value) {
    EncodeType(value->type());
    values_.emplace(value, static_cast<int64_t>(values_.size()));
  }

  void Use(const Value* value) {
    if (value->is_literal()) {
      Tag('L');
      double number = value->literal_value();
      int64_t bits;
      std::memcpy(&bits, &number, sizeof bits);
      Int(bits);
      EncodeType(value->type());
      return;
    }
    if (auto it = values_.find(value); it != values_.end()) {
      Tag('V');
      Int(it->second);
      return;
    }
    if (outer_ != nullptr) {
      if (auto it = outer_->find(value); it != outer_->end()) {
        Tag('W');
        Int(it->second);
        return;
      }
    }
    // A value defined nowhere in the function (invalid IR) is told apart from every
    // defined one, though not from other undefined ones.
    Tag('U');
    Int(-1);
  }

  // Types are interned; each distinct one is written out once and then referred to by
  // the order of its first appearance.
  void EncodeType(Type type) {
    auto [it, added] = types_.emplace(type, static_cast<int64_t>(types_.size()));
    if (added) {
      Tag('T');
      String(type.is_null() ? std::string() : type.ToString());
    } else {
      Tag('t');
      Int(it->second);
    }
  }

  void Tag(char c) { out_.push_back(c); }
  void Int(int64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void String(absl::string_view s) {
    Int(static_cast<int64_t>(s.size()));
    out_.append(s.data(), s.size());
  }

  std::string out_;
  const ValueNumbers* outer_ = nullptr;
  ValueNumbers values_;
  absl::flat_hash_map<Type, int64_t> types_;
};

}  // namespace

std::string OpStructureKey(const Operation& op, const ValueNumbers& numbers) {
  return Encoder(numbers).EncodeOpAlone(op);
}

Fingerprint ModuleFingerprint(const Module& module) {
  std::string encoding = Encoder().Encode(module);
  return Fingerprint{absl::Hash<absl::string_view>()(encoding),
                     std::hash<std::string_view>()(std::string_view(encoding))};
}

}  // namespace commir
