// Helpers shared by the op definitions in this directory.
#ifndef COMMIR_COMMIR_OPS_OP_HELPERS_H_
#define COMMIR_COMMIR_OPS_OP_HELPERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "commir/op_def.h"
#include "commir/type.h"

namespace commir::ops {

template <typename... Args>
absl::Status OpError(const absl::FormatSpec<Args...>& format, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrFormat(format, args...));
}

// "[2, 3]".
std::string FormatShape(absl::Span<const int64_t> dims);

// Checks that operand `i` is a tensor (not index) and returns its type.
absl::StatusOr<Type> TensorOperand(const OpSignature& sig, int i, absl::string_view role);
// Checks that operand `i` is an `index` value.
absl::Status IndexOperand(const OpSignature& sig, int i, absl::string_view role);
absl::Status RequireFloat(Type type, absl::string_view role);
absl::Status RequireSameElementType(Type a, Type b, absl::string_view what);

// A dimension given as an attribute, possibly negative, normalized into [0, rank).
absl::StatusOr<int64_t> NormalizeDim(int64_t dim, int64_t rank, absl::string_view attr);

// NumPy broadcasting of two shapes.
absl::StatusOr<std::vector<int64_t>> BroadcastShapes(absl::Span<const int64_t> a,
                                                     absl::Span<const int64_t> b);

// The axes of a collective's `axis` attribute, checked against the mesh; returns the
// group size.
absl::StatusOr<int64_t> CollectiveGroupSize(const OpSignature& sig);

// Arithmetic on dimension sizes that reports overflow instead of wrapping.
absl::StatusOr<int64_t> CheckedDimMul(int64_t a, int64_t b);
absl::StatusOr<int64_t> CheckedDimAdd(int64_t a, int64_t b);

// The single written result type of an op that requires one.
absl::StatusOr<Type> AnnotatedResult(const OpSignature& sig);

double ByteSize(Type type);
// Sum of operand bytes plus result bytes: the traffic of a simple streaming op.
double StreamingBytes(const OpSignature& sig, absl::Span<const Type> results);

// Builders for the per-family op tables, collected by the registry.
void AppendElementwiseOps(std::vector<OpDef>& ops);
void AppendLinalgOps(std::vector<OpDef>& ops);
void AppendAttentionMergeOps(std::vector<OpDef>& ops);
void AppendNormalizationOps(std::vector<OpDef>& ops);
void AppendLayoutOps(std::vector<OpDef>& ops);
void AppendLossOps(std::vector<OpDef>& ops);
void AppendSpmdOps(std::vector<OpDef>& ops);
void AppendTerminatorOps(std::vector<OpDef>& ops);
void AppendCallOps(std::vector<OpDef>& ops);
void AppendDropoutOps(std::vector<OpDef>& ops);
void AppendTopKOps(std::vector<OpDef>& ops);

}  // namespace commir::ops

#endif  // COMMIR_COMMIR_OPS_OP_HELPERS_H_
