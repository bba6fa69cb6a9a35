#include "sim/hardware_json.h"

#include <fstream>
#include <sstream>
#include <variant>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
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
using TransportField = P2pTransport HardwareSpec::*;

// One JSON key: where it lands in HardwareSpec, the factor from the key's unit to SI,
// and for numbers the physically meaningful values in the key's unit [min, max]: far
// beyond any GPU or network built or planned, yet tight enough that every time the
// model derives from them (bytes over a bandwidth, FLOPs over a peak times a fraction)
// is finite and positive. A denormal bandwidth or a 1e308 MiB message size would
// otherwise give infinite or NaN times.
struct FieldDef {
  const char* key;
  std::variant<DoubleField, IntField, BoolField, ProtocolField, TransportField> member;
  double scale = 1;
  Range range = Range::kPositive;
  double min = 0;
  double max = 0;
};

// The bounds, by kind of quantity (in the keys' units).
constexpr double kMinRate = 1e-3, kMaxRate = 1e6;  // TFLOP/s, GB/s, GiB
constexpr double kMinFraction = 1e-3;               // efficiencies, up to 1
constexpr double kMaxLatencyUs = 1e6;               // one second
constexpr double kMaxMessageMib = 1e6;              // about a TiB
constexpr double kMaxTileOverheadBlocks = 1e4;      // a CTA's fixed cost, in block times
constexpr size_t kMaxNameLength = 256;

