#include "search/plan/parallel_plan.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace commir::search::plan {

absl::string_view RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "none";
}

absl::StatusOr<Recompute> ParseRecompute(absl::string_view text) {
  if (text == "none") return Recompute::kNone;
  if (text == "selective") return Recompute::kSelective;
  if (text == "full") return Recompute::kFull;
  return absl::InvalidArgumentError(
      absl::StrCat("plan: recompute is none, selective or full, not '", text, "'"));
}

Recompute ParallelPlan::RecomputeOf(int64_t stage) const {
  if (stage >= 0 && stage < static_cast<int64_t>(stage_recompute.size())) {
    return stage_recompute[stage];
  }
  return recompute;
}

bool ParallelPlan::mixed_recompute() const {
  for (Recompute r : stage_recompute) {
    if (r != stage_recompute.front()) return true;
  }
  return false;
}

Recompute ParallelPlan::HeaviestRecompute() const {
  Recompute out = stage_recompute.empty() ? recompute : Recompute::kNone;
  // The enum is ordered lightest first.
  for (Recompute r : stage_recompute) out = std::max(out, r);
  return out;
}

void SetStageRecompute(ParallelPlan& plan, std::vector<Recompute> per_rank) {
  plan.stage_recompute = std::move(per_rank);
  if (!plan.mixed_recompute()) {
    if (!plan.stage_recompute.empty()) plan.recompute = plan.stage_recompute.front();
    plan.stage_recompute.clear();
  }
}

int64_t Microbatches(const ModelSpec& model, const ParallelPlan& plan) {
  const int64_t per_step = plan.micro_batch * plan.dp;
  return per_step > 0 ? model.global_batch / per_step : 0;
}

absl::Status CheckPlan(const ModelSpec& model, const ParallelPlan& p) {
  auto refuse = [&](auto&&... why) {
    return absl::InvalidArgumentError(absl::StrCat("plan ", DescribePlan(p), ": ", why...));
  };
  if (absl::Status s = Validate(model); !s.ok()) return s;
  if (p.tp < 1 || p.cp < 1 || p.pp < 1 || p.dp < 1 || p.virtual_stages < 1 || p.micro_batch < 1) {
    return refuse("every size must be at least 1");
  }
  // Checked one factor at a time (each is at most 2^30 when parsed), so that gpus()'s
  // product cannot overflow once this passes.
  {
    int64_t gpus = 1;
    for (int64_t size : {p.tp, p.cp, p.pp, p.dp}) {
      if (size > kMaxPlanGpus / gpus) {
        return refuse("tp x cp x pp x dp exceeds ", kMaxPlanGpus, " GPUs");
      }
      gpus *= size;
    }
  }
  if (p.sequence_parallel && p.tp == 1) return refuse("sequence parallelism needs tp > 1");
  if (model.global_batch % (p.micro_batch * p.dp) != 0) {
    return refuse("the global batch ", model.global_batch,
                  " is not a multiple of micro-batch x dp = ", p.micro_batch * p.dp);
  }
  if (p.uneven()) {
    if (p.pp < 2) return refuse("uneven stages need pp > 1");
    if (p.virtual_stages > 1 && !p.stage_layers.empty()) {
      return refuse("a layers=... split is not combined with interleaving (first=/last= is)");
    }
  }
  if (!p.stage_layers.empty()) {
    if (p.first_stage_layers != 0 || p.last_stage_layers != 0) {
      return refuse("give the split as layers=... or as first=/last=, not both");
    }
    if (static_cast<int64_t>(p.stage_layers.size()) != p.pp) {
      return refuse("the split names ", p.stage_layers.size(),
                    " ranks, not one per pipeline rank (pp = ", p.pp, ")");
    }
    int64_t sum = 0;
    for (int64_t n : p.stage_layers) {
      if (n < 1) return refuse("every pipeline rank needs at least one layer");
      sum += n;
    }
    if (sum != model.layers) {
      return refuse("the split holds ", sum, " layers, not the model's ", model.layers);
    }
  } else if (p.uneven()) {
    if (p.first_stage_layers < 0 || p.last_stage_layers < 0) {
      return refuse("stage layer counts must be positive (0: an even share)");
    }
    const int64_t set = (p.first_stage_layers > 0) + (p.last_stage_layers > 0);
    const int64_t others = p.pp - set;
    const int64_t rest = model.layers - p.first_stage_layers - p.last_stage_layers;
    if (others == 0 && rest != 0) {
      return refuse("the first and last stages hold ", model.layers - rest, " of the ",
                    model.layers, " layers");
    }
    if (others > 0 && (rest < others || rest % others != 0)) {
      return refuse("the other ", rest, " layers do not split evenly over the other ", others,
                    " stages");
    }
    if (p.virtual_stages > 1) {
      // Interleaved: the middle ranks' chunks hold equal counts, and an end rank's chunks
      // hold that count but for its outermost one, which takes what the end rank lacks.
      const int64_t v = p.virtual_stages;
      if (others == 0) return refuse("interleaving with first=/last= needs a rank between them");
      if ((rest / others) % v != 0) {
        return refuse("the other ranks' ", rest / others, " layers each do not split into v = ",
                      v, " chunks");
      }
      const int64_t per_chunk = rest / others / v;
      for (int64_t end : {p.first_stage_layers, p.last_stage_layers}) {
        if (end > 0 && end < (v - 1) * per_chunk) {
          return refuse("an end rank's ", end, " layers leave its v - 1 = ", v - 1,
                        " inner chunks short of the ", per_chunk, " layers of every other chunk");
        }
      }
    }
  } else if (model.layers % (p.pp * p.virtual_stages) != 0) {
    return refuse("the ", model.layers,
                  " layers do not split evenly into pp x v = ", p.pp * p.virtual_stages, " chunks");
  }
  if (p.virtual_stages > 1 && p.pp == 1) return refuse("interleaving needs pp > 1");
  if (p.virtual_stages > 1 && Microbatches(model, p) % p.pp != 0) {
    return refuse("interleaving needs the ", Microbatches(model, p),
                  " micro-batches to be a multiple of pp");
  }
  if (model.heads % p.tp != 0 || model.ffn % p.tp != 0) {
    return refuse("tp does not divide the ", model.heads, " heads and the FFN ", model.ffn);
  }
  const int64_t seq_split = p.cp * (p.sequence_parallel ? p.tp : 1);
  if (model.sequence % seq_split != 0) {
    return refuse("the sequence ", model.sequence, " does not split into ", seq_split);
  }
  if (p.zero_stage < 0 || p.zero_stage > 3) return refuse("ZeRO stage must be 0..3");
  if (!p.stage_recompute.empty() && static_cast<int64_t>(p.stage_recompute.size()) != p.pp) {
    return refuse("the recomputation names ", p.stage_recompute.size(),
                  " ranks, not one per pipeline rank (pp = ", p.pp, ")");
  }
  return absl::OkStatus();
}

