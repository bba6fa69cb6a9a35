// commir-search's core: the fastest schedules of a global function on N devices.
//
// The space: every mesh of the device count (mesh_shapes.h) x every layout of
// the function's arguments and results on it (layout_space.h), each partitioned by
// propagate-sharding and lower-to-spmd (the default spmd pipeline), x every composition
// of an attention schedule and a collective-matmul schedule (schedule_space.h). Each
// candidate is built in memory (a copy of the function laid out, copies scheduled), and
// candidates whose programs have the same structural fingerprint (commir/fingerprint.h:
// the same program up to value names) are one (the first in enumeration order stays). Each distinct candidate is predicted by
// the sim backend's model (sim/predict.h) and ranked by predicted time, then bytes sent
// per device, then enumeration order, so results are deterministic.
//
// The space is counted before it is searched (CountLayouts: cheap, no layout is built),
// and a space of more than `max_layouts` layouts is refused with its size; layouts are then
// enumerated lazily and evaluated in bounded batches, so memory does not grow with the
// space (see SearchOptions::max_layouts for what does). A function that calls others is
// searched with its calls inlined (the `inline` pass).
//
// A candidate is reproduced from its recipe: its laid-out global program
// (GlobalText()) run through `commir-opt --pass-pipeline=<pipeline>` prints exactly
// SpmdText(). Text is made only there, at the boundary. Verification (the cpu mesh against the one-device program, on a shrunken
// copy) is left to a callback, so that the core needs no executor.
#ifndef COMMIR_SEARCH_SEARCH_H_
#define COMMIR_SEARCH_SEARCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/fingerprint.h"
#include "commir/ir.h"
#include "search/layout_space.h"
#include "sim/predict.h"
#include "transforms/pipeline.h"

namespace commir::search {

enum class VerifyMode { kAll, kTop, kNone };

struct Verdict {
  enum class State { kNotChecked, kMatched, kMismatched, kFailed };
  State state = State::kNotChecked;
  // The comparison, or why the recipe could not be checked.
  std::string detail;
};

struct Candidate {
  int rank = 0;  // 1-based, after ranking
  LayoutCandidate layout;
  // The schedule passes alone (empty for plain collectives): the candidate's one record
  // of its passes; the whole pipeline and the texts are derived from it.
  Pipeline schedule;
  // The function with this candidate's mesh and layouts (shared by the candidates of a
  // layout), and the partitioned and scheduled program. Neither changes once made.
  std::shared_ptr<const Module> global_program;
  std::shared_ptr<const Module> spmd_program;
  Fingerprint fingerprint;  // of spmd_program
  double time_s = 0;  // with SearchOptions::train, forward + backward (the training step)
  // With SearchOptions::train: the forward alone (@f) and what the backward adds (@f_grad,
  // which runs the forward and the backward, less @f); time_s is their sum.
  double forward_time_s = 0;
  double backward_time_s = 0;
  double exposed_communication_s = 0;  // the most over the devices
  double bytes_per_device = 0;          // schedule-report's count (shifts included)
  int64_t peak_memory_bytes = 0;        // the most over the devices
  Verdict verdict;

  // What commir-opt runs on the global program to get the spmd one: the default spmd
  // pipeline, then the schedule.
  Pipeline passes() const;

  // Text, for the report and the recipe only: the schedule ("" for plain collectives)
  // and the whole pipeline as `commir-opt --pass-pipeline` takes them.
  std::string ScheduleText() const { return schedule.ToString(); }
  std::string PipelineText() const { return passes().ToString(); }

