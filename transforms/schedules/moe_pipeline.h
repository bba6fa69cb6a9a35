// moe-pipeline{chunks=N}: overlaps an expert-parallel MoE layer's all_to_alls with its
// expert GEMMs by splitting the capacity into N chunks (Tutel's and Comet's pipelining).
//
// lower-to-spmd writes an ep layer as (docs/language.md, "Expert parallelism")
//
//   %buf = moe_dispatch(...)                              [E, C, H]      own tokens' slots
//   %in  = all_to_all(%buf) {split_dim = 0, concat_dim = 1}  [E/n, n C, H]  dispatch
//   ... the expert FFN: batched matmuls, elementwise ops, all_reduces over other axes
//   %o   = all_to_all(%out) {split_dim = 1, concat_dim = 0}  [E, C, H]     combine
//
// Every op between the two exchanges treats the n C slots of an expert (dim 1) as
// independent rows, so the slots can be processed in chunks of C/N: chunk i holds slots
// [i C/N, (i+1) C/N) of every source device. The pass replaces such a region with N
// copies of it, one per chunk, written out in a software-pipelined order:
//
//   dispatch(0); dispatch(1); ffn(0); combine(0); dispatch(2); ffn(1); combine(1); ...
//   dispatch(i) = all_to_all(dynamic_slice(%buf viewed as [E, N, C/N, H]) at chunk i)
//                 {split_dim = 0, concat_dim = 1, stream = 1}
//   ffn(i)      = the region's ops on [E/n, n C/N, ...]                    main stream
//   combine(i)  = all_to_all(..) {split_dim = 1, concat_dim = 0, stream = 1}, written by
//                 dynamic_update_slice at chunk i of the result [E, N, C/N, H]
//
// Every exchange runs on stream 1, in that order: chunk i+1's dispatch moves while chunk
// i's GEMMs run, and chunk i's combine under chunk i+1's (Tutel's and Comet's
// pipelining); the exposed communication shrinks to about one chunk's dispatch and one
// chunk's combine, or, where the exchanges take longer than the GEMMs (across nodes), to
// what the GEMMs cannot cover. One stream, because the exchanges share the GPU's links:
// a dispatch beside a combine would not move faster than the two one after the other.
// The chunks are written out rather than looped (N is at most kMaxMoeChunks) so that
// this order is the program order the streams follow.
//
// What a region may hold (anything else leaves the layer alone, with the reason in the
// pass's remark): elementwise ops whose tensor operands all have the result's shape;
// matmuls whose first operand is a row value ([E/n, rows, K], untransposed) and whose
// second is not (the expert weights), giving a row value; matmuls `a^T b` of two row
// values (a gradient function's weight gradient, which sums over the rows): each chunk
// adds its part to a sum carried by the loop; all_reduces (the partial sums of expert
// tensor parallelism over another axis). A row value the region needs from an earlier
// region (a gradient function's backward reads the forward's activations) is sliced per
// chunk from the whole value, which the earlier region's loop assembles when a later op
// reads it. Chunked this way the mesh computes the same rows as without chunks, so the
// same tokens are dropped as on one device; the weight gradients add the chunks' partial
// sums in another order (within rounding).
//
// chunks = 1 leaves the program unchanged; a chunk count that does not divide a layer's
// per-device capacity C is an error at its dispatch all_to_all. An all_to_all that names
// a stream is already scheduled and is left alone, so running the pass twice changes
// nothing more.
#ifndef COMMIR_TRANSFORMS_SCHEDULES_MOE_PIPELINE_H_
#define COMMIR_TRANSFORMS_SCHEDULES_MOE_PIPELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "transforms/option_schema.h"
#include "transforms/pass.h"

namespace commir::schedules {

// The stream the chunks' exchanges run on (the expert GEMMs stay on stream 0).
inline constexpr int64_t kMoeExchangeStream = 1;
// The most chunks a layer is split into: the program grows by one copy of the layer's
// ops per chunk, and past a few chunks each GEMM reads the experts' weights for too few
// rows to gain anything (sim/moe_time_test.cc).
inline constexpr int64_t kMaxMoeChunks = 64;

// Rewrites every ep layer of `module`'s spmd functions into `chunks` chunks. Returns the
// number of layers (dispatch all_to_alls) rewritten; why a dispatch was left alone is
// appended to `skipped` when given.
absl::StatusOr<int> MoePipeline(Module& module, int64_t chunks,
                                std::vector<std::string>* skipped = nullptr,
                                DiagnosticEngine* diagnostics = nullptr);

struct MoePipelineOptions {
  int64_t chunks = 2;  // N chunks of the capacity, 1 to kMaxMoeChunks; must divide C

  static const OptionSchema<MoePipelineOptions>& Schema();
};

class MoePipelinePass : public OptionsPass<MoePipelineOptions> {
 public:
  static const PassInfo& Info();
  explicit MoePipelinePass(MoePipelineOptions options = {})
      : OptionsPass(Info(), std::move(options)) {}
  absl::Status Run(Module& module) override;

 private:
  std::vector<std::string> skipped_;
};

}  // namespace commir::schedules

#endif  // COMMIR_TRANSFORMS_SCHEDULES_MOE_PIPELINE_H_
