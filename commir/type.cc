#include "commir/type.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commir/mesh.h"

namespace commir {

struct TypeStorage {
  bool is_index = false;
  ElementType element_type = ElementType::kF32;
  std::vector<int64_t> dims;
  std::vector<AxisList> dim_axes;
  AxisList partial;
  int64_t zigzag_dim = -1;
  int64_t num_elements = 1;
  bool has_sharding = false;

  friend bool operator==(const TypeStorage& a, const TypeStorage& b) {
    return a.is_index == b.is_index && a.element_type == b.element_type &&
           a.dims == b.dims && a.dim_axes == b.dim_axes && a.partial == b.partial &&
           a.zigzag_dim == b.zigzag_dim;
  }
  template <typename H>
  friend H AbslHashValue(H h, const TypeStorage& s) {
    return H::combine(std::move(h), s.is_index, s.element_type, s.dims, s.dim_axes, s.partial,
                      s.zigzag_dim);
  }
};

namespace {

// Key of the lookaside table for unsharded tensor types of small rank (nearly every
// type a program builds): element type and dims, without building a TypeStorage.
struct UnshardedKey {
  static constexpr size_t kMaxRank = 6;
  ElementType element_type;
  uint8_t rank;
  int64_t dims[kMaxRank] = {};

  UnshardedKey(ElementType type, absl::Span<const int64_t> shape)
      : element_type(type), rank(static_cast<uint8_t>(shape.size())) {
    std::copy(shape.begin(), shape.end(), dims);
  }
  friend bool operator==(const UnshardedKey& a, const UnshardedKey& b) {
    return a.element_type == b.element_type && a.rank == b.rank &&
           std::equal(a.dims, a.dims + a.rank, b.dims);
  }
  template <typename H>
  friend H AbslHashValue(H h, const UnshardedKey& k) {
    return H::combine_contiguous(H::combine(std::move(h), k.element_type, k.rank), k.dims,
                                 k.rank);
  }
};

// The process-wide uniquing table. node_hash_set keeps element addresses stable.
// std::mutex rather than absl::Mutex: this lock is taken for every type built (several
// per parsed op), and Debian's Abseil runs absl::Mutex's deadlock detection (a global
// graph update) on each acquisition.
class TypeTable {
 public:
  const TypeStorage* Intern(TypeStorage storage) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = storages_.insert(std::move(storage)).first;
    return &*it;
  }

  // The interned unsharded type for `key`, or null if it has not been built yet.
  const TypeStorage* FindUnsharded(const UnshardedKey& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = unsharded_.find(key);
    return it == unsharded_.end() ? nullptr : it->second;
  }
  void RememberUnsharded(const UnshardedKey& key, const TypeStorage* storage) {
    std::lock_guard<std::mutex> lock(mutex_);
    unsharded_.emplace(key, storage);
  }

 private:
  std::mutex mutex_;
  absl::node_hash_set<TypeStorage> storages_;
  // A cache in front of storages_ (same pointers).
  absl::flat_hash_map<UnshardedKey, const TypeStorage*> unsharded_;
};

TypeTable& Table() {
  static TypeTable* table = new TypeTable();  // never destroyed: types outlive main
  return *table;
}

}  // namespace

Type Type::Index() {
  static const TypeStorage* index = [] {
    TypeStorage storage;
    storage.is_index = true;
    return Table().Intern(std::move(storage));
  }();
  return Type(index);
}

Type Type::Tensor(ElementType element_type, std::vector<int64_t> dims,
                  std::vector<AxisList> dim_axes, AxisList partial, int64_t zigzag_dim) {
  // Fast path: an unsharded type already built (dim_axes entries past the rank are
  // ignored, as the resize below drops them).
  bool unsharded = partial.empty() && zigzag_dim < 0;
  for (size_t d = 0; d < dim_axes.size() && d < dims.size(); ++d) {
    unsharded &= dim_axes[d].empty();
  }
  std::optional<UnshardedKey> key;
  if (unsharded && dims.size() <= UnshardedKey::kMaxRank) {
    key.emplace(element_type, dims);
    if (const TypeStorage* storage = Table().FindUnsharded(*key)) return Type(storage);
  }
  TypeStorage storage;
  storage.element_type = element_type;
  storage.zigzag_dim = zigzag_dim < 0 ? -1 : zigzag_dim;
  dim_axes.resize(dims.size());
  for (int64_t d : dims) {
    // Saturate rather than overflow; ElementCountOverflows() reports such a type.
    if (__builtin_mul_overflow(storage.num_elements, d, &storage.num_elements)) {
      storage.num_elements = std::numeric_limits<int64_t>::max();
    }
  }
  bool sharded = !partial.empty();
  for (const AxisList& axes : dim_axes) sharded |= !axes.empty();
  storage.has_sharding = sharded;
  storage.dims = std::move(dims);
  storage.dim_axes = std::move(dim_axes);
  storage.partial = std::move(partial);
  const TypeStorage* interned = Table().Intern(std::move(storage));
  if (key.has_value()) Table().RememberUnsharded(*key, interned);
  return Type(interned);
}

Type Type::UnshardedTensor(ElementType element_type, absl::Span<const int64_t> dims) {
  if (dims.size() <= UnshardedKey::kMaxRank) {
    if (const TypeStorage* storage = Table().FindUnsharded(UnshardedKey(element_type, dims))) {
      return Type(storage);
    }
  }
  return Tensor(element_type, std::vector<int64_t>(dims.begin(), dims.end()));
}

