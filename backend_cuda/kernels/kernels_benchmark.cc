// Throughput of the device kernels, timed with CUDA events on the launch stream (manual
// time). Memory-bound kernels report GB/s and the fraction of the device's DRAM bandwidth
// (from its memory clock and bus width); attention reports TFLOPS (4 B H Sq Skv D flops,
// halved under the causal mask).
//
//   bazel run -c opt //backend_cuda/kernels:kernels_benchmark
//   bazel run -c opt //backend_cuda/kernels:kernels_benchmark -- --benchmark_filter=Attention
#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend_cuda/kernels/attention.h"
#include "backend_cuda/kernels/dtype.h"
#include "backend_cuda/kernels/elementwise.h"
#include "backend_cuda/kernels/layout.h"
#include "backend_cuda/kernels/reduce.h"
#include "benchmark/benchmark.h"

namespace commir::cuda_kernels {
namespace {

bool HaveGpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// Theoretical DRAM bandwidth in GB/s (double data rate), 0 if unknown.
double PeakGBps() {
  int device = 0, clock_khz = 0, bus_bits = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) {
    return 0;
  }
  return 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
}

// Device buffer filled with a constant (values do not change the timing of these kernels).
struct Buffer {
  void* ptr = nullptr;
  Buffer(size_t bytes, KDType dtype, double value) {
    if (cudaMalloc(&ptr, bytes) != cudaSuccess) {
      ptr = nullptr;
      return;
    }
    LaunchFill(dtype, ptr, static_cast<int64_t>(bytes / KDTypeSize(dtype)), value, nullptr);
  }
  ~Buffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
};

// Times `launch` (which enqueues on stream 0) per iteration with events, and reports
// bytes moved and flops done per iteration.
template <typename Launch>
void TimeKernel(benchmark::State& state, double bytes, double flops, Launch launch) {
  if (!HaveGpu()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  if (cudaError_t e = launch(); e != cudaSuccess) {  // warm-up, and argument check
    state.SkipWithError(cudaGetErrorString(e));
    return;
  }
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  double total_s = 0;
  for (auto _ : state) {
    cudaEventRecord(start, nullptr);
    launch();
    cudaEventRecord(stop, nullptr);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);
    total_s += ms / 1e3;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) state.SkipWithError(cudaGetErrorString(e));
  const double per_iter = total_s / static_cast<double>(state.iterations());
  if (bytes > 0) {
    state.counters["GB/s"] = bytes / per_iter / 1e9;
    const double peak = PeakGBps();
    if (peak > 0) state.counters["peak_fraction"] = bytes / per_iter / 1e9 / peak;
  }
  if (flops > 0) state.counters["TFLOPS"] = flops / per_iter / 1e12;
}

void BM_UnaryGeluBf16(benchmark::State& state) {
  const int64_t n = state.range(0);
  Buffer x(n * 2, KDType::kBF16, 0.5), y(n * 2, KDType::kBF16, 0);
  TimeKernel(state, 4.0 * n, 0, [&] {
    return LaunchUnary(ElementwiseFn::kGeluTanh, KDType::kBF16, x.ptr, y.ptr, n, nullptr);
  });
}
BENCHMARK(BM_UnaryGeluBf16)->Arg(1 << 26)->UseManualTime();

void BM_BinaryBiasAddBf16(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  Buffer a(rows * cols * 2, KDType::kBF16, 1), b(cols * 2, KDType::kBF16, 2),
      out(rows * cols * 2, KDType::kBF16, 0);
  const std::vector<int64_t> shape = {rows, cols}, bias = {cols};
  TimeKernel(state, 4.0 * rows * cols, 0, [&] {
    return LaunchBinary(ElementwiseFn::kAdd, KDType::kBF16, a.ptr, shape, b.ptr, bias, out.ptr, shape,
                        nullptr, nullptr);
  });
}
BENCHMARK(BM_BinaryBiasAddBf16)->Args({8192, 8192})->UseManualTime();

void BM_BinarySameShapeF32(benchmark::State& state) {
  const int64_t n = state.range(0);
  Buffer a(n * 4, KDType::kF32, 1), b(n * 4, KDType::kF32, 2), out(n * 4, KDType::kF32, 0);
  const std::vector<int64_t> shape = {n};
  TimeKernel(state, 12.0 * n, 0, [&] {
    return LaunchBinary(ElementwiseFn::kMul, KDType::kF32, a.ptr, shape, b.ptr, shape, out.ptr, shape,
                        nullptr, nullptr);
  });
}
BENCHMARK(BM_BinarySameShapeF32)->Arg(1 << 26)->UseManualTime();

void BM_ConvertF32ToBf16(benchmark::State& state) {
  const int64_t n = state.range(0);
  Buffer x(n * 4, KDType::kF32, 1.25), y(n * 2, KDType::kBF16, 0);
  TimeKernel(state, 6.0 * n, 0, [&] {
    return LaunchConvert(KDType::kF32, x.ptr, KDType::kBF16, y.ptr, n, nullptr);
  });
}
BENCHMARK(BM_ConvertF32ToBf16)->Arg(1 << 26)->UseManualTime();

// Reduce over the last dim (row layout) or the first (column layout).
void BM_ReduceSumF32(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  const int64_t dim = state.range(2);
  Buffer x(rows * cols * 4, KDType::kF32, 1), y((dim == 0 ? cols : rows) * 4, KDType::kF32, 0);
  const std::vector<int64_t> shape = {rows, cols}, dims = {dim};
  TimeKernel(state, 4.0 * rows * cols, 0, [&] {
    return LaunchReduce(ReductionFn::kSum, KDType::kF32, x.ptr, shape, dims, y.ptr, nullptr, nullptr);
  });
}
BENCHMARK(BM_ReduceSumF32)->Args({8192, 8192, 1})->Args({8192, 8192, 0})->UseManualTime();

void BM_SoftmaxBf16(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  Buffer x(rows * cols * 2, KDType::kBF16, 0.1), y(rows * cols * 2, KDType::kBF16, 0);
  const std::vector<int64_t> shape = {rows, cols};
  TimeKernel(state, 4.0 * rows * cols, 0, [&] {
    return LaunchSoftmax(KDType::kBF16, x.ptr, shape, -1, y.ptr, nullptr);
  });
}
BENCHMARK(BM_SoftmaxBf16)->Args({16384, 4096})->Args({65536, 1024})->UseManualTime();

void BM_RmsNormBf16(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  Buffer x(rows * cols * 2, KDType::kBF16, 0.1), w(cols * 2, KDType::kBF16, 1),
      y(rows * cols * 2, KDType::kBF16, 0);
  TimeKernel(state, 4.0 * rows * cols, 0, [&] {
    return LaunchRmsNorm(KDType::kBF16, x.ptr, rows, cols, KDType::kBF16, w.ptr, 1e-6, y.ptr,
                         nullptr);
  });
}
BENCHMARK(BM_RmsNormBf16)->Args({16384, 4096})->UseManualTime();

void BM_LayerNormBf16(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  Buffer x(rows * cols * 2, KDType::kBF16, 0.1), w(cols * 2, KDType::kBF16, 1),
      b(cols * 2, KDType::kBF16, 0), y(rows * cols * 2, KDType::kBF16, 0);
  TimeKernel(state, 4.0 * rows * cols, 0, [&] {
    return LaunchLayerNorm(KDType::kBF16, x.ptr, rows, cols, KDType::kBF16, w.ptr, KDType::kBF16,
                           b.ptr, 1e-5, y.ptr, nullptr);
  });
}
BENCHMARK(BM_LayerNormBf16)->Args({16384, 4096})->UseManualTime();

// 2-D transpose (tiled) and [B, S, H, D] -> [B, H, S, D] (innermost kept: widened copy).
void BM_TransposeBf16(benchmark::State& state) {
  const bool heads = state.range(0) != 0;
  const std::vector<int64_t> shape =
      heads ? std::vector<int64_t>{8, 2048, 32, 128} : std::vector<int64_t>{8192, 8192};
  const std::vector<int64_t> perm =
      heads ? std::vector<int64_t>{0, 2, 1, 3} : std::vector<int64_t>{1, 0};
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  Buffer x(n * 2, KDType::kBF16, 1), y(n * 2, KDType::kBF16, 0);
  TimeKernel(state, 4.0 * n, 0, [&] {
    return LaunchTranspose(KDType::kBF16, x.ptr, shape, perm, y.ptr, nullptr);
  });
}
BENCHMARK(BM_TransposeBf16)->Arg(0)->Arg(1)->UseManualTime();

// Attention: B, H, S (= Sq = Skv), D, causal, kernel (0: the tensor-core kernel that
// LaunchAttention picks for bf16, 1: the CUDA-core kernel, for comparison); GQA with H / 4
// kv heads.
void BM_AttentionBf16(benchmark::State& state) {
  KAttentionArgs a;
  a.dtype = KDType::kBF16;
  a.batch = state.range(0);
  a.heads = state.range(1);
  a.kv_heads = a.heads / 4;
  a.sq = a.skv = state.range(2);
  a.d = a.dv = state.range(3);
  a.causal = state.range(4) != 0;
  a.kernel = state.range(5) != 0 ? KAttentionKernel::kCudaCore : KAttentionKernel::kTensorCore;
  a.scale = 0.088;
  a.q_pos = 0;
  Buffer q(a.batch * a.heads * a.sq * a.d * 2, KDType::kBF16, 0.01),
      k(a.batch * a.kv_heads * a.skv * a.d * 2, KDType::kBF16, 0.01),
      v(a.batch * a.kv_heads * a.skv * a.dv * 2, KDType::kBF16, 1),
      out(a.batch * a.heads * a.sq * a.dv * 2, KDType::kBF16, 0),
      lse(a.batch * a.heads * a.sq * 4, KDType::kF32, 0);
  a.q = q.ptr;
  a.k = k.ptr;
  a.v = v.ptr;
  a.out = out.ptr;
  a.lse = static_cast<float*>(lse.ptr);
  const double flops = 4.0 * a.batch * a.heads * a.sq * a.skv * a.d * (a.causal ? 0.5 : 1.0);
  TimeKernel(state, 0, flops, [&] { return LaunchAttention(a, nullptr); });
}
BENCHMARK(BM_AttentionBf16)
    ->ArgNames({"B", "H", "S", "D", "causal", "cuda_core"})
    ->Args({1, 32, 4096, 128, 1, 0})
    ->Args({1, 32, 4096, 128, 0, 0})
    ->Args({4, 32, 2048, 64, 1, 0})
    ->Args({1, 32, 4096, 128, 1, 1})
    ->UseManualTime();

}  // namespace
}  // namespace commir::cuda_kernels

BENCHMARK_MAIN();
