#include "backend_cuda/comm/launch.h"

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"

namespace commir::cuda::comm {
namespace {

// Returns the value of the first of `names` that is set, with its name.
std::optional<std::pair<std::string, std::string>> FirstSet(
    const EnvLookup& env, absl::Span<const absl::string_view> names) {
  for (absl::string_view name : names) {
    if (std::optional<std::string> value = env(name)) {
      return std::make_pair(std::string(name), *std::move(value));
    }
  }
  return std::nullopt;
}

// min_value is 0 for ranks and 1 for sizes (a size of 0 would also divide by zero).
absl::StatusOr<int> ParseInt(absl::string_view name, absl::string_view text, int min_value) {
  int value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value) || value < min_value) {
    return absl::InvalidArgumentError(
        absl::StrFormat("launch environment: %s=\"%s\" is not an integer >= %d", name, text,
                        min_value));
  }
  return value;
}
absl::StatusOr<int> ParseRank(absl::string_view name, absl::string_view text) {
  return ParseInt(name, text, 0);
}
absl::StatusOr<int> ParseSize(absl::string_view name, absl::string_view text) {
  return ParseInt(name, text, 1);
}

// The first of `names` that is set, parsed; std::nullopt when none is set.
absl::StatusOr<std::optional<int>> IntFromEnv(const EnvLookup& env,
                                              absl::Span<const absl::string_view> names,
                                              int min_value) {
  std::optional<std::pair<std::string, std::string>> found = FirstSet(env, names);
  if (!found) return std::optional<int>();
  absl::StatusOr<int> value = ParseInt(found->first, found->second, min_value);
  if (!value.ok()) return value.status();
  return std::optional<int>(*value);
}

#define COMMIR_ASSIGN_OR_RETURN_IMPL(var, expr, tmp) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  var = *std::move(tmp)
#define COMMIR_CONCAT_INNER(a, b) a##b
#define COMMIR_CONCAT(a, b) COMMIR_CONCAT_INNER(a, b)
#define ASSIGN_OR_RETURN(var, expr) \
  COMMIR_ASSIGN_OR_RETURN_IMPL(var, expr, COMMIR_CONCAT(status_or_, __LINE__))

// "2(x3),1" (Slurm's SLURM_TASKS_PER_NODE syntax) -> {2, 2, 2, 1}.
absl::StatusOr<std::vector<int>> ExpandTasksPerNode(absl::string_view name,
                                                    absl::string_view text) {
  std::vector<int> counts;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    int repeat = 1;
    if (size_t open = item.find("(x"); open != absl::string_view::npos) {
      if (item.back() != ')' ||
          !absl::SimpleAtoi(item.substr(open + 2, item.size() - open - 3), &repeat) ||
          repeat < 1) {
        return absl::InvalidArgumentError(
            absl::StrFormat("launch environment: cannot parse %s=\"%s\"", name, text));
      }
      item = item.substr(0, open);
    }
    int count = 0;
    if (!absl::SimpleAtoi(item, &count) || count < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("launch environment: cannot parse %s=\"%s\"", name, text));
    }
    counts.insert(counts.end(), repeat, count);
  }
  return counts;
}

// Checks shared by every launcher and fills in what can be derived.
absl::Status Validate(LaunchInfo& info, absl::string_view vars) {
  if (info.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("launch environment (%s): world size must be >= 1, got %d", vars,
                        info.world_size));
  }
  if (info.rank >= info.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "launch environment (%s): rank %d is not below world size %d", vars, info.rank,
        info.world_size));
  }
  if (info.local_world_size < 1 || info.local_world_size > info.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "launch environment (%s): local world size %d must be in [1, world size %d]", vars,
        info.local_world_size, info.world_size));
  }
  if (info.local_rank >= info.local_world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "launch environment (%s): local rank %d is not below local world size %d", vars,
        info.local_rank, info.local_world_size));
  }
  if (info.num_nodes < 1 || info.node_rank >= info.num_nodes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "launch environment (%s): node rank %d is not below node count %d", vars,
        info.node_rank, info.num_nodes));
  }
  if (info.num_nodes > info.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "launch environment (%s): %d nodes for only %d processes", vars, info.num_nodes,
        info.world_size));
  }
  if (info.master_port < 1 || info.master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "launch environment (%s): MASTER_PORT %d is not in [1, 65535]", vars,
        info.master_port));
  }
  return absl::OkStatus();
}

