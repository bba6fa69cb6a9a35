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
//   BM_AgGemm/pipelined:P/resident:R  all_gather + GEMM on a 4-device mesh sharing one
//                             GPU (launch mode (c)): all_gather then one matmul (P=0), vs
//                             the ring of shift + matmul on two streams (P=1,
//                             ag_matmul.commir's spmd form). Wall time per
//                             Interpreter::Run: R=0 includes moving the inputs in and
//                             the results out (the same for both, and it dominates);
//                             R=1 keeps inputs on the device and results there, so the
//                             time is the schedule's (dispatch + GPU) and plain vs
//                             pipelined overlap shows.
//   BM_ShiftBandwidth/p2p:T/MiB:B  one `shift` (offset 1) of B MiB per rank through the
//                             CollectiveEngine, T=0 copy engines (--p2p=ce), T=1 NCCL
//                             (--p2p=nccl), on the ranks the machine has: one rank per
//                             GPU with 2 or more GPUs (launch mode (b): peer copies vs
//                             ncclSend/ncclRecv), else 4 ranks sharing GPU 0 (mode (c):
//                             both move bytes within one GPU's memory, the ce path on
//                             transfer streams, the nccl path on the ranks' streams,
//                             since NCCL cannot run two ranks on one GPU). Counters:
//                             GBps_per_rank (bytes one rank sends / time) and GBps_total;
//                             the label says which case ran (an intra-device copy reads
//                             and writes the same HBM: it is not NVLink bandwidth).
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
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/strings/str_format.h"
#include "backend_cuda/comm/collective_engine.h"
#include "backend_cuda/comm/launch.h"
#include "backend_cuda/cuda_backend.h"
#include "benchmark/benchmark.h"
#include "benchmarks/cuda_benchmark_programs.h"
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
  std::unique_ptr<Module> module = ParseOrDie(bench::GemmProgram(m, n, k));
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
  std::unique_ptr<Module> module = ParseOrDie(bench::ExecutorPerOpProgram(ops / 4));
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

// The interpreter moves inputs in (ToDevice) and results out (ToHost) on every run. For
// timing a schedule rather than PCIe, this backend hands it inputs uploaded once (by the
// host tensor's address) and, for results, waits for the GPU and returns an empty host
// tensor: a run then costs dispatch plus GPU time, and the device-side results are
// dropped (they are checked by cuda_backend_test and the example runs).
class ResidentBackend : public runtime::Backend {
 public:
  explicit ResidentBackend(cuda::CudaBackend& inner) : inner_(inner) {}
  absl::string_view name() const override { return inner_.name(); }
  bool uses_device_memory() const override { return true; }
  absl::StatusOr<std::vector<Tensor>> RunOp(const Operation& op,
                                            const runtime::OpContext& context,
                                            absl::Span<const Tensor* const> tensors,
                                            absl::Span<const int64_t> indices) override {
    return inner_.RunOp(op, context, tensors, indices);
  }
  // The blocks the cuda backend reads and writes in place, as a run without this wrapper
  // does (and as the sim prices them).
  bool ReadsSlicesInPlace() const override { return inner_.ReadsSlicesInPlace(); }
  absl::StatusOr<bool> RunMatmulInto(const Operation& matmul, const runtime::OpContext& context,
                                     absl::Span<const Tensor* const> tensors,
                                     const Operation& update, int64_t offset,
                                     Tensor& destination) override {
    return inner_.RunMatmulInto(matmul, context, tensors, update, offset, destination);
  }
  absl::StatusOr<std::vector<Tensor>> RunCollective(
      const Operation& op, const runtime::CollectiveContext& context,
      absl::Span<const Tensor* const> parts) override {
    return inner_.RunCollective(op, context, parts);
  }
  absl::StatusOr<Tensor> ToDevice(int64_t device, const Tensor& host) override {
    auto key = std::make_pair(device, static_cast<const void*>(&host));
    auto it = resident_.find(key);
    if (it == resident_.end()) {
      absl::StatusOr<Tensor> uploaded = inner_.ToDevice(device, host);
      if (!uploaded.ok()) return uploaded.status();
      it = resident_.emplace(key, *std::move(uploaded)).first;
    }
    return it->second;
  }
  absl::StatusOr<Tensor> ToHost(const Tensor& value) override {
    if (absl::Status s = inner_.Synchronize(); !s.ok()) return s;
    return Tensor(value.element_type(), {0});
  }

 private:
  cuda::CudaBackend& inner_;
  std::map<std::pair<int64_t, const void*>, Tensor> resident_;
};

