#include "transforms/pass.h"

#include <algorithm>
#include <iostream>

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

const PassOptions::Value& PassOptions::Get(absl::string_view name) const {
  auto it = values_.find(name);
  COMMIR_CHECK(it != values_.end(), "asking a pass for an option it does not declare");
  return it->second;
}

int64_t PassOptions::GetInt(absl::string_view name) const {
  const Value& value = Get(name);
  COMMIR_CHECK(std::holds_alternative<int64_t>(value), "pass option is not an int");
  return std::get<int64_t>(value);
}

bool PassOptions::GetBool(absl::string_view name) const {
  const Value& value = Get(name);
  COMMIR_CHECK(std::holds_alternative<bool>(value), "pass option is not a bool");
  return std::get<bool>(value);
}

const std::string& PassOptions::GetString(absl::string_view name) const {
  const Value& value = Get(name);
  COMMIR_CHECK(std::holds_alternative<std::string>(value), "pass option is not a string");
  return std::get<std::string>(value);
}

absl::StatusOr<PassOptions::Value> ParseOptionValue(const PassOptionSpec& spec,
                                                    absl::string_view text) {
  switch (spec.type) {
    case PassOptionType::kInt: {
      int64_t value = 0;
      if (!absl::SimpleAtoi(text, &value)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("option '%s' expects an integer, got '%s'", spec.name, text));
      }
      const bool too_small = spec.min_value && value < *spec.min_value;
      const bool too_large = spec.max_value && value > *spec.max_value;
      if (too_small || too_large) {
        if (spec.min_value && spec.max_value) {
          return absl::InvalidArgumentError(
              absl::StrFormat("option '%s' must be between %d and %d, got %d", spec.name,
                              *spec.min_value, *spec.max_value, value));
        }
        return absl::InvalidArgumentError(absl::StrFormat(
            "option '%s' must be at %s %d, got %d", spec.name, too_small ? "least" : "most",
            too_small ? *spec.min_value : *spec.max_value, value));
      }
      return PassOptions::Value(value);
    }
    case PassOptionType::kBool:
      if (text == "true" || text == "1") return PassOptions::Value(true);
      if (text == "false" || text == "0") return PassOptions::Value(false);
      return absl::InvalidArgumentError(
          absl::StrFormat("option '%s' expects true or false, got '%s'", spec.name, text));
    case PassOptionType::kString: return PassOptions::Value(std::string(text));
    case PassOptionType::kEnum:
      if (std::find(spec.enum_values.begin(), spec.enum_values.end(), text) !=
          spec.enum_values.end()) {
        return PassOptions::Value(std::string(text));
      }
      return absl::InvalidArgumentError(absl::StrFormat("option '%s' expects one of %s, got '%s'",
                                                        spec.name, DescribeOptionType(spec), text));
  }
  return absl::InvalidArgumentError("unknown option type");
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
