// What a backend must provide to run CommIR programs: the interpreter (interpreter.h)
// owns control flow, index arithmetic, device coordinates, value lifetimes and the
// grouping of devices for collectives; a backend only carries out tensor ops and
// collectives. This is the seam between the shared interpretation of spmd programs and
// the cpu and cuda backends.
#ifndef COMMIR_RUNTIME_BACKEND_H_
#define COMMIR_RUNTIME_BACKEND_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "commir/ir.h"
#include "runtime/tensor.h"

namespace commir::runtime {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual absl::string_view name() const = 0;

  // Runs a non-collective tensor op on one device. `tensors` are the op's tensor
  // operands in order (number literals arrive as rank-0 tensors); `indices` are the
  // values of its index operands in order (dynamic slice offsets, attention q_pos and
  // k_pos). Returns the op's results.
  virtual absl::StatusOr<std::vector<Tensor>> RunOp(const Operation& op,
                                                    absl::Span<const Tensor* const> tensors,
                                                    absl::Span<const int64_t> indices) = 0;

  // Runs a collective for one device group: parts[i] is the operand of the group member
  // with coordinate i; returns each member's result in the same order.
  virtual absl::StatusOr<std::vector<Tensor>> RunCollective(
      const Operation& op, absl::Span<const Tensor* const> parts) = 0;
};

}  // namespace commir::runtime

#endif  // COMMIR_RUNTIME_BACKEND_H_
