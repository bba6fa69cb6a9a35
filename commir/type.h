// CommIR types (docs/language.md, "Types"): `index`, and tensors with an element type, a shape, a
// per-dimension sharding over mesh axes and an optional `partial(...)` suffix.
//
// Types are uniqued: a Type is a pointer to immutable storage owned by a process-wide
// table, so copies are free and equality is a pointer comparison. This matters for
// parsing and CSE of million-op programs.
#ifndef COMMIR_COMMIR_TYPE_H_
#define COMMIR_COMMIR_TYPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "commir/element_type.h"

namespace commir {

class Mesh;

// Mesh axes a dimension is split over, in order (first listed is major); empty means
// the dimension is not split.
using AxisList = std::vector<std::string>;

struct TypeStorage;

class Type {
 public:
  // The null type: no type (e.g. a value whose definition failed to parse).
  Type() = default;

  static Type Index();
  // `zigzag_dim` (-1: none) marks a split dimension laid out zigzag (see zigzag_dim()).
  static Type Tensor(ElementType element_type, std::vector<int64_t> dims,
                     std::vector<AxisList> dim_axes = {}, AxisList partial = {},
                     int64_t zigzag_dim = -1);
  // Tensor(element_type, dims) without building a vector of the dims when the type
  // exists already (the parser builds one type per op it reads).
  static Type UnshardedTensor(ElementType element_type, absl::Span<const int64_t> dims);
  // A rank-0 tensor.
  static Type Scalar(ElementType element_type) { return Tensor(element_type, {}); }

  bool is_null() const { return storage_ == nullptr; }
  bool is_index() const;
  bool is_tensor() const;

  // Tensor accessors (must be a tensor type).
  ElementType element_type() const;
  const std::vector<int64_t>& dims() const;
  int64_t rank() const { return static_cast<int64_t>(dims().size()); }
  // Product of the dims (saturated at the largest int64; see ElementCountOverflows).
  int64_t num_elements() const;
  // Axes of dimension `dim`; always sized rank() (empty lists for unsplit dims).
  const std::vector<AxisList>& dim_axes() const;
  const AxisList& partial() const;
  // Whether any dimension is split or the value is partial: a layout was written.
  bool has_sharding() const;
  // The dimension written `4096@sp zigzag`, or -1. Split over n devices it is cut into
  // 2n equal chunks and device c holds chunks c and 2n-1-c, in that order: the
  // load-balanced layout of causal sequence parallelism, as data loaders provide it.
  // Only signature types carry it (the verifier checks), and at most one dimension.
  int64_t zigzag_dim() const;
  // This type with `dim` marked zigzag (-1: the mark removed).
  Type WithZigzag(int64_t dim) const;

  Type WithoutSharding() const;
  Type WithElementType(ElementType element_type) const;
  // Same element type and sharding on the kept dims is not meaningful after a shape
  // change, so this drops all sharding.
  Type WithDims(std::vector<int64_t> dims) const;
  Type WithSharding(std::vector<AxisList> dim_axes, AxisList partial) const;

  // Same shape and element type (ignores sharding); index matches index.
  bool SameShapeAndElementType(Type other) const;

  std::string ToString() const;
  size_t hash() const;

  friend bool operator==(Type a, Type b) { return a.storage_ == b.storage_; }
  friend bool operator!=(Type a, Type b) { return a.storage_ != b.storage_; }
  template <typename H>
  friend H AbslHashValue(H h, Type type) {
    return H::combine(std::move(h), type.storage_);
  }

 private:
  explicit Type(const TypeStorage* storage) : storage_(storage) {}
  const TypeStorage* storage_ = nullptr;
};

// Checks the layout against `mesh` (null: no mesh): every axis exists, no axis appears
// twice in the type, every split dimension is divisible by the product of its axes'
// sizes, and a zigzag dimension is split and divisible by twice that product. The
// message names the first problem.
absl::Status ValidateLayout(Type type, const Mesh* mesh);

// The per-device type of a global type: split dimensions divided by their axes' sizes,
// sharding and partial dropped. The layout must be valid on `mesh`.
Type LocalType(Type global, const Mesh* mesh);

// Whether a tensor type's element count does not fit in an int64 (such a type is
// invalid: the parser and op inference reject it).
bool ElementCountOverflows(Type type);

// "(dp, tp)" or "tp" as written in types and attributes.
std::string FormatAxes(const AxisList& axes);

}  // namespace commir

#endif  // COMMIR_COMMIR_TYPE_H_
