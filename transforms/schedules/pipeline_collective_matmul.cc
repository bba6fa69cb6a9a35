#include "transforms/schedules/pipeline_collective_matmul.h"

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commir/status_macros.h"
#include "transforms/schedules/collective_matmul.h"

namespace commir::schedules {
namespace {

using cmm::AxisDimAttrs;
using cmm::CreateLoop;
using cmm::DimAttrs;
using cmm::Emit;
using cmm::EmitMatmul;
using cmm::GatherMatch;
using cmm::GatherUse;
using cmm::Loop;
using cmm::Operand;
using cmm::ResultName;
using cmm::ScaleIndex;
using cmm::ScatterMatch;
using cmm::SliceDim;
using cmm::SplitDim;
using cmm::StreamChoice;
using cmm::WithDim;
using cmm::Yield;
using cmm::ZeroAttrs;

class Pipeliner : public cmm::ReplacedOps {
 public:
  Pipeliner(Function& function, int64_t chunks, int64_t streams)
      : function_(function), chunks_(chunks), streams_(streams) {}

  // The chunk's stream inside a loop body: rem(%i, K), or none when K = 1.
  absl::StatusOr<StreamChoice> ChunkStream(OpBuilder& e, Value* iv) {
    if (streams_ == 1) return StreamChoice{};
    COMMIR_ASSIGN_OR_RETURN(
        Value* s,
        Emit(e, OpKind::kRem, {iv, Operand::Literal(static_cast<double>(streams_), Type::Index())},
             {}, {}, {}, "s"));
    return StreamChoice{s, 0};
  }

  // The chunk collective's stream: the chunk's, but with K = 1 written out as
  // `stream = 0`, so that the pass (or ring-collective-matmul) run again does not take
  // the chunk's collective for a new pair and split it (or fail on its smaller block).
  static StreamChoice CollectiveStream(StreamChoice chunk) {
    if (chunk.value == nullptr) chunk.explicit_main = true;
    return chunk;
  }

