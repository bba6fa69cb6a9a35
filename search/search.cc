#include "search/search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commir/clone.h"
#include "commir/diagnostics.h"
#include "commir/fingerprint.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "search/dim_classes.h"
#include "search/mesh_shapes.h"
#include "search/mesh_symmetry.h"
#include "search/schedule_space.h"
#include "search/train_program.h"
#include "transforms/inline.h"
#include "transforms/pipeline.h"
#include "transforms/schedules/schedule_report.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/spmd_pipeline.h"

namespace commir::search {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The callees of `function`'s calls (loop bodies included).
absl::flat_hash_set<std::string> Callees(const Function& function) {
  absl::flat_hash_set<std::string> callees;
  WalkOps(function.body(), [&](Operation* op) {
    if (!op->Is(OpKind::kCall)) return;
    if (const Attribute* callee = op->attrs().Find("callee")) callees.insert(callee->string_value());
  });
  return callees;
}

absl::StatusOr<const Function*> ChooseFunction(const Module& module, const std::string& name) {
  if (!name.empty()) {
    const Function* f = module.FindFunction(name);
    if (f == nullptr) return absl::NotFoundError(absl::StrCat("no function @", name));
    if (f->is_spmd()) {
      return absl::InvalidArgumentError(
          absl::StrCat("@", name, " is a spmd function; the search starts from a global one"));
    }
    return f;
  }
  // Functions that others call (a model's layers) are parts of the one that calls them:
  // the candidates are the global functions nobody calls.
  absl::flat_hash_set<std::string> called;
  for (const Function* f : module.functions()) {
    if (f->body() != nullptr) called.merge(Callees(*f));
  }
  const Function* found = nullptr;
  for (const Function* f : module.functions()) {
    if (f->is_spmd() || called.contains(f->name())) continue;
    if (found != nullptr) {
      return absl::InvalidArgumentError(
          "the module has several global functions; name one with --func=@name");
    }
    found = f;
  }
  if (found == nullptr) return absl::InvalidArgumentError("the module has no global function");
  return found;
}

// A copy of `module` with `pipeline` run on it. Errors are the pass's.
absl::StatusOr<std::shared_ptr<const Module>> Scheduled(const Module& module,
                                                        const Pipeline& pipeline) {
  std::shared_ptr<Module> copy = module.Clone();
  DiagnosticEngine diagnostics;  // only the status is kept: a refusal is counted
  if (absl::Status s = RunPipeline(*copy, pipeline, {.diagnostics = &diagnostics}); !s.ok()) {
    return s;
  }
  return copy;
}

// The function with every sharding removed, which each candidate lays out anew: its
// signature takes the candidate's layouts and intermediate values are left to
// propagation. Laying out copies it, so worker threads share one.
class Template {
 public:
  explicit Template(const Function& function) : function_(function.Clone()) {
    // The names its text would have: the laid-out program is the recipe, and
    // commir-opt reading that text must make the same program the search makes.
    NameValuesAsPrinted(*function_);
    function_->set_mesh_name("");
    Block& body = *function_->body();
    for (int i = 0; i < body.num_arguments(); ++i) {
      Type type = function_->arg_types()[i];
      if (type.is_tensor()) function_->SetArgType(i, type.WithoutSharding());
    }
    for (size_t r = 0; r < function_->result_types().size(); ++r) {
      Type type = function_->result_types()[r];
      if (type.is_tensor()) function_->SetResultType(static_cast<int>(r), type.WithoutSharding());
    }
    WalkOps(&body, [](Operation* op) {
      for (Value* result : op->results()) {
        if (result->type().is_tensor()) result->set_type(result->type().WithoutSharding());
      }
    });
  }

