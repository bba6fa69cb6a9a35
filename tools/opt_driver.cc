#include "tools/opt_driver.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <istream>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "commir/diagnostics.h"
#include "commir/dot_printer.h"
#include "commir/printer.h"
#include "parser/parser.h"
#include "tools/exit_codes.h"
#include "tools/input_file.h"
#include "tools/output_file.h"
#include "transforms/pass_manager.h"
#include "transforms/pipeline.h"

namespace commir {
namespace {

constexpr char kUsage[] =
    R"(usage: commir-opt [FILE|-] [--pass-pipeline=PIPE] [-o FILE] [--verify-each]
                  [--print-ir-after-all] [--pass-statistics] [--no-remarks]
                  [--list-passes] [--emit=commir|dot]

Parses and verifies a CommIR module (FILE, or stdin when it is '-' or left out), runs a
pass pipeline over it, and prints the result in canonical form.
  --pass-pipeline=PIPE   passes to run, e.g. 'canonicalize{max-rewrites=10},cse,dce'
  -o FILE                write the output to FILE instead of stdout
  --verify-each          verify the module after every pass
  --print-ir-after-all   print the module to stderr after every pass
  --pass-statistics      print each pass's counters to stderr after the pipeline
  --no-remarks           do not print pass remarks (why a pass rewrote nothing,
                         explain= output) to stderr
  --list-passes          list every pass with its options and exit
  --emit=commir|dot      output CommIR text (default) or a Graphviz graph
  --help                 show this help and exit
Options may be written with one or two dashes, and with '=VALUE' or ' VALUE'.
Exit status: 0 success; 1 invalid input (parse, verify or pass failure, unreadable
input, unwritable output); 2 bad usage (unknown flag, pass or option, bad value).
)";

enum class Emit { kCommir, kDot };

struct OptArgs {
  std::string input = "-";
  bool have_input = false;
  std::string pipeline;
  std::string output;  // empty or "-": the output stream
  bool verify_each = false;
  bool print_ir_after_all = false;
  bool pass_statistics = false;
  bool no_remarks = false;
  bool list_passes = false;
  bool help = false;
  Emit emit = Emit::kCommir;
};

// The arguments are parsed by hand rather than with absl flags: absl's parser exits
// with status 1 on an unknown flag, and the spec reserves 1 for invalid input (bad
// usage must exit 2); it also cannot report into a caller's stream for testing.
absl::StatusOr<OptArgs> ParseArgs(const std::vector<std::string>& args) {
  OptArgs parsed;
  bool options_done = false;
  bool seen_output = false, seen_pipeline = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (options_done || arg == "-" || !absl::StartsWith(arg, "-")) {
      if (parsed.have_input) {
        return absl::InvalidArgumentError(
            absl::StrCat("more than one input file ('", parsed.input, "' and '", arg, "')"));
      }
      parsed.input = arg;
      parsed.have_input = true;
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    // -name, --name, -name=value, --name=value.
    absl::string_view body = absl::StripPrefix(absl::StripPrefix(arg, "-"), "-");
    size_t eq = body.find('=');
    absl::string_view name = body.substr(0, eq);
    std::optional<std::string> inline_value;
    if (eq != absl::string_view::npos) inline_value = std::string(body.substr(eq + 1));
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (inline_value) return *inline_value;
      if (i + 1 < args.size()) return args[++i];
      return absl::InvalidArgumentError(absl::StrCat("option '", arg, "' needs a value"));
    };
    auto flag = [&](bool& target) -> absl::Status {
      if (inline_value) {
        return absl::InvalidArgumentError(absl::StrCat("option '-", name, "' takes no value"));
      }
      target = true;
      return absl::OkStatus();
    };
    absl::Status status;
    if (name == "pass-pipeline" || name == "o") {
      absl::StatusOr<std::string> v = value();
      if (!v.ok()) return v.status();
      // A second one would silently replace the first.
      bool& seen = name == "o" ? seen_output : seen_pipeline;
      if (seen) {
        return absl::InvalidArgumentError(absl::StrCat(name == "o" ? "-o" : "--pass-pipeline",
                                                       " is given more than once"));
      }
      seen = true;
      (name == "o" ? parsed.output : parsed.pipeline) = *std::move(v);
      if (name == "o" && parsed.output.empty()) {
        return absl::InvalidArgumentError("option '-o' needs a file name");
      }
    } else if (name == "emit") {
      absl::StatusOr<std::string> v = value();
      if (!v.ok()) return v.status();
      if (*v == "commir") {
        parsed.emit = Emit::kCommir;
      } else if (*v == "dot") {
        parsed.emit = Emit::kDot;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("--emit must be 'commir' or 'dot', got '", *v, "'"));
      }
    } else if (name == "verify-each") {
      status = flag(parsed.verify_each);
    } else if (name == "print-ir-after-all") {
      status = flag(parsed.print_ir_after_all);
    } else if (name == "pass-statistics") {
      status = flag(parsed.pass_statistics);
    } else if (name == "no-remarks") {
      status = flag(parsed.no_remarks);
    } else if (name == "list-passes") {
      status = flag(parsed.list_passes);
    } else if (name == "help" || name == "h") {
      status = flag(parsed.help);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown option '", arg, "'"));
    }
    if (!status.ok()) return status;
  }
  return parsed;
}

