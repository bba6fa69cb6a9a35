#include "sim/hardware.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "sim/hardware_json.h"

namespace commir::sim {
namespace {

using ::testing::HasSubstr;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

TEST(BuiltinHardwareTest, H100IsTheDefaultAndCarriesDatasheetFigures) {
  EXPECT_EQ(kDefaultHardware, "h100-sxm");
  const HardwareSpec* h100 = FindBuiltinHardware("h100-sxm");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->peak_flops_bf16, 989e12);
  EXPECT_EQ(h100->peak_flops_tf32, 495e12);
  EXPECT_EQ(h100->peak_flops_f32, 67e12);
  EXPECT_EQ(h100->hbm_bandwidth, 3.35e12);
  EXPECT_EQ(h100->hbm_capacity, 80 * kGiB);
  EXPECT_EQ(h100->sm_count, 132);
  EXPECT_EQ(h100->nvlink_bandwidth_per_direction, 450e9);
  EXPECT_EQ(h100->nvlink_links, 18);
  EXPECT_EQ(h100->gpus_per_node, 8);
  EXPECT_EQ(h100->network_bandwidth_per_gpu, 50e9);
  EXPECT_EQ(h100->nccl_base_latency_s[static_cast<int>(NcclProtocol::kSimple)], 8.4e-6);
}

TEST(BuiltinHardwareTest, H200DiffersFromH100OnlyInMemory) {
  const HardwareSpec* h200 = FindBuiltinHardware("h200");
  const HardwareSpec* h100 = FindBuiltinHardware("h100-sxm");
  ASSERT_NE(h200, nullptr);
  EXPECT_EQ(h200->hbm_bandwidth, 4.8e12);
  EXPECT_EQ(h200->hbm_capacity, 141e9);
  EXPECT_EQ(h200->peak_flops_bf16, h100->peak_flops_bf16);
  EXPECT_EQ(h200->nvlink_bandwidth_per_direction, h100->nvlink_bandwidth_per_direction);
}

TEST(BuiltinHardwareTest, A100) {
  const HardwareSpec* a100 = FindBuiltinHardware("a100-sxm-80g");
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(a100->peak_flops_bf16, 312e12);
  EXPECT_EQ(a100->sm_count, 108);
  EXPECT_EQ(a100->nvlink_bandwidth_per_direction, 300e9);
  EXPECT_EQ(a100->network_bandwidth_per_gpu, 25e9);
  EXPECT_EQ(FindBuiltinHardware("b200"), nullptr);
}

TEST(LoadHardwareTest, BuiltinByName) {
  absl::StatusOr<HardwareSpec> hw = LoadHardware("h200");
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_EQ(hw->name, "h200");
}

TEST(LoadHardwareTest, UnknownNameListsTheBuiltins) {
  absl::StatusOr<HardwareSpec> hw = LoadHardware("tpu-v5");
  ASSERT_FALSE(hw.ok());
  EXPECT_THAT(std::string(hw.status().message()), HasSubstr("unknown hardware 'tpu-v5'"));
  EXPECT_THAT(std::string(hw.status().message()), HasSubstr("h100-sxm, h200, a100-sxm-80g"));
}

// Every key, in file units: a description that starts from nothing.
constexpr char kFullFile[] = R"({
  "name": "toy-gpu",
  "peak_bf16_tflops": 100, "peak_tf32_tflops": 50, "peak_f32_tflops": 10,
  "f32_matmul_uses_tf32": true, "sm_count": 10, "gemm_peak_fraction": 0.5,
  "attention_peak_fraction": 0.25, "attention_backward_peak_fraction": 0.2,
  "attention_tile_overhead_blocks": 1.5, "attention_backward_tile_overhead_blocks": 2,
  "kernel_launch_overhead_us": 2,
  "gemm_operand_bandwidth_gb_per_s": 500, "gemm_wave_latency_us": 1.5,
  "hbm_bandwidth_gb_per_s": 1000, "hbm_capacity_gib": 16, "gpus_per_node": 4,
  "nvlink_bandwidth_per_direction_gb_per_s": 100, "nvlink_links": 4,
  "nvlink_bus_efficiency": 0.75, "p2p_bandwidth_gb_per_s": 40, "copy_engines": 2,
  "network_bandwidth_per_gpu_gb_per_s": 10, "network_latency_us": 7, "network_efficiency": 0.8,
  "copy_engine_bandwidth_one_way_gb_per_s": 90, "copy_engine_bandwidth_both_ways_gb_per_s": 170,
  "copy_engine_latency_us": 4, "p2p": "nccl",
  "all_to_all_bus_efficiency": 0.6, "all_to_all_network_efficiency": 0.7, "nvls": true, "nvls_bus_efficiency": 0.7,
  "nccl_nvls_latency_us": 20,
  "bus_half_efficiency_mib": 2, "nccl_collective_sms": 6, "nccl_p2p_sms": 3, "nccl_nvls_sms": 2,
  "nccl_base_latency_us": [1, 2, 3], "nccl_nvlink_step_latency_us": [0.5, 1, 1.5],
  "nccl_protocol_bandwidth_fraction": [0.5, 0.9, 1]
})";

