// commir-run's cpu results may depend only on the program, the seed and the build: the
// same run under one or two threads (OMP_NUM_THREADS / OPENBLAS_NUM_THREADS) or pinned to
// one CPU must write byte-identical .npy files.
//
// Arguments: the commir-run binary and the program, as runfiles paths.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

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
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    if (null < 0) _exit(126);
    dup2(null, 1);
    if (!testing::ApplyMachineSetting(setting)) _exit(125);
    execl(g_binary.c_str(), g_binary.c_str(), g_program.c_str(), "--seed=7", output_flag.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  EXPECT_TRUE(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0)
      << setting.name << ": commir-run failed (status " << status << ")";
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
