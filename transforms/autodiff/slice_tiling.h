// Static slices that split a value into blocks, for their derivative: the cotangent of a
// value read only by slices that tile it along one dimension is their cotangents side by
// side, one concat, as PyTorch's split backward (and TransformerEngine's _SplitAlongDim,
// which Megatron-LM's linear_qkv output goes through) computes it. Each slice's own rule
// pads its cotangent with zeros to the whole value, and the padded cotangents are summed:
// the same numbers, at several times the traffic of the whole value.
#ifndef COMMIR_TRANSFORMS_AUTODIFF_SLICE_TILING_H_
#define COMMIR_TRANSFORMS_AUTODIFF_SLICE_TILING_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "commir/ir.h"

namespace commir {

struct SliceTiling {
  int64_t dim = 0;
  // The slices in the order of their blocks along `dim`.
  std::vector<const Operation*> slices;
};

// When `value` is a tensor whose every use is a static `slice` that keeps every dimension
// but `dim` whole, at least two of them, and their blocks along `dim` cover it exactly,
// without overlap: those slices. Empty otherwise (another use, overlapping or missing
// blocks, a slice cutting two dimensions or none).
std::optional<SliceTiling> TilingSlices(const Value& value);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_AUTODIFF_SLICE_TILING_H_
