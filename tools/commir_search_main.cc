// commir-search: the fastest verified schedules of a global CommIR function on N devices
// (search.h describes the space). Arguments are parsed by hand, as in
// commir-run, so that bad usage exits 2 (absl's flag parser exits 1, which the spec
// reserves for invalid input).
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "parser/parser.h"
#include "tools/plan_command.h"
#include "search/recipe_verifier.h"
#include "search/search.h"
#include "search/search_report.h"
#include "sim/hardware.h"
#include "tools/command_line.h"
#include "tools/exit_codes.h"
#include "tools/hardware_file.h"
#include "tools/input_file.h"
#include "tools/output_file.h"
#include "tools/sim_session.h"

namespace commir::search {
namespace {

constexpr char kUsage[] = R"(usage: commir-search FILE|- [--devices=N] [--func=@name] [--hardware=NAME|FILE.json]
                     [--gpus-per-node=N] [--max-memory=SIZE] [--top=N] [-o FILE]
                     [--emit=spmd|global] [--format=table|json|csv] [--verify=all|top|none]
                     [--max-mesh-axes=1..3] [--max-layouts=N] [--time-limit=SECONDS]
                     [--train] [--quiet]
       commir-search --plan MODEL --gpus=N [...]   (see commir-search --plan x --help)
       commir-search --emit-model=MODEL [--micro-batch=N]   (the model as CommIR)

Finds the fastest ways to run a global function on N devices: every mesh of N devices
(up to three axes), every layout of the function's arguments and results on it (the
dimensions its ops can split), partitioned by propagate-sharding and lower-to-spmd, and
every composition of the overlap schedules. Candidates are predicted by the sim
backend's performance model, ranked, and the best are checked on the cpu mesh against
the one-device program (on a copy shrunk to cpu size with the same divisibility).
A function that calls others is searched with its calls inlined.
  --devices=N         devices to spread the function over (default 8, at most 1024: each
                      candidate is simulated on every device)
  --func=@name        the function (default: the module's only global function that no
                      other calls)
  --hardware=H        h100-sxm (default), h200, a100-sxm-80g, or a JSON cluster file
  --gpus-per-node=N   devices per node, row-major (default: the hardware's)
  --max-memory=SIZE   drop candidates that need more than SIZE per device (80GiB, 8e10,
                      or hbm for the hardware's capacity)
  --top=N             candidates to report (default 10; 0: all)
  -o FILE             write the best candidate's program: its spmd program (default), or
                      with --emit=global its laid-out global program, from which
                      `commir-opt --pass-pipeline=<its pipeline>` prints the spmd program
  --format=F          table (default), json or csv
  --verify=V          top (default: the reported candidates), all, or none
  --max-mesh-axes=K   meshes of at most K axes (default 3)
  --max-layouts=N     refuse a space of more than N layouts, saying its size (default
                      20000 on up to 8 devices, 20000*8/N on more; 0: no cap)
  --time-limit=S      stop after S seconds and report the best found so far, marked as
                      cut short (default: none; verification comes after it)
  --train             search the training step: each layout's forward with its autodiff
                      backward (gradients of every float argument, reduced over the axes
                      that split the data), ranked by forward + backward time; the
                      table adds both times and --verify checks @FUNC_grad. Without it
                      the search is forward only, and says what training would add when
                      its best plan replicates weights
  --quiet             no progress lines on stderr
Exit status: 0 success; 1 invalid program, nothing to search, a space over --max-layouts,
nothing found before --time-limit, no candidate kept (the error says why), a candidate
that does not match the one-device program, or with --train a function without a
backward; 2 bad usage.
)";

int UsageError(const std::string& message) { return commir::UsageError("commir-search", message); }

struct Request {
  std::string input;
  std::string output;
  std::string emit = "spmd";
  bool emit_given = false;
  std::string format = "table";
  std::string hardware = "h100-sxm";
  std::string max_memory;
  int64_t gpus_per_node = 0;
  bool quiet = false;
  SearchOptions options;
};

// Returns -1 when the arguments are good, else the exit status.
int ParseArgs(int argc, char** argv, Request& r) {
  bool have_input = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    absl::string_view value;
    auto flag = [&](absl::string_view name) { return FlagValue(arg, name, value); };
    int64_t n = 0;
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (flag("--devices")) {
      if (!ParseIntInRange(value, 1, kMaxSearchDevices, n)) {
        return UsageError(absl::StrCat("--devices needs a count from 1 to ", kMaxSearchDevices,
                                       " (every candidate is simulated on each device)"));
      }
      r.options.devices = n;
    } else if (flag("--func")) {
      r.options.function = std::string(absl::StripPrefix(value, "@"));
    } else if (flag("--hardware")) {
      if (value.empty()) return UsageError("--hardware needs a name or a file");
      r.hardware = std::string(value);
    } else if (flag("--gpus-per-node")) {
      if (!ParseIntInRange(value, 1, 1 << 20, n)) {
        return UsageError("--gpus-per-node needs a count from 1 to 1048576");
      }
      r.gpus_per_node = n;
    } else if (flag("--max-memory")) {
      if (value.empty()) return UsageError("--max-memory needs a size (80GiB, 8e10 or hbm)");
      r.max_memory = std::string(value);
    } else if (flag("--top")) {
      if (!ParseIntInRange(value, 0, 1 << 30, n)) {
        return UsageError("--top needs a count from 0 (all) to 1073741824");
      }
      r.options.top = static_cast<int>(n);
    } else if (arg == "-o") {
      if (i + 1 >= argc || argv[i + 1][0] == '\0') return UsageError("-o needs a file name");
      r.output = argv[++i];
    } else if (flag("--emit")) {
      if (value != "spmd" && value != "global") return UsageError("--emit is spmd or global");
      r.emit = std::string(value);
      r.emit_given = true;
    } else if (flag("--format")) {
      if (value != "table" && value != "json" && value != "csv") {
        return UsageError("--format is table, json or csv");
      }
      r.format = std::string(value);
    } else if (flag("--verify")) {
      if (value == "all") {
        r.options.verify = VerifyMode::kAll;
      } else if (value == "top") {
        r.options.verify = VerifyMode::kTop;
      } else if (value == "none") {
        r.options.verify = VerifyMode::kNone;
      } else {
        return UsageError("--verify is all, top or none");
      }
    } else if (flag("--max-mesh-axes")) {
      if (!ParseIntInRange(value, 1, 3, n)) return UsageError("--max-mesh-axes is 1, 2 or 3");
      r.options.max_mesh_axes = static_cast<int>(n);
    } else if (flag("--max-layouts")) {
      if (!ParseIntInRange(value, 0, int64_t{1} << 40, n)) {
        return UsageError("--max-layouts needs a count >= 0 (0: no cap)");
      }
      r.options.max_layouts = n;
    } else if (flag("--time-limit")) {
      double seconds = 0;
      if (!absl::SimpleAtod(value, &seconds) || !(seconds > 0) || seconds > 1e7) {
        return UsageError("--time-limit needs a number of seconds > 0");
      }
      r.options.time_limit_s = seconds;
    } else if (arg == "--train") {
      r.options.train = true;
    } else if (absl::StartsWith(arg, "--train=")) {
      return UsageError("--train takes no value");
    } else if (arg == "--quiet") {
      r.quiet = true;
    } else if (arg != "-" && absl::StartsWith(arg, "-")) {
      return UsageError(absl::StrCat("unknown option '", arg, "'"));
    } else {
      if (have_input) return UsageError("one input file only");
      r.input = arg;
      have_input = true;
    }
  }
  if (!have_input) return UsageError("no input file (use - for standard input)");
  // --emit chooses what -o writes: alone it would be silently ignored.
  if (r.emit_given && r.output.empty()) return UsageError("--emit chooses what -o writes: give -o FILE");
  return -1;
}

// Why a search ranked no candidate: what dropped the layouts and schedules it tried.
std::string NothingFound(const SearchResult& result, const Request& r) {
  const SearchStats& s = result.stats;
  std::vector<std::string> why;
  if (s.over_memory > 0) {
    why.push_back(absl::StrFormat("%d need more than --max-memory=%s (%d bytes) per device",
                                  s.over_memory, r.max_memory,
                                  r.options.max_memory_bytes.value_or(0)));
  }
  if (s.partition_failures > 0) {
    why.push_back(absl::StrFormat("%d layouts the partitioner refused", s.partition_failures));
  }
  if (s.not_applicable > 0) {
    why.push_back(absl::StrFormat("%d schedules not applicable", s.not_applicable));
  }
  if (s.prediction_failures > 0) {
    why.push_back(absl::StrFormat("%d predictions failed", s.prediction_failures));
  }
  return absl::StrFormat("no candidate for @%s on %d devices (%d layouts searched): %s",
                         result.function, r.options.devices, s.layouts,
                         why.empty() ? std::string("none was kept") : absl::StrJoin(why, ", "));
}

int Main(int argc, char** argv) {
  if (WantsEmitModel(argc, argv)) return EmitModelMain(argc, argv);
  if (WantsPlanSearch(argc, argv)) return PlanSearchMain(argc, argv);
  Request r;
  if (int status = ParseArgs(argc, argv, r); status >= 0) return status;

  absl::StatusOr<sim::HardwareSpec> hardware = LoadHardwareArgument(r.hardware);
  if (!hardware.ok()) {
    std::cerr << "commir-search: error: --hardware: " << hardware.status().message() << "\n";
    return kExitInvalidInput;
  }
  if (r.gpus_per_node > 0) hardware->gpus_per_node = static_cast<int>(r.gpus_per_node);
  r.options.predict.hardware = *hardware;
  r.options.predict.gpus_per_node = hardware->gpus_per_node;
  if (!r.max_memory.empty()) {
    absl::StatusOr<std::optional<int64_t>> limit = ParseMemorySize(r.max_memory);
    if (!limit.ok()) return UsageError(absl::StrCat("--max-memory: ", limit.status().message()));
    r.options.max_memory_bytes =
        limit->has_value() ? **limit : static_cast<int64_t>(hardware->hbm_capacity);
  }

  // Read like commir-opt and commir-run read: streamed, a directory refused, size capped.
  const std::string file = r.input == "-" ? "<stdin>" : r.input;
  absl::StatusOr<std::string> source = ReadInputFile(ResolvePath(r.input));
  if (!source.ok()) {
    std::cerr << file << ": error: " << source.status().message() << "\n";
    return kExitInvalidInput;
  }
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(*source, file);
  if (!module.ok()) {
    std::cerr << module.status().message();
    if (!absl::EndsWith(module.status().message(), "\n")) std::cerr << "\n";
    return kExitInvalidInput;
  }
  r.options.verifier = CpuMeshVerifier();
  if (!r.quiet) {
    r.options.progress = [](const SearchProgress& p) {
      if (p.counting) {
        std::cerr << absl::StrFormat("commir-search: counting the layouts on %d meshes\n",
                                     p.meshes);
        return;
      }
      std::cerr << absl::StrFormat("commir-search: mesh %d of %d, %d of %s%d layouts, %.1f s\n",
                                   p.mesh + 1, p.meshes, p.layouts_done,
                                   p.layouts_counted ? "" : "more than ", p.layouts, p.seconds);
    };
  }
  absl::StatusOr<SearchResult> result = Search(**module, r.options);
  if (!result.ok()) {
    std::cerr << "commir-search: error: " << MessageInFile(file, result.status().message()) << "\n";
    return kExitInvalidInput;
  }
  if (result->ranked.empty()) {
    if (result->stats.cut_short) {
      std::cerr << "commir-search: warning: " << CutShortText(*result) << "\n";
    }
    std::cerr << "commir-search: error: " << file << ": " << NothingFound(*result, r) << "\n";
    return kExitInvalidInput;
  }
  ReportContext context{hardware->name, r.options.devices, hardware->gpus_per_node};
  std::string report = r.format == "json"  ? FormatJson(*result, context)
                       : r.format == "csv" ? FormatCsv(*result)
                                           : FormatTable(*result, context);
  if (absl::Status s = WriteStandardOutput(report); !s.ok()) {
    std::cerr << "commir-search: error: " << s.message() << "\n";
    return kExitInvalidInput;
  }
  if (!r.quiet && r.format != "table") std::cerr << "commir-search: " << FormatSummary(*result, context) << "\n";
  // Said even with --quiet: the ranking is not the whole space's.
  if (result->stats.cut_short) std::cerr << "commir-search: warning: " << CutShortText(*result) << "\n";
  if (!r.output.empty()) {
    const Candidate& best = result->ranked.front();
    const std::string text = r.emit == "global" ? best.GlobalText() : best.SpmdText();
    if (absl::Status s = WriteOutputFile(ResolvePath(r.output), text); !s.ok()) {
      std::cerr << "commir-search: error: " << s.message() << "\n";
      return kExitInvalidInput;
    }
  }
  for (const Candidate& c : result->ranked) {
    if (c.verdict.state == Verdict::State::kMismatched) {
      std::cerr << "commir-search: error: candidate " << c.rank
                << " does not match the one-device program:\n"
                << c.verdict.detail << "\n";
      return kExitInvalidInput;
    }
  }
  if (absl::Status s = FinishStandardOutput(); !s.ok()) {
    std::cerr << "commir-search: error: " << s.message() << "\n";
    return kExitInvalidInput;
  }
  return 0;
}

}  // namespace
}  // namespace commir::search

int main(int argc, char** argv) { return commir::search::Main(argc, argv); }