TEST(HardwareJsonTest, FullFileInFileUnits) {
  absl::StatusOr<HardwareSpec> hw = ParseHardwareJson(kFullFile, "toy.json");
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_EQ(hw->name, "toy-gpu");
  EXPECT_DOUBLE_EQ(hw->peak_flops_bf16, 100e12);
  EXPECT_DOUBLE_EQ(hw->peak_flops_tf32, 50e12);
  EXPECT_DOUBLE_EQ(hw->peak_flops_f32, 10e12);
  EXPECT_TRUE(hw->f32_matmul_uses_tf32);
  EXPECT_EQ(hw->sm_count, 10);
  EXPECT_DOUBLE_EQ(hw->gemm_peak_fraction, 0.5);
  EXPECT_DOUBLE_EQ(hw->gemm_operand_bandwidth, 500e9);
  EXPECT_DOUBLE_EQ(hw->gemm_wave_latency_s, 1.5e-6);
  EXPECT_DOUBLE_EQ(hw->attention_peak_fraction, 0.25);
  EXPECT_DOUBLE_EQ(hw->attention_backward_peak_fraction, 0.2);
  EXPECT_DOUBLE_EQ(hw->attention_tile_overhead_blocks, 1.5);
  EXPECT_DOUBLE_EQ(hw->attention_backward_tile_overhead_blocks, 2);
  EXPECT_DOUBLE_EQ(hw->kernel_launch_overhead_s, 2e-6);
  EXPECT_DOUBLE_EQ(hw->hbm_bandwidth, 1e12);
  EXPECT_DOUBLE_EQ(hw->hbm_capacity, 16 * kGiB);
  EXPECT_EQ(hw->gpus_per_node, 4);
  EXPECT_DOUBLE_EQ(hw->nvlink_bandwidth_per_direction, 100e9);
  EXPECT_EQ(hw->nvlink_links, 4);
  EXPECT_DOUBLE_EQ(hw->nvlink_bus_efficiency, 0.75);
  EXPECT_DOUBLE_EQ(hw->p2p_bandwidth, 40e9);
  EXPECT_EQ(hw->copy_engines, 2);
  EXPECT_DOUBLE_EQ(hw->network_bandwidth_per_gpu, 10e9);
  EXPECT_DOUBLE_EQ(hw->network_latency_s, 7e-6);
  EXPECT_DOUBLE_EQ(hw->network_efficiency, 0.8);
  EXPECT_DOUBLE_EQ(hw->bus_half_efficiency_bytes, 2 * 1024.0 * 1024.0);
  EXPECT_DOUBLE_EQ(hw->copy_engine_bandwidth_one_way, 90e9);
  EXPECT_DOUBLE_EQ(hw->copy_engine_bandwidth_both_ways, 170e9);
  EXPECT_DOUBLE_EQ(hw->copy_engine_latency_s, 4e-6);
  EXPECT_EQ(hw->p2p_transport, P2pTransport::kNccl);
  EXPECT_EQ(hw->nccl_collective_sms, 6);
  EXPECT_EQ(hw->nccl_p2p_sms, 3);
  EXPECT_EQ(hw->nccl_nvls_sms, 2);
  EXPECT_DOUBLE_EQ(hw->all_to_all_bus_efficiency, 0.6);
  EXPECT_DOUBLE_EQ(hw->all_to_all_network_efficiency, 0.7);
  EXPECT_TRUE(hw->nvls);
  EXPECT_DOUBLE_EQ(hw->nvls_bus_efficiency, 0.7);
  EXPECT_DOUBLE_EQ(hw->nccl_nvls_latency_s, 20e-6);
  EXPECT_DOUBLE_EQ(hw->nccl_base_latency_s[2], 3e-6);
  EXPECT_DOUBLE_EQ(hw->nccl_nvlink_step_latency_s[0], 0.5e-6);
  EXPECT_DOUBLE_EQ(hw->nccl_protocol_bandwidth_fraction[1], 0.9);
}

