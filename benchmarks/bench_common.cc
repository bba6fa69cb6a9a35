#include "benchmarks/bench_common.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "commir/diagnostics.h"
#include "parser/parser.h"

namespace commir::bench {
namespace {

struct ProgramSlot {
  ProgramKind kind = ProgramKind::kElementwiseChain;
  int64_t num_ops = -1;
  GeneratedProgram program;
  std::unique_ptr<Module> module;  // parsed lazily by CachedModule
};

ProgramSlot& Slot() {
  static ProgramSlot* slot = new ProgramSlot();
  return *slot;
}

void CountOpsInBlock(const Block& block, int64_t& count) {
  for (const Operation* op : block) {
    ++count;
    for (int r = 0; r < op->num_regions(); ++r) CountOpsInBlock(*op->region(r), count);
  }
}

}  // namespace

void ApplySizes(benchmark::internal::Benchmark* b) {
  b->ArgName("ops");
  for (int64_t n : {1000, 10000, 100000, 1000000}) b->Arg(n);
  b->Unit(benchmark::kMillisecond);
}

const GeneratedProgram& Program(ProgramKind kind, int64_t num_ops) {
  ProgramSlot& slot = Slot();
  if (slot.kind != kind || slot.num_ops != num_ops) {
    // Free the previous program (and its module) before building the next one, so
    // that at most one 1M-op input is alive.
    slot.module.reset();
    slot.program = GeneratedProgram();
    slot.program = kind == ProgramKind::kElementwiseChain ? GenerateElementwiseChain(num_ops)
                                                          : GenerateCseDceMix(num_ops);
    slot.kind = kind;
    slot.num_ops = num_ops;
  }
  return slot.program;
}

std::unique_ptr<Module> ParseChecked(benchmark::State& state, const std::string& text,
                                     bool verify) {
  DiagnosticEngine diagnostics;
  ParseOptions options;
  options.verify = verify;
  std::unique_ptr<Module> module = ParseModule(text, diagnostics, options);
  if (module == nullptr) {
    std::string message = diagnostics.Render("<generated>", text);
    if (message.size() > 2000) message.resize(2000);
    state.SkipWithError(("the generated program does not parse:\n" + message).c_str());
  }
  return module;
}

Module* CachedModule(benchmark::State& state, ProgramKind kind, int64_t num_ops) {
  const GeneratedProgram& program = Program(kind, num_ops);
  ProgramSlot& slot = Slot();
  if (slot.module == nullptr) slot.module = ParseChecked(state, program.text);
  return slot.module.get();
}

int64_t CountOps(const Module& module) {
  int64_t count = 0;
  for (const Function* function : module.functions()) CountOpsInBlock(*function->body(), count);
  return count;
}

void SetThroughput(benchmark::State& state, int64_t num_ops, int64_t bytes_per_iteration) {
  state.SetItemsProcessed(state.iterations() * num_ops);
  state.SetBytesProcessed(state.iterations() * bytes_per_iteration);
}

void ReportMemory(benchmark::State& state, const std::string& key, int64_t num_ops,
                  const std::function<void()>& stage, bool report_retained,
                  const std::function<void()>& prepare) {
  if (!HeapMeter::Available()) return;
  static auto* cache = new absl::flat_hash_map<std::string, HeapStats>();
  std::string full_key = key + "/" + std::to_string(num_ops);
  auto it = cache->find(full_key);
  if (it == cache->end()) {
    if (prepare) prepare();
    HeapMeter meter;
    stage();
    it = cache->emplace(full_key, meter.Stop()).first;
  }
  const HeapStats& stats = it->second;
  double n = static_cast<double>(num_ops);
  state.counters["bytes_per_op"] = benchmark::Counter(static_cast<double>(stats.peak_bytes) / n);
  state.counters["allocs_per_op"] =
      benchmark::Counter(static_cast<double>(stats.allocations) / n);
  if (report_retained) {
    state.counters["ir_bytes_per_op"] =
        benchmark::Counter(static_cast<double>(stats.net_bytes) / n);
  }
}

}  // namespace commir::bench
