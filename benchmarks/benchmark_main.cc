// main() for the CommIR benchmark binaries and their smoke tests. Unlike
// benchmark_main, it exits with status 1 when a benchmark fails (SkipWithError: a
// generated program that does not parse, a wrong op count after a pass, ...) or when
// --benchmark_filter matches nothing, so a smoke test that runs the small sizes fails
// loudly instead of printing an error and passing.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>
#include <vector>

namespace {

// Forwards to the reporter the library would have made (so --benchmark_format and
// --benchmark_color keep working) and counts failed runs.
class FailureTrackingReporter : public benchmark::BenchmarkReporter {
 public:
  FailureTrackingReporter() : inner_(benchmark::CreateDefaultDisplayReporter()) {}

  bool ReportContext(const Context& context) override {
    inner_->SetOutputStream(&GetOutputStream());
    inner_->SetErrorStream(&GetErrorStream());
    return inner_->ReportContext(context);
  }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred) ++failures_;
    }
    inner_->ReportRuns(runs);
  }
  void Finalize() override { inner_->Finalize(); }

  int failures() const { return failures_; }

 private:
  std::unique_ptr<benchmark::BenchmarkReporter> inner_;
  int failures_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  FailureTrackingReporter reporter;
  size_t ran = benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  if (ran == 0) {
    std::fprintf(stderr, "error: no benchmark matches --benchmark_filter\n");
    return 1;
  }
  if (reporter.failures() > 0) {
    std::fprintf(stderr, "error: %d benchmark(s) failed\n", reporter.failures());
    return 1;
  }
  return 0;
}