  // The recipe's text (what `--emit=global -o` writes) and the program it makes.
  std::string GlobalText() const;
  std::string SpmdText() const;
};

struct SearchStats {
  int64_t meshes = 0;
  LayoutSpaceStats layout_space;
  int64_t layouts = 0;            // layouts taken from the space (renamed_meshes included)
  int64_t partition_failures = 0; // layouts the partitioner refused
  int64_t schedules_tried = 0;    // (layout, schedule) pairs
  int64_t not_applicable = 0;     // a schedule pass refused the program (e.g. chunks)
  int64_t duplicates = 0;         // the same program as an earlier candidate (fingerprint)
  // Layouts not evaluated: the same as an earlier one on a mesh that differs only in the
  // names and order of its axes (mesh_symmetry.h). Counted in `layouts` too.
  int64_t renamed_meshes = 0;
  int64_t prediction_failures = 0;
  int64_t over_memory = 0;        // dropped by max_memory_bytes
  int64_t candidates = 0;         // distinct, predicted, within memory
  double search_seconds = 0;      // enumerate, partition, schedule, predict, rank
  int64_t layouts_in_space = 0;   // counted before the search (every mesh, up to a million)
  bool layouts_in_space_exact = true;  // false: the space has more (it was not all counted)
  bool cut_short = false;         // time_limit_s ran out before every layout was searched
  // The most layouts and candidates (with their programs) held at once: what bounds
  // the search's memory, whatever the size of the space.
  int64_t peak_layouts_held = 0;
  int64_t peak_candidates_held = 0;
  int64_t verified = 0;
  int64_t mismatched = 0;
  int64_t verify_failures = 0;
  double verify_seconds = 0;
};

struct SearchProgress {
  // Counting the space (reported once, at the start: `meshes` is known, `layouts` not
  // yet), then searching it.
  bool counting = false;
  int64_t mesh = 0;  // the mesh being searched (0-based), of `meshes`
  int64_t meshes = 0;
  int64_t layouts_done = 0;
  int64_t layouts = 0;
  bool layouts_counted = true;  // false: the space has more than `layouts` (not all counted)
  double seconds = 0;
};

// The default cap on a search's layouts (SearchOptions::max_layouts = -1): 20,000 on up to
// 8 devices, and proportionally fewer on more, since simulating a layout costs time
// linear in the device count (at least) and the cap is meant as a bound on minutes of
// work: on two cores the search evaluates 30 to 300 layouts a second on 8 devices, about
// 4 on 256 and 1 on 1,024. A transformer layer on 64 devices (1,818 layouts, cap 2,500)
// fits; a chain of 8 matmuls on 8 devices (875,520) would take hours and is refused.
inline constexpr int64_t kDefaultMaxLayouts = 20000;
int64_t DefaultMaxLayouts(int64_t devices);
// The most devices a search spreads a function over. The sim predicts every candidate by
// simulating each device, and a ring schedule over an axis of n devices takes n steps on
// each, so one layout costs up to N^2 simulated steps: on 4,096 devices a single layout
// of a 3-matmul MLP took over two minutes and 600 MiB. 1,024 is more than an operator's
// group (tensor, sequence or expert parallelism) spans; whole-cluster plans are the plan
// search's (--plan).
inline constexpr int64_t kMaxSearchDevices = 1024;

struct SearchOptions {
  int64_t devices = 8;
  // The global function to search (empty: the module's only global function).
  std::string function;
  sim::PredictOptions predict;
  std::optional<int64_t> max_memory_bytes;
  int max_mesh_axes = 3;
  int max_classes_per_axis = 3;
  // Worker threads evaluating layouts (0: one per hardware thread). The result does not
  // depend on it.
  int threads = 0;
  // How many ranked candidates to keep (0: all). Only these keep their programs during
  // the search (unless top is 0 or verify is kAll); every other distinct candidate is
  // remembered by its program's 128-bit fingerprint, to merge duplicates.
  int top = 10;
  // Refuse a space of more layouts than this (0: no cap; -1: DefaultMaxLayouts(devices)),
  // saying how many it has.
  int64_t max_layouts = -1;
  // Stop taking new layouts after this many seconds (0: no limit) and rank what was found,
  // with stats.cut_short set. Verification of the reported candidates comes after it.
  double time_limit_s = 0;
  // Search training rather than inference: each layout's program gets its backward
  // (train_program.h: @f_grad, the autodiff pass on a copy), both are partitioned and
  // scheduled together, and candidates are ranked by the training step's time (forward
  // + backward), its bytes and its peak memory (gradients included). Verification
  // checks @f_grad.
  bool train = false;
  VerifyMode verify = VerifyMode::kTop;
  // Checks one candidate's recipe (of the searched function); required unless verify is
  // kNone.
  std::function<Verdict(const std::string& function, const Candidate&)> verifier;
  // Called about twice a second during long searches (optional).
  std::function<void(const SearchProgress&)> progress;
};

// What training the best forward-only plan would add, when that plan leaves float
// arguments (weights) replicated: their gradients must then be summed over the axes that
// split the data, which a forward-only search never sees.
struct TrainingAddition {
  std::vector<std::string> replicated_arguments;  // names, without '%'
  std::vector<std::string> axes;                   // the mesh's axes
  // The backward of that plan (the same layouts and schedule), per device, the most over
  // the devices: bytes sent, communication kernels' time, and the step's added time.
  double added_bytes_per_device = 0;
  double added_communication_s = 0;
  double backward_s = 0;
};

struct SearchResult {
  std::string function;
  // With SearchOptions::train: the function verified and predicted as the training step
  // (@<function>_grad).
  std::string trained_function;
  // Without SearchOptions::train, when the best plan replicates a float argument.
  std::optional<TrainingAddition> training_addition;
  std::vector<DimClass> classes;
  std::vector<Candidate> ranked;  // the best `top` (all with top = 0), best first
  SearchStats stats;
};

absl::StatusOr<SearchResult> Search(const Module& module, const SearchOptions& options);

}  // namespace commir::search

#endif  // COMMIR_SEARCH_SEARCH_H_
