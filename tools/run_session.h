// commir-run's work, as a library: choose the function, make or load its inputs, run it
// on a backend, then report, write or check its results (docs/commir-run.md).
#ifndef COMMIR_TOOLS_RUN_SESSION_H_
#define COMMIR_TOOLS_RUN_SESSION_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tools/run_request.h"

namespace commir {

// Runs the request, printing results and reports to `out` and errors to `err`.
// Returns the process exit status (tools/exit_codes.h). With --backend=cuda under a
// multi-process launcher (torchrun, srun, mpirun) every process runs its share of the
// mesh and only rank 0 prints results, writes --output-dir and reports --check; the
// other ranks print errors only. --check references always run on the cpu backend.
int RunSession(const RunRequest& request, std::ostream& out, std::ostream& err);

}  // namespace commir

#endif  // COMMIR_TOOLS_RUN_SESSION_H_
