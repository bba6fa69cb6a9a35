#include "transforms/pass.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commir/check.h"

namespace commir {

std::string DescribeOptionType(const PassOptionSpec& spec) {
  switch (spec.type) {
    case PassOptionType::kInt:
      if (spec.min_value && spec.max_value) {
        return absl::StrFormat("int in %d..%d", *spec.min_value, *spec.max_value);
      }
      if (spec.min_value) return absl::StrFormat("int >= %d", *spec.min_value);
      if (spec.max_value) return absl::StrFormat("int <= %d", *spec.max_value);
      return "int";
    case PassOptionType::kBool: return "bool";
    case PassOptionType::kString: return "string";
    case PassOptionType::kEnum: return absl::StrJoin(spec.enum_values, "|");
  }
  return "";
}

const PassOptions::Value* PassOptions::Find(absl::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

absl::Status CheckOptionValue(const PassOptionSpec& spec, const PassOptions::Value& value) {
  switch (spec.type) {
    case PassOptionType::kInt: {
      COMMIR_CHECK(std::holds_alternative<int64_t>(value), "an int option holds another type");
      const int64_t v = std::get<int64_t>(value);
      const bool too_small = spec.min_value && v < *spec.min_value;
      const bool too_large = spec.max_value && v > *spec.max_value;
      if (!too_small && !too_large) return absl::OkStatus();
      if (spec.min_value && spec.max_value) {
        return absl::InvalidArgumentError(
            absl::StrFormat("option '%s' must be between %d and %d, got %d", spec.name,
                            *spec.min_value, *spec.max_value, v));
      }
      return absl::InvalidArgumentError(absl::StrFormat(
          "option '%s' must be at %s %d, got %d", spec.name, too_small ? "least" : "most",
          too_small ? *spec.min_value : *spec.max_value, v));
    }
    case PassOptionType::kBool:
      COMMIR_CHECK(std::holds_alternative<bool>(value), "a bool option holds another type");
      return absl::OkStatus();
    case PassOptionType::kString:
      COMMIR_CHECK(std::holds_alternative<std::string>(value),
                   "a string option holds another type");
      return absl::OkStatus();
    case PassOptionType::kEnum: {
      COMMIR_CHECK(std::holds_alternative<std::string>(value), "an enum option holds another type");
      const std::string& text = std::get<std::string>(value);
      if (std::find(spec.enum_values.begin(), spec.enum_values.end(), text) !=
          spec.enum_values.end()) {
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError(absl::StrFormat("option '%s' expects one of %s, got '%s'",
                                                        spec.name, DescribeOptionType(spec), text));
    }
  }
  return absl::InvalidArgumentError("unknown option type");
}

std::string FormatOptionValue(const PassOptions::Value& value) {
  if (const int64_t* i = std::get_if<int64_t>(&value)) return absl::StrCat(*i);
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  const std::string& text = std::get<std::string>(value);
  // The parser strips unquoted values and ends them at ',', '{' or '}'.
  const bool plain = !text.empty() && text.find_first_of(",{}\"\\") == std::string::npos &&
                     !absl::ascii_isspace(static_cast<unsigned char>(text.front())) &&
                     !absl::ascii_isspace(static_cast<unsigned char>(text.back()));
  if (plain) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') quoted.push_back('\\');
    quoted.push_back(c);
  }
  quoted.push_back('"');
  return quoted;
}

absl::StatusOr<PassOptions::Value> ParseOptionValue(const PassOptionSpec& spec,
                                                    absl::string_view text) {
  PassOptions::Value value;
  switch (spec.type) {
    case PassOptionType::kInt: {
      int64_t parsed = 0;
      if (!absl::SimpleAtoi(text, &parsed)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("option '%s' expects an integer, got '%s'", spec.name, text));
      }
      value = parsed;
      break;
    }
    case PassOptionType::kBool:
      if (text == "true" || text == "1") {
        value = true;
      } else if (text == "false" || text == "0") {
        value = false;
      } else {
        return absl::InvalidArgumentError(
            absl::StrFormat("option '%s' expects true or false, got '%s'", spec.name, text));
      }
      break;
    case PassOptionType::kString:
    case PassOptionType::kEnum:
      value = std::string(text);
      break;
  }
  if (absl::Status s = CheckOptionValue(spec, value); !s.ok()) return s;
  return value;
}

const PassOptionSpec* PassInfo::FindOption(absl::string_view option_name) const {
  for (const PassOptionSpec& spec : options) {
    if (spec.name == option_name) return &spec;
  }
  return nullptr;
}

PassOptions PassInfo::DefaultOptions() const {
  PassOptions defaults;
  for (const PassOptionSpec& spec : options) {
    absl::StatusOr<PassOptions::Value> value = ParseOptionValue(spec, spec.default_value);
    COMMIR_CHECK(value.ok(), "a registered pass option has a malformed default");
    defaults.Set(spec.name, *std::move(value));
  }
  return defaults;
}

std::string DescribePasses(absl::Span<const PassInfo> registry) {
  size_t width = 0;
  for (const PassInfo& info : registry) width = std::max(width, info.name.size());
  std::string out;
  for (const PassInfo& info : registry) {
    absl::StrAppendFormat(&out, "%-*s  %s\n", static_cast<int>(width), info.name,
                          info.description);
    for (const PassOptionSpec& spec : info.options) {
      std::string value = spec.default_value.empty() ? "\"\"" : spec.default_value;
      absl::StrAppendFormat(&out, "    %s: %s = %s\n        %s\n", spec.name,
                            DescribeOptionType(spec), value, spec.help);
    }
  }
  return out;
}

void Pass::ClearReports() {
  remarks_.clear();
  statistics_.clear();
}

void Pass::Remark(std::string message, Location loc) {
  remarks_.push_back({loc, std::move(message)});
}

void Pass::AddToStatistic(absl::string_view name, absl::string_view description, int64_t delta) {
  for (PassStatistic& statistic : statistics_) {
    if (statistic.name == name) {
      statistic.value += delta;
      return;
    }
  }
  statistics_.push_back({std::string(name), std::string(description), delta});
}

void Pass::ReportRewrites(int64_t count, absl::string_view description,
                          absl::string_view why_none) {
  AddToStatistic("rewrites", description, count);
  if (count == 0) RemarkRewroteNothing(why_none);
}

void Pass::RemarkRewroteNothing(absl::string_view why) {
  Remark(absl::StrFormat("pass '%s' rewrote nothing: %s", name(), why));
}

std::string NameFunctions(const Module& module,
                          const std::function<bool(const Function&)>& pick) {
  std::vector<std::string> names;
  for (const Function* function : module.functions()) {
    if (pick(*function)) names.push_back(absl::StrCat("@", function->name()));
  }
  return absl::StrJoin(names, ", ");
}

std::string InSpmdFunctions(const Module& module) {
  std::string names = NameFunctions(module, [](const Function& f) { return f.is_spmd(); });
  return names.empty() ? "in no spmd function (lower-to-spmd makes them)"
                       : absl::StrCat("in ", names);
}

void ReportPass::Emit(const std::string& report) const {
  std::ostream& out = out_ != nullptr ? *out_ : std::cerr;
  out << report;
  out.flush();
}

}  // namespace commir
