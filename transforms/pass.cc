#include "transforms/pass.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
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
    case PassOptionType::kNumber: {
      const std::string upper = spec.max_number ? FormatOptionValue(*spec.max_number) : "";
      if (spec.min_number && spec.max_number) {
        return absl::StrFormat("number in [%s, %s%s", FormatOptionValue(*spec.min_number), upper,
                               spec.max_exclusive ? ")" : "]");
      }
      if (spec.min_number) return absl::StrCat("number >= ", FormatOptionValue(*spec.min_number));
      if (spec.max_number) return absl::StrCat("number ", spec.max_exclusive ? "< " : "<= ", upper);
      return "number";
    }
    case PassOptionType::kChoice:
      return absl::StrJoin(spec.choices, "|", [](std::string* out, const PassOptionChoice& c) {
        absl::StrAppend(out, c.name, c.options.empty() ? "" : "{...}");
      });
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
    case PassOptionType::kNumber: {
      COMMIR_CHECK(std::holds_alternative<double>(value), "a number option holds another type");
      const double v = std::get<double>(value);
      const bool in_range = std::isfinite(v) && (!spec.min_number || v >= *spec.min_number) &&
                            (!spec.max_number || (spec.max_exclusive ? v < *spec.max_number
                                                                     : v <= *spec.max_number));
      if (in_range) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrFormat(
          "option '%s' must be a finite %s, got %s", spec.name, DescribeOptionType(spec),
          FormatOptionValue(v)));
    }
    case PassOptionType::kChoice: {
      COMMIR_CHECK(std::holds_alternative<std::string>(value), "a choice option holds another type");
      absl::StatusOr<ChoiceValue> choice = ParseChoiceValue(spec, std::get<std::string>(value));
      return choice.status();
    }
  }
  return absl::InvalidArgumentError("unknown option type");
}

std::string FormatOptionValue(const PassOptions::Value& value) {
  if (const int64_t* i = std::get_if<int64_t>(&value)) return absl::StrCat(*i);
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const double* d = std::get_if<double>(&value)) {
    // The shortest text that reads back as the same double, so printing a pipeline and
    // parsing it again gives the same values.
    for (int precision = 1; precision < 17; ++precision) {
      std::string text = absl::StrFormat("%.*g", precision, *d);
      double back = 0;
      if (absl::SimpleAtod(text, &back) && back == *d) return text;
    }
    return absl::StrFormat("%.17g", *d);
  }
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
    case PassOptionType::kNumber: {
      double parsed = 0;
      if (!absl::SimpleAtod(text, &parsed) || !std::isfinite(parsed)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("option '%s' expects a finite number, got '%s'", spec.name, text));
      }
      value = parsed;
      break;
    }
    case PassOptionType::kChoice: {
      // Stored canonical, so that equal choices compare equal as values.
      absl::StatusOr<ChoiceValue> choice = ParseChoiceValue(spec, text);
      if (!choice.ok()) return choice.status();
      for (const PassOptionChoice& c : spec.choices) {
        if (c.name == choice->name) value = FormatChoiceValue(c, choice->values);
      }
      break;
    }
  }
  if (absl::Status s = CheckOptionValue(spec, value); !s.ok()) return s;
  return value;
}

namespace {

// `text` split at the commas outside quotes and braces, each part stripped.
std::vector<std::string> SplitTopLevel(absl::string_view text) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted && c == '\\' && i + 1 < text.size()) {
      current.push_back(c);
      current.push_back(text[++i]);
      continue;
    }
    if (c == '"') quoted = !quoted;
    if (!quoted && c == '{') ++depth;
    if (!quoted && c == '}') --depth;
    if (!quoted && depth == 0 && c == ',') {
      parts.emplace_back(absl::StripAsciiWhitespace(current));
      current.clear();
      continue;
    }
    current.push_back(c);
  }
  parts.emplace_back(absl::StripAsciiWhitespace(current));
  return parts;
}

std::string Unquote(absl::string_view text) {
  if (text.size() < 2 || text.front() != '"' || text.back() != '"') return std::string(text);
  std::string value;
  for (size_t i = 1; i + 1 < text.size(); ++i) {
    if (text[i] == '\\' && i + 2 < text.size()) ++i;
    value.push_back(text[i]);
  }
  return value;
}