TEST(HardwareJsonTest, BaseBuiltinWithOverrides) {
  absl::StatusOr<HardwareSpec> hw = ParseHardwareJson(
      R"({"base": "h100-sxm", "name": "h100-4gpu", "gpus_per_node": 4,
          "network_bandwidth_per_gpu_gb_per_s": 25})",
      "mine.json");
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_EQ(hw->name, "h100-4gpu");
  EXPECT_EQ(hw->gpus_per_node, 4);
  EXPECT_DOUBLE_EQ(hw->network_bandwidth_per_gpu, 25e9);
  EXPECT_EQ(hw->peak_flops_bf16, 989e12);  // kept from the base
  EXPECT_EQ(hw->sm_count, 132);
}

TEST(HardwareJsonTest, NameDefaultsToTheFile) {
  absl::StatusOr<HardwareSpec> hw = ParseHardwareJson(R"({"base": "h200"})", "x.json");
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_EQ(hw->name, "x.json");
  EXPECT_EQ(hw->hbm_bandwidth, 4.8e12);
}

// The error for `text`, which must not parse.
std::string ErrorOf(const std::string& text) {
  absl::StatusOr<HardwareSpec> hw = ParseHardwareJson(text, "bad.json");
  EXPECT_FALSE(hw.ok()) << text;
  return hw.ok() ? "" : std::string(hw.status().message());
}

TEST(HardwareJsonTest, ErrorsNameTheFileAndTheField) {
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "sm_cuont": 4})"), "bad.json: field 'sm_cuont' is unknown");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "sm_count": "many"})"),
            "bad.json: field 'sm_count' must be an integer, got string");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "sm_count": 13.5})"),
            "bad.json: field 'sm_count' must be an integer, got number");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "peak_bf16_tflops": true})"),
            "bad.json: field 'peak_bf16_tflops' must be a number, got boolean");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "f32_matmul_uses_tf32": 1})"),
            "bad.json: field 'f32_matmul_uses_tf32' must be true or false, got number");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "hbm_bandwidth_gb_per_s": 0})"),
            "bad.json: field 'hbm_bandwidth_gb_per_s' must be positive, got 0");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "gemm_peak_fraction": 1.5})"),
            "bad.json: field 'gemm_peak_fraction' must be in (0, 1], got 1.5");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "nccl_base_latency_us": [1, 2]})"),
            "bad.json: field 'nccl_base_latency_us' must be an array of 3 numbers [LL, LL128, Simple]");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "nccl_base_latency_us": [1, "2", 3]})"),
            "bad.json: field 'nccl_base_latency_us' must be a number, got string");
  EXPECT_THAT(ErrorOf(R"({"base": "h100-sxm", "hbm_capacity_gib": 1e999})"),
              HasSubstr("bad.json: not valid JSON: [json.exception.out_of_range.406] number overflow"));
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "sm_count": 18446744073709551615})"),
            "bad.json: field 'sm_count' is too large: 18446744073709551615");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "sm_count": -4})"),
            "bad.json: field 'sm_count' must be positive, got -4");
  EXPECT_EQ(ErrorOf(R"({"base": "b300"})"), "bad.json: field 'base' names no built-in hardware: 'b300'");
  EXPECT_EQ(ErrorOf(R"({"base": 3})"), "bad.json: field 'base' must be a string, got number");
  EXPECT_EQ(ErrorOf(R"({"name": "x"})"),
            "bad.json: field 'peak_bf16_tflops' is missing (give every field, or \"base\": a built-in)");
  EXPECT_EQ(ErrorOf("[1, 2]"), "bad.json: must hold a JSON object, got array");
  EXPECT_THAT(ErrorOf("{\"base\": "), HasSubstr("bad.json: not valid JSON: "));
}

