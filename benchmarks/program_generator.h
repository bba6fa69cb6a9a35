// Deterministic CommIR programs of a given size for the benchmarks (and their tests).
//
// Every generator writes the program in canonical form (exactly what PrintModule
// produces for it), so that print(parse(text)) == text is a cheap correctness check.
// "N ops" always counts the ops of the function body without its `return`.
#ifndef COMMIR_BENCHMARKS_PROGRAM_GENERATOR_H_
#define COMMIR_BENCHMARKS_PROGRAM_GENERATOR_H_

#include <cstdint>
#include <string>

namespace commir::bench {

struct GeneratedProgram {
  std::string text;
  // Ops in the function body, excluding the terminator.
  int64_t num_ops = 0;
  // Ops that repeat an earlier op exactly (same op, operands and attributes): what a
  // CSE pass can remove (at least this many; it may also remove the dead ops).
  int64_t num_duplicate_ops = 0;
  // Ops whose results are never used, directly or through other dead ops: what a DCE
  // pass removes.
  int64_t num_dead_ops = 0;
};

// A global function with one chain of `num_ops` elementwise ops on f32[16, 16]: a
// repeating pattern of add, mul by a literal, sub, tanh, max, exp, div by a literal and
// mul, each consuming the previous result and one of the two arguments. Nothing is
// duplicated or dead.
//
//   func @chain(%x: f32[16, 16], %y: f32[16, 16]) -> f32[16, 16] {
//     %v0 = add(%x, %y) : f32[16, 16]
//     %v1 = mul(%v0, 0.5) : f32[16, 16]
//     ...
//     return %v999
//   }
GeneratedProgram GenerateElementwiseChain(int64_t num_ops);

// A chain with redundancy for CSE and DCE, in groups of five ops:
//
//     %a7 = add(%m6, %x) : f32[16, 16]      live
//     %b7 = add(%m6, %x) : f32[16, 16]      duplicate of %a7 (CSE removes it)
//     %m7 = mul(%a7, %b7) : f32[16, 16]     live (the chain continues from here)
//     %d7 = exp(%m7) : f32[16, 16]          dead
//     %e7 = tanh(%d7) : f32[16, 16]         dead (used only by a dead op)
//
// so a fifth of the ops are duplicates and two fifths are dead. When `num_ops` is not a
// multiple of five, the remainder is live chain ops (`add(%p, %y)`).
GeneratedProgram GenerateCseDceMix(int64_t num_ops);

// A global function on a 4-device mesh with `num_ops` ops in pairs: a matmul of the
// row-sharded %a by the column-sharded %b, and an add that sums it into a running total
// (the first pair has no add). propagate-sharding and lower-to-spmd turn every matmul
// into an all_gather + matmul pair; every matmul but the first repeats it
// (num_duplicate_ops, what CSE merges), and nothing is dead except a last matmul that
// `num_ops` leaves no room to sum (num_dead_ops). num_ops >= 1.
//
//   mesh @m(tp=4)
//
//   func @f(%a: f32[16@tp, 8], %b: f32[8, 8@tp]) -> f32[16, 8@tp] on @m {
//     %c0 = matmul(%a, %b) : f32[16, 8]
//     %c1 = matmul(%a, %b) : f32[16, 8]
//     %s1 = add(%c0, %c1) : f32[16, 8]
//     ...
GeneratedProgram GenerateShardedMatmulChain(int64_t num_ops);

// The lowered form of GenerateShardedMatmulChain: a spmd function with `num_ops` ops in
// groups of all_gather + matmul + add (the pairs the collective-matmul schedules
// rewrite), so about num_ops / 3 pairs; a last pair that `num_ops` cuts short is dead
// (num_dead_ops). num_ops >= 2.
//
//   spmd func @f(%a: f32[16@tp, 8], %b: f32[8, 8@tp]) -> f32[16, 8@tp] on @m {
//     %g0 = all_gather(%a) {axis = tp, dim = 0} : f32[16, 8]
//     %c0 = matmul(%g0, %b) : f32[16, 2]
//     %g1 = all_gather(%a) {axis = tp, dim = 0} : f32[16, 8]
//     %c1 = matmul(%g1, %b) : f32[16, 2]
//     %s1 = add(%c0, %c1) : f32[16, 2]
//     ...
GeneratedProgram GenerateGatherMatmulPairs(int64_t num_ops);

// A spmd function with `num_ops` ops in groups of three: all_gathers of %k and %v along
// the sequence (dim 2) and an attention of the previous output (first: %q) over them,
// what ring-attention and ulysses-attention rewrite; about num_ops / 3 attentions. A
// group that `num_ops` cuts short is dead (num_dead_ops). num_ops >= 3.
//
//   spmd func @f(%q: f32[1, 4, 32@sp, 8], %k: ..., %v: ...) -> f32[1, 4, 32@sp, 8] on @m {
//     %kg0 = all_gather(%k) {axis = sp, dim = 2} : f32[1, 4, 32, 8]
//     %vg0 = all_gather(%v) {axis = sp, dim = 2} : f32[1, 4, 32, 8]
//     %o0 = attention(%q, %kg0, %vg0) : f32[1, 4, 8, 8]
//     ...
GeneratedProgram GenerateGatheredAttentionChain(int64_t num_ops);

}  // namespace commir::bench

#endif  // COMMIR_BENCHMARKS_PROGRAM_GENERATOR_H_
