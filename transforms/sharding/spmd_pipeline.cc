#include "transforms/sharding/spmd_pipeline.h"

#include "transforms/canonicalize.h"
#include "transforms/cse.h"
#include "transforms/dce.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/propagate.h"

namespace commir::sharding {

Pipeline DefaultSpmdPipeline(bool propagate) {
  Pipeline pipeline;
  if (propagate) pipeline.steps.push_back(PassStep::Of<PropagateShardingPass>());
  pipeline.steps.push_back(PassStep::Of<LowerToSpmdPass>());
  pipeline.steps.push_back(PassStep::Of<CanonicalizePass>());
  pipeline.steps.push_back(PassStep::Of<CsePass>());
  pipeline.steps.push_back(PassStep::Of<DcePass>());
  return pipeline;
}

}  // namespace commir::sharding
