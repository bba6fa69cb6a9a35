// commir-run --backend=sim end to end: the text and JSON reports, the predicted trace,
// hardware choice, --gpus-per-node, memory warnings and --max-memory, determinism, and
// the flags the sim backend refuses.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/subprocess.h"

namespace commir {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ToolResult = testing::SubprocessResult;

std::string g_binary;  // set by main()

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return (std::filesystem::path(dir != nullptr ? dir : "/tmp") / name).string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string Example(const std::string& name) { return "testdata/examples/" + name; }

ToolResult RunSim(std::vector<std::string> args) {
  absl::StatusOr<ToolResult> result = testing::RunSubprocess(g_binary, args);
  if (!result.ok()) {
    ADD_FAILURE() << result.status();
    return {};
  }
  return *std::move(result);
}

// A global MLP at a size that matters on a GPU (the shared example's shapes, scaled).
constexpr char kLargeMlp[] = R"(mesh @m(tp=8)
func @mlp(%x: bf16[8192, 8192], %w1: bf16[8192, 28672@tp], %w2: bf16[28672@tp, 8192]) -> bf16[8192, 8192] {
  %h = matmul(%x, %w1)
  %a = gelu(%h)
  %y = matmul(%a, %w2)
  return %y
}
)";

TEST(CommirRunSim, TextReportOfAPartitionedGlobalProgram) {
  const std::string program = TempPath("mlp.commir");
  WriteFile(program, kLargeMlp);
  ToolResult r = RunSim({program, "--backend=sim"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(r.out, HasSubstr("hardware: h100-sxm, 8 devices"));
  EXPECT_THAT(r.out, HasSubstr("predicted time:"));
  EXPECT_THAT(r.out, HasSubstr("exposed_ms"));
  EXPECT_THAT(r.out, HasSubstr("peak_mem_MiB"));
  EXPECT_EQ(r.err, "");
}

TEST(CommirRunSim, JsonReportIsDeterministicAndConsistent) {
  const std::string program = TempPath("mlp_json.commir");
  WriteFile(program, kLargeMlp);
  ToolResult first = RunSim({program, "--backend=sim", "--format=json"});
  ToolResult second = RunSim({program, "--backend=sim", "--format=json"});
  ASSERT_EQ(first.exit_code, 0) << first;
  EXPECT_EQ(first.out, second.out);  // the same program gives the same prediction
  nlohmann::json report = nlohmann::json::parse(first.out);
  ASSERT_TRUE(report.is_object()) << first.out;
  // Two 8192 x 8192 x 3584 GEMMs per device: the FLOPs are known in closed form.
  const double per_device = 2.0 * 2 * 8192.0 * 8192.0 * (28672.0 / 8);
  EXPECT_EQ(report["hardware"], "h100-sxm");
  ASSERT_EQ(report["devices"].size(), 8u);
  const double total_flops = report["total_flops"].get<double>();
  // No device is slower than the predicted time, and the slowest equals it.
  double slowest = 0;
  for (const nlohmann::json& device : report["devices"]) {
    slowest = std::max(slowest, device["time_s"].get<double>());
    EXPECT_LE(device["exposed_communication_s"].get<double>(),
              device["communication_s"].get<double>());
  }
  EXPECT_DOUBLE_EQ(slowest, report["time_s"].get<double>());
  EXPECT_NEAR(total_flops, 8 * per_device, 8 * per_device * 0.02) << first.out;
}

TEST(CommirRunSim, HardwareAndPlacementChangeThePrediction) {
  const std::string program = TempPath("mlp_hw.commir");
  WriteFile(program, kLargeMlp);
  ToolResult h100 = RunSim({program, "--backend=sim", "--format=json"});
  ToolResult a100 = RunSim({program, "--backend=sim", "--format=json", "--hardware=a100-sxm-80g"});
  ToolResult spread = RunSim({program, "--backend=sim", "--format=json", "--gpus-per-node=2"});
  ASSERT_EQ(h100.exit_code, 0) << h100;
  ASSERT_EQ(a100.exit_code, 0) << a100;
  ASSERT_EQ(spread.exit_code, 0) << spread;
  auto time_of = [](const ToolResult& r) {
    return nlohmann::json::parse(r.out)["time_s"].get<double>();
  };
  EXPECT_GT(time_of(a100), time_of(h100));  // a third of the FLOP/s
  EXPECT_GT(time_of(spread), time_of(h100));  // the reduce_scatter crosses nodes
}

TEST(CommirRunSim, HardwareFromAFile) {
  const std::string file = TempPath("cluster.json");
  WriteFile(file, R"({"base": "h100-sxm", "name": "my-cluster", "gpus_per_node": 4})");
  ToolResult r = RunSim({Example("mlp.commir"), "--backend=sim", "--hardware=" + file});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(r.out, HasSubstr("my-cluster"));

  WriteFile(file, R"({"base": "h100-sxm", "hbm_bandwith_gb_per_s": 1})");
  r = RunSim({Example("mlp.commir"), "--backend=sim", "--hardware=" + file});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("hbm_bandwith_gb_per_s"));
  EXPECT_THAT(r.err, HasSubstr("cluster.json"));

  r = RunSim({Example("mlp.commir"), "--backend=sim", "--hardware=tpu-v5"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("tpu-v5"));
}

// A 1 GiB shift on a ring of 8 H100s: copy engines one way (3 us + bytes / 378 GB/s,
// calibration.md's p2pBandwidthLatencyTest figure) or NCCL send/recv (8.4 + 3.4 us +
// bytes / (140 GB/s x the size efficiency at 0.75 MiB)), by --p2p, which overrides the
// hardware file's "p2p".
TEST(CommirRunSim, P2pFlagChoosesHowAShiftIsPricedOverTheHardwareFile) {
  const std::string program = TempPath("shift.commir");
  WriteFile(program, R"(mesh @m(tp=8)
spmd func @shift(%x: bf16[65536, 8192]) -> bf16[65536, 8192] {
  %y = shift(%x) {axis = tp, offset = 1} : bf16[65536, 8192]
  return %y
}
)");
  const std::string nccl_file = TempPath("p2p_nccl.json");
  WriteFile(nccl_file, R"({"base": "h100-sxm", "p2p": "nccl"})");
  auto time_of = [&](std::vector<std::string> flags) {
    std::vector<std::string> args = {program, "--backend=sim", "--format=json"};
    args.insert(args.end(), flags.begin(), flags.end());
    ToolResult r = RunSim(args);
    EXPECT_EQ(r.exit_code, 0) << r;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out)["time_s"].get<double>() : 0.0;
  };
  const double bytes = 65536.0 * 8192 * 2;
  const double ce = 3e-6 + bytes / 378e9;
  const double nccl = 8.4e-6 + 3.4e-6 + bytes / (140e9 * bytes / (bytes + 0.75 * 1024 * 1024));
  EXPECT_NEAR(time_of({}), ce, 1e-9);
  EXPECT_NEAR(time_of({"--p2p=nccl"}), nccl, 1e-9);
  EXPECT_NEAR(time_of({"--p2p=ce"}), ce, 1e-9);
  EXPECT_NEAR(time_of({"--hardware=" + nccl_file}), nccl, 1e-9);
  EXPECT_NEAR(time_of({"--hardware=" + nccl_file, "--p2p=ce"}), ce, 1e-9);
  EXPECT_NEAR(time_of({"--hardware=" + nccl_file, "--p2p", "nccl"}), nccl, 1e-9);
  ToolResult bad = RunSim({program, "--backend=sim", "--p2p=nvlink"});
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_THAT(bad.err, HasSubstr("--p2p must be ce or nccl"));
}

// A compute-bound GEMM (8192^3 bf16 on each of 8 H100s) beside an NCCL all_gather that
// outlasts it: NCCL keeps S SMs and the GEMM runs its waves on the 132 - S left, so its
// time follows the work of the busiest SM, min over Hopper's large tiles of
// ceil(tiles / (132 - S)) x the tile's outputs (2048 tiles of 128x256 or 4096 of 128x128).
// --nccl-ctas sets S as NCCL would: MIN:MAX clamps NCCL's own 32 (h100-sxm), so 8:64
// keeps 32 and 40:64 raises it to 40 (sim/nccl_ctas.h).
TEST(CommirRunSim, NcclCtasSetTheSmsAGemmBesideACollectiveLoses) {
  const std::string program = TempPath("beside.commir");
  WriteFile(program, R"(mesh @m(tp=8)
spmd func @f(%a: bf16[16384, 8192], %x: bf16[8192, 8192], %w: bf16[8192, 8192]) -> (bf16[131072, 8192], bf16[8192, 8192]) {
  %g = all_gather(%a) {axis = tp, dim = 0, stream = 1} : bf16[131072, 8192]
  %y = matmul(%x, %w) : bf16[8192, 8192]
  return %g, %y
})");
  const std::string trace = TempPath("beside.json");
  // The matmul's and the gather's duration on device 0 (us).
  auto durations = [&](std::vector<std::string> flags) {
    std::vector<std::string> args = {program, "--backend=sim", "--trace=" + trace};
    args.insert(args.end(), flags.begin(), flags.end());
    ToolResult r = RunSim(args);
    EXPECT_EQ(r.exit_code, 0) << r;
    double matmul = 0, gather = 0;
    nlohmann::json events = nlohmann::json::parse(ReadFile(trace))["traceEvents"];
    for (const nlohmann::json& e : events) {
      if (e.value("ph", "") != "X" || e["pid"].get<int>() != 0) continue;
      if (e["name"] == "matmul") matmul = e["dur"].get<double>();
      if (e["name"] == "all_gather") gather = e["dur"].get<double>();
    }
    EXPECT_GT(gather, matmul) << "the GEMM must run beside the gather all along";
    return matmul;
  };
  auto outputs_per_sm = [](int nccl_sms) {
    const double sms = 132 - nccl_sms;
    return std::min(std::ceil(2048 / sms) * 128 * 256, std::ceil(4096 / sms) * 128 * 128);
  };
  const double default_time = durations({});
  EXPECT_DOUBLE_EQ(durations({"--nccl-ctas=8:64"}), default_time);
  EXPECT_DOUBLE_EQ(durations({"--nccl-ctas=32"}), default_time);
  for (int s : {8, 16, 48}) {
    SCOPED_TRACE(s);
    const double expected_ratio = outputs_per_sm(s) / outputs_per_sm(32);
    EXPECT_NEAR(durations({absl::StrCat("--nccl-ctas=", s)}) / default_time, expected_ratio,
                0.03 * expected_ratio);
  }
  EXPECT_DOUBLE_EQ(durations({"--nccl-ctas=40:64"}), durations({"--nccl-ctas=40"}));
  EXPECT_DOUBLE_EQ(durations({"--nccl-ctas=1:20"}), durations({"--nccl-ctas=20"}));

  // A budget that leaves a GEMM no SM is refused (a hardware file of 48 SMs).
  const std::string small = TempPath("small_gpu.json");
  WriteFile(small, R"({"base": "h100-sxm", "sm_count": 48, "nccl_collective_sms": 16, "nccl_p2p_sms": 16})");
  ToolResult bad = RunSim({program, "--backend=sim", "--hardware=" + small, "--nccl-ctas=48"});
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_THAT(bad.err, HasSubstr("--nccl-ctas"));
  EXPECT_THAT(bad.err, HasSubstr("48"));
}

TEST(CommirRunSim, TraceHasAProcessPerDeviceAndATrackPerStream) {
  const std::string trace = TempPath("ring.json");
  ToolResult r = RunSim({Example("ring_ag_matmul.commir"), "--backend=sim", "--trace=" + trace});
  ASSERT_EQ(r.exit_code, 0) << r;
  nlohmann::json events = nlohmann::json::parse(ReadFile(trace));
  if (events.is_object()) events = events["traceEvents"];
  ASSERT_TRUE(events.is_array());
  std::set<int> pids;
  std::set<std::pair<int, int>> tracks;
  for (const nlohmann::json& event : events) {
    if (event.value("ph", "") != "X") continue;
    pids.insert(event["pid"].get<int>());
    tracks.insert({event["pid"].get<int>(), event["tid"].get<int>()});
  }
  EXPECT_EQ(pids.size(), 4u);    // the example's 4 devices
  EXPECT_GE(tracks.size(), 8u);  // shifts on a stream of their own beside the GEMMs
}

TEST(CommirRunSim, AProgramWithoutCommunicationSaysSo) {
  const std::string program = TempPath("gemm.commir");
  WriteFile(program, R"(func @f(%x: bf16[1024, 1024]) -> bf16[1024, 1024] {
  %y = matmul(%x, %x)
  return %y
}
)");
  ToolResult r = RunSim({program, "--backend=sim"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(r.out, HasSubstr("communication: none\n"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("hidden under compute")));
}

// 2^63 - 1 iterations around one shift: repeated in closed form, so the run ends at once
// (and its time is the trip count times one shift's).
constexpr char kEndlessShift[] = R"(mesh @m(tp=2)
spmd func @f(%a: f32[1024, 1024]) -> (f32[1024, 1024]) {
  %y = for %i = 0 to 9223372036854775807 step 1 iter(%x = %a) {
    %x1 = shift(%x) {axis = tp, offset = 1} : f32[1024, 1024]
    yield %x1
  } : (f32[1024, 1024])
  return %y
}
)";

TEST(CommirRunSim, AnEndlessLoopIsPredictedInClosedForm) {
  const std::string program = TempPath("endless.commir");
  WriteFile(program, kEndlessShift);
  ToolResult r = RunSim({program, "--backend=sim", "--format=json"});
  ASSERT_EQ(r.exit_code, 0) << r;
  nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_GT(json["time_s"].get<double>(), 1e9);  // seconds: far longer than a run
}

TEST(CommirRunSim, ATraceOfAnEndlessLoopIsRefusedAtTheLoop) {
  const std::string program = TempPath("endless_trace.commir");
  WriteFile(program, kEndlessShift);
  const std::string trace = TempPath("endless.json");
  ToolResult r = RunSim({program, "--backend=sim", "--trace=" + trace});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr(program + ":3:8: error: @f: a timeline of every kernel would "
                               "hold over 9.2e18 kernels, more than the 20000000 the sim "
                               "backend simulates one by one"))
      << r;
  EXPECT_FALSE(std::filesystem::exists(trace));
  EXPECT_EQ(r.out, "");
}

