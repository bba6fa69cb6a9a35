#include "transforms/sharding/spmd_pipeline.h"

#include "transforms/canonicalize.h"
#include "transforms/collectives/combine_all_reduces.h"
#include "transforms/cse.h"
#include "transforms/dce.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/propagate.h"

namespace commir::sharding {

Pipeline PartitionPipeline(bool propagate) {
  Pipeline pipeline;
  if (propagate) pipeline.steps.push_back(PassStep::Of<PropagateShardingPass>());
  pipeline.steps.push_back(PassStep::Of<LowerToSpmdPass>());
  pipeline.steps.push_back(PassStep::Of<CanonicalizePass>());
  pipeline.steps.push_back(PassStep::Of<CsePass>());
  pipeline.steps.push_back(PassStep::Of<DcePass>());
  return pipeline;
}

Pipeline DefaultSpmdPipeline(bool propagate) {
  return PartitionPipeline(propagate).Then(PassStep::Of<collectives::CombineAllReducesPass>());
}

}  // namespace commir::sharding