// MASTER_ADDR / MASTER_PORT when set (they win for every launcher).
absl::Status ApplyMasterEnv(const EnvLookup& env, LaunchInfo& info) {
  if (std::optional<std::string> addr = env("MASTER_ADDR"); addr && !addr->empty()) {
    info.master_addr = *addr;
  }
  std::optional<int> port;
  ASSIGN_OR_RETURN(port, IntFromEnv(env, {"MASTER_PORT"}, 1));
  if (port) info.master_port = *port;
  return absl::OkStatus();
}

// Node layout for launchers that only give local sizes: ranks are placed by node.
void DeriveNodesFromLocalSize(LaunchInfo& info) {
  info.num_nodes = (info.world_size + info.local_world_size - 1) / info.local_world_size;
  info.node_rank = info.rank / info.local_world_size;
}

absl::StatusOr<LaunchInfo> FromTorchrun(const EnvLookup& env) {
  LaunchInfo info;
  info.source = LaunchSource::kTorchrun;
  ASSIGN_OR_RETURN(info.rank, ParseRank("RANK", *env("RANK")));
  ASSIGN_OR_RETURN(info.world_size, ParseSize("WORLD_SIZE", *env("WORLD_SIZE")));
  std::optional<int> local_rank, local_size, group_rank, group_size;
  ASSIGN_OR_RETURN(local_rank, IntFromEnv(env, {"LOCAL_RANK"}, 0));
  ASSIGN_OR_RETURN(local_size, IntFromEnv(env, {"LOCAL_WORLD_SIZE"}, 1));
  ASSIGN_OR_RETURN(group_rank, IntFromEnv(env, {"GROUP_RANK"}, 0));
  ASSIGN_OR_RETURN(group_size, IntFromEnv(env, {"GROUP_WORLD_SIZE"}, 1));
  if (local_rank.has_value() != local_size.has_value() && local_size.has_value()) {
    return absl::InvalidArgumentError(
        "launch environment (torchrun): LOCAL_WORLD_SIZE is set but LOCAL_RANK is not");
  }
  // Without LOCAL_* (RANK/WORLD_SIZE set by hand) every process is taken to be on this node.
  info.local_world_size = local_size.value_or(info.world_size);
  info.local_rank = local_rank.value_or(info.rank % info.local_world_size);
  DeriveNodesFromLocalSize(info);
  if (group_size) info.num_nodes = *group_size;
  if (group_rank) info.node_rank = *group_rank;
  if (absl::Status s = ApplyMasterEnv(env, info); !s.ok()) return s;
  return info;
}

// The environment variables an MPI launcher exports for each process.
struct MpiEnvNames {
  LaunchSource source;
  const char* rank;
  const char* size;
  std::vector<absl::string_view> local_rank;  // in order of preference
  std::vector<absl::string_view> local_size;
};

// MPI launchers export a rank, a size and usually the rank and size within the node,
// but no node index: assume the default by-slot mapping (ranks filled node by node).
// (Open MPI's OMPI_COMM_WORLD_NODE_RANK is a rank within the node, not a node index.)
absl::StatusOr<LaunchInfo> FromMpiLauncher(const EnvLookup& env, const MpiEnvNames& names) {
  LaunchInfo info;
  info.source = names.source;
  ASSIGN_OR_RETURN(info.rank, ParseRank(names.rank, *env(names.rank)));
  ASSIGN_OR_RETURN(info.world_size, ParseSize(names.size, *env(names.size)));
  std::optional<int> local_rank, local_size;
  ASSIGN_OR_RETURN(local_rank, IntFromEnv(env, names.local_rank, 0));
  ASSIGN_OR_RETURN(local_size, IntFromEnv(env, names.local_size, 1));
  info.local_world_size = local_size.value_or(info.world_size);
  info.local_rank = local_rank.value_or(info.rank % info.local_world_size);
  DeriveNodesFromLocalSize(info);
  // Across nodes "localhost" would be wrong: leave it unknown unless MASTER_ADDR is set.
  if (info.num_nodes > 1) info.master_addr.clear();
  if (absl::Status s = ApplyMasterEnv(env, info); !s.ok()) return s;
  return info;
}

absl::StatusOr<LaunchInfo> FromOpenMpi(const EnvLookup& env) {
  return FromMpiLauncher(env, {LaunchSource::kOpenMpi, "OMPI_COMM_WORLD_RANK",
                               "OMPI_COMM_WORLD_SIZE", {"OMPI_COMM_WORLD_LOCAL_RANK"},
                               {"OMPI_COMM_WORLD_LOCAL_SIZE"}});
}

