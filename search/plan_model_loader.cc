#include "search/plan_model_loader.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "commir/ir.h"
#include "parser/parser.h"
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

// The file's part of FILE.commir,KEY=VALUE...
std::string CommirPath(const std::string& arg) {
  return arg.substr(0, arg.find(kCommirSuffix) + kCommirSuffixSize);
}

absl::StatusOr<LoadedModel> LoadCommirModel(const std::string& arg) {
  const std::string path = CommirPath(arg);
  absl::StatusOr<int64_t> options = CommirModelGlobalBatch(arg);
  if (!options.ok()) return options.status();
  const int64_t global_batch = *options;
  if (global_batch == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds no global batch: give it as ", path, ",global_batch=N"));
  }
  absl::StatusOr<std::unique_ptr<Module>> module = ParseFile(ResolvePath(path));
  if (!module.ok()) return module.status();
  // The text again, so that the layer and head handed on keep the file's line:col.
  std::ifstream in(ResolvePath(path));
  const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string name = std::filesystem::path(path).stem().string();
  absl::StatusOr<plan::ModelFromIr> read =
      plan::ReadModelFromIr(**module, path, name, global_batch, source);
  if (!read.ok()) return read.status();
  LoadedModel out;
  out.spec = read->spec;
  out.micro_batch = read->micro_batch;
  out.file = path;
  out.layer_function = std::move(read->layer_function);
  out.head_function = std::move(read->head_function);
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

absl::StatusOr<int64_t> CommirModelGlobalBatch(const std::string& arg) {
  const std::string path = CommirPath(arg);
  int64_t global_batch = 0;
  for (absl::string_view option : absl::StrSplit(arg.substr(path.size()), ',', absl::SkipEmpty())) {
    absl::string_view value = option;
    if (!absl::ConsumePrefix(&value, "global_batch=")) {
      const std::string key(option.substr(0, option.find('=')));
      return absl::InvalidArgumentError(absl::StrCat(
          "'", key, "' is not an option of a model file (", path,
          " takes one: global_batch=N; its other sizes are read from the IR)"));
    }
    if (global_batch != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("global_batch is given twice for ", path, ": give it once"));
    }
    if (!absl::SimpleAtoi(value, &global_batch) || global_batch < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", option, "': global_batch needs a count N >= 1"));
    }
  }
  return global_batch;
}

bool IsCommirModel(const std::string& arg) {
  const size_t at = arg.find(kCommirSuffix);
  if (at == std::string::npos) return false;
  const size_t end = at + kCommirSuffixSize;
  if (end != arg.size()) return arg[end] == ',';
  return LooksLikeCommir(ResolvePath(arg));
}

absl::StatusOr<LoadedModel> LoadPlanModel(const std::string& arg) {
  if (IsCommirModel(arg)) return LoadCommirModel(arg);
  // A name ending in .commir names a file, not a preset: say that it is missing.
  if (const size_t at = arg.find(kCommirSuffix);
      at != std::string::npos && at + kCommirSuffixSize == arg.size()) {
    std::error_code ec;
    if (!std::filesystem::exists(ResolvePath(arg), ec)) {
      return absl::NotFoundError(absl::StrCat(arg, ": no such file"));
    }
  }
  absl::StatusOr<plan::ModelSpec> spec = LoadModelSpec(arg);
  if (!spec.ok()) return spec.status();
  LoadedModel out;
  out.spec = *std::move(spec);
  return out;
}

}  // namespace commir::search
