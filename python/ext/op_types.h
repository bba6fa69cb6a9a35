// Result types of one op from the C++ op definitions, for commir.builder: Python asks the
// same inference the parser, the verifier and OpBuilder run, instead of computing shapes
// itself.
//
// A type crosses the boundary as the string "index" or as a tuple (element type, dims,
// axes per dimension, partial axes): ("bf16", [8, 16], [["tp"], []], []). A mesh is a
// list of (axis, size) pairs, or None.
#ifndef COMMIR_PYTHON_EXT_OP_TYPES_H_
#define COMMIR_PYTHON_EXT_OP_TYPES_H_

#include <pybind11/pybind11.h>

#include <string>

namespace commir::python {

// The result types op `op` has with these operands and attributes (`attrs`: a list of
// (key, value): bool, int, float, str, or a list of them; a str is an identifier where
// the op's schema wants one, a list of str an axis group). An operand given as None is a
// number literal, typed like the first value operand. `result_types` are the written
// result types (an op that needs one, or a sharding constraint): checked against the
// inferred ones, then returned. Raises commir.errors.OpError with the op definition's
// message when the op is invalid.
pybind11::list InferOpResultTypes(const std::string& op, const pybind11::list& operand_types,
                                  const pybind11::list& attrs, const pybind11::list& result_types,
                                  const pybind11::object& mesh, bool spmd, int num_results);

// The per-device type of a global type on `mesh` (what a spmd function's body sees of an
// argument). Raises commir.errors.OpError when the layout is invalid on the mesh.
pybind11::object LocalTensorType(const pybind11::object& type, const pybind11::object& mesh);

}  // namespace commir::python

#endif  // COMMIR_PYTHON_EXT_OP_TYPES_H_
