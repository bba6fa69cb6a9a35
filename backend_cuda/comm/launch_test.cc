#include "backend_cuda/comm/launch.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace commir::cuda::comm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](absl::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(DetectLaunchTest, NoLauncherIsSingleProcess) {
  absl::StatusOr<LaunchInfo> info = DetectLaunch(FakeEnv({}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->source, LaunchSource::kNone);
  EXPECT_EQ(info->world_size, 1);
  EXPECT_EQ(info->rank, 0);
  EXPECT_EQ(info->master_addr, "localhost");
  EXPECT_EQ(info->master_port, kDefaultMasterPort);
  EXPECT_FALSE(info->multi_process());
}

TEST(DetectLaunchTest, Torchrun) {
  absl::StatusOr<LaunchInfo> info = DetectLaunch(FakeEnv({{"RANK", "5"},
                                                          {"WORLD_SIZE", "8"},
                                                          {"LOCAL_RANK", "1"},
                                                          {"LOCAL_WORLD_SIZE", "4"},
                                                          {"GROUP_RANK", "1"},
                                                          {"MASTER_ADDR", "10.0.0.7"},
                                                          {"MASTER_PORT", "1234"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->source, LaunchSource::kTorchrun);
  EXPECT_EQ(info->rank, 5);
  EXPECT_EQ(info->world_size, 8);
  EXPECT_EQ(info->local_rank, 1);
  EXPECT_EQ(info->local_world_size, 4);
  EXPECT_EQ(info->node_rank, 1);
  EXPECT_EQ(info->num_nodes, 2);
  EXPECT_EQ(info->master_addr, "10.0.0.7");
  EXPECT_EQ(info->master_port, 1234);
  EXPECT_EQ(info->rendezvous_port, 1235);  // torchrun's agent owns MASTER_PORT
}

TEST(DetectLaunchTest, RendezvousPort) {
  absl::StatusOr<LaunchInfo> info = DetectLaunch(FakeEnv(
      {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"MASTER_PORT", "4000"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->rendezvous_port, 4000);
  info = DetectLaunch(FakeEnv({{"RANK", "0"},
                               {"WORLD_SIZE", "2"},
                               {"MASTER_PORT", "4000"},
                               {"COMMIR_RENDEZVOUS_PORT", "5000"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->rendezvous_port, 5000);
  EXPECT_FALSE(DetectLaunch(FakeEnv({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "65535"}}))
                   .ok());
}

TEST(DetectLaunchTest, TorchrunWinsOverSlurmAndMpi) {
  absl::StatusOr<LaunchInfo> info = DetectLaunch(FakeEnv({{"RANK", "1"},
                                                          {"WORLD_SIZE", "2"},
                                                          {"LOCAL_RANK", "1"},
                                                          {"LOCAL_WORLD_SIZE", "2"},
                                                          {"SLURM_PROCID", "0"},
                                                          {"SLURM_NTASKS", "1"},
                                                          {"OMPI_COMM_WORLD_RANK", "0"},
                                                          {"OMPI_COMM_WORLD_SIZE", "1"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->source, LaunchSource::kTorchrun);
  EXPECT_EQ(info->rank, 1);
}

TEST(DetectLaunchTest, OpenMpiWinsOverSlurm) {
  absl::StatusOr<LaunchInfo> info = DetectLaunch(FakeEnv({{"OMPI_COMM_WORLD_RANK", "3"},
                                                          {"OMPI_COMM_WORLD_SIZE", "4"},
                                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                                          {"SLURM_PROCID", "0"},
                                                          {"SLURM_NTASKS", "1"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->source, LaunchSource::kOpenMpi);
  EXPECT_EQ(info->rank, 3);
  EXPECT_EQ(info->local_rank, 1);
  EXPECT_EQ(info->num_nodes, 2);
  EXPECT_EQ(info->node_rank, 1);
  EXPECT_EQ(info->master_addr, "");  // two nodes and no MASTER_ADDR: unknown
}

TEST(DetectLaunchTest, SlurmWithNodeListAndTasksPerNode) {
  absl::StatusOr<LaunchInfo> info =
      DetectLaunch(FakeEnv({{"SLURM_PROCID", "4"},
                            {"SLURM_NTASKS", "7"},
                            {"SLURM_LOCALID", "1"},
                            {"SLURM_NODEID", "1"},
                            {"SLURM_STEP_TASKS_PER_NODE", "3(x2),1"},
                            {"SLURM_STEP_NODELIST", "gpu[07-09]"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->source, LaunchSource::kSlurm);
  EXPECT_EQ(info->rank, 4);
  EXPECT_EQ(info->world_size, 7);
  EXPECT_EQ(info->local_rank, 1);
  EXPECT_EQ(info->local_world_size, 3);
  EXPECT_EQ(info->node_rank, 1);
  EXPECT_EQ(info->num_nodes, 3);
  EXPECT_EQ(info->master_addr, "gpu07");  // first node of the step
  EXPECT_EQ(info->master_port, kDefaultMasterPort);
}

TEST(DetectLaunchTest, SlurmMasterAddrFromEnvWins) {
  absl::StatusOr<LaunchInfo> info = DetectLaunch(FakeEnv({{"SLURM_PROCID", "0"},
                                                          {"SLURM_NTASKS", "2"},
                                                          {"SLURM_NTASKS_PER_NODE", "1"},
                                                          {"SLURM_NNODES", "2"},
                                                          {"SLURM_NODELIST", "a,b"},
                                                          {"MASTER_ADDR", "head"},
                                                          {"MASTER_PORT", "777"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->master_addr, "head");
  EXPECT_EQ(info->master_port, 777);
  EXPECT_EQ(info->local_world_size, 1);
}

TEST(DetectLaunchTest, SlurmStepTaskCountWinsOverJob) {
  absl::StatusOr<LaunchInfo> info = DetectLaunch(FakeEnv(
      {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "16"}, {"SLURM_STEP_NUM_TASKS", "2"},
       {"SLURM_LOCALID", "1"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->world_size, 2);
  EXPECT_EQ(info->local_world_size, 2);  // one node: every task is local
}

TEST(DetectLaunchTest, SlurmMultiNodeWithoutHostsLeavesMasterUnknown) {
  absl::StatusOr<LaunchInfo> info = DetectLaunch(FakeEnv(
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NNODES", "2"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->master_addr, "");
}

TEST(DetectLaunchTest, Mpich) {
  absl::StatusOr<LaunchInfo> info = DetectLaunch(FakeEnv(
      {{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "2"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->source, LaunchSource::kMpich);
  EXPECT_EQ(info->rank, 2);
  EXPECT_EQ(info->local_rank, 0);
  EXPECT_EQ(info->node_rank, 1);
}

TEST(DetectLaunchTest, ForcedNoneIgnoresBatchScriptSlurmVariables) {
  absl::StatusOr<LaunchInfo> info = DetectLaunch(
      FakeEnv({{"COMMIR_LAUNCH", "none"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->source, LaunchSource::kNone);
  EXPECT_EQ(info->world_size, 1);
}

TEST(DetectLaunchTest, ForcedSourceMustBeKnownAndPresent) {
  EXPECT_THAT(DetectLaunch(FakeEnv({{"COMMIR_LAUNCH", "pbs"}})).status().message(),
              HasSubstr("COMMIR_LAUNCH"));
  EXPECT_THAT(DetectLaunch(FakeEnv({{"COMMIR_LAUNCH", "slurm"}})).status().message(),
              HasSubstr("not set"));
}

TEST(DetectLaunchTest, InconsistentEnvironmentsAreErrors) {
  struct Case {
    std::map<std::string, std::string> env;
    std::string message;
  };
  std::vector<Case> cases = {
      {{{"RANK", "0"}}, "RANK is set but WORLD_SIZE is not"},
      {{{"WORLD_SIZE", "2"}}, "RANK is not"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "rank 2 is not below world size 2"},
      {{{"RANK", "x"}, {"WORLD_SIZE", "2"}}, "RANK=\"x\""},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE=\"0\""},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}},
       "local rank 2"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "3"}, {"LOCAL_RANK", "0"}},
       "local world size 3"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT 70000"},
      {{{"OMPI_COMM_WORLD_RANK", "1"}}, "OMPI_COMM_WORLD_SIZE"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_NODEID", "3"},
        {"SLURM_TASKS_PER_NODE", "2(x2)"}},
       "no entry for SLURM_NODEID=3"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_TASKS_PER_NODE", "2(x"}},
       "cannot parse SLURM_TASKS_PER_NODE"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<LaunchInfo> info = DetectLaunch(FakeEnv(c.env));
    ASSERT_FALSE(info.ok()) << c.message;
    EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(info.status().message(), HasSubstr(c.message));
  }
}

TEST(ExpandSlurmHostListTest, RangesPaddingAndProducts) {
  EXPECT_THAT(*ExpandSlurmHostList("node[01-03,07],gpu5"),
              ElementsAre("node01", "node02", "node03", "node07", "gpu5"));
  EXPECT_THAT(*ExpandSlurmHostList("r[1-2]-n[8-9]"),
              ElementsAre("r1-n8", "r1-n9", "r2-n8", "r2-n9"));
  EXPECT_THAT(*ExpandSlurmHostList("single"), ElementsAre("single"));
  EXPECT_FALSE(ExpandSlurmHostList("n[3-1]").ok());
  EXPECT_FALSE(ExpandSlurmHostList("n[1-2").ok());
  EXPECT_FALSE(ExpandSlurmHostList("").ok());
}

LaunchInfo Launch(int rank, int world, int local_rank, int local_world) {
  LaunchInfo info;
  info.rank = rank;
  info.world_size = world;
  info.local_rank = local_rank;
  info.local_world_size = local_world;
  return info;
}

TEST(PlanDevicesTest, ProcessPerGpu) {
  absl::StatusOr<DevicePlan> plan = PlanDevices(Launch(3, 4, 1, 2), 8, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->mode, LaunchMode::kSharedGpu);  // 2 devices per process, one GPU each
  ASSERT_EQ(plan->local.size(), 2u);
  EXPECT_EQ(plan->local[0].mesh_device, 6);
  EXPECT_EQ(plan->local[1].mesh_device, 7);
  EXPECT_EQ(plan->local[0].gpu, 1);
  EXPECT_EQ(plan->local[1].gpu, 1);
  EXPECT_EQ(plan->ProcessOf(5), 2);
  EXPECT_EQ(plan->LocalIndex(7), 1);
  EXPECT_EQ(plan->LocalIndex(5), -1);

  plan = PlanDevices(Launch(1, 4, 1, 2), 4, 8);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->mode, LaunchMode::kProcessPerGpu);
  ASSERT_EQ(plan->local.size(), 1u);
  EXPECT_EQ(plan->local[0].mesh_device, 1);
  EXPECT_EQ(plan->local[0].gpu, 1);  // LOCAL_RANK picks the GPU
}

TEST(PlanDevicesTest, OneVisibleGpuPerProcess) {
  // e.g. srun --gpus-per-task=1: each process sees only "its" GPU as ordinal 0.
  absl::StatusOr<DevicePlan> plan = PlanDevices(Launch(3, 4, 3, 4), 4, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->local[0].gpu, 0);
  EXPECT_THAT(PlanDevices(Launch(3, 4, 3, 4), 4, 2).status().message(),
              HasSubstr("4 processes on this node but 2 visible GPUs"));
}

TEST(PlanDevicesTest, SingleProcessDrivesAllGpus) {
  absl::StatusOr<DevicePlan> plan = PlanDevices(Launch(0, 1, 0, 1), 4, 8);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->mode, LaunchMode::kSingleProcess);
  EXPECT_FALSE(plan->shares_gpus());
  ASSERT_EQ(plan->local.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(plan->local[i].gpu, i);
}

TEST(PlanDevicesTest, MoreDevicesThanGpusShareContiguously) {
  absl::StatusOr<DevicePlan> plan = PlanDevices(Launch(0, 1, 0, 1), 8, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->mode, LaunchMode::kSharedGpu);
  EXPECT_TRUE(plan->shares_gpus());
  std::vector<int> gpus;
  for (const LocalDevice& d : plan->local) gpus.push_back(d.gpu);
  EXPECT_THAT(gpus, ElementsAre(0, 0, 0, 0, 1, 1, 1, 1));

  plan = PlanDevices(Launch(0, 1, 0, 1), 4, 1);  // the whole mesh on one GPU
  ASSERT_TRUE(plan.ok());
  for (const LocalDevice& d : plan->local) EXPECT_EQ(d.gpu, 0);
}

TEST(PlanDevicesTest, Errors) {
  EXPECT_EQ(PlanDevices(Launch(0, 3, 0, 3), 4, 4).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(PlanDevices(Launch(0, 1, 0, 1), 4, 0).status().message(),
              HasSubstr("no GPU"));
}

}  // namespace
}  // namespace commir::cuda::comm
