// libFuzzer target for the pass pipelines: the partitioner, the schedules and
// combine-all-reduces.
//
// For arbitrary bytes that parse and verify, runs fixed pipelines and requires of each:
//   - no crash or sanitizer report;
//   - a pass may fail (an error status or located errors), but a pipeline that
//     succeeds must leave a module that verifies;
//   - the printed result parses again and printing that reproduces it byte for byte.
// The partitioning pipeline runs first; each schedule pass then runs on a fresh parse
// of its output (or of the input, if partitioning failed), so that every schedule sees
// both global and already-lowered programs. Any violation aborts with the input, the
// pipeline and the offending IR on stderr, so that the reproducer explains itself.
//
//   bazel --output_base=$HOME/.cache/bazel-commir-fuzz build --config=fuzz //transforms/fuzz:pipeline_fuzzer
//   bazel-bin/transforms/fuzz/pipeline_fuzzer -dict=parser/parser_fuzzer.dict CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "commir/diagnostics.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "parser/parser.h"
#include "transforms/pass_manager.h"
#include "transforms/registry/pass_registry.h"
#include "transforms/pipeline.h"
#include "transforms/schedules/schedule_report.h"
#include "transforms/sharding/comm_report.h"
#include "transforms/sharding/lower.h"

namespace {


// Each runs alone on the partitioned program (or the input).
constexpr absl::string_view kSchedulePipelines[] = {
    "pipeline-collective-matmul{chunks=2,streams=2}",
    "ring-collective-matmul{direction=uni}",
    "ring-collective-matmul{direction=bi}",
    "ring-attention",
    "ring-attention{zigzag=true}",
    "ulysses-attention",
    "combine-all-reduces",
    "combine-all-reduces{threshold-bytes=64}",
    "schedule-report",
    "comm-report",
};

[[noreturn]] void Fail(absl::string_view what, absl::string_view pipeline,
                       absl::string_view input, absl::string_view detail) {
  std::fprintf(stderr,
               "pipeline_fuzzer: %.*s\n--- pipeline ---\n%.*s\n--- input ---\n%.*s\n"
               "--- detail ---\n%.*s\n",
               static_cast<int>(what.size()), what.data(), static_cast<int>(pipeline.size()),
               pipeline.data(), static_cast<int>(input.size()), input.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

// Parses and verifies `source`; null if it does not parse or verify.
std::unique_ptr<commir::Module> Parse(absl::string_view source) {
  commir::DiagnosticEngine diagnostics;
  return commir::ParseModule(source, diagnostics, commir::ParseOptions{});
}

// Runs `pipeline` on `source` (which parses and verifies). Returns the printed result,
// or an empty string if a pass failed; aborts on a broken contract.
std::string RunPipeline(absl::string_view pipeline, absl::string_view source) {
  std::unique_ptr<commir::Module> module = Parse(source);
  if (module == nullptr) Fail("a printed module does not parse", pipeline, source, "");
  absl::StatusOr<std::vector<std::unique_ptr<commir::Pass>>> passes =
      commir::ParsePassPipeline(pipeline, commir::RegisteredPasses());
  if (!passes.ok()) Fail("bad pipeline text", pipeline, "", passes.status().ToString());
  // The reports go to a sink, not to stderr (millions of runs).
  std::ostringstream report;
  for (const std::unique_ptr<commir::Pass>& pass : *passes) {
    if (auto* p = dynamic_cast<commir::sharding::CommReportPass*>(pass.get())) {
      p->set_output(&report);
    }
    if (auto* p = dynamic_cast<commir::schedules::ScheduleReportPass*>(pass.get())) {
      p->set_output(&report);
    }
  }
  commir::PassManager manager;
  manager.AddPasses(std::move(passes).value());
  commir::DiagnosticEngine pass_diagnostics;
  if (!manager.Run(*module, pass_diagnostics).ok()) return "";  // failing is allowed

  commir::DiagnosticEngine verifier_diagnostics;
  commir::VerifyModule(*module, verifier_diagnostics);
  const std::string printed = commir::PrintModule(*module);
  if (verifier_diagnostics.has_errors()) {
    Fail("the pipeline succeeded but left an invalid module", pipeline, source,
         printed + "\n" + verifier_diagnostics.Render("out.commir", printed));
  }
  commir::DiagnosticEngine reparse_diagnostics;
  std::unique_ptr<commir::Module> reparsed =
      commir::ParseModule(printed, reparse_diagnostics, commir::ParseOptions{});
  if (reparsed == nullptr) {
    Fail("the pipeline's printed output does not parse", pipeline, source,
         printed + "\n" + reparse_diagnostics.Render("out.commir", printed));
  }
  const std::string reprinted = commir::PrintModule(*reparsed);
  if (reprinted != printed) {
    Fail("the pipeline's printed output does not round-trip", pipeline, source,
         printed + "\n--- reprinted ---\n" + reprinted);
  }
  return printed;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view input(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<commir::Module> module = Parse(input);
  if (module == nullptr) return 0;  // the parser's own fuzzer covers invalid input
  // Start from the canonical text: pass errors are about the program, not its spelling.
  const std::string source = commir::PrintModule(*module);
  std::string partitioned = RunPipeline(commir::sharding::kDefaultSpmdPipeline, source);
  const std::string& base = partitioned.empty() ? source : partitioned;
  for (absl::string_view pipeline : kSchedulePipelines) RunPipeline(pipeline, base);
  return 0;
}