std::string Resolve(const std::string& path, const std::string& working_dir) {
  if (working_dir.empty() || path == "-" || std::filesystem::path(path).is_absolute()) {
    return path;
  }
  return (std::filesystem::path(working_dir) / path).string();
}

// The whole of `path` ("-": env.in_fd, or env.in), or an error message without the path.
absl::StatusOr<std::string> ReadInput(const std::string& path, const OptEnvironment& env) {
  if (path == "-" && env.in_fd < 0) {
    std::ostringstream buffer;
    buffer << env.in->rdbuf();
    return buffer.str();
  }
  if (path == "-") return ReadAllFromFd(env.in_fd);
  return ReadInputFile(Resolve(path, env.working_dir));
}

// Writes `text` to env.out and flushes it, checking the stream right away, while errno
// still holds a failed write's error.
int WriteToOut(std::string_view text, const OptEnvironment& env) {
  errno = 0;
  *env.out << text;
  env.out->flush();
  if (*env.out) return kExitSuccess;
  const int error = errno;
  *env.err << "commir-opt: error: cannot write '<stdout>': "
           << (error != 0 ? std::strerror(error) : "the write failed") << "\n";
  return kExitInvalidInput;
}

// FILE:LINE:COL: remark: MESSAGE, or FILE: remark: MESSAGE for a remark about the module.
// Unlike errors, the source line is not quoted: a remark informs, it points at nothing
// to fix.
std::string RenderRemark(absl::string_view file, const PassRemark& remark) {
  if (!remark.loc.known()) return absl::StrCat(file, ": remark: ", remark.message, "\n");
  return absl::StrCat(file, ":", remark.loc.line, ":", remark.loc.col, ": remark: ",
                      remark.message, "\n");
}

}  // namespace

int RunCommirOpt(const std::vector<std::string>& args, const OptEnvironment& env) {
  std::ostream& err = *env.err;
  absl::StatusOr<OptArgs> parsed = ParseArgs(args);
  if (!parsed.ok()) {
    err << "commir-opt: error: " << parsed.status().message() << "\n"
        << "Try 'commir-opt --help' for usage.\n";
    return kExitUsage;
  }
  if (parsed->help) return WriteToOut(kUsage, env);
  if (parsed->list_passes) return WriteToOut(DescribePasses(env.registry), env);

  // The pipeline is checked before the input is read: a usage error wins.
  absl::StatusOr<std::vector<std::unique_ptr<Pass>>> passes =
      ParsePassPipeline(parsed->pipeline, env.registry);
  if (!passes.ok()) {
    err << "commir-opt: error: " << passes.status().message() << "\n";
    return kExitUsage;
  }

  const std::string display = parsed->input == "-" ? "<stdin>" : parsed->input;
  absl::StatusOr<std::string> source = ReadInput(parsed->input, env);
  if (!source.ok()) {
    err << display << ": error: " << source.status().message() << "\n";
    return kExitInvalidInput;
  }

  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(*source, diagnostics);
  if (module == nullptr || diagnostics.has_errors()) {
    err << diagnostics.Render(display, *source);
    return kExitInvalidInput;
  }

  PassManager pm;
  pm.AddPasses(*std::move(passes));
  pm.set_verify_each(parsed->verify_each);
  if (parsed->print_ir_after_all) pm.set_print_ir_after_all(env.err);
  if (!parsed->no_remarks) {
    pm.set_remark_handler([&err, &display](const Pass&, const PassRemark& remark) {
      err << RenderRemark(display, remark);
      err.flush();
    });
  }
  absl::Status status = pm.Run(*module, diagnostics);
  // Statistics of the passes that ran, also when one failed (its counters may say why).
  if (parsed->pass_statistics) err << FormatPassStatistics(pm.passes());
  if (!status.ok()) {
    if (diagnostics.has_errors()) {
      err << diagnostics.Render(display, *source);
    } else {
      err << display << ": error: " << status.message() << "\n";
    }
    return kExitInvalidInput;
  }

  std::string text = parsed->emit == Emit::kDot ? PrintDot(*module) : PrintModule(*module);
  if (env.skip_module_teardown) (void)module.release();
  if (parsed->output.empty() || parsed->output == "-") return WriteToOut(text, env);
  if (absl::Status s = WriteOutputFile(Resolve(parsed->output, env.working_dir), text); !s.ok()) {
    err << "commir-opt: error: " << s.message() << "\n";
    return kExitInvalidInput;
  }
  return kExitSuccess;
}

}  // namespace commir
