// The cpu backend's GEMM must give the same bits whatever the thread count, the set of
// CPUs the process may run on or the instruction set: results (.npy files, goldens) may
// depend only on the inputs. Two kinds of check:
//  * every kernel this CPU can run (baseline x86-64, AVX2, AVX-512) is compared bit for
//    bit with a scalar loop that adds in the order blas_gemm.h defines;
//  * the binary re-runs itself as a child under different machine settings (thread
//    counts, a one-CPU affinity mask, and the kernels and C library code paths an
//    AVX2-only and a baseline x86-64 machine would use); each child computes the same
//    GEMMs and writes their raw result bytes, which must all be equal.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend_cpu/blas_gemm.h"
#include "gtest/gtest.h"
#include "testing/machine_settings.h"

namespace commir::cpu {
namespace {

// Set in a child: where to write the GEMM results.
constexpr char kBitsFileEnv[] = "COMMIR_GEMM_BITS_FILE";

std::string g_self;  // this test binary, for the children

struct Shape {
  bool transpose_a, transpose_b;
  int64_t m, n, k;
};

// Shapes the cpu backend meets: mlp's per-device GEMMs, transposed operands, odd sizes
// that leave partial blocks, a long contraction, matrix-vector products.
constexpr Shape kShapes[] = {
    {false, false, 64, 128, 128}, {false, false, 256, 128, 512}, {true, false, 300, 257, 129},
    {false, true, 129, 300, 257}, {true, true, 97, 61, 2048},     {false, false, 1, 700, 300},
    {false, false, 700, 1, 300},  {false, false, 512, 512, 512},  {false, false, 130, 1500, 64},
    {true, true, 200, 1100, 100},
};

// Deterministic values in [-1, 1), the same in every process.
template <typename T>
std::vector<T> Values(int64_t count, uint64_t seed) {
  std::vector<T> values(count);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (T& v : values) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<T>(static_cast<double>(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
  return values;
}

template <typename T>
void AppendGemmBits(const Shape& s, std::string& bits) {
  const std::vector<T> a = Values<T>(s.m * s.k, 1), b = Values<T>(s.k * s.n, 2);
  std::vector<T> c(s.m * s.n);
  Gemm(s.transpose_a, s.transpose_b, s.m, s.n, s.k, T{1}, a.data(), s.transpose_a ? s.m : s.k,
       b.data(), s.transpose_b ? s.k : s.n, c.data(), s.n);
  bits.append(reinterpret_cast<const char*>(c.data()), c.size() * sizeof(T));
}

// The child's work: every shape in f32 and f64.
int WriteGemmBits(const char* path) {
  // A child told to run as an older machine must really use that machine's kernel.
  if (const char* isa = std::getenv("COMMIR_GEMM_ISA"); isa != nullptr && *isa != '\0') {
    if (GemmIsaName(ActiveGemmIsa()) != isa) return 3;
  }
  std::string bits;
  for (const Shape& s : kShapes) {
    AppendGemmBits<float>(s, bits);
    AppendGemmBits<double>(s, bits);
  }
  std::ofstream out(path, std::ios::binary);
  out << bits;
  return out ? 0 : 1;
}

// Runs this binary as a child under `setting`; returns the bytes it wrote.
std::string ChildGemmBits(const testing::MachineSetting& setting) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/gemm_bits_", setting.name);
  std::remove(path.c_str());
  const pid_t pid = fork();
  if (pid == 0) {
    setenv(kBitsFileEnv, path.c_str(), 1);
    if (!testing::ApplyMachineSetting(setting)) _exit(125);
    execl(g_self.c_str(), g_self.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    ADD_FAILURE() << "child " << setting.name << " failed (status " << status << ")";
    return "";
  }
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(GemmDeterminismTest, SameBitsForEveryThreadCountAndCpuSet) {
  const std::vector<testing::MachineSetting> settings = testing::MachineSettingsToCompare();
  const std::string reference = ChildGemmBits(settings[0]);
  ASSERT_FALSE(reference.empty());
  for (size_t i = 1; i < settings.size(); ++i) {
    const std::string bits = ChildGemmBits(settings[i]);
    ASSERT_EQ(bits.size(), reference.size()) << settings[i].name;
    // Not EXPECT_EQ on the strings: a megabyte diff helps nobody.
    EXPECT_TRUE(bits == reference) << settings[i].name << " gives different bits from default";
  }
}

// Products large enough to be split into tiles (and shared by threads), with every
// transpose combination and row strides wider than the rows, against an f64 reference.
TEST(GemmTest, TiledProductsMatchReference) {
  const int64_t m = 300, n = 1100, k = 70, pad = 3;
  for (const bool transpose_a : {false, true}) {
    for (const bool transpose_b : {false, true}) {
      const int64_t a_rows = transpose_a ? k : m, a_cols = transpose_a ? m : k;
      const int64_t b_rows = transpose_b ? n : k, b_cols = transpose_b ? k : n;
      const std::vector<float> a = Values<float>(a_rows * (a_cols + pad), 3);
      const std::vector<float> b = Values<float>(b_rows * (b_cols + pad), 4);
      std::vector<float> c(m * (n + pad), -7.0f);
      Gemm(transpose_a, transpose_b, m, n, k, 0.5f, a.data(), a_cols + pad, b.data(), b_cols + pad,
           c.data(), n + pad);
      int mismatches = 0;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double expected = 0;
          for (int64_t l = 0; l < k; ++l) {
            const double av = transpose_a ? a[l * (a_cols + pad) + i] : a[i * (a_cols + pad) + l];
            const double bv = transpose_b ? b[j * (b_cols + pad) + l] : b[l * (b_cols + pad) + j];
            expected += av * bv;
          }
          expected *= 0.5;
          if (std::abs(c[i * (n + pad) + j] - expected) > 1e-5 * (1 + std::abs(expected))) {
            ++mismatches;
          }
        }
        // The padding between rows of C is left alone.
        for (int64_t j = n; j < n + pad; ++j) ASSERT_EQ(c[i * (n + pad) + j], -7.0f);
      }
      EXPECT_EQ(mismatches, 0) << "transpose_a " << transpose_a << " transpose_b " << transpose_b;
    }
  }
}

// blas_gemm.h's summation order, one element at a time: depth blocks of kGemmDepthBlock
// products summed from +0, the blocks added left to right, alpha applied last.
template <typename T>
T ReferenceElement(const std::vector<T>& a, int64_t lda, bool transpose_a,
                   const std::vector<T>& b, int64_t ldb, bool transpose_b, int64_t i, int64_t j,
                   int64_t k, T alpha) {
  T total = 0;
  for (int64_t p0 = 0; p0 < k; p0 += kGemmDepthBlock) {
    T block = 0;
    for (int64_t p = p0; p < std::min(k, p0 + kGemmDepthBlock); ++p) {
      const T product = (transpose_a ? a[p * lda + i] : a[i * lda + p]) *
                        (transpose_b ? b[j * ldb + p] : b[p * ldb + j]);
      block = block + product;
    }
    total = p0 == 0 ? block : total + block;
  }
  return alpha * total;
}

template <typename T>
void ExpectEveryIsaMatchesReference(const Shape& s, T alpha) {
  const int64_t lda = (s.transpose_a ? s.m : s.k) + 1, ldb = (s.transpose_b ? s.k : s.n) + 2;
  const std::vector<T> a = Values<T>((s.transpose_a ? s.k : s.m) * lda, 5);
  const std::vector<T> b = Values<T>((s.transpose_b ? s.n : s.k) * ldb, 6);
  std::vector<T> expected(s.m * s.n);
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      expected[i * s.n + j] =
          ReferenceElement(a, lda, s.transpose_a, b, ldb, s.transpose_b, i, j, s.k, alpha);
    }
  }
  for (const GemmIsa isa : SupportedGemmIsas()) {
    std::vector<T> c(s.m * s.n, T{-3});
    GemmWithIsa(isa, s.transpose_a, s.transpose_b, s.m, s.n, s.k, alpha, a.data(), lda,
                b.data(), ldb, c.data(), s.n);
    int64_t mismatches = 0;
    for (size_t e = 0; e < c.size(); ++e) {
      mismatches += std::memcmp(&c[e], &expected[e], sizeof(T)) != 0;
    }
    EXPECT_EQ(mismatches, 0) << GemmIsaName(isa) << " " << sizeof(T) * 8 << "-bit "
                             << s.m << "x" << s.n << "x" << s.k << " transposes "
                             << s.transpose_a << s.transpose_b;
  }
}

// Shapes with several depth blocks (k > kGemmDepthBlock, a partial last one), partial
// register tiles and C tiles, and every transpose combination.
TEST(GemmTest, EveryInstructionSetAddsInTheDefinedOrder) {
  const std::vector<GemmIsa> isas = SupportedGemmIsas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), GemmIsa::kBaseline);
  std::string names;
  for (const GemmIsa isa : isas) absl::StrAppend(&names, " ", GemmIsaName(isa));
  std::printf("kernels compared on this CPU:%s (active: %s)\n", names.c_str(),
              std::string(GemmIsaName(ActiveGemmIsa())).c_str());
  const Shape shapes[] = {{false, false, 13, 37, 600}, {true, false, 101, 290, 513},
                          {false, true, 7, 3, 257},    {true, true, 97, 61, 1000},
                          {false, false, 1, 700, 300}, {false, false, 200, 1, 256}};
  for (const Shape& s : shapes) {
    ExpectEveryIsaMatchesReference<float>(s, 1.0f);
    ExpectEveryIsaMatchesReference<float>(s, 0.37f);
    ExpectEveryIsaMatchesReference<double>(s, -1.5);
  }
}

