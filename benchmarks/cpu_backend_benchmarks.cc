// Benchmarks of the cpu backend behind commir-run (runtime::Interpreter over
// cpu::CpuBackend), each against the same work done directly, in the same run:
//
//   BM_MatMulBlas/m/k/n                 cblas_sgemm on preallocated f32 buffers (OpenBLAS,
//                                       every core; the speed baseline)
//   BM_MatMulBlasOneThread/m/k/n        the same with openblas_set_num_threads(1)
//   BM_MatMulCpuBackend/{f32,bf16}/...  `%c = matmul(%a, %b)` in a global function run by
//                                       the interpreter; every iteration also times the
//                                       direct cblas_sgemm on the same operand buffers (for
//                                       bf16: on the operands widened to f32) right after
//                                       it, so `vs_blas` = interpreter time / sgemm time is
//                                       measured interleaved, under the same conditions.
//                                       Its result must equal cpu::Gemm's bit for bit (the
//                                       same code path) and OpenBLAS's within 1e-5 (f32)
//   BM_MatMulGemm/<isa>/m/k/n           cpu::Gemm, the cpu backend's reproducible GEMM, with
//                                       each kernel this CPU runs (baseline, avx2, avx512):
//                                       the same bits, different speeds; same buffers
//   BM_Attention/...                    `attention(%q, %k, %v)` (causal or not, MHA or GQA)
//                                       through the interpreter, interleaved with a direct
//                                       cpu::Attention call on the same tensors (vs_kernel)
//   BM_ElementwiseChain/devices/elems/ops
//                                       interpretation overhead: N elementwise ops on tiny
//                                       tensors in a global function (devices:1) or a spmd
//                                       function on 8 devices
//   BM_ElementwiseChainKernels/elems/ops
//                                       the same chain as direct kernel calls (the floor)
//   BM_Collective/<op>/devices/bytes    CpuBackend::RunCollective for one device group,
//                                       `bytes` per device (the operand each device holds)
//
// FLOPs and communicated bytes come from the ops' cost model (OpDef::cost), evaluated
// on the parsed op. Matmul and attention report the interpreter's time (manual time,
// wall clock; OpenBLAS uses every core); collectives report wall time; the chains CPU
// time (single-threaded). Every benchmark checks its result once against the direct
// computation before timing and fails (SkipWithError) on a mismatch.
//
// Counters:
//   flops            FLOP/s (cost model) through the interpreter
//   blas_flops       FLOP/s of the interleaved direct cblas_sgemm
//   vs_blas          interpreter time / direct sgemm time (1.0 = no overhead)
//   kernel_flops     FLOP/s of the interleaved direct cpu::Attention call
//   vs_kernel        interpreter time / direct kernel time
//   items_per_second attention: query tokens/s (B * Sq per run); chains: ops executed/s
//                    (program ops x devices)
//   time_per_op      chains: seconds per op executed on one device (time / (ops x devices))
//   bytes_per_second collectives: bytes each device sends per the cost model (ring
//                    algorithms; NCCL's "bus bandwidth")
//   total_comm       collectives: the same summed over the group's devices
//   host_traffic     collectives: operand bytes read plus result bytes written, all
//                    devices (what the in-process implementation touches)
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "backend_cpu/blas_gemm.h"
#include "backend_cpu/cpu_backend.h"
#include "backend_cpu/kernels.h"
#include "commir/element_type.h"
#include "commir/ir.h"
#include "commir/op_cost.h"
#include "commir/op_def.h"
#include "parser/parser.h"
#include "runtime/interpreter.h"
#include "runtime/random_inputs.h"
#include "runtime/tensor.h"

