// Host tensors: dense, row-major buffers of one element type.
//
// f16 and bf16 are stored in 16 bits (raw IEEE half / bfloat16 bits); kernels compute
// in f32 and round to nearest even when they store. i1 is one byte per element (0 or 1).
//
// A tensor may instead be device-resident: it then carries its element type and shape
// and a backend-owned DeviceStorage (e.g. GPU memory of the cuda backend), and has no
// host bytes. Only the backend that made it looks inside; the interpreter just moves
// it between ops, and Backend::ToHost turns it into a host tensor.
#ifndef COMMIR_RUNTIME_TENSOR_H_
#define COMMIR_RUNTIME_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "commir/element_type.h"

namespace commir::runtime {

// Backend-owned memory of a device-resident tensor. Destroying the last reference
// hands the memory back to its backend (which decides when it may be reused).
class DeviceStorage {
 public:
  virtual ~DeviceStorage() = default;
};

class Tensor {
 public:
  Tensor() = default;
  // A zero-filled tensor.
  Tensor(ElementType type, std::vector<int64_t> shape);
  // A device-resident tensor: metadata plus backend storage, no host bytes.
  static Tensor OnDevice(ElementType type, std::vector<int64_t> shape,
                         std::shared_ptr<DeviceStorage> storage);

  bool on_device() const { return storage_ != nullptr; }
  // The backend storage of a device-resident tensor (null for host tensors).
  DeviceStorage* device_storage() const { return storage_.get(); }
  // The same, shared: a view with another shape (reshape) shares the storage.
  const std::shared_ptr<DeviceStorage>& shared_storage() const { return storage_; }

  ElementType element_type() const { return type_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[i]; }
  int64_t num_elements() const { return num_elements_; }
  // Bytes of the elements, wherever they live.
  int64_t byte_size() const { return num_elements_ * ElementTypeByteWidth(type_); }

  // Host data; none of these may be used on a device-resident tensor (its bytes_ is
  // empty).
  void* raw_data() { return bytes_.data(); }
  const void* raw_data() const { return bytes_.data(); }
  // Typed view; T must match the storage (double, float, uint16_t for f16/bf16,
  // int64_t, int32_t, uint8_t for i1).
  template <typename T>
  T* data() { return reinterpret_cast<T*>(bytes_.data()); }
  template <typename T>
  const T* data() const { return reinterpret_cast<const T*>(bytes_.data()); }

  // Element access through double, for references, tests and printing. Set rounds to
  // the storage type (nearest even for f16/bf16/f32, nearest-even integer for ints,
  // saturating at the type's range with NaN -> 0, nonzero -> 1 for i1).
  double GetAsDouble(int64_t flat_index) const;
  void SetFromDouble(int64_t flat_index, double value);

  // Whole-tensor conversions. ToFloat/ToDouble widen every element; the From* factories
  // round to `type`.
  std::vector<float> ToFloat() const;
  std::vector<double> ToDouble() const;
  static Tensor FromFloat(ElementType type, std::vector<int64_t> shape,
                          absl::Span<const float> values);
  static Tensor FromDouble(ElementType type, std::vector<int64_t> shape,
                           absl::Span<const double> values);
  // Integer views, exact for every i64. ToInt64 rounds float elements like SetFromDouble
  // does (nearest even, saturating, NaN -> 0). FromInt64 rounds to nearest even for float
  // types, wraps modulo 2^32 for i32 (two's complement, like XLA and NumPy) and maps
  // nonzero to 1 for i1.
  std::vector<int64_t> ToInt64() const;
  static Tensor FromInt64(ElementType type, std::vector<int64_t> shape,
                          absl::Span<const int64_t> values);

  // Same element type and shape, byte-identical contents.
  bool BitwiseEqual(const Tensor& other) const;

  // "f32[2, 3]" style description for messages.
  std::string DebugTypeString() const;

 private:
  ElementType type_ = ElementType::kF32;
  std::vector<int64_t> shape_;
  int64_t num_elements_ = 0;
  std::vector<std::byte> bytes_;
  std::shared_ptr<DeviceStorage> storage_;
};

// Row-major strides (in elements) of a shape.
std::vector<int64_t> RowMajorStrides(absl::Span<const int64_t> shape);
int64_t NumElements(absl::Span<const int64_t> shape);

}  // namespace commir::runtime

#endif  // COMMIR_RUNTIME_TENSOR_H_
