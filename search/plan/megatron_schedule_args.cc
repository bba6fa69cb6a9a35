#include "search/plan/megatron_schedule_args.h"

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace commir::search::plan {
namespace {

struct Pass {
  std::string name;
  absl::flat_hash_map<std::string, std::string> options;
  std::string text;
};

// "a{k=v,k=v},b" -> passes; commas inside braces separate options.
absl::StatusOr<std::vector<Pass>> ParsePipeline(const std::string& pipeline) {
  std::vector<Pass> out;
  if (pipeline.empty()) return out;
  std::vector<std::string> items;
  int depth = 0;
  std::string current;
  for (char c : pipeline) {
    if (c == '{') ++depth;
    if (c == '}' && --depth < 0) break;
    if (c == ',' && depth == 0) {
      items.push_back(current);
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (depth != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer schedule '", pipeline, "': unbalanced braces"));
  }
  items.push_back(current);
  for (const std::string& item : items) {
    Pass p;
    p.text = item;
    const size_t brace = item.find('{');
    p.name = item.substr(0, brace);
    if (p.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer schedule '", pipeline, "': an empty pass"));
    }
    if (brace != std::string::npos) {
      const std::string body = item.substr(brace + 1, item.size() - brace - 2);
      for (absl::string_view kv : absl::StrSplit(body, ',', absl::SkipEmpty())) {
        std::pair<std::string, std::string> split = absl::StrSplit(kv, absl::MaxSplits('=', 1));
        p.options[split.first] = split.second;
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

bool IsAttention(const Pass& p) {
  return p.name == "ring-attention" || p.name == "ulysses-attention";
}
bool IsMatmul(const Pass& p) {
  return p.name == "ring-collective-matmul" || p.name == "pipeline-collective-matmul";
}

// The context axes a pass runs over: its axes= option, or all of them.
std::vector<std::string> PassAxes(const Pass& p, const ScheduleMesh& mesh) {
  auto it = p.options.find("axes");
  if (it != p.options.end()) return absl::StrSplit(it->second, '+', absl::SkipEmpty());
  std::vector<std::string> all;
  for (const auto& [name, size] : mesh.context_axes) all.push_back(name);
  return all;
}

int ContextAxisIndex(const ScheduleMesh& mesh, const std::string& axis) {
  for (size_t i = 0; i < mesh.context_axes.size(); ++i) {
    if (mesh.context_axes[i].first == axis) return static_cast<int>(i);
  }
  return -1;
}

bool OverAllContextAxes(const std::vector<std::string>& axes, const ScheduleMesh& mesh) {
  if (axes.size() != mesh.context_axes.size()) return false;
  for (const std::string& a : axes) {
    if (ContextAxisIndex(mesh, a) < 0) return false;
  }
  return true;
}

void ContextArgs(const std::vector<Pass>& attention, const ScheduleMesh& mesh,
                 ScheduleArgs& out) {
  int64_t cp = 1;
  for (const auto& [name, size] : mesh.context_axes) cp *= size;
  if (cp <= 1) {
    if (!attention.empty()) {
      out.notes.push_back(absl::StrCat("the attention schedule ", attention.front().text,
                                       " needs context parallelism; it has no Megatron-LM "
                                       "equivalent without it"));
    }
    return;
  }
  auto comm_type = [&](absl::string_view type) {
    out.args.push_back("--cp-comm-type");
    out.args.emplace_back(type);
  };
  if (attention.empty()) {
    comm_type("allgather");  // plain collectives gather keys and values over cp
    return;
  }
  if (attention.size() == 1 && OverAllContextAxes(PassAxes(attention[0], mesh), mesh)) {
    const Pass& p = attention[0];
    if (p.name == "ulysses-attention") {
      comm_type("a2a");
      return;
    }
    comm_type("p2p");
    auto zigzag = p.options.find("zigzag");
    if (zigzag == p.options.end() || zigzag->second != "true") {
      out.notes.push_back(
          "the plan costs ring attention without causal load balancing; Megatron-LM's p2p "
          "(TransformerEngine) balances it (ring-attention{zigzag=true}), so it runs no slower");
    }
    return;
  }
  // Ulysses over the inner context axis inside a ring over the outer one.
  if (attention.size() == 2 && mesh.context_axes.size() == 2 &&
      attention[0].name == "ulysses-attention" && attention[1].name == "ring-attention") {
    const std::vector<std::string> a2a = PassAxes(attention[0], mesh);
    const std::vector<std::string> ring = PassAxes(attention[1], mesh);
    if (a2a.size() == 1 && ring.size() == 1 && ContextAxisIndex(mesh, a2a[0]) == 1 &&
        ContextAxisIndex(mesh, ring[0]) == 0) {
      comm_type("a2a+p2p");
      out.args.push_back("--hierarchical-context-parallel-sizes");
      out.args.push_back(absl::StrCat(mesh.context_axes[1].second));
      out.args.push_back(absl::StrCat(mesh.context_axes[0].second));
      return;
    }
  }
  std::vector<std::string> texts;
  for (const Pass& p : attention) texts.push_back(p.text);
  comm_type("p2p");
  out.notes.push_back(absl::StrCat(
      "no Megatron-LM equivalent: the plan costs attention as ", absl::StrJoin(texts, ","),
      ", which --cp-comm-type (p2p, a2a, allgather, a2a+p2p over the cp group) cannot "
      "express; these arguments run Megatron-LM's p2p ring instead, whose time is not the "
      "plan's"));
}

void TensorArgs(const std::vector<Pass>& matmuls, const ScheduleMesh& mesh, ScheduleArgs& out) {
  if (matmuls.empty()) return;
  const Pass& p = matmuls.back();
  if (mesh.tp <= 1 || !mesh.sequence_parallel) {
    out.notes.push_back(absl::StrCat(
        "no Megatron-LM equivalent: the plan costs ", p.text,
        " but Megatron-LM's --tp-comm-overlap needs --sequence-parallel with tp > 1"));
    return;
  }
  out.args.push_back("--tp-comm-overlap");
  if (p.name == "pipeline-collective-matmul") {
    auto chunks = p.options.find("chunks");
    out.notes.push_back(absl::StrCat(
        "--tp-comm-overlap: the plan costs every tensor-parallel GEMM as ", p.text,
        ", TransformerEngine's 'pipeline' method with num_splits ",
        chunks == p.options.end() ? std::string("as the pass's default") : chunks->second,
        "; set it per GEMM in --tp-comm-overlap-cfg (the defaults mix ring_exchange, pipeline "
        "and bulk)"));
    return;
  }
  auto direction = p.options.find("direction");
  if (direction != p.options.end() && direction->second == "bi") {
    out.notes.push_back(absl::StrCat(
        "no Megatron-LM equivalent: the plan costs ", p.text,
        " (a ring in both directions); TransformerEngine's ring_exchange runs one direction, "
        "so --tp-comm-overlap with ring_exchange is the nearest and slower than the plan"));
    return;
  }
  out.notes.push_back(absl::StrCat(
      "--tp-comm-overlap: the plan costs every tensor-parallel GEMM as ", p.text,
      ", TransformerEngine's 'ring_exchange' method; set it per GEMM in --tp-comm-overlap-cfg "
      "(the defaults mix ring_exchange, pipeline and bulk)"));
}

}  // namespace

absl::StatusOr<ScheduleArgs> MegatronScheduleArgs(const std::string& layer_schedule,
                                                  const std::string& head_schedule,
                                                  const ScheduleMesh& mesh) {
  absl::StatusOr<std::vector<Pass>> passes = ParsePipeline(layer_schedule);
  if (!passes.ok()) return passes.status();
  ScheduleArgs out;
  std::vector<Pass> attention, matmuls;
  for (const Pass& p : *passes) {
    if (IsAttention(p)) {
      attention.push_back(p);
    } else if (IsMatmul(p)) {
      matmuls.push_back(p);
    } else {
      out.notes.push_back(absl::StrCat("no Megatron-LM equivalent: the layer schedule's pass ",
                                       p.text, " is not run"));
    }
  }
  if (matmuls.size() > 1) {
    out.notes.push_back(absl::StrCat("no Megatron-LM equivalent: the plan composes ",
                                     matmuls.size(),
                                     " collective-matmul schedules; the last one is written"));
  }
  ContextArgs(attention, mesh, out);
  TensorArgs(matmuls, mesh, out);
  if (!head_schedule.empty()) {
    out.notes.push_back(absl::StrCat(
        "no Megatron-LM equivalent: the plan costs the output head with ", head_schedule,
        "; Megatron-LM's output layer runs plain collectives"));
  }
  return out;
}

}  // namespace commir::search::plan