TEST(CommirRunSim, MemoryBeyondTheLimitFails) {
  const std::string program = TempPath("mlp_mem.commir");
  WriteFile(program, kLargeMlp);
  ToolResult r = RunSim({program, "--backend=sim", "--max-memory=100MiB"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("does not fit in --max-memory=100MiB"));
  EXPECT_THAT(r.err, HasSubstr("device 0"));
  r = RunSim({program, "--backend=sim", "--max-memory=hbm"});
  EXPECT_EQ(r.exit_code, 0) << r;
  r = RunSim({program, "--backend=sim", "--max-memory=lots"});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_THAT(r.err, HasSubstr("--max-memory"));

  // Without a limit, a program larger than the GPU's HBM predicts with a warning.
  WriteFile(program, R"(func @huge(%x: f32[131072, 131072]) -> f32[131072, 131072] {
  %y = exp(%x)
  return %y
}
)");
  r = RunSim({program, "--backend=sim"});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(r.err, HasSubstr("warning: @huge does not fit on a h100-sxm"));
}

TEST(CommirRunSim, FlagsThatNeedDataAreRefused) {
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--check"}, {"--bench=3"}, {"--output-dir=/tmp/x"}}) {
    std::vector<std::string> args = {Example("mlp.commir"), "--backend=sim"};
    args.insert(args.end(), flags.begin(), flags.end());
    ToolResult r = RunSim(args);
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_THAT(r.err, HasSubstr("tensor data")) << flags[0];
  }
  ToolResult r = RunSim({Example("mlp.commir"), "--hardware=h200"});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_THAT(r.err, HasSubstr("--backend=sim"));
  r = RunSim({Example("mlp.commir"), "--backend=sim", "--format=yaml"});
  EXPECT_EQ(r.exit_code, 2) << r;
}

