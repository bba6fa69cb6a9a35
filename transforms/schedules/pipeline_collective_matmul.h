// pipeline-collective-matmul{chunks=S,streams=K}: splits each all_gather -> matmul and
// matmul -> reduce_scatter pair of a spmd function (see collective_matmul.h for what
// matches) into S chunks, so that chunk i+1's collective overlaps chunk i's GEMM.
//
// all_gather(x){dim = d} -> matmul, x holding m rows of d per device:
//   for %i = 0 to S iter(%acc = zeros[.., n, S, m/S, ..]) {
//     %s = rem(%i, K)                                   the chunk's stream
//     x rows [i*m/S, (i+1)*m/S) -> all_gather -> matmul, all on stream %s
//     dynamic_update_slice of the product into %acc at chunk i   (main stream)
//   }
//   the result is %acc reshaped (a view) to the matmul's type.
// The gathered chunk holds rows c*m + i*m/S + t of every device c, so the accumulator
// splits the output dimension into [n, S, m/S] and each chunk lands in place with one
// dynamic_update_slice. A second operand that shares a batch dimension with the gathered
// one is viewed the same way and sliced per chunk.
//
// matmul -> reduce_scatter{dim = r}, R = size of r before the scatter:
//   the operand(s) indexing r are viewed as [n, S, R/(n*S)] along it; chunk i takes
//   sub-block i of every device's block, multiplies it on stream %s, reduce_scatters it
//   there, and writes the R/(n*S) rows it gets at offset i*R/(n*S) of the result.
//
// Streams follow nvFuser's host IR: chunk i's slice, collective and
// GEMM are issued on stream i mod K (with K = 1 everything stays on stream 0, and only
// the chunk collectives say so, `stream = 0`: a collective naming a stream is already
// scheduled, so running the pass again leaves it alone); the in-place assembly re-joins
// the main stream, and dependencies
// alone order the rest (no wait op). A `for` loop keeps the IR size independent of S.
// chunks = 1 leaves the program unchanged (one chunk cannot overlap anything). A chunk
// count that does not divide the per-device block is an error at the collective.
#ifndef COMMIR_TRANSFORMS_SCHEDULES_PIPELINE_COLLECTIVE_MATMUL_H_
#define COMMIR_TRANSFORMS_SCHEDULES_PIPELINE_COLLECTIVE_MATMUL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "transforms/option_schema.h"
#include "transforms/pass.h"

namespace commir::schedules {

// Rewrites every matching pair of `module`'s spmd functions. Returns the number of
// collectives rewritten.
absl::StatusOr<int> PipelineCollectiveMatmul(Module& module, int64_t chunks, int64_t streams,
                                             DiagnosticEngine* diagnostics = nullptr);

struct PipelineCollectiveMatmulOptions {
  int64_t chunks = 4;   // S chunks per collective; must divide each device's block
  int64_t streams = 2;  // K streams; chunk i runs on stream i mod K

  static const OptionSchema<PipelineCollectiveMatmulOptions>& Schema();
};

COMMIR_DECLARE_PASS_WITH_OPTIONS(PipelineCollectiveMatmulPass, PipelineCollectiveMatmulOptions);

}  // namespace commir::schedules

#endif  // COMMIR_TRANSFORMS_SCHEDULES_PIPELINE_COLLECTIVE_MATMUL_H_
