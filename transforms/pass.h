// Passes in the MLIR style: a pass has a name, a one-line description and a typed options
// struct whose schema (transforms/option_schema.h) is declared beside the pass. A pass is
// constructed from that struct in C++, or from pipeline text (transforms/pipeline.h)
// through its registry row (transforms/registry/pass_registry.h), and transforms a Module.
//
// Status codes used across transforms/ (commir-opt maps them to exit statuses):
//   kInvalidArgument     bad usage: unknown pass or option, malformed option value or
//                        pipeline text (ParsePassPipeline; commir-opt exits 2);
//   kFailedPrecondition  a pass failed on its input (PassManager::Run; exits 1);
//   kInternal            --verify-each found invalid IR after a pass: a bug in that
//                        pass (PassManager::Run; exits 1).
#ifndef COMMIR_TRANSFORMS_PASS_H_
#define COMMIR_TRANSFORMS_PASS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"

namespace commir {

// kNumber: a finite double. kChoice: one of several named alternatives, each with options
// of its own, written `name` or `name{option=value,...}` (e.g. `adamw{lr=1e-3}`).
enum class PassOptionType { kInt, kBool, kString, kEnum, kNumber, kChoice };

struct PassOptionSpec;

// One alternative of a kChoice option: its name and its own options. Declared before
// PassOptionSpec, whose `choices = {}` needs it complete (clang instantiates the vector's
// destructor there).
struct PassOptionChoice {
  std::string name;
  std::vector<PassOptionSpec> options;
};

// One entry of a pass's option schema.
struct PassOptionSpec {
  std::string name;
  PassOptionType type = PassOptionType::kBool;
  // The default, spelled as it would be written in a pipeline.
  std::string default_value;
  std::string help;
  // The accepted spellings of a kEnum option.
  std::vector<std::string> enum_values = {};
  // The accepted range of a kInt option (inclusive; unset: unbounded). Checked when the
  // pipeline is parsed, so an out-of-range value is bad usage, and shown by --list-passes.
  std::optional<int64_t> min_value = std::nullopt;
  std::optional<int64_t> max_value = std::nullopt;
  // The accepted range of a kNumber option: at least min_number, and at most max_number
  // (below it when max_exclusive); unset: unbounded.
  std::optional<double> min_number = std::nullopt;
  std::optional<double> max_number = std::nullopt;
  bool max_exclusive = false;
  // The alternatives of a kChoice option, in the order --list-passes shows them.
  std::vector<PassOptionChoice> choices = {};
};

// "int", "int >= 1", "int in 1..100", "bool", "string", "number", "number >= 0",
// "number in [0, 1)", or the enum's values (a choice's names) joined with '|'.
std::string DescribeOptionType(const PassOptionSpec& spec);

// Option values of one configured pass by option name, as the pipeline parser reads them
// from text (enum values are their spellings). Passes never read them: a pass's registry
// row turns them into its typed options struct (OptionSchema::FromValues).
class PassOptions {
 public:
  // A kChoice value is its canonical text (ParseChoiceValue).
  using Value = std::variant<int64_t, bool, std::string, double>;

  void Set(std::string name, Value value) { values_[std::move(name)] = std::move(value); }
  // The value of `name`, or null when it is not set.
  const Value* Find(absl::string_view name) const;

 private:
  absl::flat_hash_map<std::string, Value> values_;
};

// Whether `value` has `spec`'s type and lies in its range (or is one of its enum
// spellings). The error (InvalidArgument) names the expected form, e.g.
// "option 'chunks' must be at least 1, got 0".
absl::Status CheckOptionValue(const PassOptionSpec& spec, const PassOptions::Value& value);

// `value` as pipeline text: decimal, true/false, or the string; a string that is empty
// or holds a character the pipeline syntax reserves is quoted, with backslash escapes.
std::string FormatOptionValue(const PassOptions::Value& value);

// Parses `text` as a value of `spec`'s type. Booleans are `true`/`false` (or `1`/`0`);
// integers are decimal int64 within the spec's range. The error (InvalidArgument) names
// the expected form, e.g. "option 'chunks' must be at least 1, got 0".
absl::StatusOr<PassOptions::Value> ParseOptionValue(const PassOptionSpec& spec,
                                                    absl::string_view text);

// A kChoice value read back: the alternative's name and its option values (defaults for
// those the text leaves out). `text` has been accepted by ParseOptionValue.
struct ChoiceValue {
  std::string name;
  PassOptions values;
};
absl::StatusOr<ChoiceValue> ParseChoiceValue(const PassOptionSpec& spec, absl::string_view text);

// The canonical text of a kChoice value: the name, then `{option=value,...}` with the
// options that differ from their defaults, in schema order.
std::string FormatChoiceValue(const PassOptionChoice& choice, const PassOptions& values);

class Pass;
struct PassInfo;

// A remark: something a pass wants its user to know that is not an error, such as why
// it rewrote nothing or how it chose a layout. commir-opt prints remarks to stderr as
// FILE:LINE:COL: remark: MESSAGE (FILE: remark: MESSAGE without a location); other
// callers of passes leave them on the pass (PassManager's remark handler is unset).
struct PassRemark {
  Location loc;  // unknown: the remark is about the whole module
  std::string message;
};

// A counter of what a pass did, in the style of MLIR's pass statistics
// (commir-opt --pass-statistics prints them).
struct PassStatistic {
  std::string name;         // "rewrites"
  std::string description;  // "Attention ops rewritten to a ring"
  int64_t value = 0;
};

using PassFactory = std::function<std::unique_ptr<Pass>(const PassInfo&, const PassOptions&)>;

// A registry row: everything --list-passes shows and the pipeline parser checks.
struct PassInfo {
  std::string name;
  std::string description;  // one line
  std::vector<PassOptionSpec> options;
  PassFactory create;

