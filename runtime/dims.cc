#include "runtime/dims.h"

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace commir::runtime {

std::string ShapeToString(absl::Span<const int64_t> shape) {
  return absl::StrFormat("[%s]", absl::StrJoin(shape, ", "));
}

absl::StatusOr<int64_t> NormalizeDim(std::string_view op_name, int64_t dim, int64_t rank) {
  if (dim < -rank || dim >= rank) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: dimension %d is out of range for a tensor of rank %d", op_name, dim, rank));
  }
  return dim < 0 ? dim + rank : dim;
}

}  // namespace commir::runtime
