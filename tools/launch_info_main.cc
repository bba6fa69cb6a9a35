// Prints the launch environment as the cuda backend sees it, and optionally the device
// plan for a mesh: `launch_info [MESH_SIZE [VISIBLE_GPUS]]`. Useful to check a torchrun /
// srun / mpirun setup before running commir-run. Exit status 3 on an inconsistent env.
#include <cstdio>

#include "absl/strings/numbers.h"
#include "backend_cuda/comm/launch.h"

int main(int argc, char** argv) {
  using namespace commir::cuda::comm;
  absl::StatusOr<LaunchInfo> launch = DetectLaunch(ProcessEnv());
  if (!launch.ok()) {
    std::fprintf(stderr, "launch_info: %s\n", launch.status().ToString().c_str());
    return 3;
  }
  std::printf("%s\n", launch->DebugString().c_str());
  if (argc > 1) {
    int64_t mesh_size = 0;
    int gpus = 1;
    if (!absl::SimpleAtoi(argv[1], &mesh_size) || (argc > 2 && !absl::SimpleAtoi(argv[2], &gpus))) {
      std::fprintf(stderr, "usage: launch_info [MESH_SIZE [VISIBLE_GPUS]]\n");
      return 2;
    }
    absl::StatusOr<DevicePlan> plan = PlanDevices(*launch, mesh_size, gpus);
    if (!plan.ok()) {
      std::fprintf(stderr, "launch_info: %s\n", plan.status().ToString().c_str());
      return 3;
    }
    std::printf("%s\n", plan->DebugString().c_str());
  }
  return 0;
}
