// Benchmarks of the cuda backend. Timings are CUDA events on the stream the
// work runs on (manual time), except where the host is what is measured.
//
//   BM_GemmDirect/m/n/k       bf16 GEMM by a hand-written cuBLASLt call (heuristic once,
//                             then cublasLtMatmul in a loop): the baseline.
//   BM_GemmExecutor/m/n/k     the same product through CudaBackend::RunOp, the path
//                             commir-run takes for a matmul op (stream lookup, caching
//                             allocator, plan cache, dependency events).
//     counters: TFLOPS, peak_fraction (of the device's dense bf16 peak, table below),
//     and for the executor vs_direct (executor time / direct time, 1.0 = no overhead).
//   BM_ExecutorPerOp/ops      host microseconds per op of a chain of tiny elementwise
//                             ops run by runtime::Interpreter + CudaBackend (launch and
//                             bookkeeping cost; the GPU work is negligible): us_per_op.
//   BM_AgGemm/{plain,pipelined}  all_gather + GEMM on a 4-device mesh sharing one GPU
//                             (launch mode (c)): all_gather then one matmul, vs the ring
//                             of shift + matmul on two streams (ag_matmul.commir's
//                             spmd form). Wall time per Interpreter::Run (inputs in,
//                             results out included, the same for both).
//
// Run on a GPU machine:
//   bazel run -c opt //benchmarks:cuda_benchmarks
//   bazel run -c opt //benchmarks:cuda_benchmarks -- --benchmark_filter=BM_Gemm
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend_cuda/cuda_backend.h"
#include "benchmark/benchmark.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "parser/parser.h"
#include "runtime/interpreter.h"
#include "runtime/random_inputs.h"
#include "runtime/tensor.h"

namespace commir {
namespace {

using runtime::Tensor;

// Dense bf16 tensor-core peaks (TFLOPS, no sparsity) from NVIDIA's data sheets, matched
// by a substring of cudaDeviceProp::name. Unknown devices report peak_fraction 0.
double PeakBf16Tflops(const std::string& name) {
  static const std::vector<std::pair<std::string, double>> kPeaks = {
      {"H200", 989.0},       // H200 SXM
      {"H100 PCIe", 756.0},  // H100 PCIe
      {"H100 NVL", 835.0},   // H100 NVL
      {"H100", 989.0},       // H100 SXM5
      {"GH200", 989.0},
      {"A100", 312.0},       // A100 SXM4 / PCIe
      {"L40S", 362.0},
      {"B200", 2250.0},
  };
  for (const auto& [key, tflops] : kPeaks) {
    if (name.find(key) != std::string::npos) return tflops;
  }
  return 0;
}

std::string DeviceName() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "";
  return prop.name;
}

bool HaveGpu(benchmark::State& state) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    state.SkipWithError("no GPU");
    return false;
  }
  return true;
}

void GemmCounters(benchmark::State& state, int64_t m, int64_t n, int64_t k, double seconds_per) {
  const double tflops = 2.0 * m * n * k / seconds_per / 1e12;
  state.counters["TFLOPS"] = tflops;
  const double peak = PeakBf16Tflops(DeviceName());
  state.counters["peak_fraction"] = peak > 0 ? tflops / peak : 0;
  state.SetLabel(DeviceName());
}

// Seconds per iteration of `body`, timed with events around `reps` back-to-back calls.
template <typename Body>
double TimeOnStream(cudaStream_t stream, int reps, Body body) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, stream);
  for (int i = 0; i < reps; ++i) body();
  cudaEventRecord(stop, stream);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1e3 / reps;
}

// ---- direct cuBLASLt ---------------------------------------------------------------

struct DirectGemm {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  void* workspace = nullptr;
  size_t workspace_bytes = size_t{32} << 20;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  bool ok = false;

  // Row-major C[m, n] = A[m, k] B[k, n], as column-major C^T = B^T A^T.
  DirectGemm(int64_t m, int64_t n, int64_t k) {
    if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS) return;
    cudaMalloc(&a, m * k * 2);
    cudaMalloc(&b, k * n * 2);
    cudaMalloc(&c, m * n * 2);
    cudaMalloc(&workspace, workspace_bytes);
    cudaMemset(a, 0, m * k * 2);
    cudaMemset(b, 0, k * n * 2);
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, n, k, n);
    cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, m, k);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, m, n);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                         &workspace_bytes, sizeof(workspace_bytes));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(handle, desc, lb, la, lc, lc, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    algo = result.algo;
    ok = found > 0;
  }
  ~DirectGemm() {
    cudaDeviceSynchronize();
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(handle);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    cudaFree(workspace);
  }
  void Run(cudaStream_t stream) {
    const float alpha = 1, beta = 0;
    cublasLtMatmul(handle, desc, &alpha, b, lb, a, la, &beta, c, lc, c, lc, &algo, workspace,
                   workspace_bytes, stream);
  }
};

