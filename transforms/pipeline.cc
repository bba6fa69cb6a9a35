#include "transforms/pipeline.h"

#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "transforms/pass_manager.h"

namespace commir {
namespace {

std::string ValidPasses(absl::Span<const PassInfo> registry) {
  return absl::StrJoin(registry, ", ",
                       [](std::string* out, const PassInfo& info) { out->append(info.name); });
}

std::string ValidOptions(const PassInfo& info) {
  if (info.options.empty()) return absl::StrFormat("pass '%s' takes no options", info.name);
  return absl::StrCat(
      "valid options of '", info.name, "': ",
      absl::StrJoin(info.options, ", ", [](std::string* out, const PassOptionSpec& spec) {
        absl::StrAppend(out, spec.name, " (", DescribeOptionType(spec), ", default ",
                        spec.default_value.empty() ? "\"\"" : spec.default_value, ")");
      }));
}

bool IsNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

// A cursor over the pipeline text; every error is InvalidArgument and names the column.
class PipelineParser {
 public:
  PipelineParser(absl::string_view text, absl::Span<const PassInfo> registry)
      : text_(text), registry_(registry) {}

  absl::StatusOr<Pipeline> Parse() {
    Pipeline passes;
    SkipSpace();
    if (AtEnd()) return passes;
    while (true) {
      absl::StatusOr<PassStep> pass = ParseEntry();
      if (!pass.ok()) return pass.status();
      passes.steps.push_back(*std::move(pass));
      SkipSpace();
      if (AtEnd()) return passes;
      if (!Consume(',')) return SyntaxError("expected ',' between passes");
      SkipSpace();
    }
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  void SkipSpace() {
    while (!AtEnd() && absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }

  absl::Status SyntaxError(absl::string_view what) const {
    std::string found = AtEnd() ? "the end" : absl::StrCat("'", text_.substr(pos_, 1), "'");
    return absl::InvalidArgumentError(absl::StrFormat(
        "malformed pass pipeline '%s' at column %d: %s, found %s", text_, pos_ + 1, what, found));
  }

  absl::string_view ParseName() {
    size_t start = pos_;
    while (!AtEnd() && IsNameChar(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  absl::StatusOr<PassStep> ParseEntry() {
    absl::string_view name = ParseName();
    if (name.empty()) return SyntaxError("expected a pass name");
    const PassInfo* info = nullptr;
    for (const PassInfo& candidate : registry_) {
      if (candidate.name == name) info = &candidate;
    }
    if (info == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat("unknown pass '%s'; valid passes: %s",
                                                        name, ValidPasses(registry_)));
    }
    PassOptions options = info->DefaultOptions();
    SkipSpace();
    if (Consume('{')) {
      if (absl::Status s = ParseOptions(*info, options); !s.ok()) return s;
    }
    return PassStep(*info, std::move(options));
  }

  // After '{': options up to and including '}'.
  absl::Status ParseOptions(const PassInfo& info, PassOptions& options) {
    absl::flat_hash_set<std::string> seen;
    SkipSpace();
    if (Consume('}')) return absl::OkStatus();
    while (true) {
      SkipSpace();
      absl::string_view key = ParseName();
      if (key.empty()) return SyntaxError("expected an option name");
      const PassOptionSpec* spec = info.FindOption(key);
      if (spec == nullptr) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "pass '%s' has no option '%s'; %s", info.name, key, ValidOptions(info)));
      }
      if (!seen.insert(std::string(key)).second) {
        return absl::InvalidArgumentError(
            absl::StrFormat("option '%s' of pass '%s' is given twice", key, info.name));
      }
      SkipSpace();
      std::string value;
      if (Consume('=')) {
        SkipSpace();
        absl::StatusOr<std::string> parsed =
            spec->type == PassOptionType::kChoice ? ParseChoiceText() : ParseValue();
        if (!parsed.ok()) return parsed.status();
        value = *std::move(parsed);
      } else if (spec->type == PassOptionType::kBool) {
        value = "true";  // `{flag}` as in op attributes
      } else {
        return absl::InvalidArgumentError(absl::StrFormat(
            "option '%s' of pass '%s' needs a value ('%s=...'); %s", key, info.name, key,
            ValidOptions(info)));
      }
      absl::StatusOr<PassOptions::Value> typed = ParseOptionValue(*spec, value);
      if (!typed.ok()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "pass '%s': %s; %s", info.name, typed.status().message(), ValidOptions(info)));
      }
      options.Set(spec->name, *std::move(typed));
      SkipSpace();
      if (Consume('}')) return absl::OkStatus();
      if (!Consume(',')) return SyntaxError("expected ',' or '}' after an option");
    }
  }

