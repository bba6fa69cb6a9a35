#include "search/schedule_space.h"

#include "transforms/schedules/moe_pipeline.h"
#include "transforms/schedules/pipeline_collective_matmul.h"
#include "transforms/schedules/ring_attention.h"
#include "transforms/schedules/ring_collective_matmul.h"
#include "transforms/schedules/ulysses_attention.h"

namespace commir::search {
namespace {

using schedules::PipelineCollectiveMatmulOptions;
using schedules::PipelineCollectiveMatmulPass;
using schedules::RingAttentionOptions;
using schedules::RingAttentionPass;
using schedules::RingCollectiveMatmulOptions;
using schedules::RingCollectiveMatmulPass;
using schedules::UlyssesAttentionOptions;
using schedules::UlyssesAttentionPass;

PassStep Ring(RingAttentionOptions options) { return PassStep::Of<RingAttentionPass>(options); }
PassStep Ulysses(const std::string& axes) {
  return PassStep::Of<UlyssesAttentionPass>(UlyssesAttentionOptions{axes});
}

}  // namespace

std::vector<Pipeline> AttentionSchedules(const MeshShape& mesh) {
  return AttentionSchedules(mesh.axis_names());
}

std::vector<Pipeline> AttentionSchedules(const std::vector<std::string>& axes) {
  std::vector<Pipeline> schedules = {Pipeline{},
                                     Pipeline{{Ring({})}},
                                     Pipeline{{Ring({.zigzag = true})}},
                                     Pipeline{{Ulysses("")}}};
  if (axes.size() < 2) return schedules;
  // On one axis of a sequence split over several: the other axes stay gathered.
  for (const std::string& axis : axes) {
    schedules.push_back(Pipeline{{Ring({.axes = axis})}});
    schedules.push_back(Pipeline{{Ulysses(axis)}});
  }
  // A sequence split over (major, minor): USP's hybrid (Ulysses over the minor axis inside
  // a ring over the major one) and the double ring (the only order the passes compose
  // in: the outer ring first).
  for (size_t i = 0; i < axes.size(); ++i) {
    for (size_t j = i + 1; j < axes.size(); ++j) {
      schedules.push_back(Pipeline{{Ulysses(axes[j]), Ring({.axes = axes[i]})}});
      schedules.push_back(Pipeline{{Ring({.axes = axes[i]}), Ring({.axes = axes[j]})}});
    }
  }
  return schedules;
}

std::vector<Pipeline> MatmulSchedules() {
  std::vector<Pipeline> schedules = {Pipeline{}};
  // Chunks x streams: two streams overlap each chunk's transfer with the previous
  // chunk's GEMM; more chunks shorten the exposed first transfer.
  for (int chunks : {2, 4, 8}) {
    for (int streams : {2, 4}) {
      if (streams > chunks) continue;
      schedules.push_back(Pipeline{{PassStep::Of<PipelineCollectiveMatmulPass>(
          PipelineCollectiveMatmulOptions{.chunks = chunks, .streams = streams})}});
    }
  }
  schedules.push_back(Pipeline{{PassStep::Of<RingCollectiveMatmulPass>()}});
  schedules.push_back(Pipeline{{PassStep::Of<RingCollectiveMatmulPass>(
      RingCollectiveMatmulOptions{.direction = schedules::RingDirection::kBi})}});
  return schedules;
}

std::vector<Pipeline> MoeSchedules() {
  // More chunks hide more of the exchanges but make each GEMM smaller and pay each
  // all_to_all's latency once per chunk: the sim decides.
  std::vector<Pipeline> schedules;
  for (int64_t chunks : {2, 4, 8}) {
    schedules.push_back(Pipeline{{PassStep::Of<schedules::MoePipelinePass>(
        schedules::MoePipelineOptions{.chunks = chunks})}});
  }
  return schedules;
}

}  // namespace commir::search
