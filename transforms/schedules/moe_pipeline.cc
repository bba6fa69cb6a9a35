#include "transforms/schedules/moe_pipeline.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commir/status_macros.h"
#include "transforms/schedules/collective_matmul.h"

namespace commir::schedules {
namespace {

using cmm::DimAttrs;
using cmm::Emit;
using cmm::Operand;
using cmm::SliceDim;
using cmm::SplitDim;
using cmm::StreamChoice;
using cmm::WithDim;
using cmm::ZeroAttrs;

bool HasStream(const Operation& op) {
  return op.attrs().Find("stream") != nullptr || op.stream_operand() != nullptr;
}

bool IsExchange(const Operation& op, int64_t split_dim, int64_t concat_dim) {
  return op.Is(OpKind::kAllToAll) && !HasStream(op) && op.attrs().Find("axis") != nullptr &&
         op.attrs().GetInt("split_dim", -1) == split_dim &&
         op.attrs().GetInt("concat_dim", -1) == concat_dim &&
         op.operand(0)->type().rank() == 3;
}

AxisList AxesOf(const Operation& op) { return op.attrs().Find("axis")->axes(); }

// How a region op treats the rows (dim 1) of its operands.
enum class Role {
  kRow,     // its result is a row value: row r of the result reads row r of the operands
  kSum,     // a^T b over the rows: each chunk adds its part
  kCombine  // the combine all_to_all that ends the region
};

struct Region {
  Operation* dispatch = nullptr;  // all_to_all {split_dim = 0, concat_dim = 1}
  int64_t group = 1;              // n
  int64_t rows = 0;               // n C
  std::vector<std::pair<Operation*, Role>> ops;  // program order, the dispatch excluded
  std::string invalid;            // why the layer is left alone ("" if rewritable)
};

// The ep layers of `body`: each dispatch all_to_all and the ops that belong to it. An op
// belongs to the latest dispatch whose rows it reads (a gradient function's backward
// reads the forward's activations and its own cotangent rows: it belongs to the
// backward's dispatch).
std::vector<Region> FindRegions(Function& function) {
  std::vector<Region> regions;
  if (!function.is_spmd() || function.mesh() == nullptr) return regions;
  // The region of each row value (the dispatch all_to_all's result and what row ops make
  // from it).
  absl::flat_hash_map<const Value*, int> region_of;
  for (Operation* op : *function.body()) {
    int owner = -1;
    for (Value* v : op->operands()) {
      auto it = region_of.find(v);
      if (it != region_of.end()) owner = std::max(owner, it->second);
    }
    if (owner < 0) {
      if (IsExchange(*op, 0, 1)) {
        Region r;
        r.dispatch = op;
        r.group = function.mesh()->GroupSize(AxesOf(*op));
        r.rows = op->result(0)->type().dims()[1];
        if (r.group >= 2) {
          region_of[op->result(0)] = static_cast<int>(regions.size());
          regions.push_back(std::move(r));
        }
      }
      continue;
    }
    Region& r = regions[owner];
    auto reject = [&](const std::string& why) {
      if (r.invalid.empty()) {
        r.invalid = absl::StrFormat("%s at %d:%d %s", op->name(), op->loc().line, op->loc().col, why);
      }
    };
    auto is_row = [&](const Value* v) { return region_of.contains(v); };
    const Type result = op->num_results() == 1 ? op->result(0)->type() : Type();
    const bool row_shaped = op->num_results() == 1 && result.rank() >= 2 && result.dims()[1] == r.rows;
    if (IsExchange(*op, 1, 0) && AxesOf(*op) == AxesOf(*r.dispatch)) {
      r.ops.push_back({op, Role::kCombine});
    } else if (op->def().Has(kElementwise) && row_shaped) {
      bool ok = true;
      for (Value* v : op->operands()) {
        if (v->is_literal()) continue;
        if (!is_row(v) || v->type().dims() != result.dims()) ok = false;
      }
      if (!ok) reject("mixes the expert rows with a value of another shape or origin");
      r.ops.push_back({op, Role::kRow});
      region_of[op->result(0)] = owner;
    } else if (op->Is(OpKind::kMatmul) && op->operand(0)->type().rank() == 3 &&
               op->operand(1)->type().rank() == 3) {
      const bool ta = op->BoolAttr("transpose_a"), tb = op->BoolAttr("transpose_b");
      const bool a_row = is_row(op->operand(0)), b_row = is_row(op->operand(1));
      if (a_row && !ta && !b_row && row_shaped) {
        r.ops.push_back({op, Role::kRow});
        region_of[op->result(0)] = owner;
      } else if (a_row && ta && b_row && !tb) {
        r.ops.push_back({op, Role::kSum});
      } else {
        reject("is not an expert GEMM on the rows or a sum over them");
      }
    } else if (op->Is(OpKind::kAllReduce) && !HasStream(*op) && row_shaped) {
      r.ops.push_back({op, Role::kRow});
      region_of[op->result(0)] = owner;
    } else {
      reject("reads the expert rows but does not keep them independent");
    }
  }
  for (Region& r : regions) {
    bool combined = false;
    for (const auto& [op, role] : r.ops) combined |= role == Role::kCombine;
    if (!combined && r.invalid.empty()) {
      r.invalid = "no combine all_to_all {split_dim = 1, concat_dim = 0} over the same axes "
                  "follows";
    }
  }
  return regions;
}

class Rewriter {
 public:
  Rewriter(Function& function, int64_t chunks) : function_(function), chunks_(chunks) {}

