#include "python/ext/op_types.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commir/attribute.h"
#include "commir/element_type.h"
#include "commir/mesh.h"
#include "commir/op_def.h"
#include "commir/type.h"

namespace py = pybind11;

namespace commir::python {
namespace {

[[noreturn]] void RaiseOpError(const std::string& message) {
  py::object cls = py::module_::import("commir.errors").attr("OpError");
  PyErr_SetObject(cls.ptr(), cls(message).ptr());
  throw py::error_already_set();
}

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// A Python int as an int64, or an error naming `what` (Python ints are unbounded).
absl::StatusOr<int64_t> Int64(py::handle value, const std::string& what) {
  if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value)) {
    return Invalid(absl::StrCat(what, " must be an integer, not ", std::string(py::repr(value))));
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0)
    return Invalid(
        absl::StrCat(what, " ", std::string(py::str(value)), " does not fit in 64 bits"));
  return static_cast<int64_t>(v);
}

absl::StatusOr<std::vector<std::string>> Strings(py::handle value, const std::string& what) {
  if (!py::isinstance<py::list>(value) && !py::isinstance<py::tuple>(value)) {
    return Invalid(absl::StrCat(what, " must be a list of axis names"));
  }
  std::vector<std::string> out;
  for (py::handle item : value) {
    if (!py::isinstance<py::str>(item))
      return Invalid(absl::StrCat(what, " must be a list of axis names"));
    out.push_back(py::cast<std::string>(item));
  }
  return out;
}

absl::StatusOr<Type> TypeFromPython(py::handle value, const std::string& what) {
  if (py::isinstance<py::str>(value) && py::cast<std::string>(value) == "index")
    return Type::Index();
  if (!py::isinstance<py::tuple>(value) || py::len(value) != 4) {
    return Invalid(absl::StrCat(
        what, " must be \"index\" or (element type, dims, axes per dim, partial axes), not ",
        std::string(py::repr(value))));
  }
  py::tuple t = py::reinterpret_borrow<py::tuple>(value);
  if (!py::isinstance<py::str>(t[0]))
    return Invalid(absl::StrCat(what, ": the element type must be a string"));
  std::string element_name = py::cast<std::string>(t[0]);
  std::optional<ElementType> element = ParseElementType(element_name);
  if (!element.has_value())
    return Invalid(absl::StrCat(what, ": unknown element type '", element_name, "'"));
  if (!py::isinstance<py::list>(t[1]) && !py::isinstance<py::tuple>(t[1])) {
    return Invalid(absl::StrCat(what, ": dims must be a list of integers"));
  }
  std::vector<int64_t> dims;
  for (py::handle d : t[1]) {
    absl::StatusOr<int64_t> size = Int64(d, absl::StrCat(what, ": a dimension"));
    if (!size.ok()) return size.status();
    if (*size < 0) return Invalid(absl::StrCat(what, ": negative dimension ", *size));
    dims.push_back(*size);
  }
  std::vector<AxisList> dim_axes;
  if (!py::isinstance<py::list>(t[2]) && !py::isinstance<py::tuple>(t[2])) {
    return Invalid(absl::StrCat(what, ": the axes must be a list with one entry per dimension"));
  }
  for (py::handle axes : t[2]) {
    absl::StatusOr<std::vector<std::string>> names =
        Strings(axes, absl::StrCat(what, ": a dimension's axes"));
    if (!names.ok()) return names.status();
    dim_axes.push_back(*std::move(names));
  }
  if (!dim_axes.empty() && dim_axes.size() != dims.size()) {
    return Invalid(absl::StrFormat("%s: %d axis entries for a rank-%d tensor", what,
                                   dim_axes.size(), dims.size()));
  }
  absl::StatusOr<std::vector<std::string>> partial =
      Strings(t[3], absl::StrCat(what, ": the partial axes"));
  if (!partial.ok()) return partial.status();
  Type type = Type::Tensor(*element, std::move(dims), std::move(dim_axes), *std::move(partial));
  if (ElementCountOverflows(type)) {
    return Invalid(
        absl::StrCat(what, " ", type.ToString(), " has more elements than fit in 64 bits"));
  }
  return type;
}