std::string ChoiceNames(const PassOptionSpec& spec) {
  return absl::StrJoin(spec.choices, ", ",
                       [](std::string* out, const PassOptionChoice& c) { out->append(c.name); });
}

}  // namespace

absl::StatusOr<ChoiceValue> ParseChoiceValue(const PassOptionSpec& spec, absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  const size_t brace = text.find('{');
  const absl::string_view name = absl::StripAsciiWhitespace(text.substr(0, brace));
  const PassOptionChoice* choice = nullptr;
  for (const PassOptionChoice& c : spec.choices) {
    if (c.name == name) choice = &c;
  }
  if (choice == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "option '%s' expects one of %s, got '%s'", spec.name, ChoiceNames(spec), name));
  }
  ChoiceValue result;
  result.name = choice->name;
  for (const PassOptionSpec& option : choice->options) {
    absl::StatusOr<PassOptions::Value> value = ParseOptionValue(option, option.default_value);
    COMMIR_CHECK(value.ok(), "a choice option has a malformed default");
    result.values.Set(option.name, *std::move(value));
  }
  if (brace == absl::string_view::npos) return result;
  if (text.back() != '}') {
    return absl::InvalidArgumentError(absl::StrFormat(
        "option '%s': '%s' does not end with '}' after its options", spec.name, text));
  }
  const absl::string_view body = text.substr(brace + 1, text.size() - brace - 2);
  if (absl::StripAsciiWhitespace(body).empty()) return result;
  std::vector<std::string> seen;
  for (const std::string& item : SplitTopLevel(body)) {
    const size_t eq = item.find('=');
    const std::string key(absl::StripAsciiWhitespace(absl::string_view(item).substr(0, eq)));
    if (key.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "option '%s': %s's options have an empty item in '%s'", spec.name, choice->name, text));
    }
    const PassOptionSpec* option = nullptr;
    for (const PassOptionSpec& o : choice->options) {
      if (o.name == key) option = &o;
    }
    if (option == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "option '%s': %s has no option '%s'; its options: %s", spec.name, choice->name, key,
          choice->options.empty()
              ? "none"
              : absl::StrJoin(choice->options, ", ",
                              [](std::string* out, const PassOptionSpec& o) {
                                absl::StrAppend(out, o.name, " (", DescribeOptionType(o), ")");
                              })));
    }
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "option '%s': %s's option '%s' is given twice", spec.name, choice->name, key));
    }
    seen.push_back(key);
    std::string value_text;
    if (eq != std::string::npos) {
      value_text = Unquote(absl::StripAsciiWhitespace(absl::string_view(item).substr(eq + 1)));
    } else if (option->type == PassOptionType::kBool) {
      value_text = "true";
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "option '%s': %s's option '%s' needs a value ('%s=...')", spec.name, choice->name,
          key, key));
    }
    absl::StatusOr<PassOptions::Value> value = ParseOptionValue(*option, value_text);
    if (!value.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat("option '%s': %s: %s", spec.name,
                                                        choice->name, value.status().message()));
    }
    result.values.Set(option->name, *std::move(value));
  }
  return result;
}

std::string FormatChoiceValue(const PassOptionChoice& choice, const PassOptions& values) {
  std::vector<std::string> set;
  for (const PassOptionSpec& option : choice.options) {
    const PassOptions::Value* value = values.Find(option.name);
    if (value == nullptr) continue;
    absl::StatusOr<PassOptions::Value> default_value =
        ParseOptionValue(option, option.default_value);
    if (default_value.ok() && *default_value == *value) continue;
    set.push_back(absl::StrCat(option.name, "=", FormatOptionValue(*value)));
  }
  if (set.empty()) return choice.name;
  return absl::StrCat(choice.name, "{", absl::StrJoin(set, ","), "}");
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
      // A choice's alternatives with their own options, one level in.
      for (const PassOptionChoice& choice : spec.choices) {
        for (const PassOptionSpec& option : choice.options) {
          absl::StrAppendFormat(&out, "        %s{%s: %s = %s}\n            %s\n", choice.name,
                                option.name, DescribeOptionType(option), option.default_value,
                                option.help);
        }
      }
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