  // Every row value of the regions seen so far, including the assembled whole values
  // that replace rewritten ones: a later region slices them per chunk.
  absl::flat_hash_set<const Value*>& rows() { return rows_; }

  absl::Status Rewrite(const Region& r, std::vector<Operation*>& erase) {
    Operation* dispatch = r.dispatch;
    absl::flat_hash_set<const Operation*> inside = {dispatch};
    for (const auto& [op, role] : r.ops) inside.insert(op);
    // The values the loop must hand out, and where: before the first op outside the region
    // that reads one of them.
    std::vector<Value*> region_values = {dispatch->result(0)};
    for (const auto& [op, role] : r.ops) region_values.push_back(op->result(0));
    Operation* first_user = nullptr;
    for (Value* v : region_values) {
      for (Operation* user : v->users()) {
        Operation* top = user;
        while (top->parent_block() != function_.body()) top = top->parent_op();
        if (inside.contains(top)) continue;
        if (first_user == nullptr || top->IsBeforeInBlock(first_user)) first_user = top;
      }
    }
    if (first_user == nullptr) return absl::OkStatus();  // nothing reads the layer
    // Everything the region reads from outside must exist there.
    for (const auto& [op, role] : r.ops) {
      for (Value* v : op->operands()) {
        if (v->kind() != Value::Kind::kResult) continue;
        Operation* def = v->defining_op();
        if (inside.contains(def)) {
          if (def != dispatch && !rows_.contains(v)) {
            return Skip(r, absl::StrFormat("%s at %d:%d reads a sum over the rows", op->name(),
                                           op->loc().line, op->loc().col));
          }
          continue;
        }
        while (def->parent_block() != function_.body()) def = def->parent_op();
        if (!def->IsBeforeInBlock(first_user)) {
          return Skip(r, absl::StrFormat("%s at %d:%d reads a value computed after the layer's "
                                         "results are first used",
                                         op->name(), op->loc().line, op->loc().col));
        }
      }
    }
    Value* buf = dispatch->operand(0);
    const int64_t capacity = buf->type().dims()[1];
    const int64_t n = r.group, c = capacity / chunks_;
    OpBuilder e(&function_, function_.body(), first_user, dispatch->loc());
    auto name = [](const Value* v, absl::string_view suffix) {
      return absl::StrCat(v->name().empty() ? "moe" : v->name(), suffix);
    };
    // Loop-invariant views: the dispatch buffer [E, N, c, H] and each row value of an
    // earlier region [E/n, n, N, c, ...].
    Type buf_view[] = {SplitDim(buf->type(), 1, {chunks_, c})};
    COMMIR_ASSIGN_OR_RETURN(Value* buf_chunks,
                            Emit(e, OpKind::kReshape, {buf}, {}, buf_view, {}, name(buf, "_chunks")));
    absl::flat_hash_map<const Value*, Value*> outside_views;
    for (const auto& [op, role] : r.ops) {
      for (Value* v : op->operands()) {
        if (!rows_.contains(v) || inside.contains(v->defining_op()) || outside_views.contains(v)) {
          continue;
        }
        Type view[] = {SplitDim(v->type(), 1, {n, chunks_, c})};
        COMMIR_ASSIGN_OR_RETURN(Value* w,
                                Emit(e, OpKind::kReshape, {v}, {}, view, {}, name(v, "_chunks")));
        outside_views[v] = w;
      }
    }
    // Carried values: each combine's output [E, N, c, H], each row value read after the
    // layer [E/n, n, N, c, ...] (assembled), each sum over the rows.
    struct Carried {
      Value* original;
      Role role;
    };
    std::vector<Carried> carried;
    std::vector<Value*> inits;
    auto add_carried = [&](Value* original, Role role, Type type) -> absl::Status {
      COMMIR_ASSIGN_OR_RETURN(Value* zero, Emit(e, OpKind::kFull, {}, ZeroAttrs(type), {&type, 1},
                                                {}, name(original, "_init")));
      carried.push_back({original, role});
      inits.push_back(zero);
      return absl::OkStatus();
    };
    for (Value* v : region_values) {
      Operation* def = v->defining_op();
      Role role = Role::kRow;
      for (const auto& [op, op_role] : r.ops) {
        if (op == def) role = op_role;
      }
      bool read_outside = false;
      for (Operation* user : v->users()) read_outside |= !inside.contains(user);
      if (!read_outside) continue;
      if (role == Role::kCombine) {
        COMMIR_RETURN_IF_ERROR(add_carried(v, role, SplitDim(v->type(), 1, {chunks_, c})));
      } else if (role == Role::kSum) {
        COMMIR_RETURN_IF_ERROR(add_carried(v, role, v->type()));
      } else {
        COMMIR_RETURN_IF_ERROR(add_carried(v, role, SplitDim(v->type(), 1, {n, chunks_, c})));
      }
    }
    // Straight-line code, chunk by chunk, all exchanges on one stream in the order
    // dispatch 0, dispatch 1, chunk 0's GEMMs, combine 0, dispatch 2, chunk 1's GEMMs,
    // combine 1, ...: chunk i+1's dispatch is issued before chunk i's combine, so it
    // moves while chunk i's GEMMs run, and the combine of chunk i then moves under chunk
    // i+1's GEMMs. One stream, because the exchanges share the GPU's links (NVLink, the
    // NIC): two at once would not go faster than one after the other.
    OpBuilder& b = e;
    const StreamChoice exchange{nullptr, kMoeExchangeStream};
    std::vector<Value*> acc = inits;
    std::vector<Value*> dispatched(chunks_, nullptr);
    std::vector<Value*> indices(chunks_, nullptr);
    auto index = [&](int64_t i) {
      if (indices[i] == nullptr) indices[i] = b.IndexConstant(i, absl::StrCat("chunk", i));
      return indices[i];
    };
    auto dispatch_chunk = [&](int64_t i) -> absl::Status {
      Value* at = index(i);
      COMMIR_ASSIGN_OR_RETURN(Value* s, SliceDim(b, buf_chunks, 1, 1, at, exchange, name(buf, "_slice")));
      Type flat[] = {WithDim(buf->type(), 1, c)};
      COMMIR_ASSIGN_OR_RETURN(Value* f, Emit(b, OpKind::kReshape, {s}, {}, flat, exchange, name(buf, "_chunk")));
      COMMIR_ASSIGN_OR_RETURN(dispatched[i], Emit(b, OpKind::kAllToAll, {f}, dispatch->attrs(), {},
                                                  exchange, name(dispatch->result(0), "_chunk")));
      return absl::OkStatus();
    };
    COMMIR_RETURN_IF_ERROR(dispatch_chunk(0));
    for (int64_t i = 0; i < chunks_; ++i) {
      if (i + 1 < chunks_) COMMIR_RETURN_IF_ERROR(dispatch_chunk(i + 1));
      Value* at = index(i);
      absl::flat_hash_map<const Value*, Value*> chunk_of = {{dispatch->result(0), dispatched[i]}};
      auto chunk_operand = [&](Value* v) -> absl::StatusOr<Operand> {
        if (v->is_literal()) return Operand::Literal(v->literal_value(), v->type());
        if (auto it = chunk_of.find(v); it != chunk_of.end()) return Operand(it->second);
        if (auto it = outside_views.find(v); it != outside_views.end()) {
          COMMIR_ASSIGN_OR_RETURN(Value* s, SliceDim(b, it->second, 2, 1, at, {}, name(v, "_slice")));
          Type flat[] = {WithDim(v->type(), 1, n * c)};
          COMMIR_ASSIGN_OR_RETURN(Value* f, Emit(b, OpKind::kReshape, {s}, {}, flat, {}, name(v, "_chunk")));
          chunk_of[v] = f;
          return Operand(f);
        }
        return Operand(v);  // the same for every chunk: the expert weights
      };
      for (const auto& [op, role] : r.ops) {
        std::vector<Operand> operands;
        for (Value* v : op->operands()) {
          COMMIR_ASSIGN_OR_RETURN(Operand o, chunk_operand(v));
          operands.push_back(o);
        }
        Value* out = nullptr;
        if (role == Role::kCombine) {
          COMMIR_ASSIGN_OR_RETURN(out, Emit(b, OpKind::kAllToAll, operands, op->attrs(), {}, exchange,
                                            name(op->result(0), "_chunk")));
        } else {
          COMMIR_ASSIGN_OR_RETURN(out, Emit(b, op->kind(), operands, op->attrs(), {}, {},
                                            name(op->result(0), role == Role::kSum ? "_part" : "_chunk")));
        }
        chunk_of[op->result(0)] = out;
      }
      for (size_t k = 0; k < carried.size(); ++k) {
        Value* original = carried[k].original;
        Value* chunk = chunk_of[original];
        if (carried[k].role == Role::kSum) {
          COMMIR_ASSIGN_OR_RETURN(acc[k], Emit(b, OpKind::kAdd, {acc[k], chunk}, {}, {}, {},
                                               name(original, "_sum")));
          continue;
        }
        // A combine's chunk [E, c, H] lands at [E, i, c, H] (where the combine receives it,
        // on the exchange stream); a row chunk [E/n, n c, ...] at [E/n, n, i, c, ...].
        const bool combine = carried[k].role == Role::kCombine;
        const StreamChoice stream = combine ? exchange : StreamChoice{};
        Type blocks[] = {combine ? SplitDim(chunk->type(), 1, {1, c})
                                 : SplitDim(chunk->type(), 1, {n, 1, c})};
        COMMIR_ASSIGN_OR_RETURN(Value* view, Emit(b, OpKind::kReshape, {chunk}, {}, blocks, stream,
                                                  name(original, "_blocks")));
        COMMIR_ASSIGN_OR_RETURN(acc[k], Emit(b, OpKind::kDynamicUpdateSlice, {acc[k], view, at},
                                             DimAttrs(combine ? 1 : 2), {}, stream,
                                             name(original, "_acc")));
      }
    }
    if (!b.ok()) return b.status();
    for (size_t k = 0; k < carried.size(); ++k) {
      Value* original = carried[k].original;
      Value* whole = acc[k];
      if (carried[k].role != Role::kSum) {
        Type type[] = {original->type()};
        COMMIR_ASSIGN_OR_RETURN(whole, Emit(e, OpKind::kReshape, {whole}, {}, type, {}, ""));
      }
      whole->set_name(original->name());
      original->ReplaceAllUsesWith(whole);
      if (carried[k].role == Role::kRow) rows_.insert(whole);
    }
    erase.push_back(dispatch);
    for (const auto& [op, role] : r.ops) erase.push_back(op);
    return absl::OkStatus();
  }