const std::vector<FieldDef>& Fields() {
  static const std::vector<FieldDef>* fields = new std::vector<FieldDef>{
      {"peak_bf16_tflops", &HardwareSpec::peak_flops_bf16, 1e12, Range::kPositive, kMinRate,
       kMaxRate},
      {"peak_tf32_tflops", &HardwareSpec::peak_flops_tf32, 1e12, Range::kPositive, kMinRate,
       kMaxRate},
      {"peak_f32_tflops", &HardwareSpec::peak_flops_f32, 1e12, Range::kPositive, kMinRate,
       kMaxRate},
      {"f32_matmul_uses_tf32", &HardwareSpec::f32_matmul_uses_tf32},
      {"sm_count", &HardwareSpec::sm_count},
      {"gemm_peak_fraction", &HardwareSpec::gemm_peak_fraction, 1, Range::kFraction, kMinFraction,
       1},
      {"gemm_operand_bandwidth_gb_per_s", &HardwareSpec::gemm_operand_bandwidth, 1e9,
       Range::kPositive, kMinRate, kMaxRate},
      {"gemm_wave_latency_us", &HardwareSpec::gemm_wave_latency_s, 1e-6, Range::kNonNegative, 0,
       kMaxLatencyUs},
      {"attention_peak_fraction", &HardwareSpec::attention_peak_fraction, 1, Range::kFraction,
       kMinFraction, 1},
      {"attention_backward_peak_fraction", &HardwareSpec::attention_backward_peak_fraction, 1,
       Range::kFraction, kMinFraction, 1},
      {"attention_tile_overhead_blocks", &HardwareSpec::attention_tile_overhead_blocks, 1,
       Range::kNonNegative, 0, kMaxTileOverheadBlocks},
      {"attention_backward_tile_overhead_blocks",
       &HardwareSpec::attention_backward_tile_overhead_blocks, 1, Range::kNonNegative, 0,
       kMaxTileOverheadBlocks},
      {"kernel_launch_overhead_us", &HardwareSpec::kernel_launch_overhead_s, 1e-6,
       Range::kNonNegative, 0, kMaxLatencyUs},
      {"hbm_bandwidth_gb_per_s", &HardwareSpec::hbm_bandwidth, 1e9, Range::kPositive, kMinRate,
       kMaxRate},
      {"hbm_capacity_gib", &HardwareSpec::hbm_capacity, 1024.0 * 1024.0 * 1024.0, Range::kPositive,
       kMinRate, kMaxRate},
      {"gpus_per_node", &HardwareSpec::gpus_per_node},
      {"nvlink_bandwidth_per_direction_gb_per_s", &HardwareSpec::nvlink_bandwidth_per_direction,
       1e9, Range::kPositive, kMinRate, kMaxRate},
      {"nvlink_links", &HardwareSpec::nvlink_links},
      {"nvlink_bus_efficiency", &HardwareSpec::nvlink_bus_efficiency, 1, Range::kFraction,
       kMinFraction, 1},
      {"p2p_bandwidth_gb_per_s", &HardwareSpec::p2p_bandwidth, 1e9, Range::kPositive, kMinRate,
       kMaxRate},
      {"all_to_all_bus_efficiency", &HardwareSpec::all_to_all_bus_efficiency, 1,
       Range::kFraction, kMinFraction, 1},
      {"all_to_all_network_efficiency", &HardwareSpec::all_to_all_network_efficiency, 1,
       Range::kFraction, kMinFraction, 1},
      {"nvls", &HardwareSpec::nvls},
      {"nvls_bus_efficiency", &HardwareSpec::nvls_bus_efficiency, 1, Range::kFraction,
       kMinFraction, 1},
      {"nccl_nvls_latency_us", &HardwareSpec::nccl_nvls_latency_s, 1e-6, Range::kNonNegative, 0,
       kMaxLatencyUs},
      {"copy_engines", &HardwareSpec::copy_engines, 1, Range::kNonNegative},
      {"copy_engine_bandwidth_one_way_gb_per_s", &HardwareSpec::copy_engine_bandwidth_one_way,
       1e9, Range::kPositive, kMinRate, kMaxRate},
      {"copy_engine_bandwidth_both_ways_gb_per_s",
       &HardwareSpec::copy_engine_bandwidth_both_ways, 1e9, Range::kPositive, kMinRate, kMaxRate},
      {"copy_engine_latency_us", &HardwareSpec::copy_engine_latency_s, 1e-6, Range::kNonNegative,
       0, kMaxLatencyUs},
      {"p2p", &HardwareSpec::p2p_transport},
      {"network_bandwidth_per_gpu_gb_per_s", &HardwareSpec::network_bandwidth_per_gpu, 1e9,
       Range::kPositive, kMinRate, kMaxRate},
      {"network_latency_us", &HardwareSpec::network_latency_s, 1e-6, Range::kNonNegative, 0,
       kMaxLatencyUs},
      {"network_efficiency", &HardwareSpec::network_efficiency, 1, Range::kFraction, kMinFraction,
       1},
      {"bus_half_efficiency_mib", &HardwareSpec::bus_half_efficiency_bytes, 1024.0 * 1024.0,
       Range::kNonNegative, 0, kMaxMessageMib},
      {"nccl_collective_sms", &HardwareSpec::nccl_collective_sms, 1, Range::kNonNegative},
      {"nccl_p2p_sms", &HardwareSpec::nccl_p2p_sms, 1, Range::kNonNegative},
      {"nccl_nvls_sms", &HardwareSpec::nccl_nvls_sms, 1, Range::kNonNegative},
      {"nccl_base_latency_us", &HardwareSpec::nccl_base_latency_s, 1e-6, Range::kNonNegative, 0,
       kMaxLatencyUs},
      {"nccl_nvlink_step_latency_us", &HardwareSpec::nccl_nvlink_step_latency_s, 1e-6,
       Range::kNonNegative, 0, kMaxLatencyUs},
      {"nccl_protocol_bandwidth_fraction", &HardwareSpec::nccl_protocol_bandwidth_fraction, 1,
       Range::kFraction, kMinFraction, 1},
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

// The sign or fraction check, then the physically meaningful range.
absl::Status CheckNumber(double v, const FieldDef& f, absl::string_view source) {
  if (absl::Status s = CheckRange(v, f.range, source, f.key); !s.ok()) return s;
  if (f.max > 0 && !(v >= f.min && v <= f.max)) {
    return FieldError(source, f.key,
                      absl::StrFormat("must be from %g to %g, got %g", f.min, f.max, v));
  }
  return absl::OkStatus();
}

// nlohmann's type names ("string", "number", "array", ...) for messages.
std::string TypeName(const Json& j) { return j.type_name(); }

absl::Status ReadNumber(const Json& j, const FieldDef& f, absl::string_view source, double* out) {
  if (!j.is_number()) return FieldError(source, f.key, "must be a number, got " + TypeName(j));
  double v = j.get<double>();
  if (absl::Status s = CheckNumber(v, f, source); !s.ok()) return s;
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
  if (auto* m = std::get_if<TransportField>(&f.member)) {
    if (j.is_string() && j.get<std::string>() == "ce") {
      hw.**m = P2pTransport::kCopyEngine;
    } else if (j.is_string() && j.get<std::string>() == "nccl") {
      hw.**m = P2pTransport::kNccl;
    } else {
      std::string got = j.is_string()
                            ? "'" + absl::CHexEscape(j.get<std::string>().substr(0, 32)) + "'"
                            : TypeName(j);
      return FieldError(source, f.key, "must be \"ce\" or \"nccl\", got " + got);
    }
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

absl::Status CheckHardwareJsonNumber(absl::string_view key, double value,
                                     absl::string_view source) {
  for (const FieldDef& f : Fields()) {
    if (f.key != key) continue;
    if (!std::holds_alternative<DoubleField>(f.member) &&
        !std::holds_alternative<ProtocolField>(f.member)) {
      break;
    }
    return CheckNumber(value, f, source);
  }
  return absl::InvalidArgumentError(absl::StrFormat("%s: '%s' is no number key", source, key));
}

std::vector<std::string> HardwareJsonKeys() {
  std::vector<std::string> keys;
  for (const FieldDef& f : Fields()) keys.push_back(f.key);
  return keys;
}

absl::StatusOr<HardwareSpec> ParseHardwareJson(absl::string_view text, absl::string_view source) {
  Json root;
  // A key given twice in one object would silently take its last value: the parser's
  // callback sees every key of every object as it is read, so each object's keys are
  // kept on a stack and the first repeated one is reported.
  std::vector<absl::flat_hash_set<std::string>> open_objects;
  std::string repeated_key;
  auto check_keys = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!open_objects.empty() && repeated_key.empty() &&
            !open_objects.back().insert(parsed.get<std::string>()).second) {
          repeated_key = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    root = Json::parse(text.begin(), text.end(), check_keys);
  } catch (const Json::exception& e) {  // syntax errors, and numbers beyond a double's range
    return absl::InvalidArgumentError(absl::StrFormat("%s: not valid JSON: %s", source, e.what()));
  }
  if (!repeated_key.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: key '%s' is given twice", source, absl::CHexEscape(repeated_key)));
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
                        absl::StrFormat("names no built-in hardware: '%s'",
                                        absl::CHexEscape(it->get<std::string>())));
    }
    hw = *base;
    hw.name = std::string(source);  // a derived description is not the built-in itself
    has_base = true;
  }
  if (auto it = root.find("name"); it != root.end()) {
    if (!it->is_string()) return FieldError(source, "name", "must be a string, got " + TypeName(*it));
    // The name is printed in reports and tables: a control character (a newline, an
    // escape sequence) would corrupt them, and a very long name their layout.
    const std::string name = it->get<std::string>();
    if (name.empty() || name.size() > kMaxNameLength) {
      return FieldError(source, "name",
                        absl::StrFormat("must hold 1 to %d characters, got %d", kMaxNameLength,
                                        name.size()));
    }
    for (unsigned char c : name) {
      if (c < 0x20 || c == 0x7f) {
        return FieldError(source, "name",
                          absl::StrFormat("must not hold control characters, got \"%s\"",
                                          absl::CHexEscape(name)));
      }
    }
    hw.name = name;
  }
  // Unknown keys first: a misspelt key would otherwise be reported as a missing one.
  absl::flat_hash_set<std::string> known = {"base", "name"};
  for (const FieldDef& f : Fields()) known.insert(f.key);
  for (const auto& [key, value] : root.items()) {
    if (!known.contains(key)) return FieldError(source, absl::CHexEscape(key), "is unknown");
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
  // An NCCL kernel must leave a GEMM beside it at least one SM.
  for (const auto& [key, sms] : {std::pair<const char*, int>{"nccl_collective_sms",
                                                             hw.nccl_collective_sms},
                                 {"nccl_p2p_sms", hw.nccl_p2p_sms},
                                 {"nccl_nvls_sms", hw.nccl_nvls_sms}}) {
    if (sms >= hw.sm_count) {
      return FieldError(source, key,
                        absl::StrFormat("must be below sm_count (%d), got %d", hw.sm_count, sms));
    }
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