  absl::StatusOr<std::string> ParseValue() {
    if (Consume('"')) {
      std::string value;
      while (!AtEnd() && Peek() != '"') {
        if (Peek() == '\\' && pos_ + 1 < text_.size()) ++pos_;
        value.push_back(text_[pos_++]);
      }
      if (!Consume('"')) return SyntaxError("unterminated quoted value");
      return value;
    }
    size_t start = pos_;
    while (!AtEnd() && Peek() != ',' && Peek() != '}' && Peek() != '{') ++pos_;
    return std::string(absl::StripTrailingAsciiWhitespace(text_.substr(start, pos_ - start)));
  }

  // A choice, `name` or `name{...}`: the text up to the '}' that closes its options
  // (braces and quotes nest), which ParseChoiceValue reads.
  absl::StatusOr<std::string> ParseChoiceText() {
    if (Peek() == '"') return ParseValue();
    const size_t start = pos_;
    ParseName();
    SkipSpace();
    if (Peek() == '{') {
      int depth = 0;
      bool quoted = false;
      do {
        const char c = text_[pos_++];
        if (quoted && c == '\\' && !AtEnd()) {
          ++pos_;
          continue;
        }
        if (c == '"') quoted = !quoted;
        if (!quoted && c == '{') ++depth;
        if (!quoted && c == '}') --depth;
      } while (depth > 0 && !AtEnd());
      if (depth > 0) return SyntaxError("expected '}' closing the choice's options");
    }
    return std::string(absl::StripTrailingAsciiWhitespace(text_.substr(start, pos_ - start)));
  }

  absl::string_view text_;
  absl::Span<const PassInfo> registry_;
  size_t pos_ = 0;
};

}  // namespace

absl::Status PassStep::Check() const {
  for (const PassOptionSpec& spec : info_->options) {
    const PassOptions::Value* value = values_.Find(spec.name);
    if (value == nullptr) continue;  // the default
    if (absl::Status s = CheckOptionValue(spec, *value); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("pass '%s': %s; %s", info_->name, s.message(), ValidOptions(*info_)));
    }
  }
  return absl::OkStatus();
}

std::string PassStep::ToString() const {
  const PassOptions defaults = info_->DefaultOptions();
  std::vector<std::string> set;
  for (const PassOptionSpec& spec : info_->options) {
    const PassOptions::Value* value = values_.Find(spec.name);
    if (value == nullptr || *value == *defaults.Find(spec.name)) continue;
    // A choice's canonical text reads back unquoted (ParseChoiceText).
    const bool raw = spec.type == PassOptionType::kChoice;
    set.push_back(absl::StrCat(spec.name, "=",
                               raw ? std::get<std::string>(*value) : FormatOptionValue(*value)));
  }
  if (set.empty()) return info_->name;
  return absl::StrCat(info_->name, "{", absl::StrJoin(set, ","), "}");
}

Pipeline Pipeline::Then(const Pipeline& next) const {
  Pipeline joined = *this;
  joined.steps.insert(joined.steps.end(), next.steps.begin(), next.steps.end());
  return joined;
}

Pipeline Pipeline::Then(PassStep next) const {
  Pipeline joined = *this;
  joined.steps.push_back(std::move(next));
  return joined;
}

std::string Pipeline::ToString() const {
  return absl::StrJoin(steps, ",",
                       [](std::string* out, const PassStep& step) { out->append(step.ToString()); });
}

absl::StatusOr<Pipeline> ParsePipeline(absl::string_view text,
                                       absl::Span<const PassInfo> registry) {
  return PipelineParser(text, registry).Parse();
}

std::vector<std::unique_ptr<Pass>> CreatePasses(const Pipeline& pipeline) {
  std::vector<std::unique_ptr<Pass>> passes;
  for (const PassStep& step : pipeline.steps) passes.push_back(step.Create());
  return passes;
}

absl::StatusOr<std::vector<std::unique_ptr<Pass>>> ParsePassPipeline(
    absl::string_view text, absl::Span<const PassInfo> registry) {
  absl::StatusOr<Pipeline> pipeline = ParsePipeline(text, registry);
  if (!pipeline.ok()) return pipeline.status();
  return CreatePasses(*pipeline);
}

absl::Status RunPipeline(Module& module, const Pipeline& pipeline,
                         const RunPipelineOptions& options) {
  for (const PassStep& step : pipeline.steps) {
    if (absl::Status s = step.Check(); !s.ok()) return s;
  }
  PassManager manager;
  manager.set_verify_each(options.verify_each);
  manager.AddPasses(CreatePasses(pipeline));
  if (options.diagnostics != nullptr) return manager.Run(module, *options.diagnostics);
  return manager.Run(module);
}

absl::Status RunPipeline(Module& module, const Pipeline& pipeline) {
  return RunPipeline(module, pipeline, RunPipelineOptions{});
}

}  // namespace commir