  absl::Status Skip(const Region& r, const std::string& why) {
    skipped_.push_back(absl::StrFormat("@%s: all_to_all at %d:%d: %s", function_.name(),
                                       r.dispatch->loc().line, r.dispatch->loc().col, why));
    return absl::OkStatus();
  }
  std::vector<std::string>& skipped() { return skipped_; }

 private:
  Function& function_;
  int64_t chunks_;
  absl::flat_hash_set<const Value*> rows_;
  std::vector<std::string> skipped_;
};

}  // namespace

absl::StatusOr<int> MoePipeline(Module& module, int64_t chunks, std::vector<std::string>* skipped,
                                DiagnosticEngine* diagnostics) {
  if (chunks < 1 || chunks > kMaxMoeChunks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "option 'chunks' must be between 1 and %d, got %d", kMaxMoeChunks, chunks));
  }
  if (chunks == 1) return 0;
  // Every layer's capacity is checked before anything changes, so a failure leaves the
  // module as it was and names every offending layer.
  absl::Status status;
  std::vector<std::pair<Function*, std::vector<Region>>> all;
  for (Function* function : module.functions()) {
    std::vector<Region> regions = FindRegions(*function);
    for (const Region& r : regions) {
      const int64_t capacity = r.dispatch->operand(0)->type().dims()[1];
      if (r.invalid.empty() && capacity % chunks != 0) {
        std::string message = absl::StrFormat(
            "chunks=%d does not divide the capacity %d of each device's experts in this "
            "dispatch all_to_all",
            chunks, capacity);
        if (diagnostics != nullptr) diagnostics->Error(r.dispatch->loc(), message);
        status = absl::FailedPreconditionError(absl::StrCat("moe-pipeline: ", message));
      }
    }
    all.emplace_back(function, std::move(regions));
  }
  if (!status.ok()) return status;
  int rewritten = 0;
  for (auto& [function, regions] : all) {
    Rewriter rewriter(*function, chunks);
    std::vector<Operation*> erase;
    for (const Region& r : regions) {
      // Row values of every layer, rewritten or not: a later layer slices them per chunk.
      rewriter.rows().insert(r.dispatch->result(0));
      for (const auto& [op, role] : r.ops) {
        if (role == Role::kRow) rewriter.rows().insert(op->result(0));
      }
    }
    for (const Region& r : regions) {
      if (!r.invalid.empty()) {
        COMMIR_RETURN_IF_ERROR(rewriter.Skip(r, r.invalid));
        continue;
      }
      const size_t before = erase.size();
      absl::Status s = rewriter.Rewrite(r, erase);
      if (!s.ok()) {
        Operation::EraseAll(erase);
        return s;
      }
      if (erase.size() > before) ++rewritten;
    }
    Operation::EraseAll(erase);
    if (skipped != nullptr) {
      skipped->insert(skipped->end(), rewriter.skipped().begin(), rewriter.skipped().end());
    }
  }
  return rewritten;
}

