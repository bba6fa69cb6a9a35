#include "backend_cpu/dropout.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "commir/element_type.h"
#include "commir/philox.h"
#include "runtime/compute_values.h"

namespace commir::cpu {

using runtime::Tensor;

absl::StatusOr<Tensor> Dropout(const Tensor& x, uint64_t seed, const DropoutIndexing& indexing,
                               uint64_t step) {
  if (!IsFloatType(x.element_type())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "dropout needs a float tensor, got %s", ElementTypeName(x.element_type())));
  }
  const std::vector<int64_t>& dims = x.shape();
  if (indexing.strides.size() != dims.size()) {
    return absl::InvalidArgumentError("dropout: the indexing's rank differs from the tensor's");
  }
  return runtime::DispatchFloatCompute(x.element_type(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> values = runtime::LoadAs<T>(x);
    const T scale = static_cast<T>(indexing.scale);
    // Walk the block in row-major order, carrying the element's global index.
    std::vector<int64_t> position(dims.size(), 0);
    uint64_t global = indexing.base;
    for (T& v : values) {
      v = philox::DropoutKeeps(seed, global, indexing.threshold, step) ? v * scale : T{0};
      for (size_t d = dims.size(); d-- > 0;) {
        global += indexing.strides[d];
        if (++position[d] < dims[d]) break;
        global -= indexing.strides[d] * static_cast<uint64_t>(dims[d]);
        position[d] = 0;
      }
    }
    return runtime::StoreAs<T>(x.element_type(), x.shape(), values);
  });
}

}  // namespace commir::cpu