std::map<std::string, double>& DirectSeconds() {
  static auto* seconds = new std::map<std::string, double>();
  return *seconds;
}

std::string ShapeKey(int64_t m, int64_t n, int64_t k) { return absl::StrCat(m, "x", n, "x", k); }

void BM_GemmDirect(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  DirectGemm gemm(m, n, k);
  if (!gemm.ok) {
    state.SkipWithError("cuBLASLt found no algorithm");
    return;
  }
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  TimeOnStream(stream, 3, [&] { gemm.Run(stream); });  // warm-up
  double seconds = 0;
  for (auto _ : state) {
    seconds = TimeOnStream(stream, 10, [&] { gemm.Run(stream); });
    state.SetIterationTime(seconds);
  }
  DirectSeconds()[ShapeKey(m, n, k)] = seconds;
  GemmCounters(state, m, n, k, seconds);
  cudaStreamDestroy(stream);
}

// ---- the executor ------------------------------------------------------------------

std::unique_ptr<Module> ParseOrDie(const std::string& source) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(source, diagnostics);
  if (module == nullptr) std::fprintf(stderr, "benchmark program does not parse:\n%s", source.c_str());
  return module;
}

std::unique_ptr<cuda::CudaBackend> Backend(std::vector<int64_t> mesh_shape) {
  cuda::CudaBackendOptions options;
  options.mesh_shape = std::move(mesh_shape);
  absl::StatusOr<std::unique_ptr<cuda::CudaBackend>> backend = cuda::CudaBackend::Create(options);
  if (!backend.ok()) {
    std::fprintf(stderr, "%s\n", std::string(backend.status().message()).c_str());
    return nullptr;
  }
  return *std::move(backend);
}

void BM_GemmExecutor(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  std::unique_ptr<Module> module = ParseOrDie(absl::StrFormat(
      "func @f(%%a: bf16[%d, %d], %%b: bf16[%d, %d]) -> bf16[%d, %d] {\n"
      "  %%c = matmul(%%a, %%b)\n  return %%c\n}\n",
      m, k, k, n, m, n));
  std::unique_ptr<cuda::CudaBackend> backend = Backend({1});
  if (module == nullptr || backend == nullptr) {
    state.SkipWithError("setup failed");
    return;
  }
  const Operation& matmul = **module->functions()[0]->body()->begin();
  absl::StatusOr<Tensor> a = backend->ToDevice(0, Tensor(ElementType::kBF16, {m, k}));
  absl::StatusOr<Tensor> b = backend->ToDevice(0, Tensor(ElementType::kBF16, {k, n}));
  absl::StatusOr<cudaStream_t> stream = backend->StreamFor(0, 0);
  if (!a.ok() || !b.ok() || !stream.ok()) {
    state.SkipWithError("cannot place the operands");
    return;
  }
  const Tensor* operands[] = {&*a, &*b};
  bool failed = false;
  auto run = [&] {
    absl::StatusOr<std::vector<Tensor>> c = backend->RunOp(matmul, {0, 0}, operands, {});
    failed |= !c.ok();
  };
  TimeOnStream(*stream, 3, run);  // warm-up: plan, workspace and buffers cached
  double seconds = 0;
  for (auto _ : state) {
    seconds = TimeOnStream(*stream, 10, run);
    state.SetIterationTime(seconds);
  }
  if (failed) state.SkipWithError("RunOp failed");
  GemmCounters(state, m, n, k, seconds);
  auto direct = DirectSeconds().find(ShapeKey(m, n, k));
  state.counters["vs_direct"] = direct != DirectSeconds().end() ? seconds / direct->second : 0;
}

// bf16 shapes: the square 8192^3 and Llama-3-8B-like MLP/attention projections at 4096
// and 8192 tokens (m = tokens, n = output features, k = input features).
void GemmShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "n", "k"});
  b->Args({8192, 8192, 8192});
  b->Args({4096, 14336, 4096});  // gate/up projection
  b->Args({4096, 4096, 14336});  // down projection
  b->Args({8192, 4096, 4096});   // attention output projection
  b->Args({8192, 6144, 4096});   // fused qkv (GQA: 4096 + 2 * 1024)
  b->UseManualTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_GemmDirect)->Apply(GemmShapes);
BENCHMARK(BM_GemmExecutor)->Apply(GemmShapes);

