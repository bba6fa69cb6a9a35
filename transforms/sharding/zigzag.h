// Moving a per-device value between the zigzag layout of a sequence dimension (device r
// of n holds chunks r and 2n-1-r of 2n, Type::zigzag_dim) and the contiguous layout
// (device r holds chunks 2r and 2r+1), in a spmd function.
//
// Each direction is one all_to_all over the dimension's axis group in which every device
// sends its two chunks to at most two others: a zero buffer of n slots gets the chunks at
// their destinations' slots, the all_to_all delivers slot j to device j, and the two
// received chunks are read back and concatenated. lower-to-spmd emits it where a zigzag
// value meets an op that mixes along the sequence; ring-attention{zigzag=true} recognizes
// it (ZigzagExchangeSource) and works on the zigzag value directly, so a function that
// declares zigzag inputs and outputs pays no permutation.
#ifndef COMMIR_TRANSFORMS_SHARDING_ZIGZAG_H_
#define COMMIR_TRANSFORMS_SHARDING_ZIGZAG_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "commir/builder.h"
#include "commir/ir.h"
#include "commir/type.h"

namespace commir::sharding {

enum class ZigzagDirection { kToContiguous, kToZigzag };

// Emits the exchange of `x` (the per-device value) along `dim` over `axes`, a group of
// `n` devices. Needs n even (with n odd the middle device's two chunks belong to one
// block and the one-slot exchange cannot express it) and the local size along `dim`
// even; otherwise an error that says so.
absl::StatusOr<Value*> EmitZigzagExchange(OpBuilder& e, Value* x, int64_t dim, const AxisList& axes,
                                          int64_t n, ZigzagDirection direction);

// An EmitZigzagExchange found in a function: the value it exchanged and the two static
// slices that cut that value into its chunks (the exchange's only reads of it).
struct ZigzagExchange {
  Value* source = nullptr;
  const Operation* chunks[2] = {nullptr, nullptr};
};

// The exchange in `direction` over `axes` along `dim` whose result is `v`, if `v` is one.
std::optional<ZigzagExchange> MatchZigzagExchange(const Value* v, int64_t dim, const AxisList& axes,
                                                  ZigzagDirection direction);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_ZIGZAG_H_