const OptionSchema<MoePipelineOptions>& MoePipelineOptions::Schema() {
  static const auto* schema =
      &(*new OptionSchema<MoePipelineOptions>())
           .Int("chunks", &MoePipelineOptions::chunks,
                "Chunks N of each device's expert capacity; must divide it (1: leave unchanged)", 1,
                kMaxMoeChunks);
  return *schema;
}

const PassInfo& MoePipelinePass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<MoePipelinePass>(
      "moe-pipeline",
      "Split an expert-parallel MoE layer's capacity into chunks so each chunk's dispatch and "
      "combine all_to_alls overlap the neighbouring chunks' expert GEMMs"));
  return *info;
}

absl::Status MoePipelinePass::Run(Module& module) {
  skipped_.clear();
  const int64_t chunks = options().chunks;
  absl::StatusOr<int> n = MoePipeline(module, chunks, &skipped_, &diagnostics());
  if (!n.ok()) return n.status();
  ReportRewrites(*n, "Expert-parallel MoE layers split into pipelined chunks",
                 chunks == 1 ? std::string("chunks=1 leaves every layer unchanged")
                 : skipped_.empty()
                     ? absl::StrCat("no all_to_all {split_dim = 0, concat_dim = 1} of an expert "
                                    "buffer (and not yet scheduled on a stream) ",
                                    InSpmdFunctions(module))
                     : absl::StrJoin(skipped_, "; "));
  return absl::OkStatus();
}

}  // namespace commir::schedules
