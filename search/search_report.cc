#include "search/search_report.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"

namespace commir::search {
namespace {

std::string Seconds(double s) {
  if (s >= 1) return absl::StrFormat("%.3g s", s);
  if (s >= 1e-3) return absl::StrFormat("%.3g ms", s * 1e3);
  return absl::StrFormat("%.3g us", s * 1e6);
}

std::string Bytes(double b) {
  if (b >= (1 << 30)) return absl::StrFormat("%.2f GiB", b / (1 << 30));
  if (b >= (1 << 20)) return absl::StrFormat("%.2f MiB", b / (1 << 20));
  if (b >= (1 << 10)) return absl::StrFormat("%.1f KiB", b / (1 << 10));
  return absl::StrFormat("%.0f B", b);
}

std::string VerdictState(const Verdict& v) {
  switch (v.state) {
    case Verdict::State::kMatched: return "matched";
    case Verdict::State::kMismatched: return "mismatch";
    case Verdict::State::kFailed: return "failed";
    case Verdict::State::kNotChecked: return "not checked";
  }
  return "";
}

}  // namespace

std::string VerdictText(const Verdict& verdict) {
  switch (verdict.state) {
    case Verdict::State::kMatched: return "yes";
    case Verdict::State::kMismatched: return "MISMATCH";
    case Verdict::State::kFailed: return "failed";
    case Verdict::State::kNotChecked: return "-";
  }
  return "-";
}

std::string CutShortText(const SearchResult& result) {
  const SearchStats& s = result.stats;
  return absl::StrFormat("cut short by the time limit after %d of %s%d layouts: the best found so far",
                         s.layouts, s.layouts_in_space_exact ? "" : "more than ", s.layouts_in_space);
}

std::string TrainingAdditionText(const SearchResult& result) {
  if (!result.training_addition) return "";
  const TrainingAddition& t = *result.training_addition;
  std::vector<std::string> names;
  for (const std::string& name : t.replicated_arguments) names.push_back("%" + name);
  return absl::StrFormat(
      "the best plan replicates %s, and training would add %s per device of gradient "
      "all_reduce over %s (%s of communication; backward %s): --train searches both",
      absl::StrJoin(names, ", "), Bytes(t.added_bytes_per_device), absl::StrJoin(t.axes, ","),
      Seconds(t.added_communication_s), Seconds(t.backward_s));
}

std::string FormatSummary(const SearchResult& result, const ReportContext& context) {
  const SearchStats& s = result.stats;
  const bool train = !result.trained_function.empty();
  std::string text = absl::StrFormat(
      "searched %s on %d devices (%s, %d per node): %d meshes, %d layouts, %d schedules; "
      "%d duplicates merged (%d layouts on renamed meshes), %d not applicable, %d over "
      "memory; %d candidates ranked in %.3f s",
      train ? absl::StrFormat("training @%s (forward and backward @%s)", result.function,
                              result.trained_function)
            : absl::StrFormat("@%s forward only", result.function),
      context.devices, context.hardware, context.gpus_per_node, s.meshes, s.layouts,
      s.schedules_tried, s.duplicates + s.layout_space.duplicates + s.renamed_meshes,
      s.renamed_meshes, s.not_applicable, s.over_memory, s.candidates, s.search_seconds);
  if (s.cut_short) absl::StrAppend(&text, "; ", CutShortText(result));
  if (result.training_addition) absl::StrAppend(&text, "; ", TrainingAdditionText(result));
  int64_t checked = s.verified + s.mismatched + s.verify_failures;
  if (checked > 0) {
    absl::StrAppendFormat(&text, "; verified %d of %d (%d mismatched, %d not checkable) in %.3f s",
                          s.verified, checked, s.mismatched, s.verify_failures, s.verify_seconds);
  }
  return text;
}

std::string FormatTable(const SearchResult& result, const ReportContext& context) {
  // Training adds the forward's and the backward's times after the step's.
  const bool train = !result.trained_function.empty();
  std::vector<std::vector<std::string>> rows = {
      {"rank", "mesh", "layouts", "time", "exposed", "bytes/dev", "peak mem", "verified",
       "pipeline"}};
  if (train) rows[0].insert(rows[0].begin() + 4, {"forward", "backward"});
  for (const Candidate& c : result.ranked) {
    rows.push_back({absl::StrCat(c.rank), c.layout.mesh.ToString(), c.layout.description,
                    Seconds(c.time_s), Seconds(c.exposed_communication_s),
                    Bytes(c.bytes_per_device), Bytes(static_cast<double>(c.peak_memory_bytes)),
                    VerdictText(c.verdict), absl::StrCat("'", c.PipelineText(), "'")});
    if (train) {
      rows.back().insert(rows.back().begin() + 4,
                         {Seconds(c.forward_time_s), Seconds(c.backward_time_s)});
    }
  }
  const size_t last_numeric = train ? 8 : 6;
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out = absl::StrCat("// ", FormatSummary(result, context), "\n");
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      bool last = i + 1 == row.size();
      bool numeric = i == 0 || (i >= 3 && i <= last_numeric);
      std::string pad(width[i] - row[i].size(), ' ');
      absl::StrAppend(&line, numeric ? pad : "", row[i], numeric || last ? "" : pad, last ? "" : "  ");
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string FormatJson(const SearchResult& result, const ReportContext& context) {
  nlohmann::ordered_json j;
  const SearchStats& s = result.stats;
  j["function"] = result.function;
  j["train"] = !result.trained_function.empty();
  if (!result.trained_function.empty()) j["trained_function"] = result.trained_function;
  j["devices"] = context.devices;
  j["hardware"] = context.hardware;
  j["gpus_per_node"] = context.gpus_per_node;
  nlohmann::ordered_json classes = nlohmann::ordered_json::array();
  for (const DimClass& c : result.classes) {
    classes.push_back({{"name", c.name}, {"divisible_size", c.divisible_size}, {"pinned", c.pinned}});
  }
  j["dimension_classes"] = classes;
  j["stats"] = {{"meshes", s.meshes},
                {"layouts", s.layouts},
                {"layouts_in_space", s.layouts_in_space},
                {"cut_short", s.cut_short},
                {"schedules_tried", s.schedules_tried},
                {"duplicates_merged", s.duplicates + s.layout_space.duplicates + s.renamed_meshes},
                {"renamed_meshes_merged", s.renamed_meshes},
                {"not_applicable", s.not_applicable},
                {"partition_failures", s.partition_failures},
                {"prediction_failures", s.prediction_failures},
                {"over_memory", s.over_memory},
                {"candidates", s.candidates},
                {"search_seconds", s.search_seconds},
                {"verified", s.verified},
                {"mismatched", s.mismatched},
                {"verify_failures", s.verify_failures},
                {"verify_seconds", s.verify_seconds}};
  if (result.training_addition) {
    const TrainingAddition& t = *result.training_addition;
    j["training_would_add"] = {{"replicated_arguments", t.replicated_arguments},
                               {"axes", t.axes},
                               {"bytes_per_device", t.added_bytes_per_device},
                               {"communication_s", t.added_communication_s},
                               {"backward_s", t.backward_s}};
  }
  nlohmann::ordered_json ranked = nlohmann::ordered_json::array();
  for (const Candidate& c : result.ranked) {
    ranked.push_back({{"rank", c.rank},
                      {"mesh", c.layout.mesh.Declaration()},
                      {"layouts", c.layout.description},
                      {"schedule", c.ScheduleText()},
                      {"pipeline", c.PipelineText()},
                      {"time_s", c.time_s},
                      {"exposed_communication_s", c.exposed_communication_s},
                      {"bytes_per_device", c.bytes_per_device},
                      {"peak_memory_bytes", c.peak_memory_bytes},
                      {"verified", VerdictState(c.verdict)},
                      {"verify_detail", c.verdict.detail}});
    if (!result.trained_function.empty()) {
      ranked.back()["forward_time_s"] = c.forward_time_s;
      ranked.back()["backward_time_s"] = c.backward_time_s;
    }
  }
  j["ranked"] = ranked;
  return j.dump(2) + "\n";
}

std::string FormatCsv(const SearchResult& result) {
  auto quote = [](const std::string& field) {
    return absl::StrCat("\"", absl::StrReplaceAll(field, {{"\"", "\"\""}}), "\"");
  };
  // Training adds two columns at the end, so that a forward-only table reads as before.
  const bool train = !result.trained_function.empty();
  std::string out = absl::StrCat(
      "rank,mesh,layouts,pipeline,time_s,exposed_communication_s,bytes_per_device,"
      "peak_memory_bytes,verified",
      train ? ",forward_time_s,backward_time_s" : "", "\n");
  for (const Candidate& c : result.ranked) {
    absl::StrAppend(&out, c.rank, ",", c.layout.mesh.ToString(), ",", quote(c.layout.description),
                    ",", quote(c.PipelineText()), ",", absl::StrFormat("%.9g", c.time_s), ",",
                    absl::StrFormat("%.9g", c.exposed_communication_s), ",",
                    absl::StrFormat("%.0f", c.bytes_per_device), ",", c.peak_memory_bytes, ",",
                    VerdictState(c.verdict));
    if (train) {
      absl::StrAppendFormat(&out, ",%.9g,%.9g", c.forward_time_s, c.backward_time_s);
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

}  // namespace commir::search
