#include "tools/program_loader.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commir/diagnostics.h"
#include "parser/parser.h"
#include "tools/input_file.h"
#include "transforms/pipeline.h"
#include "transforms/sharding/spmd_pipeline.h"

namespace commir {

int Report(std::ostream& err, const Failure& failure) {
  err << failure.message << "\n";
  return failure.code;
}

std::optional<Failure> LoadModule(const std::string& path, LoadedModule& loaded) {
  loaded.path = path == "-" ? "<stdin>" : path;
  absl::StatusOr<std::string> source = ReadInputFile(path);
  if (!source.ok()) {
    return Failure{kExitInvalidInput, absl::StrCat(loaded.path, ": error: ", source.status().message())};
  }
  loaded.source = *std::move(source);
  DiagnosticEngine diagnostics;
  loaded.module = ParseModule(loaded.source, diagnostics);
  if (loaded.module == nullptr) {
    std::string text = diagnostics.Render(loaded.path, loaded.source);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    return Failure{kExitInvalidInput, text};
  }
  return std::nullopt;
}

// A second copy of `loaded`, partitioned by the default pipeline (a global
// function is lowered before a multi-device run). Errors point into the source.
std::optional<Failure> Partition(const LoadedModule& loaded, LoadedModule& partitioned) {
  partitioned.path = loaded.path;
  partitioned.source = loaded.source;
  DiagnosticEngine diagnostics;
  partitioned.module = ParseModule(loaded.source, diagnostics);
  if (partitioned.module == nullptr) {
    return Failure{kExitInvalidInput, absl::StrCat(loaded.path, ": error: cannot partition the module")};
  }
  absl::Status status =
      RunPipeline(*partitioned.module, sharding::DefaultSpmdPipeline(),
                  {.verify_each = true, .diagnostics = &diagnostics});
  if (!status.ok()) {
    std::string text = diagnostics.Render(loaded.path, loaded.source);
    if (text.empty()) text = absl::StrCat(loaded.path, ": error: ", status.message());
    if (!text.empty() && text.back() == '\n') text.pop_back();
    return Failure{kExitInvalidInput, text};
  }
  return std::nullopt;
}

std::optional<Failure> ChooseFunction(const LoadedModule& loaded, const std::string& name,
                                      Function*& function) {
  std::vector<Function*> functions = loaded.module->functions();
  if (!name.empty()) {
    function = loaded.module->FindFunction(name);
    if (function == nullptr) {
      std::vector<std::string> names;
      for (Function* f : functions) names.push_back(absl::StrCat("@", f->name()));
      return Failure{kExitInvalidInput,
                     absl::StrFormat("%s: error: no function @%s (the module has %s)", loaded.path,
                                     name, names.empty() ? "none" : absl::StrJoin(names, ", "))};
    }
    return std::nullopt;
  }
  if (functions.empty()) {
    return Failure{kExitInvalidInput,
                   absl::StrFormat("%s: error: the module has no function to run", loaded.path)};
  }
  if (functions.size() != 1) {
    return Failure{kExitUsage, absl::StrFormat("%s: error: the module has %d functions; choose "
                                               "one with --func=@NAME",
                                               loaded.path, functions.size())};
  }
  function = functions[0];
  return std::nullopt;
}

}  // namespace commir
