#include "search/plan/layer_schedule.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "search/plan/megatron_schedule_args.h"
#include "search/schedule_space.h"
#include "transforms/registry/pass_registry.h"
#include "transforms/sharding/megatron_layout.h"
#include "transforms/pipeline.h"

namespace commir::search::plan {

LayerSchedule LayerSchedule::Fixed(Pipeline passes) {
  if (passes.empty()) return None();
  return {Mode::kFixed, std::move(passes)};
}

std::string LayerSchedule::ToString() const {
  switch (mode) {
    case Mode::kNone:
      return "none";
    case Mode::kSearch:
      return "search";
    case Mode::kFixed:
      return passes.ToString();
  }
  return "none";
}

absl::StatusOr<LayerSchedule> ParseLayerSchedule(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text == "none") return LayerSchedule::None();
  if (text == "search") return LayerSchedule::Search();
  if (text.empty()) {
    return absl::InvalidArgumentError("the layer schedule is none, search or a pass pipeline");
  }
  absl::StatusOr<Pipeline> passes = ParsePipeline(text, RegisteredPasses());
  if (!passes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the layer schedule is none, search or a pass pipeline: ",
                     passes.status().message()));
  }
  // Only the communication schedules are layer schedules: any other pass (dce,
  // autodiff, ...) would change what the layer computes, or nothing, and be costed as if
  // it scheduled it.
  static const absl::flat_hash_set<absl::string_view> kSchedulePasses = {
      "ring-attention", "ulysses-attention", "ring-collective-matmul",
      "pipeline-collective-matmul"};
  for (const PassStep& pass : passes->steps) {
    if (!kSchedulePasses.contains(pass.name())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the layer schedule is none, search or a pipeline of schedule passes (ring-attention, "
          "ulysses-attention, ring-collective-matmul, pipeline-collective-matmul): '",
          pass.name(), "' is not one"));
    }
  }
  return LayerSchedule::Fixed(*std::move(passes));
}

namespace {

std::vector<std::string> MeshAxes(const LayerLayout& layout) {
  // The layer program's mesh (layer_program.cc): cp major, tp minor, axes of size 1 left out.
  std::vector<std::string> axes;
  if (layout.cp > 1) axes.push_back(sharding::kMegatronCpAxis);
  if (layout.tp > 1) axes.push_back(sharding::kMegatronTpAxis);
  return axes;
}

}  // namespace

LayerScheduleSpace FullLayerSchedules(const LayerLayout& layout) {
  if (layout.devices() == 1) return {{Pipeline{}}, {Pipeline{}}};  // one device: nothing to schedule
  return {AttentionSchedules(MeshAxes(layout)), MatmulSchedules()};
}

bool MegatronRuns(const Pipeline& schedule, const LayerLayout& layout) {
  if (schedule.empty()) return true;
  ScheduleMesh mesh;
  mesh.tp = layout.tp;
  mesh.sequence_parallel = layout.sequence_parallel && layout.tp > 1;
  if (layout.cp > 1) mesh.context_axes = {{sharding::kMegatronCpAxis, layout.cp}};
  return MegatronScheduleArgs(schedule, Pipeline{}, mesh).runs_as_costed;
}

LayerScheduleSpace LayerSchedules(const LayerLayout& layout) {
  LayerScheduleSpace space = FullLayerSchedules(layout);
  if (layout.cp == 1) space.attention = {Pipeline{}};
  if (layout.tp == 1) space.matmul = {Pipeline{}};
  // What is costed is what Megatron-LM runs: only schedules it has an equivalent of.
  for (std::vector<Pipeline>* list : {&space.attention, &space.matmul}) {
    std::vector<Pipeline> kept;
    for (Pipeline& s : *list) {
      if (MegatronRuns(s, layout)) kept.push_back(std::move(s));
    }
    *list = std::move(kept);
  }
  return space;
}

}  // namespace commir::search::plan
