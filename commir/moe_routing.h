// Where each routing choice of a mixture-of-experts layer lands in the per-expert buffers
// of static capacity (docs/language.md, "moe_dispatch"): the one definition that
// moe_dispatch and moe_collect share, so the token a slot holds on the way in is the
// token it is returned to on the way out, on every backend.
#ifndef COMMIR_COMMIR_MOE_ROUTING_H_
#define COMMIR_COMMIR_MOE_ROUTING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace commir {

// The capacity `ceil(tokens * k * capacity_factor / experts)` as GShard, Switch and XLA
// size their expert buffers, computed in double in that order (the order a Python
// reference `math.ceil(tokens * k * factor / experts)` uses too). The factor must be
// finite and in (0, experts] (a larger one only adds slots no choice can fill), and
// tokens, k and experts positive; an error names what is wrong.
absl::StatusOr<int64_t> MoeCapacity(int64_t tokens, int64_t k, int64_t experts,
                                    double capacity_factor);

// `experts_of` is the router's choice per token, row-major [tokens, k] (choice j of token
// t at t * k + j), each in [0, experts). The slot of each choice in the flattened
// [experts, capacity] buffer, e * capacity + position, or -1 for a dropped choice.
//
// Position in expert e counts the earlier choices of e in GShard's and Switch's order:
// every token's first choice, in token order, then every token's second choice, and so
// on, so a token's top-1 choice never loses its slot to another token's top-2. A choice
// whose position is >= capacity is dropped. The position does not depend on the
// capacity, so two buffers of different capacities agree on every slot they both hold.
// An expert index outside [0, experts) is an InvalidArgument error naming it and its
// place.
//
// With `groups` G > 1 the tokens are G contiguous groups of tokens / G (GShard's groups,
// Megatron's per-device routing): each group is routed on its own, as if alone, with
// `capacity` slots per expert, and the buffer is [experts, G * capacity], group g's slots
// of expert e at e * G * capacity + g * capacity + position. This is the layout expert
// parallelism exchanges: a device holding the tokens of group g fills exactly the
// columns [g * capacity, (g + 1) * capacity) of every expert. G must divide tokens.
absl::StatusOr<std::vector<int64_t>> MoeSlots(absl::Span<const int64_t> experts_of, int64_t tokens,
                                              int64_t k, int64_t experts, int64_t capacity,
                                              int64_t groups = 1);

}  // namespace commir

#endif  // COMMIR_COMMIR_MOE_ROUTING_H_
