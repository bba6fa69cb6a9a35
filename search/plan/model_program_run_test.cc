// The model written as CommIR through the real tools: `commir-search --emit-model` on a
// tiny model (embedding, layers, final norm, head and loss), run by commir-run with its
// calls on given token ids and labels, and again after `commir-opt
// --pass-pipeline=inline`: the same bytes (the same kernels on the same inputs).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "commir/element_type.h"
#include "runtime/npy.h"
#include "runtime/tensor.h"
#include "testing/subprocess.h"

namespace commir {
namespace {

using ::testing::HasSubstr;

std::string g_search, g_opt, g_run;  // set by main()

constexpr char kTiny[] =
    "--emit-model=name=tiny,arch=llama,layers=3,hidden=16,heads=4,kv_heads=2,ffn=24,seq=8,"
    "vocab=40,global_batch=8,dtype=f32";

testing::SubprocessResult RunTool(const std::string& binary, const std::vector<std::string>& args) {
  absl::StatusOr<testing::SubprocessResult> r = testing::RunSubprocess(binary, args);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : testing::SubprocessResult{};
}

std::string Dir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = (std::filesystem::path(tmp != nullptr ? tmp : "/tmp") / name).string();
  std::filesystem::remove_all(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(ModelProgramRun, CallsAndInlinedCallsGiveTheSameBytes) {
  testing::SubprocessResult emitted = RunTool(g_search, {kTiny, "--micro-batch=2"});
  ASSERT_EQ(emitted.exit_code, 0) << emitted;
  const std::string model = Dir("model") + ".commir";
  std::ofstream(model) << emitted.out;
  const std::string inlined = Dir("inlined") + ".commir";
  testing::SubprocessResult opt = RunTool(g_opt, {model, "--pass-pipeline=inline", "-o", inlined});
  ASSERT_EQ(opt.exit_code, 0) << opt;
  EXPECT_THAT(ReadFile(inlined), ::testing::Not(HasSubstr(" = call @layer(")));

  // Token ids and labels: rows of the 40-word vocabulary (commir-run's random integers
  // would be -1, 0 or 1).
  const std::string ids = Dir("ids") + ".npy", labels = Dir("labels") + ".npy";
  for (const auto& [path, offset] : {std::pair<std::string, int>{ids, 0}, {labels, 11}}) {
    runtime::Tensor tokens(ElementType::kI32, {2, 8});
    for (int j = 0; j < 16; ++j) tokens.data<int32_t>()[j] = (7 * j + offset) % 40;
    ASSERT_TRUE(runtime::WriteNpy(path, tokens).ok());
  }
  const std::vector<std::string> inputs = {"--input", "ids=" + ids, "--input",
                                           "head_labels=" + labels};
  const std::string by_calls = Dir("by_calls"), by_inlining = Dir("by_inlining");
  std::vector<std::string> args = {model, "--func=@model", "--output-dir=" + by_calls};
  args.insert(args.end(), inputs.begin(), inputs.end());
  testing::SubprocessResult a = RunTool(g_run, args);
  ASSERT_EQ(a.exit_code, 0) << a;
  args = {inlined, "--func=@model", "--output-dir=" + by_inlining};
  args.insert(args.end(), inputs.begin(), inputs.end());
  testing::SubprocessResult b = RunTool(g_run, args);
  ASSERT_EQ(b.exit_code, 0) << b;
  // The loss: one f32, a mean cross-entropy (positive and finite; the weights are
  // uniform in [-1, 1), so the logits are far from the uniform guess's ln(40)).
  absl::StatusOr<runtime::Tensor> loss = runtime::ReadNpy(by_calls + "/result0.npy");
  ASSERT_TRUE(loss.ok()) << loss.status();
  ASSERT_EQ(loss->num_elements(), 1);
  EXPECT_GT(loss->data<float>()[0], 0);
  EXPECT_TRUE(std::isfinite(loss->data<float>()[0]));
  EXPECT_EQ(ReadFile(by_calls + "/result0.npy"), ReadFile(by_inlining + "/result0.npy"));
}

}  // namespace
}  // namespace commir

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s COMMIR_SEARCH COMMIR_OPT COMMIR_RUN\n", argv[0]);
    return 2;
  }
  commir::g_search = argv[1];
  commir::g_opt = argv[2];
  commir::g_run = argv[3];
  return RUN_ALL_TESTS();
}