// Sums that cancel: the order decides the bits, so a kernel that split a sum across lanes
// or fused a multiply-add would differ from the reference here first.
TEST(GemmTest, CancellingSumsFollowTheDefinedOrder) {
  const int64_t k = 700;
  std::vector<float> a(k), b(k);
  for (int64_t p = 0; p < k; ++p) {
    a[p] = (p % 2 == 0 ? 1.0f : -1.0f) * (1.0f + static_cast<float>(p) * 1e-3f);
    b[p] = 1.0f / 3.0f + static_cast<float>(p % 7) * 1e-4f;
  }
  const float expected = ReferenceElement(a, k, false, b, 1, false, 0, 0, k, 1.0f);
  for (const GemmIsa isa : SupportedGemmIsas()) {
    float c = 0;
    GemmWithIsa(isa, false, false, 1, 1, k, 1.0f, a.data(), k, b.data(), 1, &c, 1);
    EXPECT_EQ(std::memcmp(&c, &expected, sizeof(float)), 0)
        << GemmIsaName(isa) << ": " << c << " vs " << expected;
  }
}

// NaNs of either sign in A and B: x86 keeps the first operand's NaN in a product, and the
// kernels' compilations order operands differently, so without a canonical NaN the
// kernels would write different bits.
TEST(GemmTest, NaNsAreTheSameBitsForEveryInstructionSet) {
  const int64_t m = 13, n = 40, k = 300;
  std::vector<float> a = Values<float>(m * k, 7), b = Values<float>(k * n, 8);
  for (int64_t i = 0; i < m; ++i) a[i * k + (i * 7) % k] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t j = 0; j < n; ++j) {
    b[((j * 11) % k) * n + j] = -std::numeric_limits<float>::quiet_NaN();
  }
  std::vector<float> reference;
  for (const GemmIsa isa : SupportedGemmIsas()) {
    std::vector<float> c(m * n);
    GemmWithIsa(isa, false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, c.data(), n);
    for (float v : c) ASSERT_TRUE(std::isnan(v)) << GemmIsaName(isa);
    if (reference.empty()) {
      reference = c;
    } else {
      EXPECT_EQ(std::memcmp(c.data(), reference.data(), c.size() * sizeof(float)), 0)
          << GemmIsaName(isa) << " writes other NaN bits than the baseline kernel";
    }
  }
}