absl::StatusOr<LaunchInfo> FromMpich(const EnvLookup& env) {
  return FromMpiLauncher(env, {LaunchSource::kMpich, "PMI_RANK", "PMI_SIZE",
                               {"MPI_LOCALRANKID", "PMI_LOCAL_RANK"},
                               {"MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"}});
}

absl::StatusOr<LaunchInfo> FromSlurm(const EnvLookup& env) {
  LaunchInfo info;
  info.source = LaunchSource::kSlurm;
  ASSIGN_OR_RETURN(info.rank, ParseRank("SLURM_PROCID", *env("SLURM_PROCID")));
  // Inside an srun step the step's task count is what matters (the job may have more).
  std::optional<int> world;
  ASSIGN_OR_RETURN(world, IntFromEnv(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS",
                                           "SLURM_NPROCS"}, 1));
  info.world_size = world.value_or(1);

  std::optional<int> node_id, local_id, num_nodes;
  ASSIGN_OR_RETURN(node_id, IntFromEnv(env, {"SLURM_NODEID"}, 0));
  ASSIGN_OR_RETURN(local_id, IntFromEnv(env, {"SLURM_LOCALID"}, 0));
  ASSIGN_OR_RETURN(num_nodes, IntFromEnv(env, {"SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES",
                                               "SLURM_NNODES"}, 1));
  std::vector<std::string> hosts;
  if (std::optional<std::pair<std::string, std::string>> list =
          FirstSet(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})) {
    absl::StatusOr<std::vector<std::string>> expanded = ExpandSlurmHostList(list->second);
    if (!expanded.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "launch environment: %s: %s", list->first, expanded.status().message()));
    }
    hosts = *std::move(expanded);
  }
  info.node_rank = node_id.value_or(0);
  info.num_nodes = num_nodes.value_or(hosts.empty() ? 1 : static_cast<int>(hosts.size()));

  // Tasks on this node: a uniform SLURM_NTASKS_PER_NODE, else the per-node list.
  std::optional<int> per_node;
  if (std::optional<std::pair<std::string, std::string>> list =
          FirstSet(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE",
                         "SLURM_TASKS_PER_NODE"})) {
    std::vector<int> counts;
    ASSIGN_OR_RETURN(counts, ExpandTasksPerNode(list->first, list->second));
    if (counts.size() == 1) {
      per_node = counts[0];
    } else if (info.node_rank < static_cast<int>(counts.size())) {
      per_node = counts[info.node_rank];
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "launch environment (slurm): %s=\"%s\" has no entry for SLURM_NODEID=%d",
          list->first, list->second, info.node_rank));
    }
  }
  info.local_world_size = per_node.value_or(info.num_nodes == 1 ? info.world_size : 1);
  info.local_rank = local_id.value_or(info.local_world_size == 1 ? 0 : info.rank % info.local_world_size);

  if (!hosts.empty()) {
    info.master_addr = hosts.front();
  } else if (info.num_nodes > 1) {
    info.master_addr.clear();  // unknown: TCP rendezvous will ask for MASTER_ADDR
  }
  if (absl::Status s = ApplyMasterEnv(env, info); !s.ok()) return s;
  return info;
}

// The launcher named by `trigger` is used when both of its variables are set; exactly one
// of them set is an error (a half-configured launcher would silently run single-process).
absl::StatusOr<bool> Triggered(const EnvLookup& env, absl::string_view rank_var,
                               absl::string_view size_var, bool size_optional = false) {
  bool has_rank = env(rank_var).has_value();
  bool has_size = env(size_var).has_value();
  if (has_rank && !has_size && !size_optional) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "launch environment: %s is set but %s is not", rank_var, size_var));
  }
  if (has_size && !has_rank) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "launch environment: %s is set but %s is not", size_var, rank_var));
  }
  return has_rank;
}

}  // namespace

absl::string_view LaunchSourceName(LaunchSource source) {
  switch (source) {
    case LaunchSource::kNone:
      return "none";
    case LaunchSource::kTorchrun:
      return "torchrun";
    case LaunchSource::kSlurm:
      return "slurm";
    case LaunchSource::kOpenMpi:
      return "mpirun";
    case LaunchSource::kMpich:
      return "mpich";
  }
  return "unknown";
}

