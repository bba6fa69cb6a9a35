// The partitioner's pipelines as typed values, for C++ callers that partition a module
// in process (commir-run's loader, the searches, the spmd checks).
#ifndef COMMIR_TRANSFORMS_SHARDING_SPMD_PIPELINE_H_
#define COMMIR_TRANSFORMS_SHARDING_SPMD_PIPELINE_H_

#include "transforms/pipeline.h"

namespace commir::sharding {

// kPartitionPipeline's passes: propagate-sharding, lower-to-spmd, canonicalize, cse,
// dce; without propagate-sharding when `propagate` is false (the function's own
// annotations are then the whole layout).
Pipeline PartitionPipeline(bool propagate = true);

// kDefaultSpmdPipeline's passes: PartitionPipeline(propagate), then combine-all-reduces
// at its default threshold (DDP's 25 MiB bucket, the one propagate-sharding prices).
Pipeline DefaultSpmdPipeline(bool propagate = true);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_SPMD_PIPELINE_H_
