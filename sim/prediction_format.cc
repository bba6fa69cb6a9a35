#include "sim/prediction_format.h"

#include <cstdint>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace commir::sim {

namespace {

constexpr double kMs = 1e3;
constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

std::string FormatPredictionText(const Prediction& p, const std::string& hardware_name) {
  std::string out;
  absl::StrAppendFormat(&out, "hardware: %s, %d devices\n", hardware_name, p.devices.size());
  absl::StrAppendFormat(&out, "predicted time: %.4f ms (slowest device)\n", p.time_s * kMs);
  // A fraction of no communication means nothing: say there is none.
  double communication_s = 0;
  for (const DevicePrediction& d : p.devices) communication_s += d.communication_s;
  if (communication_s > 0) {
    absl::StrAppendFormat(&out, "communication hidden under compute: %.1f%%\n",
                          100 * p.overlap_fraction);
  } else {
    out += "communication: none\n";
  }
  absl::StrAppendFormat(&out, "FLOPs: %.4g, achieved %.1f TFLOP/s per GPU (%.1f%% of peak)\n",
                        p.total_flops, p.achieved_tflops_per_gpu, 100 * p.fraction_of_peak);
  if (p.attention_positions_unknown > 0) {
    absl::StrAppendFormat(&out,
                          "note: %d causal attention kernels priced at the average mask "
                          "(their q_pos/k_pos values were not known)\n",
                          p.attention_positions_unknown);
  }
  absl::StrAppendFormat(&out, "%6s %12s %12s %12s %12s %14s\n", "device", "time_ms", "compute_ms",
                        "comm_ms", "exposed_ms", "peak_mem_MiB");
  for (size_t d = 0; d < p.devices.size(); ++d) {
    const DevicePrediction& e = p.devices[d];
    absl::StrAppendFormat(&out, "%6d %12.4f %12.4f %12.4f %12.4f %14.1f\n", d, e.time_s * kMs,
                          e.compute_s * kMs, e.communication_s * kMs,
                          e.exposed_communication_s * kMs,
                          static_cast<double>(e.peak_memory_bytes) / kMiB);
  }
  return out;
}

std::string FormatPredictionJson(const Prediction& p, const std::string& hardware_name) {
  // ordered_json keeps the keys in the order written, so the output is stable.
  nlohmann::ordered_json json;
  json["hardware"] = hardware_name;
  json["time_s"] = p.time_s;
  json["overlap_fraction"] = p.overlap_fraction;
  json["total_flops"] = p.total_flops;
  json["achieved_tflops_per_gpu"] = p.achieved_tflops_per_gpu;
  json["fraction_of_peak"] = p.fraction_of_peak;
  if (p.attention_positions_unknown > 0) {
    json["attention_positions_unknown"] = p.attention_positions_unknown;
  }
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (size_t d = 0; d < p.devices.size(); ++d) {
    const DevicePrediction& e = p.devices[d];
    nlohmann::ordered_json device;
    device["device"] = d;
    device["time_s"] = e.time_s;
    device["compute_s"] = e.compute_s;
    device["communication_s"] = e.communication_s;
    device["exposed_communication_s"] = e.exposed_communication_s;
    device["peak_memory_bytes"] = e.peak_memory_bytes;
    devices.push_back(std::move(device));
  }
  json["devices"] = std::move(devices);
  return json.dump(2) + "\n";
}

TimelineTraceWriter::TimelineTraceWriter(std::function<void(std::string_view)> write)
    : write_(std::move(write)) {
  write_("{\"traceEvents\":[");
}

void TimelineTraceWriter::Emit(const std::string& json) {
  if (!first_) write_(",");
  first_ = false;
  write_(json);
}

void TimelineTraceWriter::Add(const TimelineEvent& e) {
  if (tracks_.emplace(e.device, e.stream).second) {
    if (devices_.insert(e.device).second) {
      Emit(nlohmann::ordered_json({{"name", "process_name"}, {"ph", "M"}, {"pid", e.device},
                                   {"args", {{"name", absl::StrCat("device ", e.device)}}}})
               .dump());
    }
    Emit(nlohmann::ordered_json({{"name", "thread_name"}, {"ph", "M"}, {"pid", e.device},
                                 {"tid", e.stream},
                                 {"args", {{"name", absl::StrCat("stream ", e.stream)}}}})
             .dump());
  }
  Emit(nlohmann::ordered_json({{"name", e.op},
                               {"cat", e.is_communication ? "communication" : "compute"},
                               {"ph", "X"},
                               {"pid", e.device},
                               {"tid", e.stream},
                               {"ts", e.start_us},
                               {"dur", e.end_us - e.start_us}})
           .dump());
}

void TimelineTraceWriter::Finish() { write_("],\"displayTimeUnit\":\"ms\"}\n"); }

std::string FormatTimelineTrace(const Prediction& p) {
  std::string out;
  TimelineTraceWriter writer([&](std::string_view piece) { out.append(piece); });
  for (const TimelineEvent& e : p.timeline) writer.Add(e);
  writer.Finish();
  return out;
}

}  // namespace commir::sim
