#include "search/search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commir/diagnostics.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "parser/parser.h"
#include "search/dim_classes.h"
#include "search/mesh_shapes.h"
#include "search/schedule_space.h"
#include "transforms/pass_manager.h"
#include "transforms/pass_registry.h"
#include "transforms/pipeline.h"
#include "transforms/schedules/schedule_report.h"
#include "transforms/sharding/lower.h"

namespace commir::search {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
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
  const Function* found = nullptr;
  for (const Function* f : module.functions()) {
    if (f->is_spmd()) continue;
    if (found != nullptr) {
      return absl::InvalidArgumentError(
          "the module has several global functions; name one with --func=@name");
    }
    found = f;
  }
  if (found == nullptr) return absl::InvalidArgumentError("the module has no global function");
  return found;
}

// Parses `text` and runs `pipeline` on it. Errors are the pass's or the parser's.
absl::StatusOr<std::unique_ptr<Module>> Run(absl::string_view text, absl::string_view pipeline) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(text, diagnostics);
  if (module == nullptr) return diagnostics.ToStatus("candidate.commir", text);
  if (pipeline.empty()) return module;
  absl::StatusOr<std::vector<std::unique_ptr<Pass>>> passes =
      ParsePassPipeline(pipeline, RegisteredPasses());
  if (!passes.ok()) return passes.status();
  PassManager manager;
  manager.AddPasses(*std::move(passes));
  if (absl::Status s = manager.Run(*module, diagnostics); !s.ok()) return s;
  return module;
}

// The function with every sharding removed, which each candidate lays out anew: its
// signature takes the candidate's layouts and intermediate values are left to
// propagation. Each worker thread has its own (laying out mutates it).
class Template {
 public:
  static absl::StatusOr<std::unique_ptr<Template>> Make(const Module& module,
                                                        const std::string& name) {
    auto t = std::unique_ptr<Template>(new Template());
    DiagnosticEngine diagnostics;
    std::string text = PrintModule(module);
    t->module_ = ParseModule(text, diagnostics);
    if (t->module_ == nullptr) return diagnostics.ToStatus("input", text);
    t->function_ = t->module_->FindFunction(name);
    t->function_->set_mesh_name("");
    Block& body = *t->function_->body();
    for (int i = 0; i < body.num_arguments(); ++i) {
      Type type = t->function_->arg_types()[i];
      if (type.is_tensor()) t->function_->SetArgType(i, type.WithoutSharding());
    }
    for (size_t r = 0; r < t->function_->result_types().size(); ++r) {
      Type type = t->function_->result_types()[r];
      if (type.is_tensor()) t->function_->SetResultType(static_cast<int>(r), type.WithoutSharding());
    }
    WalkOps(&body, [](Operation* op) {
      for (Value* result : op->results()) {
        if (result->type().is_tensor()) result->set_type(result->type().WithoutSharding());
      }
    });
    return t;
  }

  // The laid-out global program of `layout`: its mesh and the function.
  std::string GlobalText(const LayoutCandidate& layout) {
    Block& body = *function_->body();
    for (int i = 0; i < body.num_arguments(); ++i) {
      function_->SetArgType(i, layout.arg_types[i]);
      body.argument(i)->set_type(layout.arg_types[i]);
    }
    for (size_t r = 0; r < layout.result_types.size(); ++r) {
      function_->SetResultType(static_cast<int>(r), layout.result_types[r]);
    }
    return absl::StrCat(layout.mesh.Declaration(), "\n\n", PrintFunction(*function_));
  }

 private:
  Template() = default;
  std::unique_ptr<Module> module_;
  Function* function_ = nullptr;
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
  LayoutEvaluator(const std::string& function, const SearchOptions& options, Template& t)
      : function_(function), options_(options), template_(t) {}