  absl::Status RewriteGather(const GatherMatch& m) {
    Operation* gather = m.gather;
    Operation* first = m.uses.front().matmul;
    Value* x = gather->operand(0);
    const int64_t n = m.group, c = m.local / chunks_;
    OpBuilder e(&function_, first->parent_block(), first);
    e.set_loc(gather->loc());
    const std::string base = gather->result(0)->name().empty() ? "x" : gather->result(0)->name();
    // Loop-invariant views of the other operands that must be sliced per chunk.
    std::vector<Value*> other_views;
    std::vector<Value*> inits;
    std::vector<std::string> acc_names;
    for (const GatherUse& u : m.uses) {
      Value* other = u.matmul->operand(1 - u.operand);
      if (u.other_dim >= 0) {
        Type view[] = {SplitDim(other->type(), u.other_dim, {n, chunks_, c})};
        COMMIR_ASSIGN_OR_RETURN(Value* v, Emit(e, OpKind::kReshape, {other}, {}, view, {},
                                        absl::StrCat(other->name(), "_chunks")));
        other_views.push_back(v);
      } else {
        other_views.push_back(nullptr);
      }
      Type acc_type = SplitDim(u.matmul->result(0)->type(), u.result_dim, {n, chunks_, c});
      COMMIR_ASSIGN_OR_RETURN(Value* zero, Emit(e, OpKind::kFull, {}, ZeroAttrs(acc_type), {&acc_type, 1},
                                         {}, absl::StrCat(ResultName(*u.matmul), "_init")));
      inits.push_back(zero);
      acc_names.push_back(absl::StrCat(ResultName(*u.matmul), "_acc"));
    }
    // The whole gathered value for the gather's other users, viewed like the
    // accumulators: chunk i holds rows [i*c, (i+1)*c) of every device's block.
    Type whole_view = SplitDim(gather->result(0)->type(), m.dim, {n, chunks_, c});
    if (m.assemble) {
      COMMIR_ASSIGN_OR_RETURN(Value* zero, Emit(e, OpKind::kFull, {}, ZeroAttrs(whole_view),
                                                {&whole_view, 1}, {}, base + "_init"));
      inits.push_back(zero);
      acc_names.push_back(base + "_acc");
    }
    Loop loop =
        CreateLoop(first->parent_block(), first, gather->loc(), 0, chunks_, inits, acc_names);
    OpBuilder b(&function_, loop.body, nullptr);
    b.set_loc(gather->loc());
    COMMIR_ASSIGN_OR_RETURN(StreamChoice stream, ChunkStream(b, loop.iv));
    COMMIR_ASSIGN_OR_RETURN(Value* off, ScaleIndex(b, loop.iv, c, "off"));
    COMMIR_ASSIGN_OR_RETURN(
        Value* chunk, SliceDim(b, x, m.dim, c, off, stream, absl::StrCat(x->name(), "_chunk")));
    COMMIR_ASSIGN_OR_RETURN(
        Value* gathered, Emit(b, OpKind::kAllGather, {chunk}, AxisDimAttrs(m.axes, m.dim), {},
                       CollectiveStream(stream), absl::StrCat(base, "_chunk")));
    std::vector<Value*> yields;
    for (size_t k = 0; k < m.uses.size(); ++k) {
      const GatherUse& u = m.uses[k];
      Operation* mm = u.matmul;
      Value* other = mm->operand(1 - u.operand);
      if (u.other_dim >= 0) {
        COMMIR_ASSIGN_OR_RETURN(Value* sl, SliceDim(b, other_views[k], u.other_dim + 1, 1, loop.iv,
                                             stream, absl::StrCat(other->name(), "_slice")));
        Type flat[] = {WithDim(other->type(), u.other_dim, n * c)};
        COMMIR_ASSIGN_OR_RETURN(Value* v, Emit(b, OpKind::kReshape, {sl}, {}, flat, stream,
                                        absl::StrCat(other->name(), "_chunk")));
        other = v;
      }
      Value* lhs = u.operand == 0 ? gathered : other;
      Value* rhs = u.operand == 0 ? other : gathered;
      Type result = mm->result(0)->type();
      COMMIR_ASSIGN_OR_RETURN(
          Value* part, EmitMatmul(b, *mm, lhs, rhs, WithDim(result, u.result_dim, n * c), stream,
                           absl::StrCat(ResultName(*mm), "_chunk")));
      Type blocks[] = {SplitDim(result, u.result_dim, {n, 1, c})};
      COMMIR_ASSIGN_OR_RETURN(Value* view, Emit(b, OpKind::kReshape, {part}, {}, blocks, stream,
                                         absl::StrCat(ResultName(*mm), "_blocks")));
      COMMIR_ASSIGN_OR_RETURN(
          Value* acc, Emit(b, OpKind::kDynamicUpdateSlice, {loop.carried[k], view, loop.iv},
                    DimAttrs(u.result_dim + 1), {}, {}, absl::StrCat(ResultName(*mm), "_next")));
      yields.push_back(acc);
    }
    if (m.assemble) {
      Type blocks[] = {SplitDim(gathered->type(), m.dim, {n, 1, c})};
      COMMIR_ASSIGN_OR_RETURN(Value* view, Emit(b, OpKind::kReshape, {gathered}, {}, blocks, {},
                                                base + "_blocks"));
      COMMIR_ASSIGN_OR_RETURN(
          Value* whole, Emit(b, OpKind::kDynamicUpdateSlice, {loop.carried.back(), view, loop.iv},
                             DimAttrs(m.dim + 1), {}, {}, base + "_next"));
      yields.push_back(whole);
    }
    Yield(loop, yields);
    for (size_t k = 0; k < m.uses.size(); ++k) {
      loop.op->result(static_cast<int>(k))
          ->set_name(absl::StrCat(ResultName(*m.uses[k].matmul), "_all"));
    }
    if (m.assemble) loop.op->results().back()->set_name(base + "_chunks");
    e.set_loc(first->loc());
    for (size_t k = 0; k < m.uses.size(); ++k) {
      Operation* mm = m.uses[k].matmul;
      Type result[] = {mm->result(0)->type()};
      COMMIR_ASSIGN_OR_RETURN(Value* out, Emit(e, OpKind::kReshape, {loop.op->result(static_cast<int>(k))},
                                        {}, result, {}, ResultName(*mm)));
      mm->result(0)->ReplaceAllUsesWith(out);
    }
    if (m.assemble) {
      Type whole[] = {gather->result(0)->type()};
      COMMIR_ASSIGN_OR_RETURN(Value* out, Emit(e, OpKind::kReshape, {loop.op->results().back()},
                                               {}, whole, {}, base + "_all"));
      gather->result(0)->ReplaceAllUsesWith(out);
    }
    // Only now: `first` is the insertion point of the reshapes above.
    for (const GatherUse& u : m.uses) Add(u.matmul);
    // Dead once the matched matmuls (one use each) go, and the other users read the
    // assembled value.
    if (gather->result(0)->users().size() == m.uses.size() || m.assemble) Add(gather);
    return absl::OkStatus();
  }

