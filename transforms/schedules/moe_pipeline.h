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
// [i C/N, (i+1) C/N) of every source device. The pass replaces such a region with
//
//   for %i = 0 to N iter(combine accumulator, assembled values, weight-gradient sums) {
//     %b = dynamic_slice(%buf viewed as [E, N, C/N, H]) at chunk i
//     %d = all_to_all(%b) {split_dim = 0, concat_dim = 1, stream = 1}     dispatch
//     ... the region's ops on [E/n, n C/N, ...]                            main stream
//     %c = all_to_all(..) {split_dim = 1, concat_dim = 0, stream = 2}     combine
//     dynamic_update_slice of %c into the accumulator [E, N, C/N, H] at chunk i
//   }
//
// so chunk i+1's dispatch (stream 1) runs under chunk i's GEMMs and chunk i's combine
// (stream 2) under chunk i+1's: the exposed communication shrinks to about one chunk's
// dispatch and one chunk's combine. Dependencies alone order the streams.
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

// The streams the chunks' exchanges run on (the expert GEMMs stay on stream 0).
inline constexpr int64_t kMoeDispatchStream = 1;
inline constexpr int64_t kMoeCombineStream = 2;

// Rewrites every ep layer of `module`'s spmd functions into `chunks` chunks. Returns the
// number of layers (dispatch all_to_alls) rewritten; why a dispatch was left alone is
// appended to `skipped` when given.
absl::StatusOr<int> MoePipeline(Module& module, int64_t chunks,
                                std::vector<std::string>* skipped = nullptr,
                                DiagnosticEngine* diagnostics = nullptr);

struct MoePipelineOptions {
  int64_t chunks = 2;  // N chunks of the capacity; must divide each device's capacity C

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