std::vector<int64_t> LayersPerStage(const ModelSpec& model, const ParallelPlan& p) {
  if (p.pp < 1) return {};
  if (!p.stage_layers.empty()) return p.stage_layers;
  if (!p.uneven()) return std::vector<int64_t>(p.pp, model.layers / p.pp);
  const int64_t set = (p.first_stage_layers > 0) + (p.last_stage_layers > 0);
  const int64_t others = p.pp - set;
  const int64_t rest = model.layers - p.first_stage_layers - p.last_stage_layers;
  std::vector<int64_t> out(p.pp, others > 0 ? rest / others : 0);
  if (p.first_stage_layers > 0) out.front() = p.first_stage_layers;
  if (p.last_stage_layers > 0) out.back() = p.last_stage_layers;
  return out;
}

std::vector<int64_t> ChunkLayers(const ModelSpec& model, const ParallelPlan& p) {
  const int64_t v = std::max<int64_t>(1, p.virtual_stages);
  const std::vector<int64_t> ranks = LayersPerStage(model, p);
  if (v == 1) return ranks;
  const int64_t pp = static_cast<int64_t>(ranks.size());
  // Chunk c lives on rank c % pp; every chunk holds the middle ranks' share per chunk.
  int64_t per_chunk = 0;
  for (int64_t r = 0; r < pp; ++r) {
    const bool end = (r == 0 && p.first_stage_layers > 0) ||
                     (r == pp - 1 && p.last_stage_layers > 0);
    if (!end) {
      per_chunk = ranks[r] / v;
      break;
    }
  }
  std::vector<int64_t> out(pp * v, per_chunk);
  // The ends' outermost chunks (the model's first and last) take what their rank lacks
  // (or holds beyond the others), as Meta's Llama 3 schedule drops a layer from them.
  if (p.first_stage_layers > 0) out.front() = ranks.front() - (v - 1) * per_chunk;
  if (p.last_stage_layers > 0) out.back() = ranks.back() - (v - 1) * per_chunk;
  return out;
}

std::string DescribeStageRecompute(const ParallelPlan& p) {
  if (p.stage_recompute.empty()) {
    std::vector<absl::string_view> names(std::max<int64_t>(1, p.pp), RecomputeName(p.recompute));
    return absl::StrJoin(names, ",");
  }
  return absl::StrJoin(p.stage_recompute, ",", [](std::string* out, Recompute r) {
    absl::StrAppend(out, RecomputeName(r));
  });
}

std::string DescribePlan(const ParallelPlan& p) {
  const std::string split =
      p.stage_layers.empty() ? "" : absl::StrCat(" layers=", absl::StrJoin(p.stage_layers, ","));
  const std::string recompute = p.stage_recompute.empty() ? std::string(RecomputeName(p.recompute))
                                                          : DescribeStageRecompute(p);
  return absl::StrCat("tp=", p.tp, " cp=", p.cp, " pp=", p.pp,
                      p.virtual_stages > 1 ? absl::StrCat(" (v=", p.virtual_stages, ")") : "",
                      " dp=", p.dp, p.sequence_parallel ? " sp" : "", " mb=", p.micro_batch,
                      " zero=", p.zero_stage, " recompute=", recompute,
                      split,
                      p.first_stage_layers > 0 ? absl::StrCat(" first=", p.first_stage_layers) : "",
                      p.last_stage_layers > 0 ? absl::StrCat(" last=", p.last_stage_layers) : "");
}

