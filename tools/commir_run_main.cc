// commir-run: executes a CommIR program on a mesh (docs/commir-run.md).
//
// The arguments are parsed by hand rather than with absl flags because absl's parser
// exits with status 1 on an unknown flag, and the spec reserves 1 for invalid input:
// bad usage must exit 2.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tools/command_line.h"
#include "tools/exit_codes.h"
#include "tools/input_init.h"
#include "tools/output_file.h"
#include "tools/run_session.h"

namespace commir {
namespace {

constexpr char kUsage[] = R"(usage: commir-run [FILE|-] [--func=@name] [--backend=cpu|cuda|sim] [--seed=S] [--init=I]
                  [--input NAME=FILE.npy]... [--output-dir=DIR] [--check]
                  [--check-against=REF.commir] [--rtol=X] [--bench=N] [--trace=FILE.json]
                  [--allow-nonfinite] [--timeout=SECONDS] [--allow-tf32]
                  [--p2p=ce|nccl] [--nccl-ctas=N|MIN:MAX]
                  [--hardware=NAME|FILE.json] [--gpus-per-node=N] [--format=text|json]
                  [--max-memory=SIZE] [--steps=N]

Runs a CommIR function on the devices of its mesh and prints a summary of each result.
  --func=@name          the function to run (default: the module's only function)
  --backend=B           cpu (default: simulates every device in one process), cuda
                        (GPUs; one process per GPU under torchrun/srun/mpirun, or one
                        process driving every visible GPU; devices may share a GPU) or
                        sim (predicts the time, overlap and memory of one run on a
                        cluster; computes nothing, so programs run at real sizes)
  --seed=S              seed of the random inputs (default 0)
  --init=uniform|scaled random inputs: uniform in [-1, 1) (default), or scaled: matmul
                        weights [K, N] with variance 1/K, norm weights 1, biases 0
  --input NAME=FILE     argument %NAME from a .npy file (repeatable)
  --output-dir=DIR      write result<i>.npy for each result
  --check               compare with the global function run on one device
  --check-against=REF   compare with REF's function of the same name (for spmd programs)
  --rtol=X              relative L2 tolerance (default by element type)
  --bench=N             time N more runs; print min and median wall time
  --trace=FILE.json     write a Chrome/Perfetto trace of each device's ops
  --allow-nonfinite     do not treat NaN or infinity in results as an error (also
                        under --check, which then compares them position by position)
  --timeout=SECONDS     cuda: fail (exit 3) when the GPU or a collective has not finished
                        within SECONDS of waiting (default 300; 0 waits forever)
  --allow-tf32          cuda: let f32 matmuls use TF32 tensor cores (faster, ~1e-3 error)
  --p2p=ce|nccl         cuda: how shift, all_gather and all_to_all move data inside a
                        node: ce (default) copy engines (no SMs; CUDA IPC between the
                        node's processes for shift), nccl: NCCL wherever it can run;
                        sim: how a shift inside a node is priced, overriding the
                        hardware's "p2p" (default: the hardware's, ce for the built-ins)
  --nccl-ctas=N|MIN:MAX cuda: NCCL's SM budget, the CTAs (one SM each) a collective may
                        use, 1 to 64 (default: NCCL's choice); sim: the SMs its NCCL
                        kernels keep, NCCL's own count clamped into [MIN, MAX] as NCCL
                        does, so a GEMM beside one runs on the rest
  --steps=N             run a training-step function N times (the training-step pass
                        makes them): it returns (loss, p1', ..., pK') and result i+1
                        feeds argument i in the next step (N from 1 to 1000000); an
                        optimizer's state (adamw's moments) is fed back the same way,
                        starting from @<step>_init's; prints each step's loss, and
                        with --check or --check-against the reference's beside it
  --hardware=H          sim: h100-sxm (default), h200, a100-sxm-80g, or a JSON file
                        describing your cluster (sim/examples/ has one)
  --gpus-per-node=N     sim: devices go onto nodes of N GPUs in row-major order
                        (default: the hardware's, 8 for the built-ins)
  --format=text|json    sim: the report's format (default text)
  --max-memory=SIZE     sim: fail (exit 1) when a device needs more than SIZE (80GiB,
                        8e10, or hbm for the hardware's capacity); without it a program
                        that does not fit in HBM gets a warning
Exit status: 0 success; 1 invalid program or input, or a failed check; 2 bad usage;
3 a backend or device failure.
)";

int UsageError(const std::string& message) { return commir::UsageError("commir-run", message); }

}  // namespace

int CommirRunMain(int argc, char** argv) {
  RunRequest request;
  bool have_file = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    absl::string_view value;
    auto flag_value = [&](absl::string_view flag) -> bool {
      // --flag=value, or --flag value.
      std::string prefix = absl::StrCat(flag, "=");
      if (absl::StartsWith(arg, prefix)) {
        value = absl::string_view(argv[i]).substr(prefix.size());
        return true;
      }
      if (arg == flag && i + 1 < argc) {
        value = argv[++i];
        return true;
      }
      return false;
    };
    if (arg == "--help" || arg == "-h") {
      if (absl::Status s = WriteStandardOutput(kUsage); !s.ok()) {
        std::cerr << "commir-run: error: " << s.message() << "\n";
        return kExitInvalidInput;
      }
      return kExitSuccess;
    } else if (arg == "--check") {
      request.check = true;
    } else if (arg == "--allow-nonfinite") {
      request.allow_nonfinite = true;
    } else if (arg == "--allow-tf32") {
      request.allow_tf32 = true;
    } else if (flag_value("--timeout")) {
      double seconds = 0;
      if (!absl::SimpleAtod(value, &seconds) || !(seconds >= 0)) {
        return UsageError(absl::StrCat("--timeout needs a non-negative number of seconds, got '",
                                       value, "'"));
      }
      request.timeout_seconds = seconds;
    } else if (flag_value("--p2p")) {
      if (value != "ce" && value != "nccl") {
        return UsageError(absl::StrCat("--p2p must be ce or nccl, got '", value, "'"));
      }
      request.p2p_nccl = value == "nccl";
    } else if (flag_value("--nccl-ctas")) {
      const size_t colon = value.find(':');
      absl::string_view low = value.substr(0, colon);
      absl::string_view high = colon == absl::string_view::npos ? low : value.substr(colon + 1);
      int64_t min_ctas = 0, max_ctas = 0;
      if (!ParseIntInRange(low, 1, 64, min_ctas) || !ParseIntInRange(high, 1, 64, max_ctas) ||
          min_ctas > max_ctas) {
        return UsageError(absl::StrCat(
            "--nccl-ctas needs N or MIN:MAX with 1 <= MIN <= MAX <= 64, got '", value, "'"));
      }
      request.nccl_min_ctas = static_cast<int>(min_ctas);
      request.nccl_max_ctas = static_cast<int>(max_ctas);
    } else if (flag_value("--init")) {
      absl::StatusOr<InitScheme> scheme = ParseInitScheme(value);
      if (!scheme.ok()) return UsageError(std::string(scheme.status().message()));
      request.init = *scheme;
    } else if (flag_value("--func")) {
      request.func = std::string(absl::StripPrefix(value, "@"));
    } else if (flag_value("--backend")) {
      request.backend = std::string(value);
    } else if (flag_value("--seed")) {
      if (!absl::SimpleAtoi(value, &request.seed)) return UsageError(absl::StrCat("--seed needs a non-negative integer, got '", value, "'"));
    } else if (flag_value("--input")) {
      size_t eq = value.find('=');
      if (eq == absl::string_view::npos || eq == 0 || eq + 1 == value.size()) {
        return UsageError(absl::StrCat("--input needs NAME=FILE.npy, got '", value, "'"));
      }
      std::string name(absl::StripPrefix(value.substr(0, eq), "%"));
      request.inputs.emplace_back(name, ResolvePath(std::string(value.substr(eq + 1))));
    } else if (flag_value("--output-dir")) {
      if (value.empty()) return UsageError("--output-dir needs a directory name");
      request.output_dir = ResolvePath(std::string(value));
    } else if (flag_value("--check-against")) {
      request.check_against = ResolvePath(std::string(value));
    } else if (flag_value("--rtol")) {
      double rtol = 0;
      // NaN would pass nothing and infinity everything: neither is a tolerance.
      if (!absl::SimpleAtod(value, &rtol) || !std::isfinite(rtol) || rtol < 0) {
        return UsageError(
            absl::StrCat("--rtol needs a finite non-negative number, got '", value, "'"));
      }
      request.rtol = rtol;
    } else if (flag_value("--bench")) {
      if (!absl::SimpleAtoi(value, &request.bench) || request.bench < 0) return UsageError(absl::StrCat("--bench needs a non-negative integer, got '", value, "'"));
    } else if (flag_value("--steps")) {
      // Bounded: each step is a full run, and the loop must end.
      constexpr int64_t kMaxSteps = 1000000;
      int64_t steps = 0;
      if (!ParseIntInRange(value, 1, kMaxSteps, steps)) {
        return UsageError(absl::StrCat("--steps needs a step count from 1 to ", kMaxSteps,
                                       ", got '", value, "'"));
      }
      request.steps = static_cast<int>(steps);
    } else if (flag_value("--hardware")) {
      if (value.empty()) return UsageError("--hardware needs a name or a file");
      const bool is_file = absl::EndsWith(value, ".json") || absl::StrContains(value, "/");
      request.hardware = is_file ? ResolvePath(std::string(value))
                                 : std::string(value);
    } else if (flag_value("--gpus-per-node")) {
      // Bounded before the sim narrows it to an int (2^32 would wrap to 0).
      if (!ParseIntInRange(value, 1, 1 << 20, request.gpus_per_node)) {
        return UsageError(
            absl::StrCat("--gpus-per-node needs a count from 1 to 1048576, got '", value, "'"));
      }
    } else if (flag_value("--format")) {
      request.format = std::string(value);
    } else if (flag_value("--max-memory")) {
      if (value.empty()) return UsageError("--max-memory needs a size (80GiB, 8e10 or hbm)");
      request.max_memory = std::string(value);
    } else if (flag_value("--trace")) {
      if (value.empty()) return UsageError("--trace needs a file name");
      request.trace = ResolvePath(std::string(value));
    } else if (absl::StartsWith(arg, "-") && arg != "-") {
      return UsageError(absl::StrCat("unknown or incomplete flag '", arg, "'"));
    } else if (have_file) {
      return UsageError(absl::StrCat("more than one input file ('", request.file, "' and '", arg, "')"));
    } else {
      request.file = ResolvePath(arg);
      have_file = true;
    }
  }
  const bool sim_flags = request.hardware != "h100-sxm" || request.gpus_per_node != 0 ||
                         request.format != "text" || !request.max_memory.empty();
  if (sim_flags && request.backend != "sim") {
    return UsageError("--hardware, --gpus-per-node, --format and --max-memory go with "
                      "--backend=sim");
  }
  if (request.steps > 0 &&
      (request.backend == "sim" || request.bench > 0 || !request.trace.empty())) {
    return UsageError("--steps runs and compares a training loop; it does not go with "
                      "--backend=sim, --bench or --trace");
  }
  if (request.check && !request.check_against.empty()) {
    return UsageError("--check and --check-against both choose the reference; give one");
  }
  // The report is written in one checked piece at the end, so that output lost to a
  // full disk or a file-size limit is an error rather than a silent success.
  std::ostringstream report;
  int code = RunSession(request, report, std::cerr);
  if (absl::Status s = WriteStandardOutput(report.str()); !s.ok()) {
    std::cerr << "commir-run: error: " << s.message() << "\n";
    if (code == kExitSuccess) code = kExitInvalidInput;
  }
  return code;
}

}  // namespace commir

int main(int argc, char** argv) { return commir::CommirRunMain(argc, argv); }