  const PassOptionSpec* FindOption(absl::string_view option_name) const;
  // Every option set to its default.
  PassOptions DefaultOptions() const;
  // A configured pass with default options.
  std::unique_ptr<Pass> CreateWithDefaults() const { return create(*this, DefaultOptions()); }
};

// Factory for passes without options whose constructor is `P(const PassInfo&)` (tests'
// own registries).
template <typename P>
std::unique_ptr<Pass> MakePass(const PassInfo& info, const PassOptions&) {
  return std::make_unique<P>(info);
}

class Pass {
 public:
  explicit Pass(const PassInfo& info) : info_(&info) {}
  virtual ~Pass() = default;
  Pass(const Pass&) = delete;
  Pass& operator=(const Pass&) = delete;

  const std::string& name() const { return info_->name; }
  const std::string& description() const { return info_->description; }
  const PassInfo& info() const { return *info_; }
  const std::vector<PassOptionSpec>& option_specs() const { return info_->options; }

  // Transforms `module`. A pass that fails on its input returns a non-OK status; it
  // may first report errors at source locations with diagnostics().Error(...), which
  // commir-opt renders with the source line.
  virtual absl::Status Run(Module& module) = 0;

  // Where located errors go; the PassManager points this at its engine before Run.
  DiagnosticEngine& diagnostics() { return diagnostics_ != nullptr ? *diagnostics_ : own_; }
  void set_diagnostics(DiagnosticEngine* diagnostics) { diagnostics_ = diagnostics; }

  // What the pass reported since ClearReports (the PassManager clears them before Run),
  // in the order reported.
  const std::vector<PassRemark>& remarks() const { return remarks_; }
  const std::vector<PassStatistic>& statistics() const { return statistics_; }
  void ClearReports();

 protected:
  void Remark(std::string message, Location loc = {});
  // Adds `delta` to the statistic `name`, created at zero (with `description`) on first use,
  // so a pass that found nothing still shows its counters.
  void AddToStatistic(absl::string_view name, absl::string_view description, int64_t delta);
  // The report of a pass that is asked for by name to rewrite something (the schedules):
  // the statistic "rewrites" (described as `description`) and, when `count` is zero,
  // RemarkRewroteNothing(why_none). Cleanups that pipelines run just in case
  // (canonicalize, cse, dce) keep only the statistic, as MLIR's do: their finding
  // nothing is routine, and a remark each time would bury the ones that matter.
  void ReportRewrites(int64_t count, absl::string_view description, absl::string_view why_none);
  // The remark "pass 'NAME' rewrote nothing: WHY".
  void RemarkRewroteNothing(absl::string_view why);

 private:
  const PassInfo* info_;
  std::vector<PassRemark> remarks_;
  std::vector<PassStatistic> statistics_;
  DiagnosticEngine* diagnostics_ = nullptr;
  DiagnosticEngine own_;
};

// A pass that prints a report about the module and leaves it unchanged (comm-report,
// schedule-report): the report goes to std::cerr unless a driver or test redirects it.
class ReportPass : public Pass {
 public:
  using Pass::Pass;
  void set_output(std::ostream* out) { out_ = out; }

 protected:
  // Writes `report` to the output and flushes it.
  void Emit(const std::string& report) const;

 private:
  std::ostream* out_ = nullptr;
};

// A pass configured by a typed options struct O (which declares its schema with
// `static const OptionSchema<O>& Schema()`, option_schema.h). The pass reads its fields
// (`options().axes`) and never looks an option up by name.
template <typename O>
class OptionsPass : public Pass {
 public:
  using Options = O;
  OptionsPass(const PassInfo& info, O options) : Pass(info), options_(std::move(options)) {}
  const O& options() const { return options_; }

 private:
  O options_;
};

// Declares a pass whose only behaviour is Run: the common case spelled once, as MLIR
// generates its pass declarations. `Info()` (defined beside Run with MakePassInfo) is its
// registry row; the pass is constructed directly, `ClassName()`. Passes with more to say
// (report sinks) declare their class by hand.
#define COMMIR_DECLARE_PASS(ClassName)                     \
  class ClassName : public ::commir::Pass {                \
   public:                                                 \
    static const ::commir::PassInfo& Info();              \
    ClassName() : Pass(Info()) {}                          \
    absl::Status Run(::commir::Module& module) override;  \
  }

// The same for a pass with the typed options struct `OptionsType`:
// `ClassName(OptionsType{...})`, or ClassName() with the defaults.
#define COMMIR_DECLARE_PASS_WITH_OPTIONS(ClassName, OptionsType)                         \
  class ClassName : public ::commir::OptionsPass<OptionsType> {                          \
   public:                                                                               \
    static const ::commir::PassInfo& Info();                                            \
    explicit ClassName(OptionsType options = {}) : OptionsPass(Info(), std::move(options)) {} \
    absl::Status Run(::commir::Module& module) override;                                \
  }

// "@f, @g": the functions of `module` that `pick` selects, in module order ("" if none).
// Remarks name where a pass looked with it.
std::string NameFunctions(const Module& module, const std::function<bool(const Function&)>& pick);
// "in @f, @g" naming the spmd functions, or "in no spmd function (lower-to-spmd makes
// them)": where the schedules look.
std::string InSpmdFunctions(const Module& module);

// The text of --list-passes: each pass with its description and options (name, type,
// default, help), in the registry's order.
std::string DescribePasses(absl::Span<const PassInfo> registry);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_PASS_H_
