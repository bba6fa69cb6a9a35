// Which communication schedule a plan's layer programs are costed with (the
// operator schedule search supplies each layer's best schedule).
//
//  * none: plain collectives, as the spmd pipeline leaves them;
//  * search (the default): the operator search's attention and collective-matmul
//    schedules (search/schedule_space.h) on the layout's mesh, chosen greedily: the
//    attention schedule with the least predicted forward + backward time, then the best
//    collective-matmul schedule after it (layer_cost.h; not every composition);
//  * a fixed pass pipeline (e.g. "ring-attention,ring-collective-matmul"), applied to
//    every layer it does not refuse.
#ifndef COMMIR_SEARCH_PLAN_LAYER_SCHEDULE_H_
#define COMMIR_SEARCH_PLAN_LAYER_SCHEDULE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "search/plan/layer_program.h"
#include "transforms/pipeline.h"

namespace commir::search::plan {

struct LayerSchedule {
  enum class Mode { kNone, kSearch, kFixed };
  Mode mode = Mode::kSearch;
  Pipeline passes;  // kFixed's passes (never empty: an empty one is kNone)

  static LayerSchedule None() { return {Mode::kNone, {}}; }
  static LayerSchedule Search() { return {Mode::kSearch, {}}; }
  static LayerSchedule Fixed(Pipeline passes);

  // "none", "search" or the passes' pipeline text: what --layer-schedule takes, and the
  // layer cache's key (no pass is named "none" or "search", so the three never collide).
  std::string ToString() const;
};

// --layer-schedule's value: "none", "search" or a pass pipeline of schedule passes,
// parsed here once (the command line is the only place a layer schedule is text).
// InvalidArgument (naming the pass or option) for anything else.
absl::StatusOr<LayerSchedule> ParseLayerSchedule(absl::string_view text);

// The schedules tried on a layer layout's programs, each list starting with "" (none).
// Attention schedules are the operator search's for a mesh of the layout's axes (cp, tp);
// they are left out when cp = 1, where the attention's sequence is not split and every
// one of them either refuses the program or leaves it as it was (layer_schedule_test
// measures this). Collective-matmul schedules are left out when tp = 1 for the same
// reason: without tensor parallelism no all_gather feeds a matmul and no matmul feeds a
// reduce_scatter (the k/v gathers over cp feed the attention). And only schedules
// Megatron-LM runs (MegatronRuns): a plan's layers are costed as its arguments run them.
struct LayerScheduleSpace {
  std::vector<Pipeline> attention;  // typed; the empty pipeline is none
  std::vector<Pipeline> matmul;
};
LayerScheduleSpace LayerSchedules(const LayerLayout& layout);

// Whether Megatron-LM has an equivalent of `schedule` on `layout`
// (megatron_schedule_args.h gives it as arguments without a "no equivalent" note, and not
// the ring without causal load balancing, which Megatron-LM runs balanced): the
// bidirectional ring collective matmul, the double ring and schedules over the tp axis
// are not.
bool MegatronRuns(const Pipeline& schedule, const LayerLayout& layout);

// Every schedule of `LayerSchedules(layout)` unpruned: the operator search's whole space
// for the layout's mesh (what the pruning above is checked against).
LayerScheduleSpace FullLayerSchedules(const LayerLayout& layout);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_LAYER_SCHEDULE_H_