// --hardware reads its file like the program: a directory is named as one, and a device
// that never ends stops at a small cap instead of exhausting memory.
TEST(CommirRunSim, HardwareThatIsNotAFile) {
  const std::string dir = TempPath("");
  ToolResult r = RunSim({Example("mlp.commir"), "--backend=sim", "--hardware=" + dir});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("is a directory"));
  EXPECT_THAT(r.err, Not(HasSubstr("no such file")));
  r = RunSim({Example("mlp.commir"), "--backend=sim", "--hardware=/dev/zero"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("/dev/zero: the input is larger than the 1 MiB limit"));
}

// A GPU count past the bound is bad usage, not narrowed to an int (2^32 would be 0).
TEST(CommirRunSim, GpusPerNodeIsBounded) {
  ToolResult r = RunSim({Example("mlp.commir"), "--backend=sim", "--gpus-per-node=4294967296"});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_THAT(r.err, HasSubstr("--gpus-per-node needs a count from 1 to 1048576"));
}

// An empty --max-memory is bad usage, not "no limit".
TEST(CommirRunSim, EmptyMaxMemoryIsBadUsage) {
  ToolResult r = RunSim({Example("mlp.commir"), "--backend=sim", "--max-memory="});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_THAT(r.err, HasSubstr("--max-memory needs a size"));
}

TEST(CommirRunSim, InvalidProgramsFailAsOnOtherBackends) {
  ToolResult r = RunSim({Example("errors_divisibility.commir"), "--backend=sim"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_THAT(r.err, HasSubstr("errors_divisibility.commir:5:"));
}

}  // namespace
}  // namespace commir

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PATH_TO_COMMIR_RUN\n", argv[0]);
    return 2;
  }
  commir::g_binary = argv[1];
  return RUN_ALL_TESTS();
}