py::object TypeToPython(Type type) {
  if (type.is_index()) return py::str("index");
  py::list dim_axes;
  for (const AxisList& axes : type.dim_axes()) dim_axes.append(py::cast(axes));
  return py::make_tuple(std::string(ElementTypeName(type.element_type())), py::cast(type.dims()),
                        dim_axes, py::cast(type.partial()));
}

// The mesh the op sees: a list of (axis, size), or None for a function without one.
absl::StatusOr<std::unique_ptr<Mesh>> MeshFromPython(const py::object& value) {
  if (value.is_none()) return std::unique_ptr<Mesh>();
  if (!py::isinstance<py::list>(value) && !py::isinstance<py::tuple>(value)) {
    return Invalid("the mesh must be a list of (axis, size) pairs");
  }
  std::vector<MeshAxis> axes;
  for (py::handle item : value) {
    if (!py::isinstance<py::tuple>(item) || py::len(item) != 2 ||
        !py::isinstance<py::str>(item[py::int_(0)])) {
      return Invalid("the mesh must be a list of (axis, size) pairs");
    }
    std::string name = py::cast<std::string>(item[py::int_(0)]);
    absl::StatusOr<int64_t> size =
        Int64(item[py::int_(1)], absl::StrCat("the size of mesh axis ", name));
    if (!size.ok()) return size.status();
    axes.push_back({name, *size, {}});
  }
  auto mesh = std::make_unique<Mesh>("builder", std::move(axes));
  // Group sizes are divided by and multiplied: only a mesh the verifier accepts is used.
  if (!mesh->IsWellFormed()) {
    return Invalid(
        "invalid mesh: every axis size must be at least 1, the names unique and the device count "
        "within 64 bits");
  }
  return mesh;
}

// An attribute value, read as the op's schema for `key` wants it (spec null: a key the
// op does not have, which ValidateAttributes reports).
absl::StatusOr<Attribute> AttributeFromPython(const AttrSpec* spec, const std::string& key,
                                              py::handle value) {
  std::string what = absl::StrCat("attribute '", key, "'");
  if (py::isinstance<py::bool_>(value)) return Attribute::Bool(py::cast<bool>(value));
  if (py::isinstance<py::int_>(value)) {
    absl::StatusOr<int64_t> v = Int64(value, what);
    if (!v.ok()) return v.status();
    return Attribute::Int(*v);
  }
  if (py::isinstance<py::float_>(value)) return Attribute::Float(py::cast<double>(value));
  if (py::isinstance<py::str>(value)) {
    std::string text = py::cast<std::string>(value);
    if (spec == nullptr) return Attribute::String(text);
    switch (spec->kind) {
      case AttrKind::kEnum:
      case AttrKind::kSymbol:
        return Attribute::Ident(text);
      case AttrKind::kAxes:
        return Attribute::Axes({text});
      default:
        return Attribute::String(text);
    }
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    if (spec != nullptr && spec->kind == AttrKind::kAxes) {
      absl::StatusOr<std::vector<std::string>> axes = Strings(value, what);
      if (!axes.ok()) return axes.status();
      return Attribute::Axes(*std::move(axes));
    }
    std::vector<Attribute> items;
    for (py::handle item : value) {
      absl::StatusOr<Attribute> a = AttributeFromPython(nullptr, key, item);
      if (!a.ok()) return a.status();
      items.push_back(*std::move(a));
    }
    return Attribute::List(std::move(items));
  }
  return Invalid(absl::StrCat(what, " cannot be ", std::string(py::repr(value))));
}

template <typename T>
T OrRaise(absl::StatusOr<T> value) {
  if (!value.ok()) RaiseOpError(std::string(value.status().message()));
  return *std::move(value);
}

}  // namespace

