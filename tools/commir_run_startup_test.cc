// commir-run must start in milliseconds on the cpu path: it may not link the CUDA
// libraries (cudart, cuBLASLt, NCCL: hundreds of megabytes mapped and relocated at every
// start, even for --help), nor OpenBLAS (the cpu backend has a GEMM of its own). The cuda
// backend is loaded from libcommir_cuda.so only for --backend=cuda.
//
// Arguments: the commir-run binary (runfiles path); the test reads its ELF dynamic
// section, runs `--help` and `--backend=cuda` with a missing plugin as children.
#include <elf.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/subprocess.h"

namespace commir {
namespace {

using ::testing::HasSubstr;

std::string g_binary;  // set by main()

// One read of the whole file (the binary is tens of megabytes under sanitizers).
std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  std::string bytes(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

// The DT_NEEDED entries of a 64-bit little-endian ELF file (what the dynamic loader
// loads before main), read from its section headers.
std::vector<std::string> NeededLibraries(const std::string& elf) {
  std::vector<std::string> needed;
  if (elf.size() < sizeof(Elf64_Ehdr) || std::memcmp(elf.data(), ELFMAG, SELFMAG) != 0 ||
      elf[EI_CLASS] != ELFCLASS64) {
    ADD_FAILURE() << "not a 64-bit ELF file";
    return needed;
  }
  Elf64_Ehdr header;
  std::memcpy(&header, elf.data(), sizeof(header));
  auto section = [&](size_t i) {
    Elf64_Shdr s;
    std::memcpy(&s, elf.data() + header.e_shoff + i * header.e_shentsize, sizeof(s));
    return s;
  };
  if (header.e_shoff + header.e_shnum * sizeof(Elf64_Shdr) > elf.size()) {
    ADD_FAILURE() << "truncated section headers";
    return needed;
  }
  for (size_t i = 0; i < header.e_shnum; ++i) {
    const Elf64_Shdr dynamic = section(i);
    if (dynamic.sh_type != SHT_DYNAMIC) continue;
    const Elf64_Shdr strings = section(dynamic.sh_link);
    for (size_t off = 0; off + sizeof(Elf64_Dyn) <= dynamic.sh_size; off += sizeof(Elf64_Dyn)) {
      Elf64_Dyn entry;
      std::memcpy(&entry, elf.data() + dynamic.sh_offset + off, sizeof(entry));
      if (entry.d_tag == DT_NULL) break;
      if (entry.d_tag == DT_NEEDED) needed.emplace_back(elf.data() + strings.sh_offset + entry.d_un.d_val);
    }
  }
  return needed;
}

using ChildResult = testing::SubprocessResult;

// Runs commir-run with `args` (and `env` added) and reports its peak RSS.
ChildResult RunTool(const std::vector<std::string>& args,
                    const std::vector<std::pair<std::string, std::string>>& env = {}) {
  testing::SubprocessOptions options;
  options.env = env;
  absl::StatusOr<ChildResult> result = testing::RunSubprocess(g_binary, args, options);
  if (!result.ok()) {
    ADD_FAILURE() << "cannot run " << g_binary << ": " << result.status();
    return ChildResult{};
  }
  return *std::move(result);
}

TEST(CommirRunStartupTest, LinksNoCudaLibraryAndNoOpenBlas) {
  const std::vector<std::string> needed = NeededLibraries(ReadFile(g_binary));
  ASSERT_FALSE(needed.empty()) << "no DT_NEEDED entries found in " << g_binary;
  for (const std::string& library : needed) {
    for (const char* banned : {"libcudart", "libcublas", "libnccl", "libcuda.", "libopenblas"}) {
      EXPECT_FALSE(absl::StartsWith(library, banned))
          << g_binary << " needs " << library << " at start-up";
    }
  }
}

TEST(CommirRunStartupTest, HelpRunsInASmallFootprint) {
#if defined(__SANITIZE_ADDRESS__)
  // commir-run is built like this test: ASan's shadow memory and allocator alone take
  // about 250 MB, so the footprint says nothing there (the DT_NEEDED check still runs).
  GTEST_SKIP() << "peak RSS is not meaningful under AddressSanitizer";
#endif
  const ChildResult help = RunTool({"--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  // The CUDA libraries alone put it at about 220 MB; a plain C++ tool needs a few MB
  // (more under sanitizers, hence the margin).
  EXPECT_LT(help.max_rss_kib, 50 * 1024) << "peak RSS of commir-run --help";
}

#if COMMIR_HAS_CUDA
TEST(CommirRunStartupTest, MissingCudaPluginExitsThreeNamingTheFile) {
  const std::string missing = "/nonexistent/dir/libcommir_cuda.so";
  const ChildResult r = RunTool({"testdata/examples/mlp.commir", "--backend=cuda"},
                            {{"COMMIR_CUDA_PLUGIN", missing}});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("error: cannot load the cuda backend"));
  EXPECT_THAT(r.err, HasSubstr(missing));
}

TEST(CommirRunStartupTest, BrokenCudaPluginExitsThreeWithDlerror) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string broken = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/libcommir_cuda.so");
  // Longer than an ELF header, so that dlopen reads it and rejects the magic number.
  std::ofstream(broken) << std::string(4096, 'x');
  const ChildResult r = RunTool({"testdata/examples/mlp.commir", "--backend=cuda"},
                            {{"COMMIR_CUDA_PLUGIN", broken}});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("error: cannot load the cuda backend ", broken, ": ")));
  EXPECT_THAT(r.err, HasSubstr("invalid ELF header"));  // dlerror()'s words
}
#endif

}  // namespace
}  // namespace commir

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::cerr << "usage: commir_run_startup_test COMMIR_RUN\n";
    return 2;
  }
  commir::g_binary = argv[1];
  return RUN_ALL_TESTS();
}
