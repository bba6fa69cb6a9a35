// What the cross_entropy partitioning tests share (vocab_parallel_loss_test,
// token_parallel_loss_test): labels drawn from a random input, op counting in printed IR,
// and the check of a partitioned function against one device.
#ifndef COMMIR_TRANSFORMS_SHARDING_LOSS_TEST_UTIL_H_
#define COMMIR_TRANSFORMS_SHARDING_LOSS_TEST_UTIL_H_

#include <string>

#include "testing/spmd_check.h"

namespace commir::sharding::loss_test {

// The class count the tests' labels range over.
inline constexpr int kClasses = 16384;

// Body lines that make %labels: i64[tokens] from %r: f32[tokens] (`tokens` as a type
// writes it, e.g. "128@dp"): |r| scaled to [0, 1.25 kClasses), the values at or above
// kClasses - 1 becoming ignore_index -1, so about one label in five is ignored, spread
// at random over the shards.
std::string Labels(const std::string& tokens);

// How many ops named `op` the printed IR `text` has.
int Count(const std::string& text, const std::string& op);

// `function` of `text` partitioned (kPartitionPipeline: the tests count the
// partitioner's own all_reduces) and run on the cpu mesh against one device (inputs
// drawn with `seed`); a failure fails the test. The check (module null on failure).
testing::SpmdCheck Check(const std::string& text, const std::string& function, int seed);

}  // namespace commir::sharding::loss_test

#endif  // COMMIR_TRANSFORMS_SHARDING_LOSS_TEST_UTIL_H_