namespace commir::bench {
namespace {

using runtime::Tensor;
using Clock = std::chrono::steady_clock;
using Inputs = std::vector<std::vector<Tensor>>;  // [device][argument]

double Seconds(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// ---------------------------------------------------------------------------------------
// Shared helpers

// A parsed program and the function a benchmark runs.
struct Program {
  std::unique_ptr<Module> module;
  const Function* function = nullptr;

  // The function's first op: the op under test in the one-op programs.
  const Operation& first_op() const { return *function->body()->front(); }
};

// Parses `text` and finds @`name`; false after SkipWithError on failure.
bool ParseProgram(benchmark::State& state, const std::string& text, absl::string_view name,
                  Program& program) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "<generated>");
  if (!module.ok()) {
    state.SkipWithError(absl::StrCat("the generated program does not parse:\n",
                                     module.status().message().substr(0, 2000))
                            .c_str());
    return false;
  }
  program.module = *std::move(module);
  program.function = program.module->FindFunction(name);
  if (program.function == nullptr) {
    state.SkipWithError(absl::StrCat("the generated program has no @", name).c_str());
    return false;
  }
  return true;
}


// Random inputs in [-1, 1) for every device: the body arguments' (per-device) types.
// With `same_on_every_device` each device gets the same values (replicated arguments);
// otherwise device d's values come from seed d + 1 (sharded or partial arguments).
Inputs RandomInputs(const Function& function, int64_t num_devices, bool same_on_every_device) {
  const Block& body = *function.body();
  Inputs inputs(static_cast<size_t>(num_devices));
  for (int64_t d = 0; d < num_devices; ++d) {
    const uint64_t seed = same_on_every_device ? 1 : static_cast<uint64_t>(d) + 1;
    for (int i = 0; i < body.num_arguments(); ++i) {
      const Type type = body.argument(i)->type();
      inputs[d].push_back(runtime::RandomGlobalTensor(seed, i, type.element_type(), type.dims()));
    }
  }
  return inputs;
}

// Runs the interpreter once outside the timing; false after SkipWithError on failure.
bool RunOnce(benchmark::State& state, runtime::Interpreter& interpreter, const Inputs& inputs,
             std::vector<std::vector<Tensor>>& outputs) {
  absl::StatusOr<std::vector<std::vector<Tensor>>> result = interpreter.Run(inputs);
  if (!result.ok()) {
    state.SkipWithError(
        absl::StrCat("the interpreter failed: ", result.status().message().substr(0, 2000))
            .c_str());
    return false;
  }
  outputs = *std::move(result);
  return true;
}

// Largest |a - b| over two tensors of one shape, relative to the largest |b| (at least 1).
double MaxRelativeDifference(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.ToFloat();
  const std::vector<float> y = b.ToFloat();
  double max_diff = 0, max_ref = 1;
  for (size_t i = 0; i < x.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(x[i]) - y[i]));
    max_ref = std::max(max_ref, std::abs(static_cast<double>(y[i])));
  }
  return max_diff / max_ref;
}

// Checks that `actual` (the interpreter's) matches `expected` (the direct computation's):
// the same shape and type, and equal up to `tolerance` relative to the largest value.
bool CheckClose(benchmark::State& state, const Tensor& actual, const Tensor& expected,
                double tolerance, absl::string_view what) {
  if (actual.element_type() != expected.element_type() || actual.shape() != expected.shape()) {
    state.SkipWithError(absl::StrCat(what, ": the interpreter returned ",
                                     actual.DebugTypeString(), ", the direct call ",
                                     expected.DebugTypeString())
                            .c_str());
    return false;
  }
  const double diff = MaxRelativeDifference(actual, expected);
  if (!(diff <= tolerance)) {
    state.SkipWithError(absl::StrFormat("%s: the result differs from the direct "
                                        "call's by %g (relative), more than %g",
                                        what, diff, tolerance)
                            .c_str());
    return false;
  }
  return true;
}

std::string TypeString(ElementType type, absl::Span<const int64_t> dims) {
  return absl::StrCat(ElementTypeName(type), "[", absl::StrJoin(dims, ", "), "]");
}

// ---------------------------------------------------------------------------------------
// Matmul: through the interpreter vs cblas_sgemm

// C[m, n] = A[m, k] B[k, n], row-major: the call the cpu backend's f32 matmul makes.
void DirectSgemm(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(k),
              b, static_cast<blasint>(n), 0.0f, c, static_cast<blasint>(n));
}

void MatMulSizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "k", "n"});
  for (int64_t s : {256, 512, 1024}) b->Args({s, s, s});
  // A Llama-like projection: 2048 tokens, hidden 4096, a 1024-wide output slice.
  b->Args({2048, 4096, 1024});
  b->Unit(benchmark::kMillisecond);
}

