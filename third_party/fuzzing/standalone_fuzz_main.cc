// Replays fuzzer inputs without libFuzzer: runs LLVMFuzzerTestOneInput on the
// empty input and then on every file named on the command line (directories
// are walked recursively). Flags starting with '-' (libFuzzer options) are
// ignored. Used by cc_fuzz_target() outside --config=fuzz and by the
// *_corpus_test targets.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

int RunFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "standalone_fuzz_main: cannot read %s\n", path.c_str());
    return 1;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(""), 0);
  int errors = 0;
  int runs = 1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!arg.empty() && arg[0] == '-') continue;
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(arg, ec)) {
        if (entry.is_regular_file()) {
          errors += RunFile(entry.path());
          ++runs;
        }
      }
    } else {
      errors += RunFile(arg);
      ++runs;
    }
  }
  std::fprintf(stderr, "standalone_fuzz_main: executed %d input(s), %d unreadable\n", runs, errors);
  return errors == 0 ? 0 : 1;
}
