#include "transforms/collectives/combine_all_reduces.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commir/builder.h"
#include "commir/status_macros.h"
#include "transforms/collectives/all_reduce_candidates.h"
#include "transforms/collectives/block_order.h"
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

// Builds one all_reduce of the concatenated operands of `members` (two or more
// all_reduces of one key, none reading another's result), appended to `block` for
// RelinkInDependenceOrder to place, and makes the members' readers read its slices.
// Returns the ops built, in order.
absl::StatusOr<std::vector<Operation*>> BuildBucket(Function& function, Block& block,
                                                    absl::Span<Operation* const> members) {
  OpBuilder b(&function, &block, nullptr, members.front()->loc());
  std::vector<Operation*> built;
  auto record = [&](absl::StatusOr<Value*> v, std::string name) -> absl::StatusOr<Value*> {
    if (!v.ok()) return v;
    (*v)->set_name(std::move(name));
    built.push_back((*v)->defining_op());
    return v;
  };
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
          x, record(b.CreateValue(OpKind::kReshape, {x}, {}, {Type::Tensor(element_type, {n})}),
                    Suffixed(x, "_flat")));
    }
    flat.push_back(x);
  }
  AttrDict concat_attrs;
  concat_attrs.Set("dim", Attribute::Int(0));
  COMMIR_ASSIGN_OR_RETURN(
      Value* buffer, record(b.CreateValue(OpKind::kConcat, flat, std::move(concat_attrs)), base));
  COMMIR_ASSIGN_OR_RETURN(
      Value* reduced, record(b.CreateValue(OpKind::kAllReduce, {buffer}, members.front()->attrs()),
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
        Value* part, record(b.CreateValue(OpKind::kSlice, {reduced}, std::move(slice_attrs)),
                            flat_result ? NameOf(old) : Suffixed(old, "_part")));
    if (!flat_result) {
      COMMIR_ASSIGN_OR_RETURN(
          part, record(b.CreateValue(OpKind::kReshape, {part}, {}, {old->type()}), NameOf(old)));
    }
    if (part->type() != old->type()) {
      return absl::InternalError(absl::StrFormat(
          "combine-all-reduces: the slice of a member is %s, not %s", part->type().ToString(),
          old->type().ToString()));
    }
    old->ReplaceAllUsesWith(part);
  }
  return built;
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
  std::vector<Bucket> buckets = AssignBuckets(found.candidates, threshold_bytes);
  if (std::none_of(buckets.begin(), buckets.end(),
                   [](const Bucket& b) { return b.members.size() >= 2; })) {
    return absl::OkStatus();
  }
  absl::flat_hash_map<const Operation*, int64_t> position;
  for (Operation* op : block) position.emplace(op, static_cast<int64_t>(position.size()));

  // Each bucket's ops go as one node right after the op that makes its last operand (at
  // the top of the block when every operand comes from outside it), buckets there in
  // their order; the members' readers placed before that op follow it, with what
  // depends on them, and nothing else moves (block_order.h).
  std::vector<OrderNode> nodes;
  std::vector<Operation*> erased;
  absl::flat_hash_map<const Operation*, int64_t> built_at;
  for (const Bucket& bucket : buckets) {
    if (bucket.members.size() < 2) continue;
    std::vector<Operation*> members;
    members.reserve(bucket.members.size());
    int64_t last_ready = -1;
    for (int i : bucket.members) {
      Operation* m = found.ops[static_cast<size_t>(i)];
      members.push_back(m);
      Value* x = m->operand(0);
      Operation* p =
          x->kind() == Value::Kind::kResult ? AncestorInBlock(x->defining_op(), block) : nullptr;
      if (p == nullptr) continue;
      // An earlier bucket's slice (a member all-reducing a result all-reduced before)
      // stands where that bucket goes.
      auto it = position.find(p);
      last_ready = std::max(last_ready, it != position.end() ? it->second : built_at.at(p));
    }
    COMMIR_ASSIGN_OR_RETURN(std::vector<Operation*> built,
                            BuildBucket(function, block, members));
    for (const Operation* op : built) built_at.emplace(op, last_ready);
    nodes.push_back({std::move(built), last_ready, static_cast<int64_t>(nodes.size()) + 1});
    erased.insert(erased.end(), members.begin(), members.end());
    ++counts.buckets;
    counts.combined += static_cast<int64_t>(members.size());
  }
  for (Operation* m : erased) position.erase(m);
  Operation::EraseAll(erased);
  for (Operation* op : block) {
    auto it = position.find(op);
    if (it != position.end()) nodes.push_back({{op}, it->second, 0});
  }
  return RelinkInDependenceOrder(block, nodes);
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
  // A statistic only, as canonicalize, cse and dce report: the default spmd pipeline
  // ends with this pass, so finding nothing to combine (a forward pass, one device) is
  // routine, and a remark on every such program would bury the ones that matter.
  AddToStatistic("rewrites", "Combined all_reduces made", counts.buckets);
  return absl::OkStatus();
}

}  // namespace commir::collectives
