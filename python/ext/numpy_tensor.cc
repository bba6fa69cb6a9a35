#include "python/ext/numpy_tensor.h"

#include <pybind11/numpy.h>

#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace py = pybind11;

namespace commir::python {

using runtime::Tensor;

absl::StatusOr<Tensor> TensorFromArray(const py::object& object, Type type,
                                       const std::string& name) {
  py::array array = py::array::ensure(object);
  if (!array) {
    return absl::InvalidArgumentError(
        absl::StrFormat("argument %s: expected a NumPy array (or something convertible), got %s",
                        name, py::str(py::type::of(object)).cast<std::string>()));
  }
  std::vector<int64_t> shape(array.shape(), array.shape() + array.ndim());
  if (shape != type.dims()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("argument %s: array has shape (%s) but the argument is %s", name,
                        absl::StrJoin(shape, ", "), type.ToString()));
  }
  const ElementType element = type.element_type();
  const char kind = array.dtype().kind();
  if (IsFloatType(element)) {
    if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b') {
      return absl::InvalidArgumentError(absl::StrFormat(
          "argument %s: dtype %s cannot feed a %s argument", name,
          py::str(array.dtype()).cast<std::string>(), ElementTypeName(element)));
    }
    auto values = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(array);
    return Tensor::FromDouble(element, shape,
                              absl::MakeConstSpan(values.data(), static_cast<size_t>(values.size())));
  }
  if (kind != 'i' && kind != 'u' && kind != 'b') {
    return absl::InvalidArgumentError(absl::StrFormat(
        "argument %s: dtype %s cannot feed an integer argument of type %s", name,
        py::str(array.dtype()).cast<std::string>(), ElementTypeName(element)));
  }
  auto values = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(array);
  return Tensor::FromInt64(element, shape,
                           absl::MakeConstSpan(values.data(), static_cast<size_t>(values.size())));
}

namespace {

template <typename T, typename V>
py::object MakeArray(const std::vector<int64_t>& shape, const std::vector<V>& values) {
  py::array_t<T> array(std::vector<py::ssize_t>(shape.begin(), shape.end()));
  T* out = array.mutable_data();
  for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<T>(values[i]);
  return array;
}

}  // namespace

py::object ArrayFromTensor(const Tensor& tensor) {
  switch (tensor.element_type()) {
    case ElementType::kF64:
      return MakeArray<double>(tensor.shape(), tensor.ToDouble());
    case ElementType::kF32:
    case ElementType::kF16:
    case ElementType::kBF16:
      return MakeArray<float>(tensor.shape(), tensor.ToFloat());
    case ElementType::kI64:
      return MakeArray<int64_t>(tensor.shape(), tensor.ToInt64());
    case ElementType::kI32:
      return MakeArray<int32_t>(tensor.shape(), tensor.ToInt64());
    case ElementType::kI1:
      return MakeArray<bool>(tensor.shape(), tensor.ToInt64());
  }
  return py::none();
}

}  // namespace commir::python