void BM_MatMulBlas(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const Tensor a = runtime::RandomGlobalTensor(1, 0, ElementType::kF32, {m, k});
  const Tensor b = runtime::RandomGlobalTensor(1, 1, ElementType::kF32, {k, n});
  std::vector<float> c(static_cast<size_t>(m * n));
  for (auto _ : state) {
    DirectSgemm(m, n, k, a.data<float>(), b.data<float>(), c.data());
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  // 2 m n k, as in the matmul cost model.
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  state.counters["flops"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MatMulBlas)->Apply(MatMulSizes)->UseRealTime();

void BM_MatMulBlasOneThread(benchmark::State& state) {
  const int previous = openblas_get_num_threads();
  openblas_set_num_threads(1);
  BM_MatMulBlas(state);
  openblas_set_num_threads(previous);
}
BENCHMARK(BM_MatMulBlasOneThread)->Apply(MatMulSizes)->UseRealTime();

// What the cpu backend's matmul calls (backend_cpu/blas_gemm.h: the same bits on every
// machine), once per instruction set this CPU runs; compare with BM_MatMulBlas of the
// same run.
void BM_MatMulGemm(benchmark::State& state, cpu::GemmIsa isa) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const Tensor a = runtime::RandomGlobalTensor(1, 0, ElementType::kF32, {m, k});
  const Tensor b = runtime::RandomGlobalTensor(1, 1, ElementType::kF32, {k, n});
  std::vector<float> c(static_cast<size_t>(m * n));
  for (auto _ : state) {
    cpu::GemmWithIsa(isa, false, false, m, n, k, 1.0f, a.data<float>(), k, b.data<float>(), n,
                     c.data(), n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  state.counters["flops"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate);
}
const bool kMatMulGemmRegistered = [] {
  for (const cpu::GemmIsa isa : cpu::SupportedGemmIsas()) {
    benchmark::RegisterBenchmark(
        absl::StrCat("BM_MatMulGemm/", cpu::GemmIsaName(isa)).c_str(),
        [isa](benchmark::State& state) { BM_MatMulGemm(state, isa); })
        ->Apply(MatMulSizes)
        ->UseRealTime();
  }
  return true;
}();

void BM_MatMulCpuBackend(benchmark::State& state, ElementType type) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const std::string text = absl::StrFormat(
      "func @matmul(%%a: %s, %%b: %s) -> %s {\n  %%c = matmul(%%a, %%b)\n  return %%c\n}\n",
      TypeString(type, {m, k}), TypeString(type, {k, n}), TypeString(type, {m, n}));
  Program program;
  if (!ParseProgram(state, text, "matmul", program)) return;
  const double flops = EstimateOpCost(program.first_op(), *program.function).flops;

  cpu::CpuBackend backend;
  runtime::Interpreter interpreter(*program.function, backend);
  const Inputs inputs = RandomInputs(*program.function, 1, true);
  // The direct calls read the interpreter's own input buffers for f32; for bf16 the
  // operands widened to f32 once (what the kernel computes on).
  std::vector<float> a_wide, b_wide;
  const float* a = nullptr;
  const float* b = nullptr;
  if (type == ElementType::kF32) {
    a = inputs[0][0].data<float>();
    b = inputs[0][1].data<float>();
  } else {
    a_wide = inputs[0][0].ToFloat();
    b_wide = inputs[0][1].ToFloat();
    a = a_wide.data();
    b = b_wide.data();
  }
  std::vector<float> c(static_cast<size_t>(m * n));

  {
    std::vector<std::vector<Tensor>> outputs;
    if (!RunOnce(state, interpreter, inputs, outputs)) return;
    // The interpreter runs the backend's GEMM and rounds once to the element type: the
    // same code path called directly gives the same bits, on every machine.
    std::vector<float> gemm(static_cast<size_t>(m * n));
    cpu::Gemm(false, false, m, n, k, 1.0f, a, k, b, n, gemm.data(), n);
    const std::vector<float> interpreted = outputs[0][0].ToFloat();
    const std::vector<float> direct = Tensor::FromFloat(type, {m, n}, gemm).ToFloat();
    if (interpreted.size() != direct.size() ||
        std::memcmp(interpreted.data(), direct.data(), direct.size() * sizeof(float)) != 0) {
      state.SkipWithError("matmul: the interpreter's result is not the same bits as the "
                          "backend's GEMM called directly");
      return;
    }
    // OpenBLAS, the speed baseline, adds in another order (one that depends on the CPU
    // model): close in f32, before any rounding to the element type.
    DirectSgemm(m, n, k, a, b, c.data());
    if (!CheckClose(state, Tensor::FromFloat(ElementType::kF32, {m, n}, gemm),
                    Tensor::FromFloat(ElementType::kF32, {m, n}, c), 1e-5, "OpenBLAS sgemm")) {
      return;
    }
  }

  double interpreter_seconds = 0, blas_seconds = 0;
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    {
      absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(inputs);
      if (!outputs.ok()) {
        state.SkipWithError(std::string(outputs.status().message()).c_str());
        break;
      }
      benchmark::DoNotOptimize(outputs->data());
    }  // the result is freed inside the interpreter's timing
    const Clock::time_point middle = Clock::now();
    DirectSgemm(m, n, k, a, b, c.data());
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
    const Clock::time_point end = Clock::now();
    state.SetIterationTime(Seconds(start, middle));
    interpreter_seconds += Seconds(start, middle);
    blas_seconds += Seconds(middle, end);
  }
  if (state.iterations() == 0 || blas_seconds <= 0) return;
  const double total_flops = flops * static_cast<double>(state.iterations());
  state.counters["flops"] = benchmark::Counter(total_flops, benchmark::Counter::kIsRate);
  // Rates are divided by the (manual) interpreter time: scaled so this one reads as
  // total_flops / blas_seconds.
  state.counters["blas_flops"] = benchmark::Counter(
      total_flops * interpreter_seconds / blas_seconds, benchmark::Counter::kIsRate);
  state.counters["vs_blas"] = benchmark::Counter(interpreter_seconds / blas_seconds);
}
BENCHMARK_CAPTURE(BM_MatMulCpuBackend, f32, ElementType::kF32)
    ->Apply(MatMulSizes)
    ->UseManualTime();
BENCHMARK_CAPTURE(BM_MatMulCpuBackend, bf16, ElementType::kBF16)
    ->Apply(MatMulSizes)
    ->UseManualTime();

// ---------------------------------------------------------------------------------------
// Attention: through the interpreter vs cpu::Attention

void AttentionSizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"batch", "heads", "kv_heads", "seq", "head_dim", "causal"});
  for (int64_t seq : {512, 1024}) {
    for (int64_t kv_heads : {8, 2}) {  // multi-head and grouped-query (4 heads per kv head)
      for (int64_t causal : {0, 1}) b->Args({1, 8, kv_heads, seq, 64, causal});
    }
  }
  b->Unit(benchmark::kMillisecond);
}

