// Puts a block's ops in an order their data dependences allow that moves as few of them
// as possible: what combine-all-reduces does after it inserts its buckets, in one pass
// over the block however many buckets it made.
#ifndef COMMIR_TRANSFORMS_COLLECTIVES_BLOCK_ORDER_H_
#define COMMIR_TRANSFORMS_COLLECTIVES_BLOCK_ORDER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "commir/ir.h"

namespace commir::collectives {

// Ops that stay together, in this order, and where they would like to be: nodes are
// compared by (position, tie).
struct OrderNode {
  std::vector<Operation*> ops;
  int64_t position = 0;
  int64_t tie = 0;
};

// Relinks the ops of `block` (each in exactly one of `nodes`) so that every node comes
// after the nodes making the values its ops read (in nested regions too), and among the
// nodes free to go next the least (position, tie) goes first (Kahn's algorithm with a
// priority queue). With the original program positions, an op moves only when
// something it reads comes later than it did: it then follows that right away, and
// every other op keeps its place. O(n log n) for n ops and their reads. An error, and
// the block left as it was, when the dependences have a cycle.
absl::Status RelinkInDependenceOrder(Block& block, const std::vector<OrderNode>& nodes);

}  // namespace commir::collectives

#endif  // COMMIR_TRANSFORMS_COLLECTIVES_BLOCK_ORDER_H_
