// Moving tensor contents into and out of the arithmetic type a kernel computes in.
//
// Kernels compute f64 tensors in double, every other float type in float (f16/bf16 are
// widened exactly and rounded to nearest even once, when stored), and integer types in
// int64_t. `ComputeFloat<double>` etc. keep that choice in one place.
#ifndef COMMIR_RUNTIME_COMPUTE_VALUES_H_
#define COMMIR_RUNTIME_COMPUTE_VALUES_H_

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "commir/element_type.h"
#include "runtime/tensor.h"

namespace commir::runtime {

// Every element of `tensor` converted to T (float, double or int64_t).
template <typename T>
std::vector<T> LoadAs(const runtime::Tensor& tensor) {
  if constexpr (std::is_same_v<T, float>) {
    return tensor.ToFloat();
  } else if constexpr (std::is_same_v<T, double>) {
    return tensor.ToDouble();
  } else {
    static_assert(std::is_same_v<T, int64_t>, "LoadAs supports float, double and int64_t");
    return tensor.ToInt64();
  }
}

// A tensor of `type` holding `values`, each rounded to the storage type once.
template <typename T>
runtime::Tensor StoreAs(ElementType type, std::vector<int64_t> shape, absl::Span<const T> values) {
  if constexpr (std::is_same_v<T, float>) {
    return runtime::Tensor::FromFloat(type, std::move(shape), values);
  } else if constexpr (std::is_same_v<T, double>) {
    return runtime::Tensor::FromDouble(type, std::move(shape), values);
  } else {
    static_assert(std::is_same_v<T, int64_t>, "StoreAs supports float, double and int64_t");
    return runtime::Tensor::FromInt64(type, std::move(shape), values);
  }
}

// Calls `fn(T{})` with T = double for f64 and T = float for the other float types, so a
// kernel templated on its compute type can be dispatched from an element type.
template <typename Fn>
decltype(auto) DispatchFloatCompute(ElementType type, Fn&& fn) {
  if (type == ElementType::kF64) return std::forward<Fn>(fn)(double{});
  return std::forward<Fn>(fn)(float{});
}

}  // namespace commir::runtime

#endif  // COMMIR_RUNTIME_COMPUTE_VALUES_H_