absl::string_view LaunchModeName(LaunchMode mode) {
  switch (mode) {
    case LaunchMode::kProcessPerGpu:
      return "process-per-gpu";
    case LaunchMode::kSingleProcess:
      return "single-process";
    case LaunchMode::kSharedGpu:
      return "shared-gpu";
  }
  return "unknown";
}

std::string LaunchInfo::DebugString() const {
  return absl::StrFormat(
      "source=%s rank=%d world_size=%d local_rank=%d local_world_size=%d node=%d/%d "
      "master=%s:%d rendezvous_port=%d",
      LaunchSourceName(source), rank, world_size, local_rank, local_world_size, node_rank,
      num_nodes, master_addr.empty() ? "<unknown>" : master_addr, master_port, rendezvous_port);
}

EnvLookup ProcessEnv() {
  return [](absl::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

absl::StatusOr<LaunchInfo> DetectLaunch(const EnvLookup& env) {
  absl::StatusOr<LaunchInfo> info;
  absl::string_view vars;
  // COMMIR_LAUNCH forces a source, e.g. "none" inside an sbatch script whose SLURM_*
  // describe tasks that were never started.
  std::optional<std::string> forced = env("COMMIR_LAUNCH");
  auto wants = [&](absl::string_view name) { return !forced || *forced == name; };
  if (forced && *forced != "none" && *forced != "torchrun" && *forced != "mpirun" &&
      *forced != "slurm" && *forced != "mpich") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "COMMIR_LAUNCH=\"%s\": expected none, torchrun, slurm, mpirun or mpich", *forced));
  }
  bool torchrun = false, ompi = false, slurm = false, mpich = false;
  if (wants("torchrun")) {
    ASSIGN_OR_RETURN(torchrun, Triggered(env, "RANK", "WORLD_SIZE"));
  }
  if (!torchrun && wants("mpirun")) {
    ASSIGN_OR_RETURN(ompi, Triggered(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"));
  }
  // SLURM_NTASKS alone is normal in a batch script (no SLURM_PROCID): not an error.
  if (!torchrun && !ompi && wants("slurm")) {
    slurm = env("SLURM_PROCID").has_value();
  }
  if (!torchrun && !ompi && !slurm && wants("mpich")) {
    ASSIGN_OR_RETURN(mpich, Triggered(env, "PMI_RANK", "PMI_SIZE"));
  }
  if (forced && *forced != "none" && !torchrun && !ompi && !slurm && !mpich) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "COMMIR_LAUNCH=%s but its rank/size variables are not set", *forced));
  }
  if (torchrun) {
    info = FromTorchrun(env);
    vars = "RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE";
  } else if (ompi) {
    info = FromOpenMpi(env);
    vars = "OMPI_COMM_WORLD_*";
  } else if (slurm) {
    info = FromSlurm(env);
    vars = "SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID/SLURM_NODEID";
  } else if (mpich) {
    info = FromMpich(env);
    vars = "PMI_RANK/PMI_SIZE/MPI_LOCALRANKID";
  } else {
    info = LaunchInfo();
    vars = "none";
    if (absl::Status s = ApplyMasterEnv(env, *info); !s.ok()) return s;
  }
  if (!info.ok()) return info.status();
  if (absl::Status s = Validate(*info, vars); !s.ok()) return s;
  std::optional<int> rendezvous_port;
  ASSIGN_OR_RETURN(rendezvous_port, IntFromEnv(env, {"COMMIR_RENDEZVOUS_PORT"}, 1));
  info->rendezvous_port = rendezvous_port.value_or(
      info->source == LaunchSource::kTorchrun ? info->master_port + 1 : info->master_port);
  if (info->rendezvous_port > 65535) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "launch environment: rendezvous port %d is not in [1, 65535] (set "
        "COMMIR_RENDEZVOUS_PORT)",
        info->rendezvous_port));
  }
  return info;
}

