// Host tensors: dense, row-major buffers of one element type.
//
// f16 and bf16 are stored in 16 bits (raw IEEE half / bfloat16 bits); kernels compute
// in f32 and round to nearest even when they store. i1 is one byte per element (0 or 1).
#ifndef COMMIR_RUNTIME_TENSOR_H_
#define COMMIR_RUNTIME_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "commir/element_type.h"

namespace commir::runtime {

class Tensor {
 public:
  Tensor() = default;
  // A zero-filled tensor.
  Tensor(ElementType type, std::vector<int64_t> shape);

  ElementType element_type() const { return type_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[i]; }
  int64_t num_elements() const { return num_elements_; }
  int64_t byte_size() const { return static_cast<int64_t>(bytes_.size()); }

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
};

// Row-major strides (in elements) of a shape.
std::vector<int64_t> RowMajorStrides(absl::Span<const int64_t> shape);
int64_t NumElements(absl::Span<const int64_t> shape);

}  // namespace commir::runtime

#endif  // COMMIR_RUNTIME_TENSOR_H_