void BM_Attention(benchmark::State& state) {
  const int64_t batch = state.range(0), heads = state.range(1), kv_heads = state.range(2);
  const int64_t seq = state.range(3), head_dim = state.range(4);
  const bool causal = state.range(5) != 0;
  const ElementType f32 = ElementType::kF32;
  const std::string q_type = TypeString(f32, {batch, heads, seq, head_dim});
  const std::string kv_type = TypeString(f32, {batch, kv_heads, seq, head_dim});
  const std::string text = absl::StrFormat(
      "func @attention(%%q: %s, %%k: %s, %%v: %s) -> %s {\n"
      "  %%o = attention(%%q, %%k, %%v)%s\n"
      "  return %%o\n"
      "}\n",
      q_type, kv_type, kv_type, q_type, causal ? " {causal}" : "");
  Program program;
  if (!ParseProgram(state, text, "attention", program)) return;
  const double flops = EstimateOpCost(program.first_op(), *program.function).flops;

  cpu::CpuBackend backend;
  runtime::Interpreter interpreter(*program.function, backend);
  const Inputs inputs = RandomInputs(*program.function, 1, true);
  const Tensor& q = inputs[0][0];
  const Tensor& k = inputs[0][1];
  const Tensor& v = inputs[0][2];
  cpu::AttentionOptions options;
  options.causal = causal;

  {
    std::vector<std::vector<Tensor>> outputs;
    if (!RunOnce(state, interpreter, inputs, outputs)) return;
    absl::StatusOr<cpu::AttentionResult> direct = cpu::Attention(q, k, v, options);
    if (!direct.ok()) {
      state.SkipWithError(std::string(direct.status().message()).c_str());
      return;
    }
    if (!CheckClose(state, outputs[0][0], direct->output, 1e-6, "attention")) return;
  }

  double interpreter_seconds = 0, kernel_seconds = 0;
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    {
      absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(inputs);
      if (!outputs.ok()) {
        state.SkipWithError(std::string(outputs.status().message()).c_str());
        break;
      }
      benchmark::DoNotOptimize(outputs->data());
    }
    const Clock::time_point middle = Clock::now();
    {
      absl::StatusOr<cpu::AttentionResult> direct = cpu::Attention(q, k, v, options);
      benchmark::DoNotOptimize(direct.ok());
    }
    const Clock::time_point end = Clock::now();
    state.SetIterationTime(Seconds(start, middle));
    interpreter_seconds += Seconds(start, middle);
    kernel_seconds += Seconds(middle, end);
  }
  if (state.iterations() == 0 || kernel_seconds <= 0) return;
  const double iterations = static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations() * batch * seq);  // query tokens
  state.counters["flops"] = benchmark::Counter(flops * iterations, benchmark::Counter::kIsRate);
  state.counters["kernel_flops"] = benchmark::Counter(
      flops * iterations * interpreter_seconds / kernel_seconds, benchmark::Counter::kIsRate);
  state.counters["vs_kernel"] = benchmark::Counter(interpreter_seconds / kernel_seconds);
}
BENCHMARK(BM_Attention)->Apply(AttentionSizes)->UseManualTime();

