// commir-run's cpu results may depend only on the program, the seed and the build: the
// same run under one or two threads (OMP_NUM_THREADS / OPENBLAS_NUM_THREADS) or pinned to
// one CPU must write byte-identical .npy files.
//
// Arguments: the commir-run binary and the program, as runfiles paths.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/machine_settings.h"
#include "testing/subprocess.h"

namespace commir {
namespace {

std::string g_binary;   // set by main()
std::string g_program;  // set by main()

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs `commir-run PROGRAM --seed=7 --output-dir=DIR` under `setting`; returns DIR.
std::string RunUnder(const testing::MachineSetting& setting) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/out_", setting.name);
  std::filesystem::remove_all(dir);
  const std::string output_flag = "--output-dir=" + dir;
  testing::SubprocessOptions options;
  options.in_child = [&setting] { return testing::ApplyMachineSetting(setting); };
  absl::StatusOr<testing::SubprocessResult> run =
      testing::RunSubprocess(g_binary, {g_program, "--seed=7", output_flag}, options);
  EXPECT_TRUE(run.ok() && run->exit_code == 0)
      << setting.name << ": commir-run failed ("
      << (run.ok() ? ::testing::PrintToString(*run) : run.status().ToString()) << ")";
  return dir;
}

TEST(CommirRunDeterminismTest, MlpOutputsAreIdenticalForAnyThreadCountOrCpuSet) {
  const std::vector<testing::MachineSetting> settings = testing::MachineSettingsToCompare();
  const std::string reference_dir = RunUnder(settings[0]);
  const std::string reference = ReadFile(reference_dir + "/result0.npy");
  ASSERT_GT(reference.size(), 128u) << "no result0.npy in " << reference_dir;
  for (size_t i = 1; i < settings.size(); ++i) {
    const std::string bits = ReadFile(RunUnder(settings[i]) + "/result0.npy");
    EXPECT_TRUE(bits == reference) << settings[i].name << ": result0.npy differs from the "
                                   << "default run's (" << bits.size() << " vs "
                                   << reference.size() << " bytes)";
  }
}

}  // namespace
}  // namespace commir

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 3) {
    std::cerr << "usage: commir_run_determinism_test COMMIR_RUN PROGRAM\n";
    return 2;
  }
  commir::g_binary = argv[1];
  commir::g_program = argv[2];
  return RUN_ALL_TESTS();
}