TEST(GemmTest, EmptyContractionGivesZeros) {
  std::vector<float> c(6, 7.0f);
  Gemm(false, false, 2, 3, 0, 1.0f, nullptr, 0, nullptr, 3, c.data(), 3);
  for (float v : c) EXPECT_EQ(v, 0.0f);
}

TEST(GemmTest, SmallProductWithStridesAndTransposes) {
  // a = [[1, 2], [3, 4]] stored with row stride 3; b^T stored as [[5, 7], [6, 8]].
  const double a[] = {1, 2, -1, 3, 4, -1};
  const double bt[] = {5, 7, 6, 8};
  double c[4];
  Gemm(false, true, 2, 2, 2, 2.0, a, 3, bt, 2, c, 2);
  EXPECT_EQ(c[0], 2 * 19.0);
  EXPECT_EQ(c[1], 2 * 22.0);
  EXPECT_EQ(c[2], 2 * 43.0);
  EXPECT_EQ(c[3], 2 * 50.0);
}

}  // namespace
}  // namespace commir::cpu

int main(int argc, char** argv) {
  if (const char* path = std::getenv(commir::cpu::kBitsFileEnv)) {
    return commir::cpu::WriteGemmBits(path);
  }
  commir::cpu::g_self = "/proc/self/exe";
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
