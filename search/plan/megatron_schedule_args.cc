#include "search/plan/megatron_schedule_args.h"

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "transforms/schedules/pipeline_collective_matmul.h"
#include "transforms/schedules/ring_attention.h"
#include "transforms/schedules/ring_collective_matmul.h"
#include "transforms/schedules/ulysses_attention.h"

namespace commir::search::plan {
namespace {

// A note that Megatron-LM would run something other than what the plan costed.
void Differs(ScheduleArgs& out, std::string note) {
  out.notes.push_back(std::move(note));
  out.runs_as_costed = false;
}

bool IsAttention(const PassStep& p) {
  return p.Is<schedules::RingAttentionPass>() || p.Is<schedules::UlyssesAttentionPass>();
}
bool IsMatmul(const PassStep& p) {
  return p.Is<schedules::RingCollectiveMatmulPass>() ||
         p.Is<schedules::PipelineCollectiveMatmulPass>();
}

// The context axes an attention pass runs over: its axes option (comma-separated, as the
// pass reads it), or all of them.
std::vector<std::string> PassAxes(const PassStep& p, const ScheduleMesh& mesh) {
  const std::string axes = p.Is<schedules::RingAttentionPass>()
                               ? p.OptionsOf<schedules::RingAttentionPass>().axes
                               : p.OptionsOf<schedules::UlyssesAttentionPass>().axes;
  std::vector<std::string> named;
  for (absl::string_view axis : absl::StrSplit(axes, ',', absl::SkipWhitespace())) {
    named.emplace_back(absl::StripAsciiWhitespace(axis));
  }
  if (!named.empty()) return named;
  for (const auto& [name, size] : mesh.context_axes) named.push_back(name);
  return named;
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

void ContextArgs(const std::vector<PassStep>& attention, const ScheduleMesh& mesh,
                 ScheduleArgs& out) {
  int64_t cp = 1;
  for (const auto& [name, size] : mesh.context_axes) cp *= size;
  if (cp <= 1) {
    if (!attention.empty()) {
      Differs(out, absl::StrCat("the attention schedule ", attention.front().ToString(),
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
    const PassStep& p = attention[0];
    if (p.Is<schedules::UlyssesAttentionPass>()) {
      comm_type("a2a");
      return;
    }
    comm_type("p2p");
    if (!p.OptionsOf<schedules::RingAttentionPass>().zigzag) {
      Differs(out,
              "the plan costs ring attention without causal load balancing; Megatron-LM's p2p "
              "(TransformerEngine) balances it (ring-attention{zigzag=true}), so it runs no "
              "slower");
    }
    return;
  }
  // Ulysses over the inner context axis inside a ring over the outer one.
  if (attention.size() == 2 && mesh.context_axes.size() == 2 &&
      attention[0].Is<schedules::UlyssesAttentionPass>() &&
      attention[1].Is<schedules::RingAttentionPass>()) {
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
  for (const PassStep& p : attention) texts.push_back(p.ToString());
  comm_type("p2p");
  Differs(out, absl::StrCat(
      "no Megatron-LM equivalent: the plan costs attention as ", absl::StrJoin(texts, ","),
      ", which --cp-comm-type (p2p, a2a, allgather, a2a+p2p over the cp group) cannot "
      "express; these arguments run Megatron-LM's p2p ring instead, whose time is not the "
      "plan's"));
}

void TensorArgs(const std::vector<PassStep>& matmuls, const ScheduleMesh& mesh, ScheduleArgs& out) {
  if (matmuls.empty()) return;
  const PassStep& p = matmuls.back();
  if (mesh.tp <= 1 || !mesh.sequence_parallel) {
    Differs(out, absl::StrCat(
        "no Megatron-LM equivalent: the plan costs ", p.ToString(),
        " but Megatron-LM's --tp-comm-overlap needs --sequence-parallel with tp > 1"));
    return;
  }
  out.args.push_back("--tp-comm-overlap");
  if (p.Is<schedules::PipelineCollectiveMatmulPass>()) {
    out.notes.push_back(absl::StrCat(
        "--tp-comm-overlap: the plan costs every tensor-parallel GEMM as ", p.ToString(),
        ", TransformerEngine's 'pipeline' method with num_splits ",
        p.OptionsOf<schedules::PipelineCollectiveMatmulPass>().chunks,
        "; set it per GEMM in --tp-comm-overlap-cfg (the defaults mix ring_exchange, pipeline "
        "and bulk)"));
    return;
  }
  if (p.OptionsOf<schedules::RingCollectiveMatmulPass>().direction ==
      schedules::RingDirection::kBi) {
    Differs(out, absl::StrCat(
        "no Megatron-LM equivalent: the plan costs ", p.ToString(),
        " (a ring in both directions); TransformerEngine's ring_exchange runs one direction, "
        "so --tp-comm-overlap with ring_exchange is the nearest and slower than the plan"));
    return;
  }
  out.notes.push_back(absl::StrCat(
      "--tp-comm-overlap: the plan costs every tensor-parallel GEMM as ", p.ToString(),
      ", TransformerEngine's 'ring_exchange' method; set it per GEMM in --tp-comm-overlap-cfg "
      "(the defaults mix ring_exchange, pipeline and bulk)"));
}

}  // namespace

ScheduleArgs MegatronScheduleArgs(const Pipeline& layer_schedule, const Pipeline& head_schedule,
                                  const ScheduleMesh& mesh) {
  ScheduleArgs out;
  std::vector<PassStep> attention, matmuls;
  for (const PassStep& p : layer_schedule.steps) {
    if (IsAttention(p)) {
      attention.push_back(p);
    } else if (IsMatmul(p)) {
      matmuls.push_back(p);
    } else {
      Differs(out, absl::StrCat("no Megatron-LM equivalent: the layer schedule's pass ",
                                p.ToString(), " is not run"));
    }
  }
  if (matmuls.size() > 1) {
    Differs(out, absl::StrCat("no Megatron-LM equivalent: the plan composes ", matmuls.size(),
                              " collective-matmul schedules; the last one is written"));
  }
  ContextArgs(attention, mesh, out);
  TensorArgs(matmuls, mesh, out);
  if (!head_schedule.empty()) {
    Differs(out, absl::StrCat(
        "no Megatron-LM equivalent: the plan costs the output head with ",
        head_schedule.ToString(),
        "; Megatron-LM's output layer runs plain collectives"));
  }
  return out;
}

}  // namespace commir::search::plan
