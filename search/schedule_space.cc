#include "search/schedule_space.h"

#include "absl/strings/str_cat.h"

namespace commir::search {

std::vector<std::string> AttentionSchedules(const MeshShape& mesh) {
  return AttentionSchedules(mesh.axis_names());
}

std::vector<std::string> AttentionSchedules(const std::vector<std::string>& axes) {
  std::vector<std::string> schedules = {"", "ring-attention", "ring-attention{zigzag=true}",
                                        "ulysses-attention"};
  if (axes.size() < 2) return schedules;
  // On one axis of a sequence split over several: the other axes stay gathered.
  for (const std::string& axis : axes) {
    schedules.push_back(absl::StrCat("ring-attention{axes=", axis, "}"));
    schedules.push_back(absl::StrCat("ulysses-attention{axes=", axis, "}"));
  }
  // A sequence split over (major, minor): USP's hybrid (Ulysses over the minor axis inside
  // a ring over the major one) and the double ring (the only order the passes compose
  // in: the outer ring first).
  for (size_t i = 0; i < axes.size(); ++i) {
    for (size_t j = i + 1; j < axes.size(); ++j) {
      schedules.push_back(absl::StrCat("ulysses-attention{axes=", axes[j], "},ring-attention{axes=",
                                       axes[i], "}"));
      schedules.push_back(absl::StrCat("ring-attention{axes=", axes[i], "},ring-attention{axes=",
                                       axes[j], "}"));
    }
  }
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