bool Type::is_index() const { return storage_ != nullptr && storage_->is_index; }
bool Type::is_tensor() const { return storage_ != nullptr && !storage_->is_index; }
ElementType Type::element_type() const { return storage_->element_type; }
const std::vector<int64_t>& Type::dims() const { return storage_->dims; }
int64_t Type::num_elements() const { return storage_->num_elements; }
const std::vector<AxisList>& Type::dim_axes() const { return storage_->dim_axes; }
const AxisList& Type::partial() const { return storage_->partial; }
bool Type::has_sharding() const { return storage_ != nullptr && storage_->has_sharding; }
int64_t Type::zigzag_dim() const { return is_tensor() ? storage_->zigzag_dim : -1; }

Type Type::WithZigzag(int64_t dim) const {
  return Tensor(element_type(), dims(), dim_axes(), partial(), dim);
}

Type Type::WithoutSharding() const {
  if (!is_tensor() || !has_sharding()) return *this;
  return Tensor(element_type(), dims());
}

Type Type::WithElementType(ElementType new_type) const {
  return Tensor(new_type, dims(), dim_axes(), partial(), zigzag_dim());
}

Type Type::WithDims(std::vector<int64_t> new_dims) const {
  return Tensor(element_type(), std::move(new_dims));
}

Type Type::WithSharding(std::vector<AxisList> new_dim_axes, AxisList new_partial) const {
  return Tensor(element_type(), dims(), std::move(new_dim_axes), std::move(new_partial));
}

bool Type::SameShapeAndElementType(Type other) const {
  if (is_null() || other.is_null()) return false;
  if (is_index() || other.is_index()) return is_index() && other.is_index();
  return element_type() == other.element_type() && dims() == other.dims();
}

bool ElementCountOverflows(Type type) {
  if (!type.is_tensor()) return false;
  for (int64_t d : type.dims()) {
    if (d == 0) return false;
  }
  int64_t n = 1;
  for (int64_t d : type.dims()) {
    if (__builtin_mul_overflow(n, d, &n)) return true;
  }
  return false;
}

size_t Type::hash() const { return absl::HashOf(storage_); }

std::string FormatAxes(const AxisList& axes) {
  if (axes.size() == 1) return axes[0];
  return absl::StrCat("(", absl::StrJoin(axes, ", "), ")");
}

std::string Type::ToString() const {
  if (is_null()) return "<<null type>>";
  if (is_index()) return "index";
  std::string out = absl::StrCat(ElementTypeName(element_type()), "[");
  for (size_t i = 0; i < dims().size(); ++i) {
    if (i > 0) out += ", ";
    absl::StrAppend(&out, dims()[i]);
    if (!dim_axes()[i].empty()) absl::StrAppend(&out, "@", FormatAxes(dim_axes()[i]));
    if (static_cast<int64_t>(i) == zigzag_dim()) out += " zigzag";
  }
  out += "]";
  if (!partial().empty()) absl::StrAppend(&out, " partial(", absl::StrJoin(partial(), ", "), ")");
  return out;
}

absl::Status ValidateLayout(Type type, const Mesh* mesh) {
  if (!type.is_tensor()) return absl::OkStatus();
  if (int64_t z = type.zigzag_dim(); z >= 0) {
    if (z >= type.rank() || type.dim_axes()[z].empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "type %s: 'zigzag' marks a dimension that is not split over mesh axes",
          type.ToString()));
    }
  }
  if (!type.has_sharding()) return absl::OkStatus();
  absl::flat_hash_set<std::string> seen;
  auto check_axis = [&](const std::string& axis) -> absl::Status {
    if (mesh == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "type %s names mesh axis '%s' but the function has no mesh", type.ToString(), axis));
    }
    if (!mesh->AxisIndex(axis)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "type %s names axis '%s', which mesh @%s does not have", type.ToString(), axis,
          mesh->name()));
    }
    if (!seen.insert(axis).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("type %s uses axis '%s' more than once", type.ToString(), axis));
    }
    return absl::OkStatus();
  };
  for (size_t d = 0; d < type.dims().size(); ++d) {
    const AxisList& axes = type.dim_axes()[d];
    for (const std::string& axis : axes) {
      if (absl::Status s = check_axis(axis); !s.ok()) return s;
    }
    if (axes.empty()) continue;
    int64_t parts = mesh->GroupSize(axes);
    if (parts < 1) {  // an axis of size < 1: the verifier reports the mesh
      return absl::InvalidArgumentError(absl::StrFormat(
          "type %s: mesh @%s has an axis of size < 1", type.ToString(), mesh->name()));
    }
    if (type.dims()[d] % parts != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "type %s: dimension %d of size %d is not divisible by %d, the number of devices "
          "along %s",
          type.ToString(), d, type.dims()[d], parts, FormatAxes(axes)));
    }
    if (static_cast<int64_t>(d) == type.zigzag_dim() && type.dims()[d] % (2 * parts) != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "type %s: zigzag dimension %d of size %d is not divisible by %d, twice the number "
          "of devices along %s (each holds two chunks)",
          type.ToString(), d, type.dims()[d], 2 * parts, FormatAxes(axes)));
    }
  }
  for (const std::string& axis : type.partial()) {
    if (absl::Status s = check_axis(axis); !s.ok()) return s;
  }
  return absl::OkStatus();
}

Type LocalType(Type global, const Mesh* mesh) {
  if (!global.is_tensor() || !global.has_sharding()) return global;
  std::vector<int64_t> dims = global.dims();
  for (size_t d = 0; d < dims.size(); ++d) {
    const AxisList& axes = global.dim_axes()[d];
    if (axes.empty() || mesh == nullptr) continue;
    int64_t parts = mesh->GroupSize(axes);
    if (parts >= 1) dims[d] /= parts;
  }
  return Type::Tensor(global.element_type(), std::move(dims));
}

}  // namespace commir
