// Random well-typed global CommIR programs for the partitioner's property test: random
// ops of spec 5.1 (elementwise, matmul, reductions, softmax, norms, reshape, transpose,
// slice, concat, broadcast, attention, reshard, full), random small shapes, random
// shardings on arguments, annotations and results, on random 1-D and 2-D meshes. A
// program is a pure function of its seed.
#ifndef COMMIR_TRANSFORMS_SHARDING_RANDOM_PROGRAM_H_
#define COMMIR_TRANSFORMS_SHARDING_RANDOM_PROGRAM_H_

#include <cstdint>
#include <string>

namespace commir::sharding {

// The text of a module with one mesh `@m` and one global function `@f`.
std::string GenerateRandomProgram(uint64_t seed);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_RANDOM_PROGRAM_H_