// ---------------------------------------------------------------------------------------
// Interpretation overhead: a chain of elementwise ops on tiny tensors

// The chain cycles through five ops, each on the previous result (%x for the first) and
// an argument or a literal; tanh keeps the values bounded.
enum class ChainStep { kAddY, kMulHalf, kTanh, kSubX, kMaxX };
constexpr ChainStep kChainCycle[] = {ChainStep::kAddY, ChainStep::kMulHalf, ChainStep::kTanh,
                                     ChainStep::kSubX, ChainStep::kMaxX};

ChainStep ChainStepAt(int64_t i) { return kChainCycle[i % 5]; }

// A global function (devices = 1) or a spmd function on a 1-D mesh of `devices` with
// replicated arguments: `ops` ops on f32[elems].
std::string ChainProgram(int64_t devices, int64_t elems, int64_t ops) {
  const std::string type = TypeString(ElementType::kF32, {elems});
  std::string text;
  if (devices > 1) absl::StrAppend(&text, "mesh @m(x=", devices, ")\n\nspmd ");
  absl::StrAppend(&text, "func @chain(%x: ", type, ", %y: ", type, ") -> ", type, " {\n");
  std::string prev = "%x";
  for (int64_t i = 0; i < ops; ++i) {
    const std::string name = absl::StrCat("%v", i);
    switch (ChainStepAt(i)) {
      case ChainStep::kAddY: absl::StrAppend(&text, "  ", name, " = add(", prev, ", %y)\n"); break;
      case ChainStep::kMulHalf:
        absl::StrAppend(&text, "  ", name, " = mul(", prev, ", 0.5)\n");
        break;
      case ChainStep::kTanh: absl::StrAppend(&text, "  ", name, " = tanh(", prev, ")\n"); break;
      case ChainStep::kSubX: absl::StrAppend(&text, "  ", name, " = sub(", prev, ", %x)\n"); break;
      case ChainStep::kMaxX: absl::StrAppend(&text, "  ", name, " = max(", prev, ", %x)\n"); break;
    }
    prev = name;
  }
  absl::StrAppend(&text, "  return ", prev, "\n}\n");
  return text;
}

// The chain as direct kernel calls; `half` is the literal 0.5 as a rank-0 tensor.
absl::StatusOr<Tensor> KernelChain(const Tensor& x, const Tensor& y, const Tensor& half,
                                   int64_t ops) {
  Tensor prev = x;
  for (int64_t i = 0; i < ops; ++i) {
    absl::StatusOr<Tensor> next;
    switch (ChainStepAt(i)) {
      case ChainStep::kAddY: next = cpu::Binary(ElementwiseFn::kAdd, prev, y); break;
      case ChainStep::kMulHalf: next = cpu::Binary(ElementwiseFn::kMul, prev, half); break;
      case ChainStep::kTanh: next = cpu::Unary(ElementwiseFn::kTanh, prev); break;
      case ChainStep::kSubX: next = cpu::Binary(ElementwiseFn::kSub, prev, x); break;
      case ChainStep::kMaxX: next = cpu::Binary(ElementwiseFn::kMax, prev, x); break;
    }
    if (!next.ok()) return next.status();
    prev = *std::move(next);
  }
  return prev;
}