  // The laid-out global program of `layout`: its mesh and a copy of the function, or
  // why it does not verify (as its text would not parse).
  absl::StatusOr<std::unique_ptr<Module>> LaidOut(const LayoutCandidate& layout) const {
    auto module = std::make_unique<Module>();
    std::vector<MeshAxis> axes;
    std::vector<std::string> names = layout.mesh.axis_names();
    for (size_t i = 0; i < layout.mesh.sizes.size(); ++i) {
      axes.push_back(MeshAxis{names[i], layout.mesh.sizes[i], {}});
    }
    module->AddMesh(std::make_unique<Mesh>("m", std::move(axes)));
    Function* function = module->AddFunction(function_->Clone());
    for (size_t i = 0; i < layout.arg_types.size(); ++i) {
      function->SetArgType(static_cast<int>(i), layout.arg_types[i]);
    }
    for (size_t r = 0; r < layout.result_types.size(); ++r) {
      function->SetResultType(static_cast<int>(r), layout.result_types[r]);
    }
    module->ResolveMeshes();
    function->RefreshArgumentTypes();
    if (absl::Status s = VerifyModule(*module); !s.ok()) return s;
    return module;
  }

 private:
  std::unique_ptr<Function> function_;
};

// What one layout gives: its distinct scheduled programs, predicted, in schedule order,
// and the counts for SearchStats. Layouts are evaluated independently (in parallel) and
// merged in enumeration order, so the result does not depend on the thread count.
struct LayoutOutcome {
  bool partitioned = false;
  int64_t schedules_tried = 0;
  int64_t not_applicable = 0;
  int64_t duplicates = 0;  // within the layout
  int64_t prediction_failures = 0;
  std::vector<Candidate> candidates;
};

class LayoutEvaluator {
 public:
  // `stop` says when to leave the remaining schedules of a layout untried (the time
  // limit ran out): one layout of a large program can take minutes.
  // `target` is the function predicted and ranked: `function`, or its training step
  // @function_grad (SearchOptions::train), which each laid-out copy gets.
  LayoutEvaluator(const std::string& function, const std::string& target,
                  const SearchOptions& options, const Template& t, std::function<bool()> stop)
      : function_(function), target_(target), options_(options), template_(t),
        stop_(std::move(stop)) {}

  LayoutOutcome Evaluate(const LayoutCandidate& layout) {
    LayoutOutcome out;
    seen_.clear();
    absl::StatusOr<std::unique_ptr<Module>> laid_out = template_.LaidOut(layout);
    if (!laid_out.ok()) return out;
    // The backward is built on the laid-out copy, so its gradients take this layout's
    // argument layouts and are partitioned with the forward.
    if (options_.train && !AddBackward(**laid_out, function_).ok()) return out;
    std::shared_ptr<const Module> global = *std::move(laid_out);
    absl::StatusOr<std::shared_ptr<const Module>> lowered =
        Scheduled(*global, sharding::DefaultSpmdPipeline());
    if (!lowered.ok()) return out;
    out.partitioned = true;
    const Fingerprint lowered_fingerprint = ModuleFingerprint(**lowered);
    // Families with nothing to rewrite are not tried: each would give the program as it
    // is (attention schedules need an attention, collective-matmul ones a gather or scatter).
    bool has_attention = false, has_gather_or_scatter = false, has_expert_exchange = false;
    WalkOps((*lowered)->FindFunction(target_)->body(), [&](Operation* op) {
      has_attention |= op->Is(OpKind::kAttention);
      has_gather_or_scatter |= op->Is(OpKind::kAllGather) || op->Is(OpKind::kReduceScatter);
      // lower-to-spmd's MoE dispatch: the expert buffer from a token split to an expert split.
      has_expert_exchange |= op->Is(OpKind::kAllToAll) && op->attrs().GetInt("split_dim", -1) == 0 &&
                             op->attrs().GetInt("concat_dim", -1) == 1;
    });
    std::vector<Pipeline> second_schedules = MatmulSchedules();
    const size_t matmul_schedules = second_schedules.size();
    if (has_expert_exchange) {
      for (Pipeline& p : MoeSchedules()) second_schedules.push_back(std::move(p));
    }
    std::vector<Pipeline> attention_schedules = {Pipeline{}};
    if (has_attention) attention_schedules = AttentionSchedules(layout.mesh);
    for (const Pipeline& attention : attention_schedules) {
      // The plain program is always tried: every layout searched gives its candidate.
      if (!attention.empty() && stop_()) break;
      std::shared_ptr<const Module> attended = *lowered;
      Fingerprint attended_fingerprint = lowered_fingerprint;
      if (!attention.empty()) {
        ++out.schedules_tried;
        absl::StatusOr<std::shared_ptr<const Module>> m = Scheduled(**lowered, attention);
        if (!m.ok()) {
          ++out.not_applicable;
          continue;
        }
        attended_fingerprint = ModuleFingerprint(**m);
        if (attended_fingerprint == lowered_fingerprint) {
          ++out.duplicates;
          continue;
        }
        attended = *std::move(m);
      }
      for (size_t k = 0; k < second_schedules.size(); ++k) {
        const Pipeline& matmul = second_schedules[k];
        if (!matmul.empty() && k < matmul_schedules && !has_gather_or_scatter && !has_attention) {
          continue;
        }
        if (!matmul.empty() && stop_()) break;
        const Pipeline schedule = attention.Then(matmul);
        if (matmul.empty()) {
          // An attention schedule alone is a schedule tried too (as before: counted for
          // the attention step and for the combination).
          if (!attention.empty()) ++out.schedules_tried;
          Consider(layout, global, schedule, attended, attended_fingerprint, out);
          continue;
        }
        ++out.schedules_tried;
        absl::StatusOr<std::shared_ptr<const Module>> m = Scheduled(*attended, matmul);
        if (!m.ok()) {
          ++out.not_applicable;
          continue;
        }
        Fingerprint fingerprint = ModuleFingerprint(**m);
        Consider(layout, global, schedule, *std::move(m), fingerprint, out);
      }
    }
    return out;
  }

