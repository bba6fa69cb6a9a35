// The partitioner's default pipeline as a typed value, for C++ callers that partition a
// module in process (commir-run's loader, the searches, the spmd checks).
#ifndef COMMIR_TRANSFORMS_SHARDING_SPMD_PIPELINE_H_
#define COMMIR_TRANSFORMS_SHARDING_SPMD_PIPELINE_H_

#include "transforms/pipeline.h"

namespace commir::sharding {

// kDefaultSpmdPipeline's passes: propagate-sharding, lower-to-spmd, canonicalize, cse,
// dce; without propagate-sharding when `propagate` is false (the function's own
// annotations are then the whole layout).
Pipeline DefaultSpmdPipeline(bool propagate = true);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_SPMD_PIPELINE_H_