void BM_ExecutorPerOp(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  const int64_t ops = state.range(0);
  // A loop of `ops / 4` iterations, four small elementwise ops each.
  std::unique_ptr<Module> module = ParseOrDie(absl::StrFormat(
      "func @f(%%x: f32[256]) -> f32[256] {\n"
      "  %%r = for %%i = 0 to %d iter(%%v = %%x) {\n"
      "    %%a = mul(%%v, 0.5)\n    %%b = add(%%a, 0.25)\n    %%c = tanh(%%b)\n"
      "    %%d = sub(%%c, %%a)\n    yield %%d\n  } : f32[256]\n  return %%r\n}\n",
      ops / 4));
  std::unique_ptr<cuda::CudaBackend> backend = Backend({1});
  if (module == nullptr || backend == nullptr) {
    state.SkipWithError("setup failed");
    return;
  }
  runtime::Interpreter interpreter(*module->functions()[0], *backend);
  std::vector<std::vector<Tensor>> inputs(1);
  inputs[0].push_back(runtime::RandomGlobalTensor(0, 0, ElementType::kF32, {256}));
  if (!interpreter.Run(inputs).ok()) {
    state.SkipWithError("run failed");
    return;
  }
  for (auto _ : state) {
    if (!interpreter.Run(inputs).ok()) state.SkipWithError("run failed");
  }
  // Rate-inverted: elapsed seconds / (ops * iterations / 1e6) = microseconds per op.
  state.counters["us_per_op"] =
      benchmark::Counter(static_cast<double>(ops) * state.iterations() / 1e6,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ExecutorPerOp)
    ->Arg(1000)
    ->Arg(10000)
    ->ArgName("ops")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// all_gather + GEMM on mesh tp=4 sharing one GPU.
constexpr int64_t kAgM = 8192, kAgK = 4096, kAgN = 4096, kAgDevices = 4;

std::string PlainAgGemm() {
  return absl::StrFormat(
      "mesh @m(tp=4)\n"
      "spmd func @f(%%a: bf16[%d@tp, %d], %%b: bf16[%d, %d@tp]) -> bf16[%d, %d@tp] {\n"
      "  %%g = all_gather(%%a) {axis = tp, dim = 0} : bf16[%d, %d]\n"
      "  %%c = matmul(%%g, %%b) : bf16[%d, %d]\n  return %%c\n}\n",
      kAgM, kAgK, kAgK, kAgN, kAgM, kAgN, kAgM, kAgK, kAgM, kAgN / kAgDevices);
}

// The ring: each step multiplies the block it holds while the next block arrives on
// stream 1 (as in ag_matmul.commir's spmd form).
std::string PipelinedAgGemm() {
  const int64_t block = kAgM / kAgDevices, cols = kAgN / kAgDevices;
  return absl::StrFormat(
      "mesh @m(tp=4)\n"
      "spmd func @f(%%a: bf16[%d@tp, %d], %%b: bf16[%d, %d@tp]) -> bf16[%d, %d@tp] {\n"
      "  %%r = rank() {axis = tp}\n"
      "  %%c0 = full() {value = 0.0} : bf16[%d, %d]\n"
      "  %%c, %%last = for %%i = 0 to 4 iter(%%acc = %%c0, %%blk = %%a) {\n"
      "    %%next = shift(%%blk) {axis = tp, offset = 1, stream = 1} : bf16[%d, %d]\n"
      "    %%part = matmul(%%blk, %%b) : bf16[%d, %d]\n"
      "    %%src = sub(%%r, %%i)\n    %%src4 = rem(%%src, 4)\n    %%off = mul(%%src4, %d)\n"
      "    %%acc1 = dynamic_update_slice(%%acc, %%part, %%off) {dim = 0} : bf16[%d, %d]\n"
      "    yield %%acc1, %%next\n"
      "  } : (bf16[%d, %d], bf16[%d, %d])\n  return %%c\n}\n",
      kAgM, kAgK, kAgK, kAgN, kAgM, kAgN, kAgM, cols, block, kAgK, block, cols, block, kAgM,
      cols, kAgM, cols, block, kAgK);
}

void BM_AgGemm(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  const bool pipelined = state.range(0) == 1;
  std::unique_ptr<Module> module = ParseOrDie(pipelined ? PipelinedAgGemm() : PlainAgGemm());
  std::unique_ptr<cuda::CudaBackend> backend = Backend({kAgDevices});
  if (module == nullptr || backend == nullptr) {
    state.SkipWithError("setup failed");
    return;
  }
  runtime::Interpreter interpreter(*module->functions()[0], *backend);
  std::vector<std::vector<Tensor>> inputs(kAgDevices);
  for (int64_t d = 0; d < kAgDevices; ++d) {
    inputs[d].push_back(Tensor(ElementType::kBF16, {kAgM / kAgDevices, kAgK}));
    inputs[d].push_back(Tensor(ElementType::kBF16, {kAgK, kAgN / kAgDevices}));
  }
  if (!interpreter.Run(inputs).ok()) {
    state.SkipWithError("run failed");
    return;
  }
  for (auto _ : state) {
    if (!interpreter.Run(inputs).ok()) state.SkipWithError("run failed");
  }
  state.SetLabel(pipelined ? "pipelined (shift ring, 2 streams)" : "plain (all_gather, matmul)");
  state.counters["TFLOPS"] = benchmark::Counter(2.0 * kAgM * kAgN * kAgK / 1e12 * state.iterations(),
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AgGemm)->Arg(0)->Arg(1)->ArgName("pipelined")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace commir
