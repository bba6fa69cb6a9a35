// Pass pipeline text (commir-opt --pass-pipeline):
//
//   pipeline := [entry (',' entry)*]
//   entry    := PASS-NAME ['{' [option (',' option)*] '}']
//   option   := OPTION-NAME ['=' value]       a bare name sets a bool option to true
//   value    := "quoted, with \" and \\ escapes" | text up to the next ',' or '}'
//             | CHOICE-NAME ['{' [option (',' option)*] '}']   for a choice option
//
// Whitespace around every token is ignored; an empty pipeline has no passes.
//
// Text is for the command line, recipes and Python. In C++ a pipeline is a value,
// `Pipeline`, of typed steps (`PassStep::Of<RingAttentionPass>({.zigzag = true})`), run
// with RunPipeline; its text form (ToString) is what it prints in reports and recipes.
#ifndef COMMIR_TRANSFORMS_PIPELINE_H_
#define COMMIR_TRANSFORMS_PIPELINE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "commir/check.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "transforms/pass.h"

namespace commir {

// One configured pass of a pipeline: which pass, and its option values. A value (copyable,
// shared between threads); each run creates fresh Pass objects from it.
class PassStep {
 public:
  // Pass P with typed options (no text involved).
  template <typename P>
  static PassStep Of(typename P::Options options) {
    return PassStep(P::Info(), P::Options::Schema().ToValues(options));
  }
  // Pass P, which has no options or takes its defaults.
  template <typename P>
  static PassStep Of() {
    return PassStep(P::Info(), {});
  }
  PassStep(const PassInfo& info, PassOptions values) : info_(&info), values_(std::move(values)) {}

  const PassInfo& info() const { return *info_; }
  const std::string& name() const { return info_->name; }
  // Whether this step runs pass P.
  template <typename P>
  bool Is() const {
    return name() == P::Info().name;
  }
  // This step's options as pass P's typed struct (each option the text left out at its
  // default), for code that reads a pipeline it did not build; P must be this step's pass.
  template <typename P>
  typename P::Options OptionsOf() const {
    COMMIR_CHECK(Is<P>(), "PassStep::OptionsOf: the step runs another pass");
    return P::Options::Schema().FromValues(values_);
  }
  // Each option's value against its schema row (range, enum spelling): InvalidArgument
  // "pass 'NAME': option ... must be ..." as the pipeline parser words it.
  absl::Status Check() const;
  std::unique_ptr<Pass> Create() const { return info_->create(*info_, values_); }
  // The pipeline text of this step: the name, then `{name=value,...}` with the options
  // that differ from their defaults, in schema order (parsing it gives this step back).
  std::string ToString() const;

 private:
  const PassInfo* info_;
  PassOptions values_;
};

// Passes in order.
struct Pipeline {
  std::vector<PassStep> steps;

  bool empty() const { return steps.empty(); }
  // This pipeline followed by `next`'s steps.
  Pipeline Then(const Pipeline& next) const;
  Pipeline Then(PassStep next) const;
  // "a,b{x=1},c" ("" when empty): commir-opt --pass-pipeline takes it.
  std::string ToString() const;
};

// Parses `text` against `registry` (normally RegisteredPasses()) into a pipeline, with
// the errors of ParsePassPipeline below.
absl::StatusOr<Pipeline> ParsePipeline(absl::string_view text,
                                       absl::Span<const PassInfo> registry);

struct RunPipelineOptions {
  bool verify_each = false;  // PassManager::set_verify_each
  // Where located errors go (see PassManager::Run); null: folded into the status.
  DiagnosticEngine* diagnostics = nullptr;
};

// The one way to run a pipeline in process: checks every step's options, then runs
// fresh passes over `module` in order with PassManager (errors are PassManager::Run's).
absl::Status RunPipeline(Module& module, const Pipeline& pipeline,
                         const RunPipelineOptions& options);
absl::Status RunPipeline(Module& module, const Pipeline& pipeline);

// Parses `text` against `registry` (normally RegisteredPasses()) into configured passes,
// in order. Every error is a usage error with code kInvalidArgument: malformed text
// (with the column), an unknown pass (the message lists every valid pass), an unknown
// or repeated option or a bad value (the message lists that pass's options).
absl::StatusOr<std::vector<std::unique_ptr<Pass>>> ParsePassPipeline(
    absl::string_view text, absl::Span<const PassInfo> registry);
// Fresh passes of `pipeline`, in order (for drivers that keep them: statistics, remarks).
std::vector<std::unique_ptr<Pass>> CreatePasses(const Pipeline& pipeline);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_PIPELINE_H_
