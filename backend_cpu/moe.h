// The cpu backend's moe_dispatch and moe_collect kernels (docs/language.md, "Mixture of
// experts"), declared apart from kernels.h so the op pair stays in its own files.
#ifndef COMMIR_BACKEND_CPU_MOE_H_
#define COMMIR_BACKEND_CPU_MOE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/tensor.h"

namespace commir::cpu {

// [experts, capacity, hidden]: slot (e, c) holds the row of the routing choice that
// commir::MoeSlots puts there, copied bit for bit; an empty slot is zeros. `rows` is
// [tokens, hidden] (each of a token's k choices copies the token's row) or
// [tokens, k, hidden] (a row per choice); `experts_of` is an i32 or i64 [tokens, k].
// Expert indices outside [0, experts) are InvalidArgument errors naming the index.
// With `groups` G the tokens are routed in G groups of `capacity` slots per expert each
// and the buffer is [experts, G * capacity, hidden] (commir::MoeSlots).
absl::StatusOr<runtime::Tensor> MoeDispatch(const runtime::Tensor& rows,
                                            const runtime::Tensor& experts_of, int64_t experts,
                                            int64_t capacity, int64_t groups = 1);

// [tokens, k, hidden]: row (t, j) is the buffer's slot of choice j of token t, zeros for
// a dropped choice. The buffer is [experts, groups * capacity, hidden].
absl::StatusOr<runtime::Tensor> MoeCollect(const runtime::Tensor& buffer,
                                           const runtime::Tensor& experts_of, int64_t groups = 1);

}  // namespace commir::cpu

#endif  // COMMIR_BACKEND_CPU_MOE_H_
