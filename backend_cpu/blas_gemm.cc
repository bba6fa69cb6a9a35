#include "backend_cpu/blas_gemm.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <exception>
#include <mutex>
#include <new>
#include <system_error>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"
#include "backend_cpu/gemm_kernels.h"

// Why not Eigen or OpenBLAS: both pick register blocking (and with it how a sum is split
// and in which order its parts are added) by vector width, and use fused multiply-adds
// where the CPU has them, so their bits follow the instruction set. Here a lane never
// holds part of another lane's sum, and multiplies and adds round separately, which makes
// the summation order of blas_gemm.h hold for every kernel.

namespace commir::cpu {
namespace {

using gemm_internal::GemmKernel;
using gemm_internal::kPanelAlignment;

// C is computed in tiles of at most kTileRows x kTileCols; threads take whole tiles.
// Neither the tiling nor the thread count changes any element's summation order.
constexpr int64_t kTileRows = 96;
constexpr int64_t kTileCols = 256;
// Below this many multiply-adds a product stays on the calling thread: starting threads
// would cost more than it saves.
constexpr int64_t kMinParallelMacs = int64_t{1} << 22;

// The CPUs this process may run on (taskset, cgroups), at least 1.
int UsableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

bool CpuSupports(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kBaseline:
      return true;
    case GemmIsa::kAvx2:
      // __builtin_cpu_supports also checks that the OS saves the wider registers.
      return __builtin_cpu_supports("avx2");
    case GemmIsa::kAvx512:
      return __builtin_cpu_supports("avx512f");
  }
  return false;
}

GemmIsa DetectActiveIsa() {
  GemmIsa best = GemmIsa::kBaseline;
  for (GemmIsa isa : {GemmIsa::kAvx2, GemmIsa::kAvx512}) {
    if (CpuSupports(isa)) best = isa;
  }
  const char* cap = std::getenv("COMMIR_GEMM_ISA");
  if (cap == nullptr || *cap == '\0') return best;
  for (GemmIsa isa : {GemmIsa::kBaseline, GemmIsa::kAvx2, GemmIsa::kAvx512}) {
    if (GemmIsaName(isa) == cap) return std::min(isa, best);
  }
  std::fprintf(stderr,
               "warning: COMMIR_GEMM_ISA=%s is not one of baseline, avx2, avx512; using %s\n",
               cap, std::string(GemmIsaName(best)).c_str());
  return best;
}

template <typename T>
GemmKernel<T> KernelFor(GemmIsa isa);
template <>
GemmKernel<float> KernelFor<float>(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kAvx512:
      return gemm_internal::Avx512KernelF32();
    case GemmIsa::kAvx2:
      return gemm_internal::Avx2KernelF32();
    case GemmIsa::kBaseline:
      break;
  }
  return gemm_internal::BaselineKernelF32();
}
template <>
GemmKernel<double> KernelFor<double>(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kAvx512:
      return gemm_internal::Avx512KernelF64();
    case GemmIsa::kAvx2:
      return gemm_internal::Avx2KernelF64();
    case GemmIsa::kBaseline:
      break;
  }
  return gemm_internal::BaselineKernelF64();
}

// An aligned scratch buffer of T (the packed panels).
template <typename T>
class PanelBuffer {
 public:
  explicit PanelBuffer(int64_t count)
      : data_(static_cast<T*>(::operator new(static_cast<size_t>(count) * sizeof(T),
                                             std::align_val_t{kPanelAlignment}))) {}
  ~PanelBuffer() { ::operator delete(data_, std::align_val_t{kPanelAlignment}); }
  PanelBuffer(const PanelBuffer&) = delete;
  PanelBuffer& operator=(const PanelBuffer&) = delete;
  T* get() const { return data_; }

 private:
  T* data_;
};

template <typename T>
struct GemmArgs {
  bool transpose_a, transpose_b;
  int64_t m, n, k;
  T alpha;
  const T* a;
  int64_t lda;
  const T* b;
  int64_t ldb;
  T* c;
  int64_t ldc;

  T A(int64_t i, int64_t p) const { return transpose_a ? a[p * lda + i] : a[i * lda + p]; }
  T B(int64_t p, int64_t j) const { return transpose_b ? b[j * ldb + p] : b[p * ldb + j]; }
};

// One worker's packed panels and kernel output, reused across its tiles.
template <typename T>
struct TileScratch {
  TileScratch(const GemmKernel<T>& kernel)
      : a_panels(RoundUp(kTileRows, kernel.rows) * kGemmDepthBlock),
        b_panels(RoundUp(kTileCols, kernel.cols) * kGemmDepthBlock),
        out(static_cast<int64_t>(kernel.rows) * kernel.cols) {}
  static int64_t RoundUp(int64_t value, int64_t multiple) {
    return (value + multiple - 1) / multiple * multiple;
  }
  PanelBuffer<T> a_panels, b_panels, out;
};

