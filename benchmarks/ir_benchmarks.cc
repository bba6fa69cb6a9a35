// Lex, parse, verify and print of generated N-op elementwise chains
// (benchmarks/program_generator.h), N = 1k, 10k, 100k, 1M.
//
// Reported per benchmark: items_per_second (ops/s), bytes_per_second (program text
// bytes/s), bytes_per_op / allocs_per_op (heap needed by one run of the stage, see
// bench_common.h), and for BM_Parse ir_bytes_per_op (the heap held by the parsed module).
//
//   bazel run -c opt //benchmarks:ir_benchmarks
//   bazel run -c opt //benchmarks:ir_benchmarks -- --benchmark_filter='BM_Parse/'
//
// Each benchmark checks its result once (token count, op count, no diagnostics, printed
// text identical to the canonical input) and fails with SkipWithError otherwise, which
// makes the smoke test (//benchmarks:ir_benchmarks_smoke_test) fail.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "benchmarks/bench_common.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "parser/lexer.h"
#include "parser/parser.h"

namespace commir::bench {
namespace {

constexpr ProgramKind kChain = ProgramKind::kElementwiseChain;

void BM_Lex(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::string& text = Program(kChain, n).text;
  {
    std::vector<Token> tokens = Tokenize(text);
    if (tokens.empty() || !tokens.back().Is(TokenKind::kEof)) {
      state.SkipWithError("the token stream does not end with end-of-file");
      return;
    }
    for (const Token& token : tokens) {
      if (token.Is(TokenKind::kError)) {
        state.SkipWithError("the generated program has an invalid token");
        return;
      }
    }
  }
  ReportMemory(state, "lex", n, [&] {
    std::vector<Token> tokens = Tokenize(text);
    benchmark::DoNotOptimize(tokens.data());
  });
  for (auto _ : state) {
    std::vector<Token> tokens = Tokenize(text);
    benchmark::DoNotOptimize(tokens.data());
  }
  SetThroughput(state, n, static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_Lex)->Apply(ApplySizes);

// Lexing and parsing into the SSA graph (with type inference), without the verifier.
void BM_Parse(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::string& text = Program(kChain, n).text;
  {
    std::unique_ptr<Module> module = ParseChecked(state, text, /*verify=*/false);
    if (module == nullptr) return;
    if (CountOps(*module) != n + 1) {
      state.SkipWithError("the parsed module does not have N ops plus the return");
      return;
    }
  }
  std::unique_ptr<Module> held;
  ReportMemory(
      state, "parse", n,
      [&] {
        DiagnosticEngine diagnostics;
        held = ParseModule(text, diagnostics, ParseOptions{.verify = false});
      },
      /*report_retained=*/true);
  held.reset();
  for (auto _ : state) {
    DiagnosticEngine diagnostics;
    std::unique_ptr<Module> module =
        ParseModule(text, diagnostics, ParseOptions{.verify = false});
    benchmark::DoNotOptimize(module.get());
    // Tearing down the module is not part of parsing.
    state.PauseTiming();
    module.reset();
    state.ResumeTiming();
  }
  SetThroughput(state, n, static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_Parse)->Apply(ApplySizes);

void BM_Verify(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::string& text = Program(kChain, n).text;
  Module* module = CachedModule(state, kChain, n);
  if (module == nullptr) return;
  ReportMemory(state, "verify", n, [&] {
    DiagnosticEngine diagnostics;
    VerifyModule(*module, diagnostics);
  });
  for (auto _ : state) {
    DiagnosticEngine diagnostics;
    VerifyModule(*module, diagnostics);
    if (diagnostics.has_errors()) {
      state.SkipWithError("the verifier reported errors on the generated program");
      break;
    }
  }
  SetThroughput(state, n, static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_Verify)->Apply(ApplySizes);

void BM_Print(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::string& text = Program(kChain, n).text;
  Module* module = CachedModule(state, kChain, n);
  if (module == nullptr) return;
  if (PrintModule(*module) != text) {
    state.SkipWithError("printing the parsed program does not reproduce its canonical text");
    return;
  }
  ReportMemory(state, "print", n, [&] {
    std::string out = PrintModule(*module);
    benchmark::DoNotOptimize(out.data());
  });
  for (auto _ : state) {
    std::string out = PrintModule(*module);
    benchmark::DoNotOptimize(out.data());
  }
  // Bytes written (the same as read: the input is canonical).
  SetThroughput(state, n, static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_Print)->Apply(ApplySizes);

// What `commir-opt FILE` does without a pipeline, minus the file I/O: parse, verify,
// print (module teardown excluded, as in BM_Parse).
void BM_ParseVerifyPrint(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::string& text = Program(kChain, n).text;
  ReportMemory(state, "parse_verify_print", n, [&] {
    DiagnosticEngine diagnostics;
    std::unique_ptr<Module> module = ParseModule(text, diagnostics);
    if (module != nullptr) {
      std::string out = PrintModule(*module);
      benchmark::DoNotOptimize(out.data());
    }
  });
  for (auto _ : state) {
    DiagnosticEngine diagnostics;
    std::unique_ptr<Module> module = ParseModule(text, diagnostics);
    if (module == nullptr) {
      state.SkipWithError("the generated program does not parse and verify");
      break;
    }
    std::string out = PrintModule(*module);
    benchmark::DoNotOptimize(out.data());
    state.PauseTiming();
    module.reset();
    state.ResumeTiming();
  }
  SetThroughput(state, n, static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_ParseVerifyPrint)->Apply(ApplySizes);

}  // namespace
}  // namespace commir::bench
