// What one commir-run invocation asks for: the parsed command line (docs/commir-run.md).
#ifndef COMMIR_TOOLS_RUN_REQUEST_H_
#define COMMIR_TOOLS_RUN_REQUEST_H_

#include <cstdint>
#include <optional>
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
  // --steps: run a training-step function this many times, feeding its new params back
  // (tools/step_loop.h); 0: run once.
  int steps = 0;
  std::string trace;
  bool allow_nonfinite = false;
  // Bound on each wait for the device in seconds (--timeout); 0: unbounded. A hung
  // collective becomes an error (exit 3) instead of a silent hang.
  double timeout_seconds = 300;
  // cuda backend: f32 GEMMs may use TF32 tensor cores (--allow-tf32); off by default
  // because TF32 misses the spec's 1e-5 tolerance for f32.
  bool allow_tf32 = false;
  // How data moves between devices inside a node (--p2p=ce|nccl): copy engines, or NCCL
  // wherever it can run. Unset: the cuda backend uses copy engines, the sim backend its
  // hardware description's "p2p" (which the flag overrides when given).
  std::optional<bool> p2p_nccl;
  // cuda backend: NCCL's SM budget (--nccl-ctas=N or MIN:MAX): ncclConfig_t minCTAs and
  // maxCTAs; 0: NCCL's choice.
  int nccl_min_ctas = 0;
  int nccl_max_ctas = 0;
  // sim backend (tools/sim_session.h): the cluster (a built-in name or a JSON file), GPUs
  // per node (0: the hardware's own), the report's format (text or json) and the memory
  // a device may use (empty: no limit; see ParseMemorySize).
  std::string hardware = "h100-sxm";
  int64_t gpus_per_node = 0;
  std::string format = "text";
  std::string max_memory;
};

}  // namespace commir

#endif  // COMMIR_TOOLS_RUN_REQUEST_H_
