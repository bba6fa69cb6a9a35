#include "search/plan_model_loader.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "parser/parser.h"
#include "search/plan/layer_program.h"
#include "search/plan/model_reader.h"
#include "tools/command_line.h"

namespace commir::search {
namespace {

constexpr char kCommirSuffix[] = ".commir";
constexpr size_t kCommirSuffixSize = sizeof(kCommirSuffix) - 1;

// A file of the text form when one exists at that path, else the text itself.
absl::StatusOr<plan::ModelSpec> LoadModelSpec(const std::string& arg) {
  const std::string path = ResolvePath(arg);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return plan::ParseModelSpec(arg);
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", arg, "'"));
  std::vector<std::string> parts;
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (l.empty() || absl::StartsWith(l, "//")) continue;
    parts.emplace_back(l);
  }
  absl::StatusOr<plan::ModelSpec> model = plan::ParseModelSpec(absl::StrJoin(parts, ","));
  if (!model.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(arg, ": ", model.status().message()));
  }
  return model;
}

// Until the plan search lays out a file's own functions, it costs the generated layer
// and head programs of the sizes it read: so it accepts only a file whose functions are
// exactly those (as `--emit-model` writes them), and says so otherwise rather than
// costing other programs than the file's.
absl::Status CheckGeneratedFunctions(const LoadedModel& m, const std::string& path) {
  absl::StatusOr<plan::FunctionText> layer = plan::SingleDeviceLayer(m.spec, m.micro_batch);
  if (!layer.ok()) return layer.status();
  absl::StatusOr<plan::FunctionText> head = plan::SingleDeviceHead(m.spec, m.micro_batch);
  if (!head.ok()) return head.status();
  absl::StatusOr<std::unique_ptr<Module>> generated =
      ParseModuleOrError(absl::StrCat(layer->Print(), head->Print()), "generated.commir");
  if (!generated.ok()) return generated.status();
  const std::string expected_layer =
      PrintFunction(*(*generated)->FindFunction(plan::kLayerFunction));
  const std::string expected_head = PrintFunction(*(*generated)->FindFunction(plan::kHeadFunction));
  for (const auto& [what, written, expected] :
       {std::tuple<const char*, const std::string*, const std::string*>{
            "layer", &m.layer_function, &expected_layer},
        {"head", &m.head_function, &expected_head}}) {
    if (*written != *expected) {
      return absl::UnimplementedError(absl::StrCat(
          path, ": the ", what, " function is not the generated ", what, " of its sizes (",
          plan::FormatModelSpec(m.spec), ", micro_batch=", m.micro_batch,
          "; `commir-search --emit-model` writes it); costing a file's own, edited functions "
          "needs the Megatron layout step, which is not done yet"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadedModel> LoadCommirModel(const std::string& arg) {
  const size_t end = arg.find(kCommirSuffix) + kCommirSuffixSize;
  const std::string path = arg.substr(0, end);
  int64_t global_batch = 0;
  for (absl::string_view option : absl::StrSplit(arg.substr(end), ',', absl::SkipEmpty())) {
    absl::string_view value = option;
    if (!absl::ConsumePrefix(&value, "global_batch=") || !absl::SimpleAtoi(value, &global_batch) ||
        global_batch < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", option, "': a CommIR model takes one option, global_batch=N (N >= 1)"));
    }
  }
  if (global_batch == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds no global batch: give it as ", path, ",global_batch=N"));
  }
  absl::StatusOr<std::unique_ptr<Module>> module = ParseFile(ResolvePath(path));
  if (!module.ok()) return module.status();
  const std::string name = std::filesystem::path(path).stem().string();
  absl::StatusOr<plan::ModelFromIr> read =
      plan::ReadModelFromIr(**module, path, name, global_batch);
  if (!read.ok()) return read.status();
  LoadedModel out;
  out.spec = read->spec;
  out.micro_batch = read->micro_batch;
  out.layer_function = std::move(read->layer_function);
  out.head_function = std::move(read->head_function);
  if (absl::Status s = CheckGeneratedFunctions(out, path); !s.ok()) return s;
  return out;
}

// Whether the file's first line that is not blank or a comment starts a CommIR
// declaration: a spec file may be named .commir too (the golden tests' are).
bool LooksLikeCommir(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (l.empty() || absl::StartsWith(l, "//")) continue;
    return absl::StartsWith(l, "func ") || absl::StartsWith(l, "spmd ") ||
           absl::StartsWith(l, "mesh ");
  }
  return false;
}

}  // namespace

bool IsCommirModel(const std::string& arg) {
  const size_t at = arg.find(kCommirSuffix);
  if (at == std::string::npos) return false;
  const size_t end = at + kCommirSuffixSize;
  if (end != arg.size()) return arg[end] == ',';
  return LooksLikeCommir(ResolvePath(arg));
}

absl::StatusOr<LoadedModel> LoadPlanModel(const std::string& arg) {
  if (IsCommirModel(arg)) return LoadCommirModel(arg);
  absl::StatusOr<plan::ModelSpec> spec = LoadModelSpec(arg);
  if (!spec.ok()) return spec.status();
  LoadedModel out;
  out.spec = *std::move(spec);
  return out;
}

}  // namespace commir::search
