// commir-run --backend=sim: predicts one run of the program on a described cluster
// (sim/predict.h) instead of running it, and reports the predicted time, communication,
// overlap, memory and FLOP/s (text, or JSON with --format=json), with the predicted
// timeline as a Perfetto trace (--trace). No tensor is allocated, so programs run at
// their real sizes.
#ifndef COMMIR_TOOLS_SIM_SESSION_H_
#define COMMIR_TOOLS_SIM_SESSION_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/run_request.h"

namespace commir {

// Runs the request with the sim backend. Returns the process exit status: 0, or 1 when
// the program does not fit in --max-memory (or is invalid), 2 for bad usage (flags that
// need real data: --check, --input, --output-dir, --bench).
int RunSimSession(const RunRequest& request, std::ostream& out, std::ostream& err);

// A --max-memory value in bytes: an integer with an optional unit (KB, MB, GB, TB in
// powers of 1000; KiB, MiB, GiB, TiB in powers of 1024), or `hbm`: the hardware's HBM
// capacity (returned as nullopt here, resolved by the caller).
absl::StatusOr<std::optional<int64_t>> ParseMemorySize(absl::string_view text);

}  // namespace commir

#endif  // COMMIR_TOOLS_SIM_SESSION_H_
