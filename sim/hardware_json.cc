#include "sim/hardware_json.h"

#include <fstream>
#include <sstream>
#include <variant>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace commir::sim {
namespace {

using Json = nlohmann::json;

enum class Range { kPositive, kNonNegative, kFraction };  // kFraction: (0, 1]

using DoubleField = double HardwareSpec::*;
using IntField = int HardwareSpec::*;
using BoolField = bool HardwareSpec::*;
using ProtocolField = double (HardwareSpec::*)[kNumNcclProtocols];

// One JSON key: where it lands in HardwareSpec and the factor from the key's unit to SI.
struct FieldDef {
  const char* key;
  std::variant<DoubleField, IntField, BoolField, ProtocolField> member;
  double scale = 1;
  Range range = Range::kPositive;
};

const std::vector<FieldDef>& Fields() {
  static const std::vector<FieldDef>* fields = new std::vector<FieldDef>{
      {"peak_bf16_tflops", &HardwareSpec::peak_flops_bf16, 1e12},
      {"peak_tf32_tflops", &HardwareSpec::peak_flops_tf32, 1e12},
      {"peak_f32_tflops", &HardwareSpec::peak_flops_f32, 1e12},
      {"f32_matmul_uses_tf32", &HardwareSpec::f32_matmul_uses_tf32},
      {"sm_count", &HardwareSpec::sm_count},
      {"gemm_peak_fraction", &HardwareSpec::gemm_peak_fraction, 1, Range::kFraction},
      {"attention_peak_fraction", &HardwareSpec::attention_peak_fraction, 1, Range::kFraction},
      {"kernel_launch_overhead_us", &HardwareSpec::kernel_launch_overhead_s, 1e-6,
       Range::kNonNegative},
      {"hbm_bandwidth_gb_per_s", &HardwareSpec::hbm_bandwidth, 1e9},
      {"hbm_capacity_gib", &HardwareSpec::hbm_capacity, 1024.0 * 1024.0 * 1024.0},
      {"gpus_per_node", &HardwareSpec::gpus_per_node},
      {"nvlink_bandwidth_per_direction_gb_per_s", &HardwareSpec::nvlink_bandwidth_per_direction,
       1e9},
      {"nvlink_links", &HardwareSpec::nvlink_links},
      {"nvlink_bus_efficiency", &HardwareSpec::nvlink_bus_efficiency, 1, Range::kFraction},
      {"p2p_bandwidth_gb_per_s", &HardwareSpec::p2p_bandwidth, 1e9},
      {"copy_engines", &HardwareSpec::copy_engines, 1, Range::kNonNegative},
      {"network_bandwidth_per_gpu_gb_per_s", &HardwareSpec::network_bandwidth_per_gpu, 1e9},
      {"network_latency_us", &HardwareSpec::network_latency_s, 1e-6, Range::kNonNegative},
      {"network_efficiency", &HardwareSpec::network_efficiency, 1, Range::kFraction},
      {"bus_half_efficiency_mib", &HardwareSpec::bus_half_efficiency_bytes, 1024.0 * 1024.0,
       Range::kNonNegative},
      {"gemm_comm_overlap_slowdown", &HardwareSpec::gemm_comm_overlap_slowdown, 1,
       Range::kNonNegative},
      {"nccl_base_latency_us", &HardwareSpec::nccl_base_latency_s, 1e-6, Range::kNonNegative},
      {"nccl_nvlink_step_latency_us", &HardwareSpec::nccl_nvlink_step_latency_s, 1e-6,
       Range::kNonNegative},
      {"nccl_protocol_bandwidth_fraction", &HardwareSpec::nccl_protocol_bandwidth_fraction, 1,
       Range::kFraction},
  };
  return *fields;
}

absl::Status FieldError(absl::string_view source, absl::string_view key, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrFormat("%s: field '%s' %s", source, key, what));
}

absl::Status CheckRange(double v, Range range, absl::string_view source, absl::string_view key) {
  switch (range) {
    case Range::kPositive:
      if (!(v > 0)) return FieldError(source, key, absl::StrFormat("must be positive, got %g", v));
      break;
    case Range::kNonNegative:
      if (!(v >= 0)) return FieldError(source, key, absl::StrFormat("must be >= 0, got %g", v));
      break;
    case Range::kFraction:
      if (!(v > 0 && v <= 1)) {
        return FieldError(source, key, absl::StrFormat("must be in (0, 1], got %g", v));
      }
      break;
  }
  return absl::OkStatus();
}

