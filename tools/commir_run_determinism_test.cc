// commir-run's cpu results may depend only on the program and the seed: the same run
// under one or two threads (OMP_NUM_THREADS / OPENBLAS_NUM_THREADS), pinned to one CPU,
// or run as an AVX2-only or a baseline x86-64 machine (the GEMM kernel and the C
// library's code paths such a machine would use) must write byte-identical .npy files.
//
// Arguments: the commir-run binary and the programs, as runfiles paths.

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/machine_settings.h"
#include "testing/subprocess.h"

namespace commir {
namespace {

std::string g_binary;   // set by main()
std::vector<std::string> g_programs;  // set by main()

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs `commir-run PROGRAM --seed=7 --output-dir=DIR` under `setting`; returns DIR.
std::string RunUnder(const std::string& program, int program_index,
                     const testing::MachineSetting& setting) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/out", program_index,
                                       "_", setting.name);
  std::filesystem::remove_all(dir);
  const std::string output_flag = "--output-dir=" + dir;
  testing::SubprocessOptions options;
  options.in_child = [&setting] { return testing::ApplyMachineSetting(setting); };
  absl::StatusOr<testing::SubprocessResult> run =
      testing::RunSubprocess(g_binary, {program, "--seed=7", output_flag}, options);
  EXPECT_TRUE(run.ok() && run->exit_code == 0)
      << setting.name << ": commir-run failed ("
      << (run.ok() ? ::testing::PrintToString(*run) : run.status().ToString()) << ")";
  return dir;
}

// Every result*.npy a run wrote, by file name.
std::vector<std::pair<std::string, std::string>> ResultFiles(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> files;
  if (!std::filesystem::is_directory(dir)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("result", 0) == 0) files.emplace_back(name, ReadFile(entry.path().string()));
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(CommirRunDeterminismTest, OutputsAreIdenticalForAnyThreadCountCpuSetOrInstructionSet) {
  const std::vector<testing::MachineSetting> settings = testing::MachineSettingsToCompare();
  for (size_t p = 0; p < g_programs.size(); ++p) {
    const std::string& program = g_programs[p];
    const auto reference = ResultFiles(RunUnder(program, p, settings[0]));
    ASSERT_FALSE(reference.empty()) << program << ": no result*.npy";
    for (const auto& [name, bits] : reference) {
      ASSERT_GT(bits.size(), 128u) << program << ": " << name << " is too short for a .npy";
    }
    for (size_t i = 1; i < settings.size(); ++i) {
      const auto files = ResultFiles(RunUnder(program, p, settings[i]));
      ASSERT_EQ(files.size(), reference.size()) << program << " as " << settings[i].name;
      for (size_t f = 0; f < files.size(); ++f) {
        EXPECT_EQ(files[f].first, reference[f].first);
        EXPECT_TRUE(files[f].second == reference[f].second)
            << program << " as " << settings[i].name << ": " << files[f].first
            << " differs from the default run's";
      }
    }
  }
}

}  // namespace
}  // namespace commir

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 3) {
    std::cerr << "usage: commir_run_determinism_test COMMIR_RUN PROGRAM...\n";
    return 2;
  }
  commir::g_binary = argv[1];
  commir::g_programs.assign(argv + 2, argv + argc);
  return RUN_ALL_TESTS();
}
