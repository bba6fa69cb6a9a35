#include "search/schedule_space.h"

#include "absl/strings/str_cat.h"

namespace commir::search {

std::vector<std::string> AttentionSchedules(const MeshShape& mesh) {
  std::vector<std::string> schedules = {"", "ring-attention", "ring-attention{zigzag=true}",
                                        "ulysses-attention"};
  (void)mesh;
  return schedules;
}

std::vector<std::string> MatmulSchedules() {
  std::vector<std::string> schedules = {""};
  // Chunks x streams: two streams overlap each chunk's transfer with the previous
  // chunk's GEMM; more chunks shorten the exposed first transfer.
  for (int chunks : {2, 4, 8}) {
    for (int streams : {2, 4}) {
      if (streams > chunks) continue;
      schedules.push_back(
          absl::StrCat("pipeline-collective-matmul{chunks=", chunks, ",streams=", streams, "}"));
    }
  }
  schedules.push_back("ring-collective-matmul");
  schedules.push_back("ring-collective-matmul{direction=bi}");
  return schedules;
}

std::string JoinPipeline(const std::string& first, const std::string& second) {
  if (first.empty()) return second;
  if (second.empty()) return first;
  return absl::StrCat(first, ",", second);
}

}  // namespace commir::search