 private:
  void Consider(const LayoutCandidate& layout, const std::shared_ptr<const Module>& global,
                const Pipeline& schedule, std::shared_ptr<const Module> module,
                const Fingerprint& fingerprint, LayoutOutcome& out) {
    if (!seen_.insert(fingerprint).second) {
      ++out.duplicates;
      return;
    }
    const Function* spmd = module->FindFunction(target_);
    absl::StatusOr<sim::Prediction> prediction = sim::Predict(*spmd, options_.predict);
    absl::StatusOr<sim::Prediction> forward = prediction;
    if (options_.train && prediction.ok()) {
      forward = sim::Predict(*module->FindFunction(function_), options_.predict);
    }
    if (!prediction.ok() || !forward.ok()) {
      ++out.prediction_failures;
      return;
    }
    Candidate c;
    if (options_.train) {
      c.forward_time_s = forward->time_s;
      c.backward_time_s = prediction->time_s - forward->time_s;
    }
    c.layout = layout;
    c.schedule = schedule;
    c.global_program = global;
    c.spmd_program = std::move(module);
    c.fingerprint = fingerprint;
    c.time_s = prediction->time_s;
    for (const sim::DevicePrediction& d : prediction->devices) {
      c.exposed_communication_s = std::max(c.exposed_communication_s, d.exposed_communication_s);
      c.peak_memory_bytes = std::max(c.peak_memory_bytes, d.peak_memory_bytes);
    }
    c.bytes_per_device = schedules::ComputeScheduleStats(*spmd).bytes_per_device;
    out.candidates.push_back(std::move(c));
  }

  const std::string& function_;
  const std::string& target_;
  const SearchOptions& options_;
  const Template& template_;
  std::function<bool()> stop_;
  absl::flat_hash_set<Fingerprint> seen_;
};

class Searcher {
 public:
  Searcher(const Module& module, const SearchOptions& options) : module_(module), options_(options) {}

  absl::StatusOr<SearchResult> Run() {
    start_ = Clock::now();
    // Chosen before inlining, while the calls still say which functions are parts.
    absl::StatusOr<const Function*> function = ChooseFunction(module_, options_.function);
    if (!function.ok()) return function.status();
    result_.function = (*function)->name();
    const Module* module = &module_;
    absl::StatusOr<std::unique_ptr<Module>> inlined = InlineCallsOf(module_);
    if (!inlined.ok()) return inlined.status();
    if (*inlined != nullptr) module = inlined->get();
    function_ = module->FindFunction(result_.function);
    if (options_.train) {
      // Once, on a copy of the input: a function without a backward is refused here,
      // with the location of the op that has no derivative rule.
      std::unique_ptr<Module> copy = module->Clone();
      absl::StatusOr<std::string> trained = AddBackward(*copy, result_.function);
      if (!trained.ok()) return trained.status();
      result_.trained_function = *trained;
    }
    absl::StatusOr<std::vector<DimClass>> classes = FindDimClasses(*function_);
    if (!classes.ok()) return classes.status();
    if (classes->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "@", result_.function, " has no dimension that can be split over devices"));
    }
    result_.classes = *classes;

