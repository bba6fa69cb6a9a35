#include "transforms/registry/pass_registry.h"

#include <algorithm>
#include <vector>

#include "commir/check.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/autodiff/training_step.h"
#include "transforms/canonicalize.h"
#include "transforms/collectives/combine_all_reduces.h"
#include "transforms/cse.h"
#include "transforms/dce.h"
#include "transforms/inline.h"
#include "transforms/schedules/moe_pipeline.h"
#include "transforms/schedules/pipeline_collective_matmul.h"
#include "transforms/schedules/ring_attention.h"
#include "transforms/schedules/ring_collective_matmul.h"
#include "transforms/schedules/schedule_report.h"
#include "transforms/schedules/ulysses_attention.h"
#include "transforms/sharding/comm_report.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/megatron_layout.h"
#include "transforms/sharding/propagate.h"

namespace commir {
namespace {

// Each row is declared beside its pass (Info(): name, description, option schema).
std::vector<PassInfo> BuildRegistry() {
  std::vector<PassInfo> passes = {
      AutodiffPass::Info(),
      CanonicalizePass::Info(),
      collectives::CombineAllReducesPass::Info(),
      CsePass::Info(),
      DcePass::Info(),
      InlinePass::Info(),
      sharding::PropagateShardingPass::Info(),
      sharding::LowerToSpmdPass::Info(),
      sharding::MegatronLayoutPass::Info(),
      sharding::CommReportPass::Info(),
      schedules::MoePipelinePass::Info(),
      schedules::PipelineCollectiveMatmulPass::Info(),
      schedules::RingCollectiveMatmulPass::Info(),
      schedules::ScheduleReportPass::Info(),
      schedules::RingAttentionPass::Info(),
      TrainingStepPass::Info(),
      schedules::UlyssesAttentionPass::Info(),
  };
  std::sort(passes.begin(), passes.end(),
            [](const PassInfo& a, const PassInfo& b) { return a.name < b.name; });
  for (size_t i = 1; i < passes.size(); ++i) {
    COMMIR_CHECK(passes[i - 1].name != passes[i].name, "two passes share a name");
  }
  return passes;
}

}  // namespace

absl::Span<const PassInfo> RegisteredPasses() {
  static const std::vector<PassInfo>* passes = new std::vector<PassInfo>(BuildRegistry());
  return *passes;
}

const PassInfo* FindRegisteredPass(absl::string_view name) {
  for (const PassInfo& info : RegisteredPasses()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

}  // namespace commir
