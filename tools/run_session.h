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

namespace commir {

struct RunRequest {
  std::string file = "-";
  std::string func;  // without '@'; empty: the module's only function
  std::string backend = "cpu";
  uint64_t seed = 0;
  std::vector<std::pair<std::string, std::string>> inputs;  // argument name -> .npy path
  std::string output_dir;
  bool check = false;
  std::string check_against;
  std::optional<double> rtol;
  int bench = 0;
  std::string trace;
  bool allow_nonfinite = false;
};

// Runs the request, printing results and reports to `out` and errors to `err`.
// Returns the process exit status (tools/exit_codes.h).
int RunSession(const RunRequest& request, std::ostream& out, std::ostream& err);

}  // namespace commir

#endif  // COMMIR_TOOLS_RUN_SESSION_H_
