// Random well-typed global CommIR programs for the partitioner's property test: random
// ops valid in global functions (elementwise, matmul, reductions, softmax, norms, reshape,
// transpose, slice, concat, broadcast, attention, reshard, full), random small shapes,
// random shardings on arguments, annotations and results, on random 1-D and 2-D meshes. A
// program is a pure function of its seed.
#ifndef COMMIR_TRANSFORMS_SHARDING_RANDOM_PROGRAM_H_
#define COMMIR_TRANSFORMS_SHARDING_RANDOM_PROGRAM_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace commir::sharding {

// Knobs for other property tests. The defaults give exactly the programs of
// GenerateRandomProgram(seed) (the partitioner's property test depends on that).
struct RandomProgramOptions {
  // The mesh's axes (name, size); empty: a random 1-D or 2-D mesh.
  std::vector<std::pair<std::string, int64_t>> mesh;
  // Probability that an op is one of the patterns the communication schedules rewrite:
  // a matmul of a resharded activation whose operand and result layouts make
  // lower-to-spmd emit all_gather -> matmul or matmul -> reduce_scatter, or attention
  // with q, k and v split along the sequence over one axis group (all-gathered k/v).
  double p_schedule_pattern = 0;
};

// The text of a module with one mesh `@m` and one global function `@f`.
std::string GenerateRandomProgram(uint64_t seed);
std::string GenerateRandomProgram(uint64_t seed, const RandomProgramOptions& options);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_RANDOM_PROGRAM_H_