// Values that pass a sign check but make every derived time infinite or NaN (a
// denormal bandwidth, a message-size curve of 1e308 MiB) are refused with their range.
TEST(HardwareJsonTest, FieldsOutsideAPhysicallyMeaningfulRangeAreRefused) {
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "nvlink_bandwidth_per_direction_gb_per_s": 1e-320})"),
            "bad.json: field 'nvlink_bandwidth_per_direction_gb_per_s' must be from 0.001 to "
            "1e+06, got 9.99989e-321");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "bus_half_efficiency_mib": 1e308})"),
            "bad.json: field 'bus_half_efficiency_mib' must be from 0 to 1e+06, got 1e+308");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "peak_bf16_tflops": 1e300})"),
            "bad.json: field 'peak_bf16_tflops' must be from 0.001 to 1e+06, got 1e+300");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "gemm_peak_fraction": 1e-300})"),
            "bad.json: field 'gemm_peak_fraction' must be from 0.001 to 1, got 1e-300");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "network_latency_us": 1e200})"),
            "bad.json: field 'network_latency_us' must be from 0 to 1e+06, got 1e+200");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "nccl_protocol_bandwidth_fraction": [1e-320, 1, 1]})"),
            "bad.json: field 'nccl_protocol_bandwidth_fraction' must be from 0.001 to 1, got "
            "9.99989e-321");
  // Every field of every number kind, at a huge and a tiny positive value: none passes
  // where a sign check alone would have let it through.
  for (const std::string& key : HardwareJsonKeys()) {
    for (const char* value : {"1e300", "1e-300"}) {
      nlohmann::json file = nlohmann::json::parse(R"({"base": "h100-sxm"})");
      if (key == "f32_matmul_uses_tf32") continue;
      if (key.rfind("nccl_", 0) == 0) {
        file[key] = nlohmann::json::array({std::stod(value), std::stod(value), std::stod(value)});
      } else {
        file[key] = std::stod(value);
      }
      absl::StatusOr<HardwareSpec> hw = ParseHardwareJson(file.dump(), "bad.json");
      // Latencies, the message-size curve, the slowdown and attention tiles' fixed cost may be
      // 0 and so tiny.
      const bool may_be_tiny =
          std::string(value) == "1e-300" &&
          (key.find("latency") != std::string::npos || key == "kernel_launch_overhead_us" ||
           key == "bus_half_efficiency_mib" ||
           key.find("tile_overhead") != std::string::npos);
      if (may_be_tiny) continue;
      EXPECT_FALSE(hw.ok()) << key << "=" << value;
    }
  }
}

// calibration.md's copy-engine figures; NCCL's SMs must leave a GEMM at least one SM;
// the transport is one of two words.
TEST(HardwareJsonTest, CopyEnginesAndNcclSms) {
  const HardwareSpec& h100 = *FindBuiltinHardware("h100-sxm");
  EXPECT_DOUBLE_EQ(h100.copy_engine_bandwidth_one_way, 378e9);
  EXPECT_DOUBLE_EQ(h100.copy_engine_bandwidth_both_ways, 745e9);
  EXPECT_EQ(h100.p2p_transport, P2pTransport::kCopyEngine);
  EXPECT_EQ(h100.nccl_collective_sms, 32);
  EXPECT_EQ(P2pTransportName(P2pTransport::kNccl), "nccl");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "nccl_collective_sms": 132})"),
            "bad.json: field 'nccl_collective_sms' must be below sm_count (132), got 132");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "sm_count": 16, "nccl_p2p_sms": 16})"),
            "bad.json: field 'nccl_collective_sms' must be below sm_count (16), got 32");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "nccl_p2p_sms": -1})"),
            "bad.json: field 'nccl_p2p_sms' must be >= 0, got -1");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "sm_count": 40, "nccl_nvls_sms": 40})"),
            "bad.json: field 'nccl_nvls_sms' must be below sm_count (40), got 40");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "nvls": 1})"),
            "bad.json: field 'nvls' must be true or false, got number");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "nvls_bus_efficiency": 1.5})"),
            "bad.json: field 'nvls_bus_efficiency' must be in (0, 1], got 1.5");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "p2p": "nvlink"})"),
            "bad.json: field 'p2p' must be \"ce\" or \"nccl\", got 'nvlink'");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "p2p": 1})"),
            "bad.json: field 'p2p' must be \"ce\" or \"nccl\", got number");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "copy_engine_bandwidth_both_ways_gb_per_s": 0})"),
            "bad.json: field 'copy_engine_bandwidth_both_ways_gb_per_s' must be positive, got 0");
  absl::StatusOr<HardwareSpec> hw = ParseHardwareJson(
      R"({"base": "h100-sxm", "p2p": "nccl", "nccl_collective_sms": 0})", "ok.json");
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_EQ(hw->p2p_transport, P2pTransport::kNccl);
  EXPECT_EQ(hw->nccl_collective_sms, 0);
}

