// NumPy arrays <-> runtime tensors for the extension module. Floating arguments take
// any real array (converted as NumPy's astype would; bf16 and f16 round to nearest even
// from float64, which is exact for float32 inputs); integer arguments take integer or
// bool arrays. Results come back as float32 for f32/f16/bf16, float64, int64, int32 and
// bool.
#ifndef COMMIR_PYTHON_EXT_NUMPY_TENSOR_H_
#define COMMIR_PYTHON_EXT_NUMPY_TENSOR_H_

#include <pybind11/pybind11.h>

#include <string>

#include "absl/status/statusor.h"
#include "commir/type.h"
#include "runtime/tensor.h"

namespace commir::python {

// `array` as a tensor of `type`'s element type and global shape; an array of another
// shape, or a float array for an integer argument, is an InvalidArgument error naming
// `name`.
absl::StatusOr<runtime::Tensor> TensorFromArray(const pybind11::object& array, Type type,
                                                const std::string& name);

pybind11::object ArrayFromTensor(const runtime::Tensor& tensor);

}  // namespace commir::python

#endif  // COMMIR_PYTHON_EXT_NUMPY_TENSOR_H_
