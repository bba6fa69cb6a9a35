#include "commir/element_type.h"

namespace commir {

absl::string_view ElementTypeName(ElementType type) {
  switch (type) {
    case ElementType::kF64: return "f64";
    case ElementType::kF32: return "f32";
    case ElementType::kF16: return "f16";
    case ElementType::kBF16: return "bf16";
    case ElementType::kI64: return "i64";
    case ElementType::kI32: return "i32";
    case ElementType::kI1: return "i1";
  }
  return "?";
}

std::optional<ElementType> ParseElementType(absl::string_view name) {
  for (ElementType type : kAllElementTypes) {
    if (ElementTypeName(type) == name) return type;
  }
  return std::nullopt;
}

int ElementTypeByteWidth(ElementType type) {
  switch (type) {
    case ElementType::kF64:
    case ElementType::kI64: return 8;
    case ElementType::kF32:
    case ElementType::kI32: return 4;
    case ElementType::kF16:
    case ElementType::kBF16: return 2;
    case ElementType::kI1: return 1;
  }
  return 0;
}

bool IsFloatType(ElementType type) {
  return type == ElementType::kF64 || type == ElementType::kF32 ||
         type == ElementType::kF16 || type == ElementType::kBF16;
}

bool IsIntegerType(ElementType type) { return !IsFloatType(type); }

}  // namespace commir
