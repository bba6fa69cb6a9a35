// commir-run's work, as a library: choose the function, make or load its inputs, run it
// on a backend, then report, write or check its results (spec section 6).
#ifndef COMMIR_TOOLS_RUN_SESSION_H_
#define COMMIR_TOOLS_RUN_SESSION_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tools/input_init.h"

namespace commir {

struct RunRequest {
  std::string file = "-";
  std::string func;  // without '@'; empty: the module's only function
  std::string backend = "cpu";
  uint64_t seed = 0;
  // How arguments without --input are drawn (--init; tools/input_init.h).
  InitScheme init = InitScheme::kUniform;
  std::vector<std::pair<std::string, std::string>> inputs;  // argument name -> .npy path
  std::string output_dir;
  bool check = false;
  std::string check_against;
  std::optional<double> rtol;
  int bench = 0;
  std::string trace;
  bool allow_nonfinite = false;
  // Bound on each wait for the device in seconds (--timeout); 0: unbounded. A hung
  // collective becomes an error (exit 3) instead of a silent hang.
  double timeout_seconds = 300;
  // cuda backend: f32 GEMMs may use TF32 tensor cores (--allow-tf32); off by default
  // because TF32 misses the spec's 1e-5 tolerance for f32.
  bool allow_tf32 = false;
};

// Runs the request, printing results and reports to `out` and errors to `err`.
// Returns the process exit status (tools/exit_codes.h). With --backend=cuda under a
// multi-process launcher (torchrun, srun, mpirun) every process runs its share of the
// mesh and only rank 0 prints results, writes --output-dir and reports --check; the
// other ranks print errors only. --check references always run on the cpu backend.
int RunSession(const RunRequest& request, std::ostream& out, std::ostream& err);

}  // namespace commir

#endif  // COMMIR_TOOLS_RUN_SESSION_H_