  absl::Status RewriteScatter(const ScatterMatch& m) {
    Operation* scatter = m.scatter;
    const int64_t n = m.group, c = m.full / (n * chunks_);
    OpBuilder e(&function_, scatter->parent_block(), scatter);
    e.set_loc(scatter->loc());
    // Every summed matmul (most often just one), with loop-invariant chunk views of its
    // operands that index the scattered dimension.
    std::vector<ScatterMatch::Term> terms = {{m.matmul, {m.operand_dim[0], m.operand_dim[1]}}};
    terms.insert(terms.end(), m.more.begin(), m.more.end());
    std::vector<std::array<Value*, 2>> views(terms.size(), {nullptr, nullptr});
    for (size_t t = 0; t < terms.size(); ++t) {
      for (int w = 0; w < 2; ++w) {
        if (terms[t].operand_dim[w] < 0) continue;
        Value* v = terms[t].matmul->operand(w);
        Type view[] = {SplitDim(v->type(), terms[t].operand_dim[w], {n, chunks_, c})};
        COMMIR_ASSIGN_OR_RETURN(Value* r, Emit(e, OpKind::kReshape, {v}, {}, view, {},
                                               absl::StrCat(v->name(), "_chunks")));
        views[t][w] = r;
      }
    }
    Type out_type = scatter->result(0)->type();
    const std::string name = scatter->result(0)->name();
    COMMIR_ASSIGN_OR_RETURN(Value* zero, Emit(e, OpKind::kFull, {}, ZeroAttrs(out_type), {&out_type, 1},
                                       {}, absl::StrCat(name.empty() ? "y" : name, "_init")));
    Value* inits[] = {zero};
    std::string names[] = {absl::StrCat(name.empty() ? "y" : name, "_acc")};
    Loop loop =
        CreateLoop(scatter->parent_block(), scatter, scatter->loc(), 0, chunks_, inits, names);
    OpBuilder b(&function_, loop.body, nullptr);
    b.set_loc(scatter->loc());
    COMMIR_ASSIGN_OR_RETURN(StreamChoice stream, ChunkStream(b, loop.iv));
    const std::string mm_name =
        m.matmul->result(0)->name().empty() ? "p" : m.matmul->result(0)->name();
    Value* part = nullptr;
    for (size_t t = 0; t < terms.size(); ++t) {
      Operation* mm = terms[t].matmul;
      Value* operands[2] = {mm->operand(0), mm->operand(1)};
      for (int w = 0; w < 2; ++w) {
        if (views[t][w] == nullptr) continue;
        Value* v = mm->operand(w);
        COMMIR_ASSIGN_OR_RETURN(Value* sl, SliceDim(b, views[t][w], terms[t].operand_dim[w] + 1, 1,
                                                    loop.iv, stream, absl::StrCat(v->name(), "_slice")));
        Type flat[] = {WithDim(v->type(), terms[t].operand_dim[w], n * c)};
        COMMIR_ASSIGN_OR_RETURN(Value* f, Emit(b, OpKind::kReshape, {sl}, {}, flat, stream,
                                               absl::StrCat(v->name(), "_chunk")));
        operands[w] = f;
      }
      COMMIR_ASSIGN_OR_RETURN(
          Value* term, EmitMatmul(b, *mm, operands[0], operands[1],
                                  WithDim(mm->result(0)->type(), m.result_dim, n * c), stream,
                                  absl::StrCat(mm_name, t == 0 ? "_chunk" : "_term")));
      if (part == nullptr) {
        part = term;
      } else {
        // A sum of matmuls (the fused QKV input gradient): the chunk's sum.
        COMMIR_ASSIGN_OR_RETURN(part, Emit(b, OpKind::kAdd, {part, term}, {}, {}, stream,
                                           absl::StrCat(mm_name, "_chunk")));
      }
    }
    AttrDict rs_attrs = scatter->attrs();
    COMMIR_ASSIGN_OR_RETURN(Value* rs, Emit(b, OpKind::kReduceScatter, {part}, rs_attrs, {},
                                     CollectiveStream(stream), absl::StrCat(mm_name, "_chunk_rs")));
    COMMIR_ASSIGN_OR_RETURN(Value* off, ScaleIndex(b, loop.iv, c, "off"));
    COMMIR_ASSIGN_OR_RETURN(Value* acc, Emit(b, OpKind::kDynamicUpdateSlice, {loop.carried[0], rs, off},
                                      DimAttrs(m.result_dim), {}, {},
                                      absl::StrCat(name.empty() ? "y" : name, "_next")));
    Value* yields[] = {acc};
    Yield(loop, yields);
    Value* result = loop.op->result(0);
    result->set_name(name);
    scatter->result(0)->ReplaceAllUsesWith(result);
    Add(scatter);
    for (Operation* add : m.adds) Add(add);
    for (const ScatterMatch::Term& t : terms) Add(t.matmul);
    return absl::OkStatus();
  }

