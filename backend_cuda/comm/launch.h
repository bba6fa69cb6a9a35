// How this process was launched (docs/commir-run-cuda.md, "Launch modes"), read from the
// environment conventions of torchrun, Slurm, Open MPI and MPICH/PMI, and how the mesh
// devices of a CommIR program are spread over processes and GPUs.
//
// Plain C++ with no CUDA dependency so that it is unit-tested on any machine.
//
// Precedence (first match wins; the first variable named is the trigger):
//   1. torchrun  RANK + WORLD_SIZE (LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
//                MASTER_ADDR, MASTER_PORT)
//   2. Open MPI  OMPI_COMM_WORLD_RANK + OMPI_COMM_WORLD_SIZE
//                (OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE, OMPI_COMM_WORLD_NODE_RANK)
//   3. Slurm     SLURM_PROCID + SLURM_NTASKS (SLURM_LOCALID, SLURM_NTASKS_PER_NODE or
//                SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE, SLURM_NODEID,
//                SLURM_STEP_NODELIST / SLURM_NODELIST)
//   4. MPICH/PMI PMI_RANK + PMI_SIZE (MPI_LOCALRANKID, MPI_LOCALNRANKS)
//   5. none      a single process.
// torchrun comes first because torchrun inside an srun/mpirun allocation exports its own
// RANK/WORLD_SIZE describing the processes it spawned; Open MPI before Slurm because
// mpirun inside an allocation leaves SLURM_* describing the allocation, not the job.
// For every source, MASTER_ADDR / MASTER_PORT from the environment win when set; Slurm
// otherwise takes the first host of the node list, the others "localhost" only when the
// whole job is on one node. A missing port is filled with kDefaultMasterPort.
// COMMIR_LAUNCH=none|torchrun|slurm|mpirun|mpich forces a source (e.g. "none" to run one
// process inside an sbatch script whose SLURM_* variables describe tasks never started).
#ifndef COMMIR_BACKEND_CUDA_COMM_LAUNCH_H_
#define COMMIR_BACKEND_CUDA_COMM_LAUNCH_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace commir::cuda::comm {

enum class LaunchSource { kNone, kTorchrun, kSlurm, kOpenMpi, kMpich };
absl::string_view LaunchSourceName(LaunchSource source);  // "none", "torchrun", ...

// The spec's launch modes: (a) one process per GPU, (b) one process driving every
// visible GPU, (c) more mesh devices than GPUs. Decided by PlanDevices, not by the
// environment alone.
enum class LaunchMode { kProcessPerGpu, kSingleProcess, kSharedGpu };
absl::string_view LaunchModeName(LaunchMode mode);

inline constexpr int kDefaultMasterPort = 29500;

struct LaunchInfo {
  LaunchSource source = LaunchSource::kNone;
  int rank = 0;              // global process rank, 0 <= rank < world_size
  int world_size = 1;        // number of processes
  int local_rank = 0;        // rank among the processes on this node
  int local_world_size = 1;  // processes on this node
  int node_rank = 0;         // 0 <= node_rank < num_nodes
  int num_nodes = 1;
  std::string master_addr = "localhost";  // where rank 0 listens for TCP rendezvous
  int master_port = kDefaultMasterPort;
  // Port of the TCP rendezvous for the NCCL id: COMMIR_RENDEZVOUS_PORT when set; else
  // master_port + 1 under torchrun, whose agent already serves its own store on
  // MASTER_PORT; else master_port.
  int rendezvous_port = kDefaultMasterPort;

  bool multi_process() const { return world_size > 1; }
  std::string DebugString() const;  // one line, for logs and the launch_info tool
};

// Looks up an environment variable; std::nullopt when unset. Tests pass a fake.
using EnvLookup = std::function<std::optional<std::string>(absl::string_view name)>;
EnvLookup ProcessEnv();  // getenv

// Reads the launch environment. Inconsistent or malformed values (rank >= world size,
// a non-number, local rank >= local size, a port out of range, ...) are InvalidArgument
// naming the variables involved.
absl::StatusOr<LaunchInfo> DetectLaunch(const EnvLookup& env);

// Expands a Slurm host list ("node[01-03,07],gpu5") into host names, in order.
absl::StatusOr<std::vector<std::string>> ExpandSlurmHostList(absl::string_view list);

// Which mesh devices this process drives and on which GPU ordinal each one runs.
// Rule (identical on every process, so no exchange is needed):
//   - mesh devices are split into equal contiguous blocks, process p drives
//     [p * k, (p + 1) * k) with k = mesh_size / world_size (must divide);
//   - with several processes on a node, each uses one GPU: ordinal local_rank when it
//     sees at least local_world_size GPUs, else ordinal 0 when it sees exactly one (a
//     launcher that sets CUDA_VISIBLE_DEVICES per process); anything else is an error;
//   - with one process on the node it uses g = min(k, visible_gpus) GPUs and its local
//     device i runs on GPU i * g / k (contiguous blocks of devices share a GPU).
struct LocalDevice {
  int64_t mesh_device = 0;
  int gpu = 0;  // CUDA device ordinal as this process sees it
};

struct DevicePlan {
  LaunchMode mode = LaunchMode::kSingleProcess;
  int64_t mesh_size = 1;
  int world_size = 1;
  int rank = 0;
  int64_t devices_per_process = 1;  // k
  int gpus_per_process = 1;         // g
  std::vector<LocalDevice> local;   // k entries, ascending mesh_device

  // True when some GPU runs more than one mesh device (mode (c)).
  bool shares_gpus() const { return devices_per_process > gpus_per_process; }
  // The process that drives mesh device d.
  int ProcessOf(int64_t device) const { return static_cast<int>(device / devices_per_process); }
  bool IsLocal(int64_t device) const { return ProcessOf(device) == rank; }
  // Index into `local` of a device this process drives, or -1.
  int LocalIndex(int64_t device) const;
  std::string DebugString() const;
};

// visible_gpus: what cudaGetDeviceCount reported (>= 1). FailedPrecondition when the
// mesh cannot be spread as described above.
absl::StatusOr<DevicePlan> PlanDevices(const LaunchInfo& launch, int64_t mesh_size,
                                       int visible_gpus);

}  // namespace commir::cuda::comm

#endif  // COMMIR_BACKEND_CUDA_COMM_LAUNCH_H_
