// The element types of CommIR tensors (docs/language.md, "Element types"), alone: plain C++ without Abseil,
// so that nvcc's .cu files (which may include only such headers) name the same type as
// the rest of the code. Their properties are in element_type.h.
#ifndef COMMIR_COMMIR_ELEMENT_TYPE_ENUM_H_
#define COMMIR_COMMIR_ELEMENT_TYPE_ENUM_H_

#include <cstdint>

namespace commir {

enum class ElementType : uint8_t { kF64, kF32, kF16, kBF16, kI64, kI32, kI1 };

}  // namespace commir

#endif  // COMMIR_COMMIR_ELEMENT_TYPE_ENUM_H_
