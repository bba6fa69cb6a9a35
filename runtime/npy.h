// Reading and writing NumPy .npy files for commir-run's --input and --output-dir.
//
// Read: format versions 1.0, 2.0 and 3.0; C-order arrays of dtype '<f8', '<f4',
// '<f2', '<i8', '<i4' or '|b1', which load as f64, f32, f16, i64, i32 and i1 tensors.
// Anything else (big-endian data, Fortran order, other dtypes, structured dtypes, a
// malformed header, a data section of the wrong size) is an InvalidArgument error whose
// message names the file and the problem.
//
// Write: format version 1.0 (2.0 only if the header cannot fit 1.0's 16-bit length),
// the header padded with spaces to a 64-byte boundary and ending in '\n', as NumPy
// writes it. The spec says "bf16 and f16 tensors are read and written as float32 .npy
// files", so both are widened (exactly) to '<f4'; the other types keep their own dtype.
//
// This code assumes a little-endian host, as does the rest of the runtime.
#ifndef COMMIR_RUNTIME_NPY_H_
#define COMMIR_RUNTIME_NPY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "commir/element_type.h"
#include "runtime/tensor.h"

namespace commir::runtime {

// Parses the bytes of a .npy file; `name_for_errors` (usually the path) starts every
// error message.
absl::StatusOr<Tensor> ParseNpy(std::string_view bytes, std::string_view name_for_errors);

// For reading a .npy file piece by piece: from its first 12 bytes (fewer if the file is
// shorter), where its header ends; from everything up to there, the file's whole size as
// its header promises it. Errors are ParseNpy's (bad magic, version, header).
absl::StatusOr<size_t> NpyHeaderEnd(std::string_view prefix, std::string_view name_for_errors);
absl::StatusOr<size_t> NpyFileSize(std::string_view prefix, std::string_view name_for_errors);

// The bytes of a .npy file holding `tensor` (see above for the dtype chosen).
std::string SerializeNpy(const Tensor& tensor);

// File variants of the two above. I/O failures carry the errno-derived status code.
// ReadNpy reads in the order the format is checked (magic, header, then exactly the
// bytes the header promises and one more to detect trailing data), so a file that is not
// .npy, or a device that never ends, fails without being read through.
absl::StatusOr<Tensor> ReadNpy(const std::string& path);
absl::Status WriteNpy(const std::string& path, const Tensor& tensor);

// Checks that a tensor loaded from a .npy file fits the function argument `arg_name`
// of type want[want_shape] and returns it in the argument's element type. The shapes
// must be equal and the element types equal, except that an f32 tensor converts (round
// to nearest even) to an f16 or bf16 argument, since those are passed as float32 files.
// Errors (InvalidArgument) read like
//   "input %x: .npy has shape (3, 4) but the argument is f32[4, 4]".
absl::StatusOr<Tensor> ConvertLoadedToArgumentType(const Tensor& loaded, ElementType want,
                                                   absl::Span<const int64_t> want_shape,
                                                   std::string_view arg_name);

}  // namespace commir::runtime

#endif  // COMMIR_RUNTIME_NPY_H_
