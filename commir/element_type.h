// Element types of CommIR tensors (docs/language.md, "Element types") and their properties.
#ifndef COMMIR_COMMIR_ELEMENT_TYPE_H_
#define COMMIR_COMMIR_ELEMENT_TYPE_H_

#include <cstdint>
#include <optional>
#include "absl/strings/string_view.h"
#include "commir/element_type_enum.h"

namespace commir {

inline constexpr ElementType kAllElementTypes[] = {
    ElementType::kF64,  ElementType::kF32, ElementType::kF16, ElementType::kBF16,
    ElementType::kI64,  ElementType::kI32, ElementType::kI1};

// Spelling in the text format: "f64", "f32", "f16", "bf16", "i64", "i32", "i1".
absl::string_view ElementTypeName(ElementType type);
std::optional<ElementType> ParseElementType(absl::string_view name);

// Bytes one element occupies in memory (i1 is stored as one byte).
int ElementTypeByteWidth(ElementType type);
bool IsFloatType(ElementType type);
bool IsIntegerType(ElementType type);

}  // namespace commir

#endif  // COMMIR_COMMIR_ELEMENT_TYPE_H_