// C[row0 : row0 + rows, col0 : col0 + cols], every depth block in order.
template <typename T>
void RunTile(const GemmArgs<T>& g, const GemmKernel<T>& kernel, int64_t row0, int64_t rows,
             int64_t col0, int64_t cols, TileScratch<T>& scratch) {
  const int64_t row_panels = (rows + kernel.rows - 1) / kernel.rows;
  const int64_t col_panels = (cols + kernel.cols - 1) / kernel.cols;
  for (int64_t p0 = 0; p0 < g.k; p0 += kGemmDepthBlock) {
    const int64_t depth = std::min(kGemmDepthBlock, g.k - p0);
    const bool first = p0 == 0, last = p0 + depth == g.k;
    // Pack: A panel r holds [depth][kernel.rows], B panel c [depth][kernel.cols]; rows
    // and columns past the tile are zeros (their results are never stored).
    T* a_pack = scratch.a_panels.get();
    for (int64_t panel = 0; panel < row_panels; ++panel) {
      T* dst = a_pack + panel * depth * kernel.rows;
      for (int64_t p = 0; p < depth; ++p) {
        for (int r = 0; r < kernel.rows; ++r) {
          const int64_t row = panel * kernel.rows + r;
          dst[p * kernel.rows + r] = row < rows ? g.A(row0 + row, p0 + p) : T{0};
        }
      }
    }
    T* b_pack = scratch.b_panels.get();
    for (int64_t panel = 0; panel < col_panels; ++panel) {
      T* dst = b_pack + panel * depth * kernel.cols;
      for (int64_t p = 0; p < depth; ++p) {
        for (int col = 0; col < kernel.cols; ++col) {
          const int64_t j = panel * kernel.cols + col;
          dst[p * kernel.cols + col] = j < cols ? g.B(p0 + p, col0 + j) : T{0};
        }
      }
    }
    T* out = scratch.out.get();
    for (int64_t rp = 0; rp < row_panels; ++rp) {
      for (int64_t cp = 0; cp < col_panels; ++cp) {
        kernel.run(depth, a_pack + rp * depth * kernel.rows, b_pack + cp * depth * kernel.cols,
                   out);
        const int64_t panel_rows = std::min<int64_t>(kernel.rows, rows - rp * kernel.rows);
        const int64_t panel_cols = std::min<int64_t>(kernel.cols, cols - cp * kernel.cols);
        for (int64_t r = 0; r < panel_rows; ++r) {
          T* c_row = g.c + (row0 + rp * kernel.rows + r) * g.ldc + col0 + cp * kernel.cols;
          const T* block_sums = out + r * kernel.cols;
          for (int64_t j = 0; j < panel_cols; ++j) {
            T sum = first ? block_sums[j] : c_row[j] + block_sums[j];
            if (last) {
              sum = g.alpha * sum;
              // x86 multiplies two NaNs into the first operand's NaN, and each kernel's
              // compilation orders the operands its own way: one NaN for all of them.
              if (sum != sum) sum = std::numeric_limits<T>::quiet_NaN();
            }
            c_row[j] = sum;
          }
        }
      }
    }
  }
}

template <typename T>
void RunGemm(GemmIsa isa, const GemmArgs<T>& g) {
  if (g.m == 0 || g.n == 0) return;
  if (g.k == 0) {
    // Every entry is an empty sum; alpha is not applied, so a non-finite alpha does not
    // turn it into NaN.
    for (int64_t i = 0; i < g.m; ++i) std::fill_n(g.c + i * g.ldc, g.n, T{0});
    return;
  }
  const GemmKernel<T> kernel = KernelFor<T>(isa);
  const int64_t row_tiles = (g.m + kTileRows - 1) / kTileRows;
  const int64_t col_tiles = (g.n + kTileCols - 1) / kTileCols;
  const int64_t tiles = row_tiles * col_tiles;
  const bool large = g.m * g.n * g.k >= kMinParallelMacs;
  const int64_t workers = large ? std::min<int64_t>(tiles, UsableCpus()) : 1;
  std::atomic<int64_t> next{0};
  // The first exception of any worker (a scratch buffer may throw bad_alloc); it is
  // rethrown on the calling thread once every helper has been joined, so the caller's
  // out-of-memory handling sees it instead of std::terminate.
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    try {
      TileScratch<T> scratch(kernel);
      for (int64_t tile; (tile = next.fetch_add(1)) < tiles;) {
        const int64_t row = tile / col_tiles * kTileRows, col = tile % col_tiles * kTileCols;
        RunTile(g, kernel, row, std::min(kTileRows, g.m - row), col,
                std::min(kTileCols, g.n - col), scratch);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next.store(tiles);  // the others stop at their next tile
    }
  };
  std::vector<std::thread> helpers;
  helpers.reserve(static_cast<size_t>(workers - 1));
  for (int64_t i = 1; i < workers; ++i) {
    // Fewer threads give the same bits, so a thread that cannot be started (process
    // limits, memory) is simply not used.
    try {
      helpers.emplace_back(work);
    } catch (...) {
      break;
    }
  }
  work();
  for (std::thread& helper : helpers) helper.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

absl::string_view GemmIsaName(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kBaseline:
      return "baseline";
    case GemmIsa::kAvx2:
      return "avx2";
    case GemmIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

std::vector<GemmIsa> SupportedGemmIsas() {
  std::vector<GemmIsa> isas;
  for (GemmIsa isa : {GemmIsa::kBaseline, GemmIsa::kAvx2, GemmIsa::kAvx512}) {
    if (CpuSupports(isa)) isas.push_back(isa);
  }
  return isas;
}

GemmIsa ActiveGemmIsa() {
  static const GemmIsa active = DetectActiveIsa();
  return active;
}

void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  RunGemm(ActiveGemmIsa(),
          GemmArgs<float>{transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, c, ldc});
}

void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc) {
  RunGemm(ActiveGemmIsa(),
          GemmArgs<double>{transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, c, ldc});
}

void GemmWithIsa(GemmIsa isa, bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                 int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float* c, int64_t ldc) {
  RunGemm(CpuSupports(isa) ? isa : GemmIsa::kBaseline,
          GemmArgs<float>{transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, c, ldc});
}

void GemmWithIsa(GemmIsa isa, bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                 int64_t k, double alpha, const double* a, int64_t lda, const double* b,
                 int64_t ldb, double* c, int64_t ldc) {
  RunGemm(CpuSupports(isa) ? isa : GemmIsa::kBaseline,
          GemmArgs<double>{transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, c, ldc});
}

}  // namespace commir::cpu