    meshes_ = MeshShapes(options_.devices, options_.max_mesh_axes);
    stats().meshes = static_cast<int64_t>(meshes_.size());
    if (options_.progress) options_.progress({.counting = true, .meshes = stats().meshes});
    if (absl::Status s = CountSpace(); !s.ok()) return s;
    if (stats().layouts_in_space == 0) return NoLayoutError();
    if (options_.progress) {
      last_progress_ = Clock::now();
      options_.progress({.meshes = stats().meshes, .layouts = stats().layouts_in_space,
                         .layouts_counted = space_counted_, .seconds = SecondsSince(start_)});
    }
    if (absl::Status s = SearchSpace(*module); !s.ok()) return s;
    Rank();
    if (!options_.train) result_.training_addition = WhatTrainingAdds();
    stats().search_seconds = SecondsSince(start_);
    Verify();
    return std::move(result_);
  }

 private:
  SearchStats& stats() { return result_.stats; }

  // A copy of `module` with every call of its functions inlined, or null when nothing
  // calls: the partitioner sees one function at a time.
  static absl::StatusOr<std::unique_ptr<Module>> InlineCallsOf(const Module& module) {
    bool calls = false;
    for (const Function* f : module.functions()) calls |= f->body() != nullptr && HasCalls(*f);
    if (!calls) return std::unique_ptr<Module>();
    std::unique_ptr<Module> copy = module.Clone();
    absl::StatusOr<int64_t> inlined = InlineCalls(*copy);
    if (!inlined.ok()) return inlined.status();
    return copy;
  }

  // Counts every mesh's layouts, as far as kMaxCount (or the cap, if larger): enough to
  // refuse a space over max_layouts with its size, or to say it is larger still.
  absl::Status CountSpace() {
    // Counting builds nothing: a million layouts count in about a second.
    constexpr int64_t kMaxCount = 1000000;
    const bool default_cap = options_.max_layouts < 0;
    const int64_t cap = default_cap ? DefaultMaxLayouts(options_.devices) : options_.max_layouts;
    const int64_t limit = std::max(cap, kMaxCount);
    int64_t total = 0;
    double bound = 0;
    for (const MeshShape& mesh : meshes_) {
      bound += AssignmentBound(static_cast<int64_t>(result_.classes.size()),
                               options_.max_classes_per_axis, static_cast<int>(mesh.sizes.size()));
      if (total > limit) {
        mesh_layouts_.push_back(-1);  // not counted
        continue;
      }
      int64_t n = CountLayouts(*function_, result_.classes, mesh, options_.max_classes_per_axis,
                               limit - total);
      mesh_layouts_.push_back(n);
      total += n;
    }
    space_counted_ = total <= limit;
    stats().layouts_in_space_exact = space_counted_;
    stats().layouts_in_space = std::min(total, limit);
    if (cap <= 0 || total <= cap) return absl::OkStatus();
    std::string size = space_counted_ ? absl::StrCat(total) : absl::StrCat("more than ", limit);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "@%s has %s layouts on %d devices (%d meshes; at most %.3g assignments of its %d "
        "dimension classes to mesh axes), more than --max-layouts=%d%s. Narrow the space "
        "(--max-mesh-axes=K, or layouts written on the arguments), or raise --max-layouts "
        "(0: no cap) and bound the time with --time-limit=SECONDS",
        result_.function, size, options_.devices, meshes_.size(), bound,
        result_.classes.size(), cap,
        default_cap && options_.devices > 8
            ? absl::StrCat(" (the default on ", options_.devices,
                           " devices: a layout's cost grows with the device count)")
            : ""));
  }

  // What the best forward-only plan's backward adds when the plan replicates float
  // arguments (nothing when it does not, or when the function has no backward).
  std::optional<TrainingAddition> WhatTrainingAdds() const {
    if (result_.ranked.empty()) return std::nullopt;
    const Candidate& best = result_.ranked.front();
    const Function* global = best.global_program->FindFunction(result_.function);
    TrainingAddition addition;
    addition.replicated_arguments = ReplicatedFloatArguments(*global);
    if (addition.replicated_arguments.empty()) return std::nullopt;
    addition.axes = best.layout.mesh.axis_names();
    std::unique_ptr<Module> trained = best.global_program->Clone();
    absl::StatusOr<std::string> backward = AddBackward(*trained, result_.function);
    if (!backward.ok()) return std::nullopt;
    absl::StatusOr<std::shared_ptr<const Module>> spmd = Scheduled(*trained, best.passes());
    if (!spmd.ok()) return std::nullopt;
    const Function* f = (*spmd)->FindFunction(result_.function);
    const Function* step = (*spmd)->FindFunction(*backward);
    absl::StatusOr<sim::Prediction> forward = sim::Predict(*f, options_.predict);
    absl::StatusOr<sim::Prediction> train = sim::Predict(*step, options_.predict);
    if (!forward.ok() || !train.ok()) return std::nullopt;
    double forward_comm = 0, train_comm = 0;
    for (const sim::DevicePrediction& d : forward->devices) forward_comm = std::max(forward_comm, d.communication_s);
    for (const sim::DevicePrediction& d : train->devices) train_comm = std::max(train_comm, d.communication_s);
    addition.added_bytes_per_device = schedules::ComputeScheduleStats(*step).bytes_per_device -
                                      schedules::ComputeScheduleStats(*f).bytes_per_device;
    addition.added_communication_s = train_comm - forward_comm;
    addition.backward_s = train->time_s - forward->time_s;
    return addition;
  }

  // No mesh of the device count splits any class evenly (or the pins cannot be met).
  absl::Status NoLayoutError() const {
    std::vector<std::string> classes;
    for (const DimClass& c : result_.classes) {
      classes.push_back(absl::StrCat(c.name, " (", c.divisible_size, c.pinned ? ", pinned" : "", ")"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "no layout of @", result_.function, " splits over ", options_.devices,
        " devices: every mesh axis must evenly split at least one of its dimensions ",
        absl::StrJoin(classes, ", "), ", and every pinned dimension must be split"));
  }

  bool TimeIsUp() const {
    return options_.time_limit_s > 0 && SecondsSince(start_) >= options_.time_limit_s;
  }

  // Enumerates the layouts mesh by mesh and evaluates them in batches of a few per
  // thread, merging each batch in enumeration order before taking the next: at most one
  // batch of layouts and outcomes is held at a time.
  absl::Status SearchSpace(const Module& module) {
    int threads = options_.threads > 0 ? options_.threads
                                       : static_cast<int>(std::thread::hardware_concurrency());
    threads = static_cast<int>(std::clamp<int64_t>(threads, 1, stats().layouts_in_space));
    // One template for every worker: laying out copies it and changes only the copy.
    template_ = std::make_unique<Template>(*module.FindFunction(result_.function));
    const size_t batch_size = static_cast<size_t>(threads) * 16;
    std::vector<LayoutCandidate> batch;
    int64_t done_before = 0;
    // Canonical keys of the layouts taken (mesh_symmetry.h): a layout on a mesh that is
    // an earlier one with its axes renamed or reordered is that layout again.
    absl::flat_hash_set<std::vector<int64_t>> keys;
    for (size_t m = 0; m < meshes_.size() && !stop_; ++m) {
      if (mesh_layouts_[m] == 0) continue;
      LayoutEnumerator enumerator(*function_, result_.classes, meshes_[m],
                                  options_.max_classes_per_axis);
      const std::vector<std::vector<int>> symmetries =
          NodeKeepingPermutations(meshes_[m].sizes, options_.predict.gpus_per_node);
      bool more = true;
      while (more && !stop_) {
        batch.clear();
        LayoutCandidate layout;
        while (batch.size() < batch_size && (more = enumerator.Next(layout))) {
          if (!keys.insert(CanonicalLayoutKey(layout, symmetries)).second) {
            ++stats().renamed_meshes;
            ++stats().layouts;
            ++done_before;
            continue;
          }
          batch.push_back(std::move(layout));
        }
        if (batch.empty()) break;
        stats().peak_layouts_held =
            std::max(stats().peak_layouts_held, static_cast<int64_t>(batch.size()));
        EvaluateBatch(batch, threads, static_cast<int64_t>(m), done_before);
        done_before += static_cast<int64_t>(batch.size());
      }
      stats().layout_space.assignments += enumerator.stats().assignments;
      stats().layout_space.rejected += enumerator.stats().rejected;
      stats().layout_space.duplicates += enumerator.stats().duplicates;
    }
    stats().cut_short = stop_ && (stats().layouts < stats().layouts_in_space || !space_counted_);
    if (stats().cut_short && result_.ranked.empty()) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "--time-limit=%gs ran out after %d of %s%d layouts of @%s, before any candidate was "
          "found", options_.time_limit_s, stats().layouts, space_counted_ ? "" : "more than ",
          stats().layouts_in_space, result_.function));
    }
    return absl::OkStatus();
  }

  // Evaluates `batch` on `threads` workers, each taking the next layout in turn, while
  // this thread reports progress about twice a second; then merges it in order.
  void EvaluateBatch(const std::vector<LayoutCandidate>& batch, int threads, int64_t mesh,
                     int64_t done_before) {
    std::vector<LayoutOutcome> outcomes(batch.size());
    std::vector<char> evaluated(batch.size(), 0);
    std::atomic<size_t> next{0};
    std::atomic<int64_t> done{0};
    std::atomic<int> running{threads};
    std::mutex mu;
    std::condition_variable finished;
    auto work = [&] {
      LayoutEvaluator evaluator(result_.function,
                                options_.train ? result_.trained_function : result_.function,
                                options_, *template_, [this] { return TimeIsUp(); });
      while (!stop_) {
        size_t i = next++;
        if (i >= batch.size()) break;
        outcomes[i] = evaluator.Evaluate(batch[i]);
        evaluated[i] = 1;
        ++done;
        // At least one layout is searched whatever the limit.
        if (TimeIsUp()) stop_ = true;
      }
      std::lock_guard<std::mutex> lock(mu);
      if (--running == 0) finished.notify_all();
    };
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) workers.emplace_back(work);
    {
      std::unique_lock<std::mutex> lock(mu);
      while (running > 0) {
        finished.wait_for(lock, std::chrono::milliseconds(100));
        if (running > 0) Progress(mesh, done_before + done.load());
      }
    }
    for (std::thread& w : workers) w.join();
    for (size_t i = 0; i < batch.size(); ++i) {
      if (evaluated[i]) Merge(outcomes[i]);
    }
    stats().peak_candidates_held =
        std::max(stats().peak_candidates_held, static_cast<int64_t>(result_.ranked.size()));
    Progress(mesh, done_before + done.load());
    Prune();
  }

  void Progress(int64_t mesh, int64_t done) {
    if (!options_.progress) return;
    Clock::time_point now = Clock::now();
    if (std::chrono::duration<double>(now - last_progress_).count() < 0.5) return;
    last_progress_ = now;
    options_.progress({.mesh = mesh, .meshes = stats().meshes, .layouts_done = done,
                       .layouts = stats().layouts_in_space, .layouts_counted = space_counted_,
                       .seconds = SecondsSince(start_)});
  }

  // Takes one layout's outcome (layouts are merged in enumeration order): the first of
  // identical programs stays.
  void Merge(LayoutOutcome& o) {
    ++stats().layouts;
    if (!o.partitioned) ++stats().partition_failures;
    stats().schedules_tried += o.schedules_tried;
    stats().not_applicable += o.not_applicable;
    stats().duplicates += o.duplicates;
    stats().prediction_failures += o.prediction_failures;
    for (Candidate& c : o.candidates) {
      if (!seen_.insert(c.fingerprint).second) {
        ++stats().duplicates;
        continue;
      }
      if (options_.max_memory_bytes && c.peak_memory_bytes > *options_.max_memory_bytes) {
        ++stats().over_memory;
        continue;
      }
      ++stats().candidates;
      result_.ranked.push_back(std::move(c));
    }
    o.candidates.clear();
  }

  // Ranking is by time, then bytes; enumeration order breaks ties (stable_sort keeps it:
  // ranked holds candidates in enumeration order, or a ranked prefix then later ones).
  void Sort() {
    std::stable_sort(result_.ranked.begin(), result_.ranked.end(),
                     [](const Candidate& a, const Candidate& b) {
                       if (a.time_s != b.time_s) return a.time_s < b.time_s;
                       return a.bytes_per_device < b.bytes_per_device;
                     });
  }

  // Keeps only the best `top` candidates once twice that many are held: the best `top`
  // of all are among the best `top` of the earlier ones and the later ones, so the
  // result is the same as ranking everything. Not with top = 0 or --verify=all, which
  // want every candidate.
  void Prune() {
    if (options_.top <= 0 || options_.verify == VerifyMode::kAll) return;
    if (result_.ranked.size() <= 2 * static_cast<size_t>(options_.top)) return;
    Sort();
    result_.ranked.resize(options_.top);
  }

  void Rank() {
    Sort();
    for (size_t i = 0; i < result_.ranked.size(); ++i) result_.ranked[i].rank = static_cast<int>(i + 1);
  }

  void Verify() {
    if (options_.verify == VerifyMode::kNone || !options_.verifier) {
      Truncate();
      return;
    }
    Clock::time_point start = Clock::now();
    size_t count = result_.ranked.size();
    if (options_.verify == VerifyMode::kTop && options_.top > 0) {
      count = std::min(count, static_cast<size_t>(options_.top));
    }
    for (size_t i = 0; i < count; ++i) {
      Candidate& c = result_.ranked[i];
      c.verdict = options_.verifier(
          options_.train ? result_.trained_function : result_.function, c);
      switch (c.verdict.state) {
        case Verdict::State::kMatched: ++stats().verified; break;
        case Verdict::State::kMismatched: ++stats().mismatched; break;
        case Verdict::State::kFailed: ++stats().verify_failures; break;
        case Verdict::State::kNotChecked: break;
      }
    }
    stats().verify_seconds = SecondsSince(start);
    Truncate();
  }

  void Truncate() {
    if (options_.top > 0 && result_.ranked.size() > static_cast<size_t>(options_.top)) {
      result_.ranked.resize(options_.top);
    }
  }

  const Module& module_;
  const SearchOptions& options_;
  SearchResult result_;
  const Function* function_ = nullptr;
  std::vector<MeshShape> meshes_;
  std::vector<int64_t> mesh_layouts_;  // counted per mesh (0: skip it; -1: not counted)
  bool space_counted_ = true;          // layouts_in_space is exact (else a lower bound)
  std::unique_ptr<Template> template_;
  absl::flat_hash_set<Fingerprint> seen_;
  Clock::time_point start_;
  Clock::time_point last_progress_;
  std::atomic<bool> stop_{false};  // time_limit_s ran out
};

}  // namespace

Pipeline Candidate::passes() const { return sharding::DefaultSpmdPipeline().Then(schedule); }

std::string Candidate::GlobalText() const {
  return global_program == nullptr ? std::string() : PrintModule(*global_program);
}

std::string Candidate::SpmdText() const {
  return spmd_program == nullptr ? std::string() : PrintModule(*spmd_program);
}

int64_t DefaultMaxLayouts(int64_t devices) {
  return kDefaultMaxLayouts * 8 / std::max<int64_t>(8, devices);
}

absl::StatusOr<SearchResult> Search(const Module& module, const SearchOptions& options) {
  if (options.devices < 1 || options.devices > kMaxSearchDevices) {
    return absl::InvalidArgumentError(absl::StrCat("the device count must be from 1 to ",
                                                   kMaxSearchDevices, ", got ", options.devices));
  }
  if (options.verify != VerifyMode::kNone && !options.verifier) {
    return absl::InvalidArgumentError("verification asked for without a verifier");
  }
  return Searcher(module, options).Run();
}

}  // namespace commir::search
