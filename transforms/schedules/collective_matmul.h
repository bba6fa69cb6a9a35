// What pipeline-collective-matmul and ring-collective-matmul share: finding the
// all_gather -> matmul and matmul -> reduce_scatter pairs of a spmd function that can be
// computed block by block, and the few emission helpers both schedules use.
//
// A pair is rewritable when the collective's dimension is a free (not contracted)
// dimension of the matmul:
//  - all_gather(x){dim = d} feeding matmul operand a along M, operand b along N, or
//    either along a batch dimension. The other operand's matching batch dimension, if it
//    has one of size > 1, is sliced along with it. Several matmuls reading one gather
//    (the q, k and v projections after CSE) are computed in one loop from one stream of
//    blocks. A gather along the contracted K dimension is left alone (its blocks would
//    give partial sums, not output blocks; see transforms/README.md).
//  - matmul -> reduce_scatter{dim = r, reduce = sum|max|min} where r is a result
//    dimension of M, N or batch, and the reduce_scatter is the matmul's only user (else
//    the GEMM would be computed twice). With reduce = sum, the reduce_scatter may also
//    read a sum (a tree of `add`s, each with that one user) of such matmuls of one type:
//    a gradient function's dX = dQ Wq^T + dK Wk^T + dV Wv^T, Megatron's one GEMM with
//    the fused QKV weight. Each block's addend is then the sum of the matmuls' blocks.
// Users of a gather that are not rewritable matmuls (in a gradient function, the weight
// gradient X^T dY, which contracts the gathered rows) get the gathered value assembled
// from the blocks the schedule moves anyway (GatherMatch::assemble), so the all_gather
// goes; where one of them comes before the first rewritten matmul, the assembled value
// would come too late, and they keep the all_gather. Matmuls whose other operand is
// defined after the first rewritten matmul are not grouped (they are such users). Matches never cross blocks: the collective and its matmuls share a block.
#ifndef COMMIR_TRANSFORMS_SCHEDULES_COLLECTIVE_MATMUL_H_
#define COMMIR_TRANSFORMS_SCHEDULES_COLLECTIVE_MATMUL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "commir/ir.h"
#include "transforms/schedules/counted_loop.h"
#include "transforms/sharding/layout.h"

namespace commir::schedules::cmm {

// One matmul that reads a gathered value.
struct GatherUse {
  Operation* matmul = nullptr;
  int operand = 0;     // 0: the gathered value is a, 1: it is b
  int result_dim = 0;  // the result dimension the gathered dimension becomes
  int other_dim = -1;  // the other operand's matching dimension to slice (-1: none)
};

struct GatherMatch {
  Operation* gather = nullptr;
  AxisList axes;
  int64_t group = 1;            // n, the devices along axes
  int64_t dim = 0;              // the gathered dimension of the operand
  int64_t local = 0;            // its per-device size m (gathered size n * m)
  std::vector<GatherUse> uses;  // in block order
  // The gather has other users, all after the first use: the schedule also writes each
  // block it holds into the whole gathered value, for them.
  bool assemble = false;
};

struct ScatterMatch {
  Operation* matmul = nullptr;
  Operation* scatter = nullptr;
  AxisList axes;
  int64_t group = 1;
  int result_dim = 0;             // the scattered dimension of the matmul result
  int64_t full = 0;               // its size R before the scatter (R / n after)
  int operand_dim[2] = {-1, -1};  // per matmul operand, the dimension indexing result_dim
  // Further matmuls added to `matmul` before the scatter, each with its operand_dim, and
  // the adds that sum them (erased with the matmuls).
  struct Term {
    Operation* matmul = nullptr;
    int operand_dim[2] = {-1, -1};
  };
  std::vector<Term> more;
  std::vector<Operation*> adds;
};

// The rewritable gathers and scatters of `function`'s blocks, in program order. A matmul
// is claimed by at most one match: as a gather use first.
struct CollectiveMatmulMatches {
  std::vector<GatherMatch> gathers;
  std::vector<ScatterMatch> scatters;
};
CollectiveMatmulMatches FindCollectiveMatmuls(Function& function);

// Why a collective-matmul schedule rewrote nothing, for its remark.
inline constexpr char kNoCollectiveMatmulPair[] =
    "no all_gather -> matmul or matmul -> reduce_scatter pair along a free matmul dimension "
    "(and not yet scheduled on a stream)";

// Rewrites every match with `rewriter` (a schedule's RewriteGather and RewriteScatter),
// gathers first, adding one to `*rewritten` per pair. Stops at the first error. Then
// erases the ops the rewrites replaced (the rewriter is a ReplacedOps).
template <typename Rewriter>
absl::Status RewriteMatches(Rewriter& rewriter, const CollectiveMatmulMatches& matches,
                            int* rewritten) {
  absl::Status status = [&]() -> absl::Status {
    for (const GatherMatch& m : matches.gathers) {
      if (absl::Status s = rewriter.RewriteGather(m); !s.ok()) return s;
      ++*rewritten;
    }
    for (const ScatterMatch& m : matches.scatters) {
      if (absl::Status s = rewriter.RewriteScatter(m); !s.ok()) return s;
      ++*rewritten;
    }
    return absl::OkStatus();
  }();
  rewriter.EraseReplaced();
  return status;
}

// The ops a rewriter has replaced (their results unused, or used only by each other),
// erased together at the end: erasing each at once would search the user list of a
// widely read value (the weights every matmul reads) once per op, quadratic in the
// number of matches.
class ReplacedOps {
 public:
  void Add(Operation* op) { ops_.push_back(op); }
  void EraseReplaced() {
    Operation::EraseAll(ops_);
    ops_.clear();
  }