py::list InferOpResultTypes(const std::string& op, const py::list& operand_types,
                            const py::list& attrs, const py::list& result_types,
                            const py::object& mesh_axes, bool spmd, int num_results) {
  const OpDef* def = LookupOp(op);
  if (def == nullptr) RaiseOpError(absl::StrCat("unknown op '", op, "'"));
  // The verifier's context rule (OpBuilder leaves it to the verifier).
  if (def->Has(kSpmdOnly) && !spmd && !def->Has(kIndexOperands)) {
    RaiseOpError(absl::StrCat("'", op, "' is only valid in spmd functions"));
  }
  if (def->Has(kGlobalOnly) && spmd)
    RaiseOpError(absl::StrCat("'", op, "' is only valid in global functions"));
  std::unique_ptr<Mesh> mesh = OrRaise(MeshFromPython(mesh_axes));
  // Operands: values first, then the literals typed like the first value (the parser's rule).
  std::vector<Type> operands(operand_types.size());
  std::optional<Type> partner;
  bool has_literal = false;
  for (size_t i = 0; i < operand_types.size(); ++i) {
    if (operand_types[i].is_none()) {
      has_literal = true;
      continue;
    }
    operands[i] =
        OrRaise(TypeFromPython(operand_types[i], absl::StrFormat("%s: operand %d", op, i)));
    if (!partner.has_value()) partner = operands[i];
  }
  if (has_literal) {
    if (!def->Has(kAllowsLiteral))
      RaiseOpError(absl::StrCat("'", op, "' does not take number literals"));
    if (!partner.has_value())
      RaiseOpError(absl::StrCat("'", op, "' needs at least one operand that is a value"));
    Type literal = partner->is_index() ? Type::Index() : Type::Scalar(partner->element_type());
    for (size_t i = 0; i < operand_types.size(); ++i) {
      if (operand_types[i].is_none()) operands[i] = literal;
    }
  }
  AttrDict dict;
  for (py::handle entry : attrs) {
    if (!py::isinstance<py::tuple>(entry) || py::len(entry) != 2 ||
        !py::isinstance<py::str>(entry[py::int_(0)])) {
      RaiseOpError(absl::StrCat(op, ": attributes must be (key, value) pairs"));
    }
    std::string key = py::cast<std::string>(entry[py::int_(0)]);
    dict.Set(key, OrRaise(AttributeFromPython(def->FindAttr(key), key, entry[py::int_(1)])));
  }
  std::vector<Type> written;
  for (size_t i = 0; i < result_types.size(); ++i) {
    Type t = OrRaise(TypeFromPython(result_types[i], absl::StrFormat("%s: result type %d", op, i)));
    // What the verifier requires of a written result type before inference.
    if (spmd && t.is_tensor() && t.has_sharding()) {
      RaiseOpError(absl::StrFormat(
          "%s: %s: types in a spmd function body are per-device and carry no sharding", op,
          t.ToString()));
    }
    if (absl::Status s = ValidateLayout(t, mesh.get()); !s.ok()) {
      RaiseOpError(absl::StrCat(op, ": ", s.message()));
    }
    written.push_back(t);
  }
  // OpBuilder's checks, in its order and with its message prefix (the op's name).
  if (absl::Status s = ValidateAttributes(*def, dict, spmd); !s.ok()) {
    RaiseOpError(std::string(s.message()));
  }
  OpSignature sig{operands, dict, written, num_results, mesh.get(), spmd};
  absl::StatusOr<std::vector<Type>> inferred = InferResultTypes(*def, sig);
  if (!inferred.ok()) RaiseOpError(absl::StrCat(def->name, ": ", inferred.status().message()));
  py::list out;
  for (Type t : *inferred) out.append(TypeToPython(t));
  return out;
}

py::object LocalTensorType(const py::object& type, const py::object& mesh_axes) {
  std::unique_ptr<Mesh> mesh = OrRaise(MeshFromPython(mesh_axes));
  Type global = OrRaise(TypeFromPython(type, "the type"));
  if (absl::Status s = ValidateLayout(global, mesh.get()); !s.ok()) {
    RaiseOpError(absl::StrCat(global.ToString(), ": ", s.message()));
  }
  return TypeToPython(global.is_index() ? global : LocalType(global, mesh.get()));
}

}  // namespace commir::python
