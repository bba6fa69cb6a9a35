// The Megatron-LM layout of an unannotated pre-norm transformer (the `megatron-layout`
// pass, and the planner's costs of a model file's own layer and head): sets the tp/cp/sp
// layouts on the types of a single-device global function, so that propagate-sharding
// partitions it as Megatron-LM does (Shoeybi et al. 2019 for tp, Korthikanti et al. 2022
// for sequence parallelism, Megatron-LM's context parallelism for cp).
//
// The rules, by where a value comes from:
//  * the residual stream (the first argument, a row-parallel projection's output, and
//    elementwise ops of those): sequence over cp, and over tp with sequence parallelism;
//  * a norm's output: the sequence over cp only (gathered over tp inside the block);
//  * a column-parallel projection (a matmul of a norm's output by an argument weight):
//    the weight's and the output's columns over tp; when the output is reshaped into
//    heads that tp does not divide (key/value heads under grouped-query attention with
//    tp > kv heads), they stay whole;
//  * a reshape into or out of heads carries the columns' split to the heads and back:
//    a reshape that splits one dimension into two or merges two keeps every split on the
//    outer factor (a fused QKV projection's columns into its key/value head groups, a
//    group's query columns into heads, the groups' heads into heads); merging whole
//    groups into heads-first heads [b, heads, s, d] splits the heads over tp where tp
//    divides them but not the groups (each rank takes its query heads);
//  * a static slice keeps its operand's splits and may cut only dimensions that are not
//    split (q, k and v out of a fused QKV projection's groups);
//  * a batched matmul of two heads-first [b, heads, s, *] values (an attention written
//    as matmuls: the scores q k^T, the probabilities times v) keeps their heads' split;
//    the sequence may not be split there (cp), since the scores pair every query with
//    every key;
//  * a row-parallel projection (a matmul of tp-split columns by an argument weight): the
//    weight's rows over tp, its output back in the residual stream's layout;
//  * the head's vocabulary (`vocabulary` > 0): padded to `padded_vocabulary` columns and
//    split over tp; a projection by a weight stored [out, in] (`transpose_b`: GPT's head
//    tied to the embedding's table) splits its rows where the columns would be;
//  * an embedding (the first argument the token ids, an integer [batch, seq]: the
//    sequence over cp): its lookup gather(table, ids) {axis = 0} of an argument table
//    splits the table's rows (padded as the head's columns) over tp, the result in the
//    residual stream's layout (Megatron-LM's VocabParallelEmbedding); learned positions, an
//    argument broadcast to the stream, stay whole and the broadcast is in the stream's
//    layout;
//  * the loss: cross_entropy(logits, labels) of the head's logits and argument labels
//    (an integer [batch, seq], the sequence over cp), and a reduce_sum or elementwise op of
//    its results, take the types inference gives them;
//  * a call: the callee's laid-out signature (callees are laid out first), so a model
//    whose top function calls its layer and head is laid out whole.
// Set as the written type on the ops whose layout their operands do not imply (norms,
// matmuls, reshapes, softmax) and on the signature; every other result gets the type the
// op's inference gives for its laid-out operands, which is what the parser gives the
// same program written as text. An op outside these rules, a dimension a split does not
// divide, or a function already laid out is an error at its location.
#ifndef COMMIR_TRANSFORMS_SHARDING_MEGATRON_LAYOUT_H_
#define COMMIR_TRANSFORMS_SHARDING_MEGATRON_LAYOUT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "transforms/option_schema.h"
#include "transforms/pass.h"

namespace commir::sharding {

// The largest tp and cp the pass accepts: far above any GPU job, and small enough that
// tp x cp and every device count derived from them stay far inside int64.
inline constexpr int64_t kMaxMegatronParallelism = 1 << 16;

struct MegatronLayoutOptions {
  int64_t tp = 1;
  int64_t cp = 1;
  // Megatron-LM's --sequence-parallel: the residual stream's sequence over tp too. A
  // no-op when tp = 1 (Megatron-LM turns it off there).
  bool sequence_parallel = false;
  // Columns of width `vocabulary` (> 0: the head's weight and logits) become
  // `padded_vocabulary` wide (Megatron-LM's --make-vocab-size-divisible-by); 0: as they are.
  int64_t vocabulary = 0;
  int64_t padded_vocabulary = 0;

  // The pass's options: tp, cp and sp (the vocabulary fields are the planner's).
  static const OptionSchema<MegatronLayoutOptions>& Schema();
};

// The name of the mesh the layout adds: `mesh @m(cp=C, tp=T)`, axes of size 1 left out,
// and its axes' names (the planner's schedules and its checks name them too).
inline constexpr char kMegatronMeshName[] = "m";
inline constexpr char kMegatronTpAxis[] = "tp";
inline constexpr char kMegatronCpAxis[] = "cp";

// Adds the layout's mesh to `module` (tp and cp at most kMaxMegatronParallelism): null
// when tp = cp = 1.
const Mesh* AddMegatronMesh(Module& module, const MegatronLayoutOptions& options);

// Lays out `function` on `mesh` (null when tp = cp = 1; else with the axes `tp` and
// `cp` as the options say; the function is put on it). `function` must be global,
// unannotated and meshless; its callees must be laid out already. On an error
// the function may be partly laid out, the message says what (without the function's
// name) and `where` (when given) gets the location.
absl::Status LayOutMegatron(Function& function, const Mesh* mesh,
                            const MegatronLayoutOptions& options, Location* where = nullptr);

// Lays out every function of `module`, callees first, on a mesh it adds (none when
// tp = cp = 1). The module must have no mesh. Errors go to `diagnostics` at their
// location (prefixed with the function's name) and the status says how many.
absl::Status LayOutMegatron(Module& module, const MegatronLayoutOptions& options,
                            DiagnosticEngine& diagnostics);

// megatron-layout{tp=T, cp=C, sp=B}.
COMMIR_DECLARE_PASS_WITH_OPTIONS(MegatronLayoutPass, MegatronLayoutOptions);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_MEGATRON_LAYOUT_H_