 private:
  std::vector<Operation*> ops_;
};

// `type` with dimension `dim` resized to `size`.
Type WithDim(Type type, int64_t dim, int64_t size);
// `type` with dimension `dim` replaced by `factors` (row-major split: a view).
Type SplitDim(Type type, int64_t dim, absl::Span<const int64_t> factors);

using Operand = OpBuilder::Operand;

// `{value = 0}` (integer types) or `{value = 0.0}` for a `full` of `type`.
AttrDict ZeroAttrs(Type type);

// Emission helpers on top of OpBuilder (commir/builder.h). `stream` (may be null) becomes
// `stream = %v`; `fixed_stream` > 0 becomes `stream = N`; `explicit_main` writes
// `stream = 0`, which marks a collective as scheduled (matching skips collectives that
// name a stream) so that a schedule applied again leaves it alone.
struct StreamChoice {
  Value* value = nullptr;
  int64_t fixed = 0;
  bool explicit_main = false;
};
absl::StatusOr<Value*> Emit(OpBuilder& e, OpKind kind, absl::Span<const Operand> operands,
                            AttrDict attrs, absl::Span<const Type> result_types,
                            StreamChoice stream, const std::string& name);
AttrDict DimAttrs(int64_t dim);
AttrDict AxisDimAttrs(const AxisList& axes, int64_t dim);
// `x` in blocks of `size` along `dim`: dynamic_slice at `offset` (an index value).
absl::StatusOr<Value*> SliceDim(OpBuilder& e, Value* x, int64_t dim, int64_t size,
                                Value* offset, StreamChoice stream, const std::string& name);
// The matmul `original` on new operands, its result type resized to `result`.
absl::StatusOr<Value*> EmitMatmul(OpBuilder& e, const Operation& original, Value* a,
                                  Value* b, Type result, StreamChoice stream,
                                  const std::string& name);
// `index * factor` (or `index` itself when factor is 1).
absl::StatusOr<Value*> ScaleIndex(OpBuilder& e, Value* index, int64_t factor,
                                  const std::string& name);
// `(rank + delta) mod n` as index arithmetic; delta may be an index value or null plus
// a constant.
absl::StatusOr<Value*> RingIndex(OpBuilder& e, Value* rank, Value* delta, bool subtract,
                                 int64_t constant, int64_t n, const std::string& name);

// The collective-matmul schedules' loops count with `%i` (counted_loop.h).
using Loop = CountedLoop;
inline Loop CreateLoop(Block* block, Operation* before, Location loc, int64_t lower,
                       int64_t upper, absl::Span<Value* const> inits,
                       absl::Span<const std::string> names) {
  return InsertCountedLoop(block, before, loc, lower, upper, inits, "i", names);
}
inline void Yield(const Loop& loop, absl::Span<Value* const> values) {
  YieldFromLoop(loop, values);
}

// The matmul result name for a rewritten result (the original's, so that users keep
// reading the same name).
std::string ResultName(const Operation& op);

}  // namespace commir::schedules::cmm

#endif  // COMMIR_TRANSFORMS_SCHEDULES_COLLECTIVE_MATMUL_H_