// nlohmann's type names ("string", "number", "array", ...) for messages.
std::string TypeName(const Json& j) { return j.type_name(); }

absl::Status ReadNumber(const Json& j, const FieldDef& f, absl::string_view source, double* out) {
  if (!j.is_number()) return FieldError(source, f.key, "must be a number, got " + TypeName(j));
  double v = j.get<double>();
  if (absl::Status s = CheckRange(v, f.range, source, f.key); !s.ok()) return s;
  *out = v * f.scale;
  return absl::OkStatus();
}

absl::Status ApplyField(const Json& j, const FieldDef& f, absl::string_view source,
                        HardwareSpec& hw) {
  if (auto* m = std::get_if<DoubleField>(&f.member)) return ReadNumber(j, f, source, &(hw.**m));
  if (auto* m = std::get_if<IntField>(&f.member)) {
    if (!j.is_number_integer()) {
      return FieldError(source, f.key, "must be an integer, got " + TypeName(j));
    }
    // Compared as a double first: an unsigned value beyond int64 must not wrap around.
    if (j.get<double>() > (1 << 30)) {
      return FieldError(source, f.key, absl::StrFormat("is too large: %s", j.dump()));
    }
    int64_t v = j.get<int64_t>();
    if (absl::Status s = CheckRange(static_cast<double>(v), f.range, source, f.key); !s.ok()) {
      return s;
    }
    hw.**m = static_cast<int>(v);
    return absl::OkStatus();
  }
  if (auto* m = std::get_if<BoolField>(&f.member)) {
    if (!j.is_boolean()) return FieldError(source, f.key, "must be true or false, got " + TypeName(j));
    hw.**m = j.get<bool>();
    return absl::OkStatus();
  }
  auto* m = std::get_if<ProtocolField>(&f.member);
  if (!j.is_array() || j.size() != kNumNcclProtocols) {
    return FieldError(source, f.key, "must be an array of 3 numbers [LL, LL128, Simple]");
  }
  for (int p = 0; p < kNumNcclProtocols; ++p) {
    if (absl::Status s = ReadNumber(j[p], f, source, &(hw.**m)[p]); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> HardwareJsonKeys() {
  std::vector<std::string> keys;
  for (const FieldDef& f : Fields()) keys.push_back(f.key);
  return keys;
}

absl::StatusOr<HardwareSpec> ParseHardwareJson(absl::string_view text, absl::string_view source) {
  Json root;
  try {
    root = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {  // syntax errors, and numbers beyond a double's range
    return absl::InvalidArgumentError(absl::StrFormat("%s: not valid JSON: %s", source, e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: must hold a JSON object, got %s", source, TypeName(root)));
  }
  HardwareSpec hw;
  hw.name = std::string(source);
  bool has_base = false;
  if (auto it = root.find("base"); it != root.end()) {
    if (!it->is_string()) return FieldError(source, "base", "must be a string, got " + TypeName(*it));
    const HardwareSpec* base = FindBuiltinHardware(it->get<std::string>());
    if (base == nullptr) {
      return FieldError(source, "base",
                        absl::StrFormat("names no built-in hardware: '%s'", it->get<std::string>()));
    }
    hw = *base;
    hw.name = std::string(source);  // a derived description is not the built-in itself
    has_base = true;
  }
  if (auto it = root.find("name"); it != root.end()) {
    if (!it->is_string()) return FieldError(source, "name", "must be a string, got " + TypeName(*it));
    hw.name = it->get<std::string>();
  }
  // Unknown keys first: a misspelt key would otherwise be reported as a missing one.
  absl::flat_hash_set<std::string> known = {"base", "name"};
  for (const FieldDef& f : Fields()) known.insert(f.key);
  for (const auto& [key, value] : root.items()) {
    if (!known.contains(key)) return FieldError(source, key, "is unknown");
  }
  for (const FieldDef& f : Fields()) {
    auto it = root.find(f.key);
    if (it == root.end()) {
      if (!has_base) {
        return FieldError(source, f.key, "is missing (give every field, or \"base\": a built-in)");
      }
      continue;
    }
    if (absl::Status s = ApplyField(*it, f, source, hw); !s.ok()) return s;
  }
  return hw;
}

absl::StatusOr<HardwareSpec> LoadHardwareJsonFile(absl::string_view path) {
  std::ifstream in{std::string(path)};
  if (!in) return absl::NotFoundError(absl::StrFormat("%s: cannot open the hardware file", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseHardwareJson(text.str(), path);
}

}  // namespace commir::sim