 private:
  Function& function_;
  int64_t chunks_;
  int64_t streams_;
};

// The pass manager prefixes located errors with the pass name; the status says it too
// for callers without diagnostics.
absl::Status LocatedError(DiagnosticEngine* diagnostics, const Operation& op, std::string message) {
  if (diagnostics != nullptr) diagnostics->Error(op.loc(), message);
  return absl::FailedPreconditionError(absl::StrCat("pipeline-collective-matmul: ", message));
}

}  // namespace

absl::StatusOr<int> PipelineCollectiveMatmul(Module& module, int64_t chunks, int64_t streams,
                                             DiagnosticEngine* diagnostics) {
  // Worded like propagate-sharding's range check: the pass manager names the pass.
  if (chunks < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("option 'chunks' must be at least 1, got %d", chunks));
  }
  if (streams < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("option 'streams' must be at least 1, got %d", streams));
  }
  if (chunks == 1) return 0;
  // Every chunk count is checked before anything changes, so a failure leaves the
  // module as it was and reports every offending collective.
  absl::Status status;
  std::vector<std::pair<Function*, cmm::CollectiveMatmulMatches>> all;
  for (Function* function : module.functions()) {
    cmm::CollectiveMatmulMatches matches = cmm::FindCollectiveMatmuls(*function);
    for (const cmm::GatherMatch& m : matches.gathers) {
      if (m.local % chunks != 0) {
        status = LocatedError(diagnostics, *m.gather,
                              absl::StrFormat("chunks=%d does not divide the %d rows of dimension "
                                              "%d that each device contributes to this all_gather",
                                              chunks, m.local, m.dim));
      }
    }
    for (const cmm::ScatterMatch& m : matches.scatters) {
      int64_t block = m.full / m.group;
      if (block % chunks != 0) {
        status = LocatedError(diagnostics, *m.scatter,
                              absl::StrFormat("chunks=%d does not divide the %d rows of dimension "
                                              "%d that each device keeps from this reduce_scatter",
                                              chunks, block, m.result_dim));
      }
    }
    all.emplace_back(function, std::move(matches));
  }
  if (!status.ok()) return status;
  int rewritten = 0;
  for (auto& [function, matches] : all) {
    Pipeliner pipeliner(*function, chunks, streams);
    if (absl::Status s = cmm::RewriteMatches(pipeliner, matches, &rewritten); !s.ok()) return s;
  }
  return rewritten;
}

const OptionSchema<PipelineCollectiveMatmulOptions>& PipelineCollectiveMatmulOptions::Schema() {
  static const auto* schema =
      &(*new OptionSchema<PipelineCollectiveMatmulOptions>())
           .Int("chunks", &PipelineCollectiveMatmulOptions::chunks,
                "Chunks S per collective; must divide each device's block (1: leave unchanged)", 1)
           .Int("streams", &PipelineCollectiveMatmulOptions::streams,
                "Streams K; chunk i's slice, collective and GEMM run on stream i mod K", 1);
  return *schema;
}

const PassInfo& PipelineCollectiveMatmulPass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<PipelineCollectiveMatmulPass>(
      "pipeline-collective-matmul",
      "Split all_gather+matmul and matmul+reduce_scatter pairs into chunks pipelined over "
      "streams"));
  return *info;
}

absl::Status PipelineCollectiveMatmulPass::Run(Module& module) {
  const int64_t chunks = options().chunks;
  absl::StatusOr<int> n =
      PipelineCollectiveMatmul(module, chunks, options().streams, &diagnostics());
  if (!n.ok()) return n.status();
  ReportRewrites(*n, "Collective+matmul pairs split into pipelined chunks",
                 chunks == 1 ? std::string("chunks=1 leaves every pair unchanged")
                             : absl::StrCat(cmm::kNoCollectiveMatmulPair, " ", InSpmdFunctions(module)));
  return absl::OkStatus();
}

}  // namespace commir::schedules