  LayoutOutcome Evaluate(const LayoutCandidate& layout) {
    LayoutOutcome out;
    seen_.clear();
    std::string global_text = template_.GlobalText(layout);
    absl::StatusOr<std::unique_ptr<Module>> lowered =
        search::Run(global_text, sharding::kDefaultSpmdPipeline);
    if (!lowered.ok()) return out;
    out.partitioned = true;
    std::string lowered_text = PrintModule(**lowered);
    // Families with nothing to rewrite are not tried: each would print the program as it
    // is (attention schedules need an attention, collective-matmul ones a gather or scatter).
    bool has_attention = false, has_gather_or_scatter = false;
    WalkOps((*lowered)->FindFunction(function_)->body(), [&](Operation* op) {
      has_attention |= op->Is(OpKind::kAttention);
      has_gather_or_scatter |= op->Is(OpKind::kAllGather) || op->Is(OpKind::kReduceScatter);
    });
    std::vector<std::string> attention_schedules = {""};
    if (has_attention) attention_schedules = AttentionSchedules(layout.mesh);
    for (const std::string& attention : attention_schedules) {
      std::string attention_text = lowered_text;
      if (!attention.empty()) {
        ++out.schedules_tried;
        absl::StatusOr<std::unique_ptr<Module>> m = search::Run(lowered_text, attention);
        if (!m.ok()) {
          ++out.not_applicable;
          continue;
        }
        attention_text = PrintModule(**m);
        if (attention_text == lowered_text) {
          ++out.duplicates;
          continue;
        }
      }
      for (const std::string& matmul : MatmulSchedules()) {
        if (!matmul.empty() && !has_gather_or_scatter && !has_attention) break;
        std::string schedule = JoinPipeline(attention, matmul);
        if (schedule.empty()) {
          Consider(layout, global_text, schedule, std::move(*lowered), out);
          continue;
        }
        ++out.schedules_tried;
        Consider(layout, global_text, schedule, search::Run(attention_text, matmul), out);
      }
    }
    return out;
  }

 private:
  void Consider(const LayoutCandidate& layout, const std::string& global_text,
                const std::string& schedule, absl::StatusOr<std::unique_ptr<Module>> module,
                LayoutOutcome& out) {
    if (!module.ok() || *module == nullptr) {
      ++out.not_applicable;
      return;
    }
    std::string text = PrintModule(**module);
    if (!seen_.insert(text).second) {
      ++out.duplicates;
      return;
    }
    const Function* spmd = (*module)->FindFunction(function_);
    absl::StatusOr<sim::Prediction> prediction = sim::Predict(*spmd, options_.predict);
    if (!prediction.ok()) {
      ++out.prediction_failures;
      return;
    }
    Candidate c;
    c.layout = layout;
    c.schedule = schedule;
    c.pipeline = JoinPipeline(sharding::kDefaultSpmdPipeline, schedule);
    c.global_text = global_text;
    c.spmd_text = std::move(text);
    c.time_s = prediction->time_s;
    for (const sim::DevicePrediction& d : prediction->devices) {
      c.exposed_communication_s = std::max(c.exposed_communication_s, d.exposed_communication_s);
      c.peak_memory_bytes = std::max(c.peak_memory_bytes, d.peak_memory_bytes);
    }
    c.bytes_per_device = schedules::ComputeScheduleStats(*spmd).bytes_per_device;
    out.candidates.push_back(std::move(c));
  }

  const std::string& function_;
  const SearchOptions& options_;
  Template& template_;
  absl::flat_hash_set<std::string> seen_;
};

class Searcher {
 public:
  Searcher(const Module& module, const SearchOptions& options) : module_(module), options_(options) {}