absl::StatusOr<std::vector<std::string>> ExpandSlurmHostList(absl::string_view list) {
  // Split at top-level commas (commas inside brackets separate ranges).
  std::vector<std::string> items;
  int depth = 0;
  std::string current;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) {
      return absl::InvalidArgumentError(absl::StrFormat("bad host list \"%s\"", list));
    }
    if (c == ',' && depth == 0) {
      items.push_back(std::move(current));
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (depth != 0) return absl::InvalidArgumentError(absl::StrFormat("bad host list \"%s\"", list));
  items.push_back(std::move(current));

  std::vector<std::string> hosts;
  for (std::string& item : items) {
    item = std::string(absl::StripAsciiWhitespace(item));
    if (item.empty()) continue;
    // Expand brackets left to right; each one multiplies the names built so far.
    std::vector<std::string> names = {""};
    size_t pos = 0;
    while (pos < item.size()) {
      size_t open = item.find('[', pos);
      std::string literal = item.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
      for (std::string& name : names) name += literal;
      if (open == std::string::npos) break;
      size_t close = item.find(']', open);
      std::vector<std::string> suffixes;
      for (absl::string_view range :
           absl::StrSplit(absl::string_view(item).substr(open + 1, close - open - 1), ',')) {
        std::vector<absl::string_view> bounds = absl::StrSplit(range, '-');
        int64_t lo = 0, hi = 0;
        if (bounds.size() > 2 || bounds[0].empty() || !absl::SimpleAtoi(bounds[0], &lo) ||
            !absl::SimpleAtoi(bounds.back(), &hi) || lo < 0 || hi < lo || hi - lo > 100000) {
          return absl::InvalidArgumentError(
              absl::StrFormat("bad range \"%s\" in host list \"%s\"", range, list));
        }
        int width = static_cast<int>(bounds[0].size());  // keeps zero padding: 01-03
        for (int64_t i = lo; i <= hi; ++i) suffixes.push_back(absl::StrFormat("%0*d", width, i));
      }
      std::vector<std::string> expanded;
      expanded.reserve(names.size() * suffixes.size());
      for (const std::string& name : names) {
        for (const std::string& suffix : suffixes) expanded.push_back(name + suffix);
      }
      names = std::move(expanded);
      pos = close + 1;
    }
    hosts.insert(hosts.end(), names.begin(), names.end());
  }
  if (hosts.empty()) return absl::InvalidArgumentError("empty host list");
  return hosts;
}

int DevicePlan::LocalIndex(int64_t device) const {
  if (!IsLocal(device)) return -1;
  return static_cast<int>(device - static_cast<int64_t>(rank) * devices_per_process);
}

std::string DevicePlan::DebugString() const {
  std::vector<std::string> parts;
  for (const LocalDevice& d : local) parts.push_back(absl::StrFormat("%d->gpu%d", d.mesh_device, d.gpu));
  return absl::StrFormat("mode=%s mesh_size=%d process=%d/%d devices=[%s]", LaunchModeName(mode),
                         mesh_size, rank, world_size, absl::StrJoin(parts, ","));
}

absl::StatusOr<DevicePlan> PlanDevices(const LaunchInfo& launch, int64_t mesh_size,
                                       int visible_gpus) {
  if (visible_gpus < 1) {
    return absl::FailedPreconditionError("no GPU is visible to this process");
  }
  if (mesh_size < 1 || mesh_size % launch.world_size != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the mesh has %d devices, which cannot be split evenly over %d processes (%s)",
        mesh_size, launch.world_size, LaunchSourceName(launch.source)));
  }
  DevicePlan plan;
  plan.mesh_size = mesh_size;
  plan.world_size = launch.world_size;
  plan.rank = launch.rank;
  plan.devices_per_process = mesh_size / launch.world_size;
  const int64_t k = plan.devices_per_process;
  const int64_t first = static_cast<int64_t>(launch.rank) * k;
  if (launch.local_world_size > 1) {
    int gpu = 0;
    if (visible_gpus >= launch.local_world_size) {
      gpu = launch.local_rank;
    } else if (visible_gpus != 1) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%d processes on this node but %d visible GPUs: give each process its own GPU "
          "(one visible GPU each, or at least %d visible to all)",
          launch.local_world_size, visible_gpus, launch.local_world_size));
    }
    plan.gpus_per_process = 1;
    for (int64_t i = 0; i < k; ++i) plan.local.push_back({first + i, gpu});
  } else {
    plan.gpus_per_process = static_cast<int>(std::min<int64_t>(k, visible_gpus));
    for (int64_t i = 0; i < k; ++i) {
      plan.local.push_back({first + i, static_cast<int>(i * plan.gpus_per_process / k)});
    }
  }
  if (plan.shares_gpus()) {
    plan.mode = LaunchMode::kSharedGpu;
  } else if (launch.world_size > 1 && plan.gpus_per_process == 1) {
    plan.mode = LaunchMode::kProcessPerGpu;
  } else {
    plan.mode = LaunchMode::kSingleProcess;
  }
  return plan;
}

}  // namespace commir::cuda::comm