TEST(HardwareJsonTest, AKeyGivenTwiceIsRefused) {
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "sm_count": 4, "sm_count": 8})"),
            "bad.json: key 'sm_count' is given twice");
  EXPECT_EQ(ErrorOf(R"({"name": "a", "base": "h100-sxm", "name": "b"})"),
            "bad.json: key 'name' is given twice");
  // The same key in two objects is no repetition (there is no nested object in the format,
  // so the second is refused for its type, not as a duplicate).
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "name": {"name": 1}})"),
            "bad.json: field 'name' must be a string, got object");
}

TEST(HardwareJsonTest, ControlCharactersInTheNameAreRefused) {
  EXPECT_EQ(ErrorOf("{\"base\": \"h100-sxm\", \"name\": \"a\\u001b[31mred\\nline\"}"),
            "bad.json: field 'name' must not hold control characters, got "
            "\"a\\x1b[31mred\\nline\"");
  EXPECT_EQ(ErrorOf(R"({"base": "h100-sxm", "name": ""})"),
            "bad.json: field 'name' must hold 1 to 256 characters, got 0");
  EXPECT_EQ(ErrorOf("{\"base\": \"b3\\u0007\"}"),
            "bad.json: field 'base' names no built-in hardware: 'b3\\x07'");
  absl::StatusOr<HardwareSpec> hw =
      ParseHardwareJson(R"({"base": "h100-sxm", "name": "H100 (4 GPUs) – ü"})", "ok.json");
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_EQ(hw->name, "H100 (4 GPUs) – ü");
}

TEST(HardwareJsonTest, EveryKeyIsRequiredWithoutABase) {
  ASSERT_GT(HardwareJsonKeys().size(), 20u);
  for (const std::string& key : HardwareJsonKeys()) {
    nlohmann::json file = nlohmann::json::parse(kFullFile);
    ASSERT_EQ(file.erase(key), 1u) << "the full file lacks " << key;
    EXPECT_EQ(ErrorOf(file.dump()),
              "bad.json: field '" + key + "' is missing (give every field, or \"base\": a built-in)");
  }
}

// The example shipped for users (sim/examples/) loads and means what its comment says.
TEST(LoadHardwareTest, ShippedExample) {
  absl::StatusOr<HardwareSpec> hw = LoadHardware("sim/examples/h100_4gpu_nodes_hdr.json");
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_EQ(hw->name, "h100-4gpu-hdr");
  EXPECT_EQ(hw->gpus_per_node, 4);
  EXPECT_DOUBLE_EQ(hw->network_bandwidth_per_gpu, 25e9);
  EXPECT_DOUBLE_EQ(hw->network_latency_s, 6e-6);
  EXPECT_EQ(hw->peak_flops_bf16, 989e12);
}

TEST(LoadHardwareTest, FromFile) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/cluster.json");
  {
    std::ofstream out(path);
    out << R"({"base": "a100-sxm-80g", "name": "my-a100", "gpus_per_node": 4})";
  }
  absl::StatusOr<HardwareSpec> hw = LoadHardware(path);
  ASSERT_TRUE(hw.ok()) << hw.status();
  EXPECT_EQ(hw->name, "my-a100");
  EXPECT_EQ(hw->gpus_per_node, 4);
  EXPECT_EQ(hw->sm_count, 108);

  {
    std::ofstream out(path);
    out << R"({"base": "a100-sxm-80g", "gpus": 4})";
  }
  hw = LoadHardware(path);
  ASSERT_FALSE(hw.ok());
  EXPECT_EQ(hw.status().message(), path + ": field 'gpus' is unknown");
}

}  // namespace
}  // namespace commir::sim