Tensor Half() { return Tensor::FromFloat(ElementType::kF32, {}, {0.5f}); }

// Seconds per op executed on one device, as a counter over the benchmark's own time.
benchmark::Counter TimePerOp(const benchmark::State& state, int64_t ops_per_iteration) {
  return benchmark::Counter(static_cast<double>(state.iterations() * ops_per_iteration),
                            benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_ElementwiseChain(benchmark::State& state) {
  const int64_t devices = state.range(0), elems = state.range(1), ops = state.range(2);
  Program program;
  if (!ParseProgram(state, ChainProgram(devices, elems, ops), "chain", program)) return;
  cpu::CpuBackend backend;
  runtime::Interpreter interpreter(*program.function, backend);
  if (interpreter.num_devices() != devices) {
    state.SkipWithError(absl::StrCat("the chain runs on ", interpreter.num_devices(),
                                     " devices, expected ", devices)
                            .c_str());
    return;
  }
  const Inputs inputs = RandomInputs(*program.function, devices, true);
  {
    std::vector<std::vector<Tensor>> outputs;
    if (!RunOnce(state, interpreter, inputs, outputs)) return;
    absl::StatusOr<Tensor> direct = KernelChain(inputs[0][0], inputs[0][1], Half(), ops);
    if (!direct.ok()) {
      state.SkipWithError(std::string(direct.status().message()).c_str());
      return;
    }
    for (int64_t d = 0; d < devices; ++d) {
      if (!outputs[d][0].BitwiseEqual(*direct)) {
        state.SkipWithError(
            absl::StrCat("device ", d, ": the interpreted chain differs from the kernel chain")
                .c_str());
        return;
      }
    }
  }
  for (auto _ : state) {
    absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(inputs);
    if (!outputs.ok()) {
      state.SkipWithError(std::string(outputs.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(outputs->data());
  }
  state.SetItemsProcessed(state.iterations() * ops * devices);
  state.counters["time_per_op"] = TimePerOp(state, ops * devices);
}
BENCHMARK(BM_ElementwiseChain)
    ->ArgNames({"devices", "elems", "ops"})
    ->ArgsProduct({{1, 8}, {1, 4}, {1000}})
    ->Unit(benchmark::kMicrosecond);

void BM_ElementwiseChainKernels(benchmark::State& state) {
  const int64_t elems = state.range(0), ops = state.range(1);
  const Tensor x = runtime::RandomGlobalTensor(1, 0, ElementType::kF32, {elems});
  const Tensor y = runtime::RandomGlobalTensor(1, 1, ElementType::kF32, {elems});
  const Tensor half = Half();
  for (auto _ : state) {
    absl::StatusOr<Tensor> result = KernelChain(x, y, half, ops);
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(result->raw_data());
  }
  state.SetItemsProcessed(state.iterations() * ops);
  state.counters["time_per_op"] = TimePerOp(state, ops);
}
BENCHMARK(BM_ElementwiseChainKernels)
    ->ArgNames({"elems", "ops"})
    ->ArgsProduct({{1, 4}, {1000}})
    ->Unit(benchmark::kMicrosecond);

// ---------------------------------------------------------------------------------------
// Collectives: CpuBackend::RunCollective on one group of simulated devices

enum class Collective { kAllGather, kReduceScatter, kAllReduce, kAllToAll, kShift };

// A spmd function on a 1-D mesh of `devices` whose only op is the collective, each
// device holding an f32[rows, 1024] operand (rows = bytes / 4 KiB).
std::string CollectiveProgram(Collective collective, int64_t devices, int64_t rows) {
  const int64_t n = devices;
  std::string arg, result, op;
  switch (collective) {
    case Collective::kAllGather:  // sharded rows -> every device holds them all
      arg = absl::StrFormat("f32[%d@x, 1024]", n * rows);
      result = absl::StrFormat("f32[%d, 1024]", n * rows);
      op = "all_gather(%a) {axis = x, dim = 0}";
      break;
    case Collective::kReduceScatter:  // partial sums -> each device's block of the sum
      arg = absl::StrFormat("f32[%d, 1024] partial(x)", rows);
      result = absl::StrFormat("f32[%d@x, 1024]", rows);
      op = "reduce_scatter(%a) {axis = x, dim = 0}";
      break;
    case Collective::kAllReduce:  // partial sums -> the sum everywhere
      arg = absl::StrFormat("f32[%d, 1024] partial(x)", rows);
      result = absl::StrFormat("f32[%d, 1024]", rows);
      op = "all_reduce(%a) {axis = x}";
      break;
    case Collective::kAllToAll:  // columns sharded -> rows sharded (as in Ulysses attention)
      arg = absl::StrFormat("f32[%d, %d@x]", rows, n * 1024);
      result = absl::StrFormat("f32[%d@x, %d]", rows, n * 1024);
      op = "all_to_all(%a) {axis = x, split_dim = 0, concat_dim = 1}";
      break;
    case Collective::kShift:  // ring step
      arg = absl::StrFormat("f32[%d@x, 1024]", n * rows);
      result = arg;
      op = "shift(%a) {axis = x}";
      break;
  }
  return absl::StrCat("mesh @m(x=", n, ")\n\nspmd func @collective(%a: ", arg, ") -> ", result,
                      " {\n  %r = ", op, "\n  return %r\n}\n");
}

void CollectiveSizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"devices", "bytes"});
  for (int64_t devices : {2, 4, 8}) {
    for (int64_t kib : {64, 256, 1024, 4096, 16384}) b->Args({devices, kib * 1024});
  }
  b->Unit(benchmark::kMicrosecond);
  b->UseRealTime();
}

void BM_Collective(benchmark::State& state, Collective collective) {
  const int64_t devices = state.range(0), bytes = state.range(1);
  const int64_t rows = bytes / (1024 * 4);
  Program program;
  if (!ParseProgram(state, CollectiveProgram(collective, devices, rows), "collective", program)) {
    return;
  }
  const Operation& op = program.first_op();
  const OpCost cost = EstimateOpCost(op, *program.function);
  const Inputs inputs = RandomInputs(*program.function, devices, false);
  std::vector<const Tensor*> parts;
  for (const std::vector<Tensor>& device_inputs : inputs) parts.push_back(&device_inputs[0]);
  if (parts[0]->byte_size() != bytes) {
    state.SkipWithError(absl::StrCat("each device holds ", parts[0]->byte_size(),
                                     " bytes, expected ", bytes)
                            .c_str());
    return;
  }
  cpu::CpuBackend backend;
  {
    // The results have the op's per-device type on every device.
    absl::StatusOr<std::vector<Tensor>> results = backend.RunCollective(op, parts);
    if (!results.ok()) {
      state.SkipWithError(std::string(results.status().message()).c_str());
      return;
    }
    const Type expected = op.result(0)->type();
    if (static_cast<int64_t>(results->size()) != devices) {
      state.SkipWithError(absl::StrCat(results->size(), " results for ", devices, " devices")
                              .c_str());
      return;
    }
    for (const Tensor& result : *results) {
      if (result.element_type() != expected.element_type() || result.shape() != expected.dims()) {
        state.SkipWithError(absl::StrCat("a result is ", result.DebugTypeString(),
                                         ", expected ", expected.ToString())
                                .c_str());
        return;
      }
    }
  }
  for (auto _ : state) {
    absl::StatusOr<std::vector<Tensor>> results = backend.RunCollective(op, parts);
    if (!results.ok()) {
      state.SkipWithError(std::string(results.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(results->data());
  }
  const double iterations = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(iterations * cost.bytes_communicated));
  state.counters["total_comm"] = benchmark::Counter(
      iterations * cost.bytes_communicated * static_cast<double>(devices),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
  state.counters["host_traffic"] = benchmark::Counter(
      iterations * cost.bytes_accessed * static_cast<double>(devices),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
}
BENCHMARK_CAPTURE(BM_Collective, all_gather, Collective::kAllGather)->Apply(CollectiveSizes);
BENCHMARK_CAPTURE(BM_Collective, reduce_scatter, Collective::kReduceScatter)
    ->Apply(CollectiveSizes);
BENCHMARK_CAPTURE(BM_Collective, all_reduce, Collective::kAllReduce)->Apply(CollectiveSizes);
BENCHMARK_CAPTURE(BM_Collective, all_to_all, Collective::kAllToAll)->Apply(CollectiveSizes);
BENCHMARK_CAPTURE(BM_Collective, shift, Collective::kShift)->Apply(CollectiveSizes);

}  // namespace
}  // namespace commir::bench