absl::StatusOr<ParallelPlan> ParsePlan(absl::string_view text) {
  ParallelPlan p;
  bool any = false;
  bool after_recompute = false;  // bare recomputation words extend recompute=...'s list
  bool after_layers = false;     // bare counts extend layers=...'s list
  std::vector<Recompute> per_rank;
  absl::flat_hash_set<std::string> seen;  // keys given so far
  for (absl::string_view item : absl::StrSplit(text, absl::ByAnyChar(", "), absl::SkipEmpty())) {
    any = true;
    if (after_recompute && !absl::StrContains(item, '=')) {
      if (absl::StatusOr<Recompute> r = ParseRecompute(item); r.ok()) {
        per_rank.push_back(*r);
        continue;
      }
    }
    after_recompute = false;
    if (after_layers && !absl::StrContains(item, '=')) {
      int64_t n = 0;
      if (absl::SimpleAtoi(item, &n)) {
        if (n < 1 || n > (int64_t{1} << 30)) {
          return absl::InvalidArgumentError(
              absl::StrCat("plan: layers needs positive counts, not '", item, "'"));
        }
        p.stage_layers.push_back(n);
        continue;
      }
    }
    after_layers = false;
    // DescribePlan writes interleaving as "(v=2)".
    absl::ConsumePrefix(&item, "(");
    absl::ConsumeSuffix(&item, ")");
    if (item == "sp") {
      if (!seen.insert("sp").second) {
        return absl::InvalidArgumentError("plan: 'sp' is given twice");
      }
      p.sequence_parallel = true;
      continue;
    }
    const std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    const absl::string_view key = kv.first;
    const absl::string_view value = kv.second;
    // The last of two values would silently win: a key given twice is refused.
    if (!seen.insert(std::string(key)).second) {
      return absl::InvalidArgumentError(absl::StrCat("plan: key '", key, "' is given twice"));
    }
    if (key == "recompute") {
      absl::StatusOr<Recompute> r = ParseRecompute(value);
      if (!r.ok()) return r.status();
      per_rank = {*r};
      after_recompute = true;
      continue;
    }
    if (key == "layers") {
      int64_t n = 0;
      if (!absl::SimpleAtoi(value, &n) || n < 1 || n > (int64_t{1} << 30)) {
        return absl::InvalidArgumentError(
            absl::StrCat("plan: layers needs positive counts, not '", value, "'"));
      }
      p.stage_layers = {n};
      after_layers = true;
      continue;
    }
    int64_t* field = nullptr;
    int64_t zero = 0;
    if (key == "tp") field = &p.tp;
    if (key == "cp") field = &p.cp;
    if (key == "pp") field = &p.pp;
    if (key == "v") field = &p.virtual_stages;
    if (key == "dp") field = &p.dp;
    if (key == "mb") field = &p.micro_batch;
    if (key == "first") field = &p.first_stage_layers;
    if (key == "last") field = &p.last_stage_layers;
    if (key == "zero") field = &zero;
    if (field == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan: unknown key '", key,
                       "' (tp, cp, pp, v, dp, sp, mb, zero, recompute, layers, first, last)"));
    }
    if (!absl::SimpleAtoi(value, field) || *field < 0 || *field > (int64_t{1} << 30)) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan: ", key, " needs a count, not '", value, "'"));
    }
    if (key == "zero") {
      // ZeRO 2 is no scheme Megatron-LM runs (its distributed optimizer keeps the whole
      // gradient buffer) but torch FSDP's SHARD_GRAD_OP, which Meta ran Llama 3 405B with:
      // it can be costed, not launched (megatron_args.h refuses it), nor is it searched.
      if (zero > 3) {
        return absl::InvalidArgumentError(
            "plan: zero is 0 (plain data parallelism), 1 (Megatron-LM's distributed optimizer), "
            "2 (FSDP keeping each micro-batch's gathered parameters to its backward) or 3 "
            "(FSDP2)");
      }
      p.zero_stage = static_cast<int>(zero);
    }
  }
  if (!any) return absl::InvalidArgumentError("plan: empty (e.g. tp=8,pp=8,dp=12,mb=1)");
  if (per_rank.size() == 1) {
    p.recompute = per_rank.front();
  } else if (!per_rank.empty()) {
    // A list names one recomputation per pipeline rank, all equal or not: a list of
    // another length is refused here, before an all-equal one folds into one value.
    if (static_cast<int64_t>(per_rank.size()) != p.pp) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan: recompute names ", per_rank.size(),
                       " ranks, not one per pipeline rank (pp = ", p.pp, ")"));
    }
    // One spelling: an all-equal list is the uniform recomputation (CheckPlan checks the
    // count of a mixed one).
    SetStageRecompute(p, std::move(per_rank));
  }
  return p;
}

}  // namespace commir::search::plan
