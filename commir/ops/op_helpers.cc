#include "commir/ops/op_helpers.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_join.h"
#include "commir/mesh.h"

namespace commir::ops {

std::string FormatShape(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

absl::StatusOr<Type> TensorOperand(const OpSignature& sig, int i, absl::string_view role) {
  Type type = sig.operand_types[i];
  if (!type.is_tensor()) return OpError("%s must be a tensor, got %s", role, type.ToString());
  return type;
}

absl::Status IndexOperand(const OpSignature& sig, int i, absl::string_view role) {
  Type type = sig.operand_types[i];
  if (!type.is_index()) return OpError("%s must be an index, got %s", role, type.ToString());
  return absl::OkStatus();
}

absl::Status RequireFloat(Type type, absl::string_view role) {
  if (!IsFloatType(type.element_type())) {
    return OpError("%s must have a floating-point element type, got %s", role, type.ToString());
  }
  return absl::OkStatus();
}

absl::Status RequireSameElementType(Type a, Type b, absl::string_view what) {
  if (a.element_type() != b.element_type()) {
    return OpError("%s must have the same element type, got %s and %s", what,
                   ElementTypeName(a.element_type()), ElementTypeName(b.element_type()));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> NormalizeDim(int64_t dim, int64_t rank, absl::string_view attr) {
  int64_t normalized = dim < 0 ? dim + rank : dim;
  if (normalized < 0 || normalized >= rank) {
    return OpError("%s = %d is out of range for rank %d", attr, dim, rank);
  }
  return normalized;
}

absl::StatusOr<std::vector<int64_t>> BroadcastShapes(absl::Span<const int64_t> a,
                                                     absl::Span<const int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return OpError("shapes %s and %s do not broadcast", FormatShape(a), FormatShape(b));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

absl::StatusOr<int64_t> CollectiveGroupSize(const OpSignature& sig) {
  const Attribute* axis = sig.attrs.Find("axis");
  if (axis == nullptr) return OpError("missing attribute 'axis'");
  if (sig.mesh == nullptr) return OpError("a collective needs a mesh, and the function has none");
  AxisList axes = axis->axes();
  absl::flat_hash_set<std::string> seen;
  for (const std::string& name : axes) {
    if (!sig.mesh->AxisIndex(name)) {
      return OpError("mesh @%s has no axis '%s'", sig.mesh->name(), name);
    }
    if (!seen.insert(name).second) return OpError("axis '%s' appears twice in the group", name);
  }
  int64_t size = sig.mesh->GroupSize(axes);
  // Only an invalid mesh (reported by the verifier) gets here; never divide by it.
  if (size < 1 || !sig.mesh->IsWellFormed()) return OpError("mesh @%s is invalid", sig.mesh->name());
  return size;
}

absl::StatusOr<int64_t> CheckedDimMul(int64_t a, int64_t b) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) {
    return OpError("the result dimension %d * %d does not fit in 64 bits", a, b);
  }
  return product;
}

absl::StatusOr<int64_t> CheckedDimAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) {
    return OpError("the result dimension %d + %d does not fit in 64 bits", a, b);
  }
  return sum;
}

absl::StatusOr<Type> AnnotatedResult(const OpSignature& sig) {
  if (sig.annotated_results.size() != 1) return OpError("a result type must be written");
  return sig.annotated_results[0];
}

double ByteSize(Type type) {
  if (!type.is_tensor()) return 8;
  return static_cast<double>(type.num_elements()) * ElementTypeByteWidth(type.element_type());
}

double StreamingBytes(const OpSignature& sig, absl::Span<const Type> results) {
  double bytes = 0;
  for (Type t : sig.operand_types) bytes += ByteSize(t);
  for (Type t : results) bytes += ByteSize(t);
  return bytes;
}

}  // namespace commir::ops