  absl::StatusOr<SearchResult> Run() {
    Clock::time_point start = Clock::now();
    absl::StatusOr<const Function*> function = ChooseFunction(module_, options_.function);
    if (!function.ok()) return function.status();
    result_.function = (*function)->name();
    absl::StatusOr<std::vector<DimClass>> classes = FindDimClasses(**function);
    if (!classes.ok()) return classes.status();
    if (classes->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "@", result_.function, " has no dimension that can be split over devices"));
    }
    result_.classes = *classes;

    meshes_ = MeshShapes(options_.devices, options_.max_mesh_axes);
    stats().meshes = static_cast<int64_t>(meshes_.size());
    std::vector<LayoutCandidate> layouts;
    for (const MeshShape& mesh : meshes_) {
      for (LayoutCandidate& layout :
           EnumerateLayouts(**function, result_.classes, mesh, options_.max_classes_per_axis,
                            stats().layout_space)) {
        layouts.push_back(std::move(layout));
      }
    }
    if (layouts.empty()) return NoLayoutError();
    absl::StatusOr<std::vector<LayoutOutcome>> outcomes = EvaluateAll(layouts, start);
    if (!outcomes.ok()) return outcomes.status();
    Merge(*outcomes);
    Rank();
    stats().search_seconds = SecondsSince(start);
    Verify();
    return std::move(result_);
  }

 private:
  SearchStats& stats() { return result_.stats; }

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

  // Evaluates every layout on `threads` workers, each taking the next layout in turn.
  absl::StatusOr<std::vector<LayoutOutcome>> EvaluateAll(const std::vector<LayoutCandidate>& layouts,
                                                         Clock::time_point start) {
    int threads = options_.threads > 0 ? options_.threads
                                       : static_cast<int>(std::thread::hardware_concurrency());
    threads = std::max(1, std::min<int>(threads, static_cast<int>(layouts.size())));
    std::vector<std::unique_ptr<Template>> templates;
    for (int t = 0; t < threads; ++t) {
      absl::StatusOr<std::unique_ptr<Template>> made = Template::Make(module_, result_.function);
      if (!made.ok()) return made.status();
      templates.push_back(*std::move(made));
    }
    std::vector<LayoutOutcome> outcomes(layouts.size());
    std::atomic<size_t> next{0};
    std::atomic<size_t> done{0};
    auto work = [&](int t) {
      LayoutEvaluator evaluator(result_.function, options_, *templates[t]);
      for (size_t i = next++; i < layouts.size(); i = next++) {
        outcomes[i] = evaluator.Evaluate(layouts[i]);
        ++done;
      }
    };
    std::vector<std::thread> workers;
    for (int t = 1; t < threads; ++t) workers.emplace_back(work, t);
    // This thread works too, and reports progress between its layouts.
    {
      LayoutEvaluator evaluator(result_.function, options_, *templates[0]);
      Clock::time_point last_progress = start;
      for (size_t i = next++; i < layouts.size(); i = next++) {
        outcomes[i] = evaluator.Evaluate(layouts[i]);
        ++done;
        Progress(layouts, i, done.load(), start, last_progress);
      }
    }
    for (std::thread& w : workers) w.join();
    return outcomes;
  }

  void Progress(const std::vector<LayoutCandidate>& layouts, size_t current, size_t done,
                Clock::time_point start, Clock::time_point& last) {
    if (!options_.progress) return;
    Clock::time_point now = Clock::now();
    if (std::chrono::duration<double>(now - start).count() < 1.0 ||
        std::chrono::duration<double>(now - last).count() < 0.5) {
      return;
    }
    last = now;
    int64_t mesh = 0;
    for (size_t m = 0; m < meshes_.size(); ++m) {
      if (layouts[current].mesh.sizes == meshes_[m].sizes) mesh = static_cast<int64_t>(m);
    }
    options_.progress({mesh, stats().meshes, static_cast<int64_t>(done),
                       static_cast<int64_t>(layouts.size()), SecondsSince(start)});
  }

  // Takes the outcomes in enumeration order: the first of identical programs stays.
  void Merge(std::vector<LayoutOutcome>& outcomes) {
    absl::flat_hash_set<std::string> seen;
    for (LayoutOutcome& o : outcomes) {
      ++stats().layouts;
      if (!o.partitioned) ++stats().partition_failures;
      stats().schedules_tried += o.schedules_tried;
      stats().not_applicable += o.not_applicable;
      stats().duplicates += o.duplicates;
      stats().prediction_failures += o.prediction_failures;
      for (Candidate& c : o.candidates) {
        if (!seen.insert(c.spmd_text).second) {
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
  }

  void Rank() {
    // Enumeration order breaks ties: stable_sort keeps it.
    std::stable_sort(result_.ranked.begin(), result_.ranked.end(),
                     [](const Candidate& a, const Candidate& b) {
                       if (a.time_s != b.time_s) return a.time_s < b.time_s;
                       return a.bytes_per_device < b.bytes_per_device;
                     });
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
      c.verdict = options_.verifier(result_.function, c);
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
  std::vector<MeshShape> meshes_;
};

}  // namespace

absl::StatusOr<SearchResult> Search(const Module& module, const SearchOptions& options) {
  if (options.devices < 1) return absl::InvalidArgumentError("the device count must be at least 1");
  if (options.verify != VerifyMode::kNone && !options.verifier) {
    return absl::InvalidArgumentError("verification asked for without a verifier");
  }
  return Searcher(module, options).Run();
}

}  // namespace commir::search
