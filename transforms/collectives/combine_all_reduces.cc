#include "transforms/collectives/combine_all_reduces.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commir/builder.h"
#include "commir/status_macros.h"
#include "transforms/collectives/all_reduce_candidates.h"
#include "transforms/collectives/collective_buckets.h"

namespace commir::collectives {
namespace {

// A value's name as derived names may extend it: empty for an unnamed value, and for
// one named by a number (`%90`: the printer numbered it before the program was read
// back), since `%90_flat` would read as if it were related to the 90th value.
std::string NameOf(const Value* v) {
  const std::string& name = v->name();
  return absl::c_all_of(name, [](char c) { return absl::ascii_isdigit(c); }) ? std::string()
                                                                             : name;
}

// The names of a bucket's new values, from its members' names so that a printed program
// still says whose gradients a buffer holds: the first member's, or `bucket` when it has
// none (the printer suffixes repeats).
std::string BucketName(absl::Span<Operation* const> members) {
  const std::string first = NameOf(members.front()->result(0));
  return first.empty() ? "bucket" : absl::StrCat(first, "_bucket");
}

std::string Suffixed(const Value* v, absl::string_view suffix) {
  const std::string name = NameOf(v);
  return name.empty() ? std::string() : absl::StrCat(name, suffix);
}

absl::StatusOr<Value*> Named(absl::StatusOr<Value*> v, std::string name) {
  if (v.ok()) (*v)->set_name(std::move(name));
  return v;
}

// The readers of `members` placed before `last_ready` (the op making the last member's
// operand), and every op before it that reads what they make: what must move after
// the combined all_reduce. An error if `last_ready` or a member's operand depends on a
// member's result (the candidates' round order rules that out).
absl::StatusOr<std::vector<Operation*>> ReadersToMove(const Block& block,
                                                      absl::Span<Operation* const> members,
                                                      Operation* last_ready) {
  std::vector<Operation*> moved;
  if (last_ready == nullptr) return moved;  // every operand comes from outside the block
  absl::flat_hash_set<const Operation*> member_set(members.begin(), members.end());
  Operation* first_reader = nullptr;
  for (const Operation* m : members) {
    for (Operation* user : m->result(0)->users()) {
      Operation* reader = AncestorInBlock(user, block);
      if (reader != nullptr && (first_reader == nullptr || reader->IsBeforeInBlock(first_reader))) {
        first_reader = reader;
      }
    }
  }
  if (first_reader == nullptr || last_ready->IsBeforeInBlock(first_reader)) return moved;
  absl::flat_hash_set<const Operation*> moved_set;
  for (Operation* op = first_reader;; op = op->next()) {
    bool depends = false;
    ForEachValueRead(*op, [&](Value* v) {
      if (depends || v->kind() != Value::Kind::kResult) return;
      if (member_set.contains(v->defining_op())) {
        depends = true;
        return;
      }
      Operation* p = AncestorInBlock(v->defining_op(), block);
      depends = p != nullptr && p != op && moved_set.contains(p);
    });
    if (depends && (op == last_ready || member_set.contains(op))) {
      return absl::InternalError(absl::StrFormat(
          "combine-all-reduces: the operand of a %d-member bucket's all_reduce depends on "
          "a member's result",
          members.size()));
    }
    if (depends) {
      moved.push_back(op);
      moved_set.insert(op);
    }
    if (op == last_ready) break;
  }
  return moved;
}

// Replaces `members` (two or more all_reduces of one key, none reading another's result)
// by one all_reduce of their concatenated operands.
absl::Status CombineBucket(Function& function, Block& block, absl::Span<Operation* const> members) {
  Operation* last_ready = nullptr;
  for (const Operation* m : members) {
    Value* x = m->operand(0);
    if (x->kind() != Value::Kind::kResult) continue;
    Operation* p = AncestorInBlock(x->defining_op(), block);
    if (p != nullptr && (last_ready == nullptr || last_ready->IsBeforeInBlock(p))) last_ready = p;
  }
  COMMIR_ASSIGN_OR_RETURN(std::vector<Operation*> moved,
                          ReadersToMove(block, members, last_ready));
  // Take the readers out first: the combined all_reduce goes where they were, then they
  // follow it in their own order.
  std::vector<std::unique_ptr<Operation>> held;
  held.reserve(moved.size());
  for (Operation* op : moved) held.push_back(block.Remove(op));
  Operation* anchor = last_ready == nullptr ? block.front() : last_ready->next();

  OpBuilder b(&function, &block, anchor, members.front()->loc());
  const std::string base = BucketName(members);
  const ElementType element_type = members.front()->operand(0)->type().element_type();
  std::vector<OpBuilder::Operand> flat;
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const Operation* m : members) {
    Value* x = m->operand(0);
    const int64_t n = x->type().num_elements();
    if (n > kMaxThresholdBytes || total > kMaxThresholdBytes - n) {
      return absl::InternalError("combine-all-reduces: a bucket's element count overflows");
    }
    total += n;
    sizes.push_back(n);
    if (x->type().rank() != 1) {
      COMMIR_ASSIGN_OR_RETURN(
          x, Named(b.CreateValue(OpKind::kReshape, {x}, {},
                                 {Type::Tensor(element_type, {n})}),
                   Suffixed(m->operand(0), "_flat")));
    }
    flat.push_back(x);
  }
  AttrDict concat_attrs;
  concat_attrs.Set("dim", Attribute::Int(0));
  COMMIR_ASSIGN_OR_RETURN(Value* buffer,
                          Named(b.CreateValue(OpKind::kConcat, flat, std::move(concat_attrs)), base));
  COMMIR_ASSIGN_OR_RETURN(
      Value* reduced,
      Named(b.CreateValue(OpKind::kAllReduce, {buffer}, members.front()->attrs()),
            absl::StrCat(base, "_ar")));
  int64_t offset = 0;
  for (size_t k = 0; k < members.size(); ++k) {
    Value* old = members[k]->result(0);
    AttrDict slice_attrs;
    slice_attrs.Set("start", Attribute::IntList({offset}));
    slice_attrs.Set("size", Attribute::IntList({sizes[k]}));
    offset += sizes[k];
    const bool flat_result = old->type().rank() == 1;
    COMMIR_ASSIGN_OR_RETURN(
        Value* part, Named(b.CreateValue(OpKind::kSlice, {reduced}, std::move(slice_attrs)),
                           flat_result ? NameOf(old) : Suffixed(old, "_part")));
    if (!flat_result) {
      COMMIR_ASSIGN_OR_RETURN(
          part, Named(b.CreateValue(OpKind::kReshape, {part}, {}, {old->type()}), NameOf(old)));
    }
    if (part->type() != old->type()) {
      return absl::InternalError(absl::StrFormat(
          "combine-all-reduces: the slice of a member is %s, not %s", part->type().ToString(),
          old->type().ToString()));
    }
    old->ReplaceAllUsesWith(part);
  }
  for (std::unique_ptr<Operation>& op : held) block.InsertBefore(anchor, std::move(op));
  Operation::EraseAll(members);
  return absl::OkStatus();
}

absl::Status CombineInBlock(Function& function, Block& block, double threshold_bytes,
                            CombineCounts& counts) {
  for (Operation* op : block) {
    for (int r = 0; r < op->num_regions(); ++r) {
      COMMIR_RETURN_IF_ERROR(CombineInBlock(function, *op->region(r), threshold_bytes, counts));
    }
  }
  AllReduceCandidates found = CollectAllReduceCandidates(block);
  if (found.ops.size() < 2) return absl::OkStatus();
  // Last bucket first: buckets that go at one point (after the same op, or at the top
  // of the block) are each inserted right there, so they end up in bucket order. Any
  // order is correct: rewriting a bucket keeps every other bucket's members independent.
  std::vector<Bucket> buckets = AssignBuckets(found.candidates, threshold_bytes);
  for (auto it = buckets.rbegin(); it != buckets.rend(); ++it) {
    const Bucket& bucket = *it;
    if (bucket.members.size() < 2) continue;
    std::vector<Operation*> members;
    members.reserve(bucket.members.size());
    for (int i : bucket.members) members.push_back(found.ops[static_cast<size_t>(i)]);
    COMMIR_RETURN_IF_ERROR(CombineBucket(function, block, members));
    ++counts.buckets;
    counts.combined += static_cast<int64_t>(members.size());
  }
  return absl::OkStatus();
}

absl::Status CheckThreshold(int64_t threshold_bytes) {
  if (threshold_bytes < 0 || threshold_bytes > kMaxThresholdBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "threshold-bytes must lie in [0, %d], got %d", kMaxThresholdBytes, threshold_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CombineCounts> CombineAllReduces(Function& function, int64_t threshold_bytes) {
  COMMIR_RETURN_IF_ERROR(CheckThreshold(threshold_bytes));
  CombineCounts counts;
  if (!function.is_spmd()) return counts;
  COMMIR_RETURN_IF_ERROR(CombineInBlock(function, *function.body(),
                                        static_cast<double>(threshold_bytes), counts));
  return counts;
}

absl::StatusOr<CombineCounts> CombineAllReduces(Module& module, int64_t threshold_bytes) {
  CombineCounts counts;
  for (Function* f : module.functions()) {
    COMMIR_ASSIGN_OR_RETURN(CombineCounts c, CombineAllReduces(*f, threshold_bytes));
    counts.buckets += c.buckets;
    counts.combined += c.combined;
  }
  return counts;
}

const OptionSchema<CombineAllReducesOptions>& CombineAllReducesOptions::Schema() {
  static const auto* schema =
      &(*new OptionSchema<CombineAllReducesOptions>())
           .Int("threshold-bytes", &CombineAllReducesOptions::threshold_bytes,
                "bytes per device one combined all_reduce may hold (default: PyTorch DDP's "
                "bucket_cap_mb = 25 MiB; XLA's GPU combiner uses 30 MiB); an all_reduce "
                "larger than it stays alone",
                0, kMaxThresholdBytes);
  return *schema;
}

const PassInfo& CombineAllReducesPass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<CombineAllReducesPass>(
      "combine-all-reduces",
      "Combine independent all_reduces of one reduction, axes and element type into one "
      "all_reduce of their concatenation per bucket (DDP's gradient buckets)"));
  return *info;
}

absl::Status CombineAllReducesPass::Run(Module& module) {
  COMMIR_ASSIGN_OR_RETURN(CombineCounts counts,
                          CombineAllReduces(module, options().threshold_bytes));
  AddToStatistic("all-reduces-combined", "All_reduces replaced by a combined one",
                 counts.combined);
  ReportRewrites(counts.buckets, "Combined all_reduces made",
                 absl::StrCat("no two all_reduces of one reduction, axes and element type "
                              "can run at one point within ",
                              options().threshold_bytes, " bytes ", InSpmdFunctions(module)));
  return absl::OkStatus();
}

}  // namespace commir::collectives