void BM_AgGemm(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  const bool pipelined = state.range(0) == 1;
  const bool resident = state.range(1) == 1;
  bench::AgGemmShape shape;
  shape.m = kAgM;
  shape.k = kAgK;
  shape.n = kAgN;
  shape.devices = kAgDevices;
  std::unique_ptr<Module> module = ParseOrDie(pipelined ? bench::PipelinedAgGemmProgram(shape)
                                                        : bench::PlainAgGemmProgram(shape));
  std::unique_ptr<cuda::CudaBackend> backend = Backend({kAgDevices});
  if (module == nullptr || backend == nullptr) {
    state.SkipWithError("setup failed");
    return;
  }
  ResidentBackend resident_backend(*backend);
  runtime::Backend& runner =
      resident ? static_cast<runtime::Backend&>(resident_backend) : *backend;
  runtime::Interpreter interpreter(*module->functions()[0], runner);
  std::vector<std::vector<Tensor>> inputs(kAgDevices);
  for (int64_t d = 0; d < kAgDevices; ++d) {
    inputs[d].push_back(Tensor(ElementType::kBF16, {kAgM / kAgDevices, kAgK}));
    inputs[d].push_back(Tensor(ElementType::kBF16, {kAgK, kAgN / kAgDevices}));
  }
  // Warm-up: allocator, GEMM plans, (copy-engine) transfer streams.
  for (int i = 0; i < 2; ++i) {
    if (!interpreter.Run(inputs).ok()) {
      state.SkipWithError("run failed");
      return;
    }
  }
  for (auto _ : state) {
    if (!interpreter.Run(inputs).ok()) state.SkipWithError("run failed");
  }
  state.SetLabel(absl::StrCat(
      pipelined ? "pipelined (shift ring, 2 streams)" : "plain (all_gather, matmul)",
      resident ? "; device-resident: schedule only" : "; host inputs in, results out",
      "; 4 devices on one GPU (their shifts are on-device copies)"));
  state.counters["TFLOPS"] = benchmark::Counter(2.0 * kAgM * kAgN * kAgK / 1e12 * state.iterations(),
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AgGemm)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"pipelined", "resident"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// ---- shift bandwidth: copy engines vs NCCL ------------------------------------------

void BM_ShiftBandwidth(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  const bool nccl = state.range(0) == 1;
  const int64_t bytes = state.range(1) << 20;
  int gpus = 0;
  cudaGetDeviceCount(&gpus);
  const int64_t ranks = gpus >= 2 ? gpus : 4;
  cuda::comm::LaunchInfo launch;
  absl::StatusOr<cuda::comm::DevicePlan> plan = cuda::comm::PlanDevices(launch, ranks, gpus);
  if (!plan.ok()) {
    state.SkipWithError(std::string(plan.status().message()).c_str());
    return;
  }
  cuda::comm::EngineOptions options;
  options.p2p = nccl ? cuda::comm::P2pTransport::kNccl : cuda::comm::P2pTransport::kCopyEngine;
  options.timeout = absl::Seconds(120);
  auto engine = cuda::comm::CollectiveEngine::Create(launch, *plan, {ranks}, options);
  if (!engine.ok()) {
    state.SkipWithError(std::string(engine.status().message()).c_str());
    return;
  }
  std::vector<int64_t> group;
  std::vector<cuda::comm::MemberBuffers> members;
  std::vector<void*> allocations;
  bool ok = true;
  for (const cuda::comm::LocalDevice& d : plan->local) {
    cudaSetDevice(d.gpu);
    void *send = nullptr, *recv = nullptr;
    cudaStream_t stream = nullptr;
    ok &= cudaMalloc(&send, bytes) == cudaSuccess && cudaMalloc(&recv, bytes) == cudaSuccess &&
          cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess;
    if (send != nullptr) cudaMemset(send, 1, bytes);
    allocations.push_back(send);
    allocations.push_back(recv);
    group.push_back(d.mesh_device);
    members.push_back({d.mesh_device, send, recv, stream});
  }
  auto shift = [&] {
    absl::Status s = (*engine)->Shift(group, members, bytes / 4, ElementType::kF32, 1);
    ok &= s.ok();
  };
  const int reps = 10;
  for (int i = 0; i < 3; ++i) shift();  // warm-up: communicators, transfer streams
  ok &= (*engine)->WaitAll().ok();
  double seconds = 0;
  for (auto _ : state) {
    const absl::Time start = absl::Now();
    for (int i = 0; i < reps; ++i) shift();
    ok &= (*engine)->WaitAll().ok();
    seconds = absl::ToDoubleSeconds(absl::Now() - start) / reps;
    state.SetIterationTime(seconds);
  }
  if (!ok) state.SkipWithError("a shift failed");
  state.counters["GBps_per_rank"] = seconds > 0 ? bytes / seconds / 1e9 : 0;
  state.counters["GBps_total"] = seconds > 0 ? ranks * bytes / seconds / 1e9 : 0;
  const cuda::comm::Route route = (*engine)->RouteOf(cuda::comm::CollectiveKind::kShift, group);
  state.SetLabel(absl::StrCat(
      DeviceName(), "; ", ranks, " ranks ",
      gpus >= 2 ? "on separate GPUs (peer links: NVLink or PCIe)"
                : "sharing one GPU (intra-device copies, not NVLink)",
      "; ", cuda::comm::RouteName(route)));
  for (const cuda::comm::MemberBuffers& m : members) {
    if (m.stream != nullptr) cudaStreamDestroy(m.stream);
  }
  engine->reset();
  for (void* p : allocations) cudaFree(p);
}
BENCHMARK(BM_ShiftBandwidth)
    ->ArgsProduct({{0, 1}, {1, 16, 256}})
    ->ArgNames({"p2p", "MiB"})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace commir
