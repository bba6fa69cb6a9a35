#include "transforms/collectives/collective_buckets.h"

#include <algorithm>
#include <numeric>

#include "absl/container/flat_hash_map.h"

namespace commir::collectives {

std::vector<Bucket> AssignBuckets(absl::Span<const BucketCandidate> candidates,
                                  double threshold_bytes) {
  std::vector<int> order(candidates.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (candidates[a].needed != candidates[b].needed) {
      return candidates[a].needed < candidates[b].needed;
    }
    return candidates[a].ready < candidates[b].ready;
  });
  std::vector<Bucket> buckets;
  // Per key, the bucket still open to new members (an index into `buckets`).
  absl::flat_hash_map<int64_t, size_t> open;
  for (int i : order) {
    const BucketCandidate& c = candidates[i];
    auto it = open.find(c.key);
    if (c.ready < c.needed && it != open.end()) {
      Bucket& b = buckets[it->second];
      // Sorted by `needed`, so the open bucket's deadline is its first member's and
      // this candidate's own deadline is no earlier: it joins when its operand is
      // ready before that deadline and the buffer has room.
      if (c.ready < b.needed && b.bytes + c.bytes <= threshold_bytes) {
        b.members.push_back(i);
        b.after = std::max(b.after, c.ready);
        b.bytes += c.bytes;
        continue;
      }
    }
    buckets.push_back(Bucket{{i}, c.ready, c.needed, c.bytes});
    if (c.ready < c.needed) open[c.key] = buckets.size() - 1;
  }
  for (Bucket& b : buckets) std::sort(b.members.begin(), b.members.end());
  std::sort(buckets.begin(), buckets.end(),
            [](const Bucket& a, const Bucket& b) { return a.members[0] < b.members[0]; });
  return buckets;
}

}  // namespace commir::collectives
