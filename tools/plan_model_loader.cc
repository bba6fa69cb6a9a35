#include "tools/plan_model_loader.h"

#include <sys/stat.h>

#include <filesystem>
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
#include "tools/input_file.h"

namespace commir::search {
namespace {

constexpr char kCommirSuffix[] = ".commir";
constexpr size_t kCommirSuffixSize = sizeof(kCommirSuffix) - 1;

// A file of the text form is a few lines.
constexpr size_t kMaxSpecFileBytes = size_t{1} << 20;

// The whole file, read as commir-opt reads program text (a directory refused, a device
// that never ends stopped at `max_bytes`); errors name the file as given.
absl::StatusOr<std::string> ReadModelFile(const std::string& path, size_t max_bytes) {
  absl::StatusOr<std::string> text = ReadInputFile(ResolvePath(path), max_bytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(), absl::StrCat(path, ": ", text.status().message()));
  }
  return text;
}

// A file of the text form when something exists at that path, else the text itself.
absl::StatusOr<plan::ModelSpec> LoadModelSpec(const std::string& arg) {
  struct stat info;
  if (stat(ResolvePath(arg).c_str(), &info) != 0) {
    // DIR,KEY=VALUE: a directory where a model was meant is said to be one, not taken
    // for an unknown preset.
    const std::string first = arg.substr(0, arg.find(','));
    if (first != arg && stat(ResolvePath(first).c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat(first, ": cannot read file: it is a directory"));
    }
    return plan::ParseModelSpec(arg);
  }
  absl::StatusOr<std::string> text = ReadModelFile(arg, kMaxSpecFileBytes);
  if (!text.ok()) return text.status();
  std::vector<std::string> parts;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
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

// Where the file's name ends in FILE.commir[,KEY=VALUE...]: after the last ".commir"
// that ends the argument or is followed by ',' (a directory such as my.commir.d/ may
// hold it; the options never contain ".commir"). npos when there is none.
size_t CommirPathEnd(const std::string& arg) {
  size_t found = std::string::npos;
  for (size_t at = arg.find(kCommirSuffix); at != std::string::npos;
       at = arg.find(kCommirSuffix, at + 1)) {
    const size_t end = at + kCommirSuffixSize;
    if (end == arg.size() || arg[end] == ',') found = end;
  }
  return found;
}

// The file's part of FILE.commir,KEY=VALUE...
std::string CommirPath(const std::string& arg) {
  const size_t end = CommirPathEnd(arg);
  return end == std::string::npos ? arg : arg.substr(0, end);
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
  absl::StatusOr<std::string> text = ReadModelFile(path, kMaxProgramBytes);
  if (!text.ok()) return text.status();
  // Parsed once, as the file: the layer and head handed on keep its line:col.
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(*text, path);
  if (!module.ok()) return module.status();
  const std::string name = std::filesystem::path(path).stem().string();
  absl::StatusOr<plan::ModelFromIr> read =
      plan::ReadModelFromIr(**module, path, name, global_batch);
  if (!read.ok()) return read.status();
  LoadedModel out;
  out.spec = read->spec;
  out.micro_batch = read->micro_batch;
  out.file = path;
  out.functions = std::move(read->functions);
  out.layer_name = std::move(read->layer_name);
  out.head_name = std::move(read->head_name);
  return out;
}

// Whether the file's first line that is not blank or a comment starts a CommIR
// declaration: a spec file may be named .commir too (the golden tests' are).
// A file that cannot be read (a directory) is not: loading it as the text form says why.
bool LooksLikeCommir(const std::string& path) {
  absl::StatusOr<std::string> text = ReadModelFile(path, kMaxProgramBytes);
  if (!text.ok()) return false;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
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
  const size_t end = CommirPathEnd(arg);
  if (end == std::string::npos) return false;
  if (end != arg.size()) return true;
  return LooksLikeCommir(arg);
}

absl::StatusOr<LoadedModel> LoadPlanModel(const std::string& arg) {
  if (IsCommirModel(arg)) return LoadCommirModel(arg);
  // A name ending in .commir names a file, not a preset: say that it is missing.
  if (CommirPathEnd(arg) == arg.size()) {
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
