#include "search/search.h"

#include <algorithm>
#include <chrono>
#include <memory>
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

class Searcher {
 public:
  Searcher(const Module& module, const SearchOptions& options) : module_(module), options_(options) {}

  absl::StatusOr<SearchResult> Run() {
    Clock::time_point start = Clock::now();
    last_progress_ = start;
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
    if (absl::Status s = PrepareTemplate(**function); !s.ok()) return s;

    std::vector<MeshShape> meshes = MeshShapes(options_.devices, options_.max_mesh_axes);
    stats().meshes = static_cast<int64_t>(meshes.size());
    for (size_t m = 0; m < meshes.size(); ++m) {
      std::vector<LayoutCandidate> layouts =
          EnumerateLayouts(**function, result_.classes, meshes[m],
                           options_.max_classes_per_axis, stats().layout_space);
      for (LayoutCandidate& layout : layouts) {
        SearchLayout(std::move(layout));
        Progress(m, meshes.size(), start);
      }
    }
    if (stats().layouts == 0) return NoLayoutError();
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

  // A copy of the function with every sharding removed: candidates write their own
  // layouts on its signature, and intermediate values are left to propagation.
  absl::Status PrepareTemplate(const Function& function) {
    DiagnosticEngine diagnostics;
    std::string text = PrintModule(module_);
    template_module_ = ParseModule(text, diagnostics);
    if (template_module_ == nullptr) return diagnostics.ToStatus("input", text);
    template_function_ = template_module_->FindFunction(function.name());
    template_function_->set_mesh_name("");
    Block& body = *template_function_->body();
    for (int i = 0; i < body.num_arguments(); ++i) {
      Type t = template_function_->arg_types()[i];
      if (t.is_tensor()) template_function_->SetArgType(i, t.WithoutSharding());
    }
    for (size_t r = 0; r < template_function_->result_types().size(); ++r) {
      Type t = template_function_->result_types()[r];
      if (t.is_tensor()) template_function_->SetResultType(static_cast<int>(r), t.WithoutSharding());
    }
    WalkOps(&body, [](Operation* op) {
      for (Value* result : op->results()) {
        if (result->type().is_tensor()) result->set_type(result->type().WithoutSharding());
      }
    });
    return absl::OkStatus();
  }

  std::string GlobalText(const LayoutCandidate& layout) {
    Block& body = *template_function_->body();
    for (int i = 0; i < body.num_arguments(); ++i) {
      template_function_->SetArgType(i, layout.arg_types[i]);
      body.argument(i)->set_type(layout.arg_types[i]);
    }
    for (size_t r = 0; r < layout.result_types.size(); ++r) {
      template_function_->SetResultType(static_cast<int>(r), layout.result_types[r]);
    }
    return absl::StrCat(layout.mesh.Declaration(), "\n\n", PrintFunction(*template_function_));
  }

  void SearchLayout(LayoutCandidate layout) {
    ++stats().layouts;
    std::string global_text = GlobalText(layout);
    absl::StatusOr<std::unique_ptr<Module>> lowered =
        search::Run(global_text, sharding::kDefaultSpmdPipeline);
    if (!lowered.ok()) {
      ++stats().partition_failures;
      return;
    }
    std::string lowered_text = PrintModule(**lowered);
    for (const std::string& attention : AttentionSchedules(layout.mesh)) {
      std::string attention_text = lowered_text;
      if (!attention.empty()) {
        ++stats().schedules_tried;
        absl::StatusOr<std::unique_ptr<Module>> m = search::Run(lowered_text, attention);
        if (!m.ok()) {
          ++stats().not_applicable;
          continue;
        }
        attention_text = PrintModule(**m);
        if (attention_text == lowered_text) {
          ++stats().duplicates;
          continue;
        }
      }
      for (const std::string& matmul : MatmulSchedules()) {
        std::string schedule = JoinPipeline(attention, matmul);
        if (schedule.empty()) {
          Consider(layout, global_text, schedule, std::move(*lowered));
          continue;
        }
        ++stats().schedules_tried;
        if (matmul.empty()) {
          Consider(layout, global_text, schedule, search::Run(attention_text, ""));
          continue;
        }
        absl::StatusOr<std::unique_ptr<Module>> m = search::Run(attention_text, matmul);
        if (!m.ok()) {
          ++stats().not_applicable;
          continue;
        }
        Consider(layout, global_text, schedule, std::move(m));
      }
    }
  }

  void Consider(const LayoutCandidate& layout, const std::string& global_text,
                const std::string& schedule, absl::StatusOr<std::unique_ptr<Module>> module) {
    if (!module.ok() || *module == nullptr) {
      ++stats().not_applicable;
      return;
    }
    std::string text = PrintModule(**module);
    if (!seen_.insert(text).second) {
      ++stats().duplicates;
      return;
    }
    const Function* spmd = (*module)->FindFunction(result_.function);
    absl::StatusOr<sim::Prediction> prediction = sim::Predict(*spmd, options_.predict);
    if (!prediction.ok()) {
      ++stats().prediction_failures;
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
    if (options_.max_memory_bytes && c.peak_memory_bytes > *options_.max_memory_bytes) {
      ++stats().over_memory;
      return;
    }
    ++stats().candidates;
    result_.ranked.push_back(std::move(c));
  }

  void Progress(size_t mesh, size_t meshes, Clock::time_point start) {
    if (!options_.progress) return;
    Clock::time_point now = Clock::now();
    if (std::chrono::duration<double>(now - start).count() < 1.0 ||
        std::chrono::duration<double>(now - last_progress_).count() < 0.5) {
      return;
    }
    last_progress_ = now;
    options_.progress({static_cast<int64_t>(mesh), static_cast<int64_t>(meshes), stats().layouts,
                       stats().candidates, SecondsSince(start)});
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
  std::unique_ptr<Module> template_module_;
  Function* template_function_ = nullptr;
  absl::flat_hash_set<std::string> seen_;
  Clock::time_point last_progress_;
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
