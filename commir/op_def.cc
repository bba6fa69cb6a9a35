#include "commir/op_def.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commir/check.h"
#include "commir/ops/gather_ops.h"
#include "commir/ops/moe_ops.h"
#include "commir/ops/op_helpers.h"

namespace commir {

const AttrSpec* OpDef::FindAttr(absl::string_view attr_name) const {
  for (const AttrSpec& spec : attrs) {
    if (spec.name == attr_name) return &spec;
  }
  return nullptr;
}

const Attribute& OpDef::DefaultAttr(absl::string_view attr_name) const {
  const AttrSpec* spec = FindAttr(attr_name);
  COMMIR_CHECK(spec != nullptr, "the op's spec has no such attribute");
  COMMIR_CHECK(spec->default_value.has_value(), "the attribute's spec has no default");
  return *spec->default_value;
}

// A value of the wrong kind reads as the default, as AttrDict's getters do: inference
// runs on unverified attributes and reports its own errors.
int64_t OpDef::IntAttr(const AttrDict& attrs, absl::string_view attr_name) const {
  const Attribute* value = attrs.Find(attr_name);
  return value != nullptr && value->is_int() ? value->int_value()
                                             : DefaultAttr(attr_name).int_value();
}

double OpDef::NumberAttr(const AttrDict& attrs, absl::string_view attr_name) const {
  const Attribute* value = attrs.Find(attr_name);
  return value != nullptr && value->is_number() ? value->number_value()
                                                : DefaultAttr(attr_name).number_value();
}

bool OpDef::BoolAttr(const AttrDict& attrs, absl::string_view attr_name) const {
  const Attribute* value = attrs.Find(attr_name);
  return value != nullptr && value->kind() == Attribute::Kind::kBool
             ? value->bool_value()
             : DefaultAttr(attr_name).bool_value();
}

const std::string& OpDef::EnumAttr(const AttrDict& attrs, absl::string_view attr_name) const {
  const Attribute* value = attrs.Find(attr_name);
  return value != nullptr && value->kind() == Attribute::Kind::kIdent
             ? value->string_value()
             : DefaultAttr(attr_name).string_value();
}

const Attribute& OpDef::RequiredAttr(const AttrDict& attrs, absl::string_view attr_name) const {
  const AttrSpec* spec = FindAttr(attr_name);
  COMMIR_CHECK(spec != nullptr, "the op's spec has no such attribute");
  COMMIR_CHECK(spec->required, "the attribute is optional: read it with its default");
  const Attribute* value = attrs.Find(attr_name);
  COMMIR_CHECK(value != nullptr, "a required attribute is missing (the op was not verified)");
  return *value;
}

int64_t OpDef::RequiredIntAttr(const AttrDict& attrs, absl::string_view attr_name) const {
  const Attribute& value = RequiredAttr(attrs, attr_name);
  COMMIR_CHECK(value.is_int(), "a required integer attribute is not an integer");
  return value.int_value();
}

double OpDef::RequiredNumberAttr(const AttrDict& attrs, absl::string_view attr_name) const {
  const Attribute& value = RequiredAttr(attrs, attr_name);
  COMMIR_CHECK(value.is_number(), "a required number attribute is not a number");
  return value.number_value();
}

std::vector<int64_t> OpDef::RequiredIntListAttr(const AttrDict& attrs,
                                                absl::string_view attr_name) const {
  std::optional<std::vector<int64_t>> list = RequiredAttr(attrs, attr_name).int_list();
  COMMIR_CHECK(list.has_value(), "a required integer-list attribute is not a list of integers");
  return *std::move(list);
}

const std::string& OpDef::RequiredEnumAttr(const AttrDict& attrs,
                                          absl::string_view attr_name) const {
  const Attribute& value = RequiredAttr(attrs, attr_name);
  COMMIR_CHECK(value.kind() == Attribute::Kind::kIdent,
               "a required enum attribute is not an identifier");
  return value.string_value();
}

namespace {

struct Registry {
  std::vector<OpDef> defs;
  std::vector<const OpDef*> by_kind;
  absl::flat_hash_map<absl::string_view, const OpDef*> by_name;
};

const Registry& GetRegistry() {
  static const Registry* registry = [] {
    auto* r = new Registry();
    ops::AppendElementwiseOps(r->defs);
    ops::AppendLinalgOps(r->defs);
    ops::AppendAttentionMergeOps(r->defs);
    ops::AppendNormalizationOps(r->defs);
    ops::AppendLayoutOps(r->defs);
    ops::AppendGatherOps(r->defs);
    ops::AppendLossOps(r->defs);
    ops::AppendSpmdOps(r->defs);
    ops::AppendTerminatorOps(r->defs);
    ops::AppendCallOps(r->defs);
    ops::AppendDropoutOps(r->defs);
    ops::AppendTopKOps(r->defs);
    ops::AppendMoeOps(r->defs);
    std::sort(r->defs.begin(), r->defs.end(),
              [](const OpDef& a, const OpDef& b) { return a.kind < b.kind; });
    for (size_t i = 0; i < r->defs.size(); ++i) {
      COMMIR_CHECK(static_cast<size_t>(r->defs[i].kind) == i,
                   "every OpKind needs exactly one OpDef");
      r->by_kind.push_back(&r->defs[i]);
      r->by_name[r->defs[i].name] = &r->defs[i];
    }
    return r;
  }();
  return *registry;
}

absl::string_view AttrKindName(AttrKind kind) {
  switch (kind) {
    case AttrKind::kInt: return "an integer";
    case AttrKind::kNumber: return "a number";
    case AttrKind::kBool: return "true or false";
    case AttrKind::kEnum: return "one of";
    case AttrKind::kIntList: return "a list of integers";
    case AttrKind::kAxes: return "a mesh axis or an axis group like (dp, tp)";
    case AttrKind::kSymbol: return "a function name";
  }
  return "";
}

bool AttrMatchesKind(const AttrSpec& spec, const Attribute& value) {
  switch (spec.kind) {
    case AttrKind::kInt: return value.kind() == Attribute::Kind::kInt;
    case AttrKind::kNumber: return value.is_number();
    case AttrKind::kBool: return value.kind() == Attribute::Kind::kBool;
    case AttrKind::kEnum:
      return value.kind() == Attribute::Kind::kIdent &&
             std::find(spec.enum_values.begin(), spec.enum_values.end(),
                       value.string_value()) != spec.enum_values.end();
    case AttrKind::kIntList: return value.int_list().has_value();
    case AttrKind::kAxes:
      return value.kind() == Attribute::Kind::kIdent || value.kind() == Attribute::Kind::kAxes;
    case AttrKind::kSymbol: return value.kind() == Attribute::Kind::kIdent;
  }
  return false;
}

}  // namespace

const OpDef* LookupOp(absl::string_view name) {
  const Registry& r = GetRegistry();
  auto it = r.by_name.find(name);
  return it == r.by_name.end() ? nullptr : it->second;
}

const OpDef& GetOpDef(OpKind kind) { return *GetRegistry().by_kind[static_cast<size_t>(kind)]; }

const std::vector<const OpDef*>& AllOpDefs() { return GetRegistry().by_kind; }

absl::Status ValidateAttributes(const OpDef& def, const AttrDict& attrs, bool in_spmd) {
  for (const auto& [key, value] : attrs.entries()) {
    if (key == "stream") {
      if (!in_spmd) return ops::OpError("'stream' is only valid in spmd functions");
      if (!value.is_int() || value.int_value() < 0) {
        return ops::OpError("'stream' must be a non-negative integer or an index value");
      }
      continue;
    }
    if (key == kRematAttr) {
      // Marks an op autodiff{remat=...} recomputed in the backward (the block it
      // recomputes): CSE then keeps it apart from its forward twin.
      if (!value.is_int() || value.int_value() < 0) {
        return ops::OpError("'%s' must be a non-negative integer (a block index)", kRematAttr);
      }
      continue;
    }
    const AttrSpec* spec = def.FindAttr(key);
    if (spec == nullptr) {
      std::vector<absl::string_view> known;
      for (const AttrSpec& s : def.attrs) known.push_back(s.name);
      return ops::OpError("'%s' has no attribute '%s'%s", def.name, key,
                          known.empty() ? std::string(" (it takes none)")
                                        : absl::StrCat(" (known: ", absl::StrJoin(known, ", "), ")"));
    }
    if (!AttrMatchesKind(*spec, value)) {
      std::string expected(AttrKindName(spec->kind));
      if (spec->kind == AttrKind::kEnum) {
        absl::StrAppend(&expected, " ", absl::StrJoin(spec->enum_values, ", "));
      }
      return ops::OpError("attribute '%s' must be %s, got %s", key, expected, value.ToString());
    }
  }
  for (const AttrSpec& spec : def.attrs) {
    if (spec.required && !attrs.Has(spec.name)) {
      return ops::OpError("'%s' needs attribute '%s'", def.name, spec.name);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Type>> InferResultTypes(const OpDef& def, const OpSignature& sig) {
  int n = static_cast<int>(sig.operand_types.size());
  if (n < def.min_operands || (def.max_operands >= 0 && n > def.max_operands)) {
    std::string expected =
        def.max_operands < 0 ? absl::StrFormat("at least %d", def.min_operands)
        : def.min_operands == def.max_operands
            ? absl::StrFormat("%d", def.min_operands)
            : absl::StrFormat("%d to %d", def.min_operands, def.max_operands);
    // "1 operand", "at least 1 operand", but "1 to 3 operands".
    bool singular = def.max_operands == 1 || (def.max_operands < 0 && def.min_operands == 1);
    return ops::OpError("'%s' takes %s operand%s, got %d", def.name, expected,
                        singular ? "" : "s", n);
  }
  for (Type t : sig.operand_types) {
    if (t.is_null()) return ops::OpError("operand has no type");
  }
  if (sig.num_results < def.min_results ||
      (def.max_results >= 0 && sig.num_results > def.max_results)) {
    return ops::OpError("'%s' produces %s result%s, not %d", def.name,
                        def.min_results == def.max_results
                            ? absl::StrFormat("%d", def.min_results)
                            : absl::StrFormat("%d to %d", def.min_results, def.max_results),
                        def.max_results == 1 ? "" : "s", sig.num_results);
  }
  if (def.Has(kResultTypeRequired) && sig.annotated_results.empty()) {
    return ops::OpError("'%s' needs its result type written (': TYPE')", def.name);
  }
  absl::StatusOr<std::vector<Type>> inferred = def.infer(sig);
  if (!inferred.ok()) return inferred.status();
  // A zigzag layout is declared in signatures only: op results (even a neg of a zigzag
  // argument) never carry the mark, so that body types stay what users may write.
  for (Type& t : *inferred) {
    if (t.zigzag_dim() >= 0) t = t.WithZigzag(-1);
  }
  for (Type t : *inferred) {
    if (ElementCountOverflows(t)) {
      return ops::OpError("the result %s has more elements than fit in 64 bits",
                          t.WithoutSharding().ToString());
    }
  }
  if (sig.annotated_results.empty()) return inferred;
  if (sig.annotated_results.size() != inferred->size()) {
    return ops::OpError("%d result type%s written for %d result%s",
                        sig.annotated_results.size(), sig.annotated_results.size() == 1 ? "" : "s",
                        inferred->size(), inferred->size() == 1 ? "" : "s");
  }
  for (size_t i = 0; i < sig.annotated_results.size(); ++i) {
    Type written = sig.annotated_results[i];
    Type expected = (*inferred)[i];
    bool element_type_free = def.kind == OpKind::kMatmul;
    bool shape_matches = written.is_index() == expected.is_index() &&
                         (written.is_index() || written.dims() == expected.dims());
    bool element_matches = written.is_index() || element_type_free ||
                           written.element_type() == expected.element_type();
    if (!shape_matches || !element_matches) {
      return ops::OpError("result type %s does not match the inferred type %s", written.ToString(),
                          expected.WithoutSharding().ToString());
    }
  }
  // The written types win (they may carry a sharding); reuse the inferred vector.
  std::vector<Type> results = *std::move(inferred);
  std::copy(sig.annotated_results.begin(), sig.annotated_results.end(), results.begin());
  return results;
}

}  // namespace commir
