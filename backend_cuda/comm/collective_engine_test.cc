// GPU tests of the collective engine against host reference collectives. Without a GPU
// (or driver) every test that needs one skips with the reason; the argument checks that
// fail before touching a device run everywhere.
//
// Data are small integers, exact in every element type, so every path (NCCL in any
// reduction order, or the copy path) must match the reference bit for bit.
#include "backend_cuda/comm/collective_engine.h"

#include <nccl.h>

#include <cuda_runtime_api.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "backend_cuda/comm/comm_status.h"
#include "commir/float16.h"

extern char** environ;

namespace commir::cuda::comm {
namespace {

using ::testing::HasSubstr;
using Groups = std::vector<std::vector<int64_t>>;
using ::commir::BFloat16BitsToFloat;
using ::commir::DoubleToBFloat16Bits;
using ::commir::DoubleToHalfBits;
using ::commir::HalfBitsToFloat;

int VisibleGpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

#define REQUIRE_GPUS(n)                                                               \
  do {                                                                                \
    int gpus_ = VisibleGpus();                                                        \
    if (gpus_ < (n)) {                                                                \
      GTEST_SKIP() << "needs " << (n) << " GPU(s), found " << gpus_                   \
                   << (gpus_ == 0 ? " (no device or driver: cudaGetDeviceCount failed)" \
                                  : "");                                              \
    }                                                                                 \
  } while (false)

// ---- host encoding of small integer values --------------------------------------------

std::string Encode(ElementType type, const std::vector<double>& values) {
  const int esize = ElementTypeByteWidth(type);
  std::string bytes(values.size() * esize, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    char* out = bytes.data() + i * esize;
    double v = values[i];
    switch (type) {
      case ElementType::kF64: std::memcpy(out, &v, 8); break;
      case ElementType::kF32: { float f = static_cast<float>(v); std::memcpy(out, &f, 4); break; }
      case ElementType::kF16: { uint16_t h = DoubleToHalfBits(v); std::memcpy(out, &h, 2); break; }
      case ElementType::kBF16: { uint16_t h = DoubleToBFloat16Bits(v); std::memcpy(out, &h, 2); break; }
      case ElementType::kI64: { int64_t x = static_cast<int64_t>(v); std::memcpy(out, &x, 8); break; }
      case ElementType::kI32: { int32_t x = static_cast<int32_t>(v); std::memcpy(out, &x, 4); break; }
      case ElementType::kI1: *out = v != 0 ? 1 : 0; break;
    }
  }
  return bytes;
}

std::vector<double> Decode(ElementType type, const std::string& bytes) {
  const int esize = ElementTypeByteWidth(type);
  std::vector<double> values(bytes.size() / esize);
  for (size_t i = 0; i < values.size(); ++i) {
    const char* in = bytes.data() + i * esize;
    switch (type) {
      case ElementType::kF64: std::memcpy(&values[i], in, 8); break;
      case ElementType::kF32: { float f; std::memcpy(&f, in, 4); values[i] = f; break; }
      case ElementType::kF16: { uint16_t h; std::memcpy(&h, in, 2); values[i] = HalfBitsToFloat(h); break; }
      case ElementType::kBF16: { uint16_t h; std::memcpy(&h, in, 2); values[i] = BFloat16BitsToFloat(h); break; }
      case ElementType::kI64: { int64_t x; std::memcpy(&x, in, 8); values[i] = static_cast<double>(x); break; }
      case ElementType::kI32: { int32_t x; std::memcpy(&x, in, 4); values[i] = x; break; }
      case ElementType::kI1: values[i] = *in != 0 ? 1 : 0; break;
    }
  }
  return values;
}

// Distinct small integers per device and element (0/1 for i1).
std::vector<double> InputOf(ElementType type, int64_t device, int64_t count) {
  std::vector<double> values(count);
  for (int64_t i = 0; i < count; ++i) {
    values[i] = type == ElementType::kI1 ? static_cast<double>((device * 3 + i) % 3 == 0)
                                         : static_cast<double>((device * 7 + i * 3) % 9 - 4);
  }
  return values;
}

double Combine(ReductionFn op, ElementType type, double a, double b) {
  switch (op) {
    case ReductionFn::kSum: return type == ElementType::kI1 ? (a != 0 || b != 0) : a + b;
    case ReductionFn::kMax: return std::max(a, b);
    case ReductionFn::kMin: return std::min(a, b);
    case ReductionFn::kMean: break;  // no collective computes a mean
  }
  return 0;
}

enum class Coll { kAllGather, kReduceScatter, kAllReduce, kAllToAll, kShift };

struct Case {
  Coll coll;
  ReductionFn op = ReductionFn::kSum;
  int64_t offset = 0;
  bool in_place = false;  // all_reduce with send == recv
};

std::string CaseName(const Case& c, ElementType type) {
  const char* names[] = {"all_gather", "reduce_scatter", "all_reduce", "all_to_all", "shift"};
  const char* ops[] = {"sum", "max", "min"};
  return absl::StrFormat("%s(%s, offset %d%s) %s", names[static_cast<int>(c.coll)],
                         ops[static_cast<int>(c.op)], c.offset, c.in_place ? ", in place" : "",
                         ElementTypeName(type));
}

int64_t RecvCount(Coll coll, int64_t count, int64_t n) {
  if (coll == Coll::kAllGather) return count * n;
  if (coll == Coll::kReduceScatter) return count / n;
  return count;
}

// What member `pos` of `group` must receive (the collective's definition in docs/language.md,
// "Spmd-only ops"), from the inputs of every member.
std::vector<double> Reference(const Case& c, ElementType type, const std::vector<int64_t>& group,
                              int64_t pos, int64_t count) {
  const int64_t n = static_cast<int64_t>(group.size());
  std::vector<std::vector<double>> in;
  for (int64_t d : group) in.push_back(InputOf(type, d, count));
  std::vector<double> out;
  switch (c.coll) {
    case Coll::kAllGather:
      for (const auto& part : in) out.insert(out.end(), part.begin(), part.end());
      break;
    case Coll::kAllReduce:
    case Coll::kReduceScatter: {
      std::vector<double> acc = in[0];
      for (int64_t s = 1; s < n; ++s) {
        for (int64_t i = 0; i < count; ++i) acc[i] = Combine(c.op, type, acc[i], in[s][i]);
      }
      if (c.coll == Coll::kAllReduce) return acc;
      const int64_t block = count / n;
      return std::vector<double>(acc.begin() + pos * block, acc.begin() + (pos + 1) * block);
    }
    case Coll::kAllToAll: {
      const int64_t block = count / n;
      for (int64_t s = 0; s < n; ++s) {
        out.insert(out.end(), in[s].begin() + pos * block, in[s].begin() + (pos + 1) * block);
      }
      break;
    }
    case Coll::kShift: {
      const int64_t src = (((pos - c.offset) % n) + n) % n;
      return in[src];
    }
  }
  return out;
}

// Device buffers and streams of every mesh device this process drives.
class Harness {
 public:
  Harness(const DevicePlan& plan, bool shared_stream) : plan_(plan) {
    for (const LocalDevice& d : plan.local) {
      cudaSetDevice(d.gpu);
      cudaStream_t stream = nullptr;
      if (!shared_stream || streams_.empty() || plan.local[streams_.size() - 1].gpu != d.gpu) {
        EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
        owned_.push_back(stream);
      } else {
        stream = streams_.back();
      }
      streams_.push_back(stream);
    }
  }
  ~Harness() {
    for (size_t i = 0; i < plan_.local.size(); ++i) {
      cudaSetDevice(plan_.local[i].gpu);
      cudaStreamSynchronize(streams_[i]);
    }
    for (void* p : buffers_) cudaFree(p);
    for (cudaStream_t s : owned_) cudaStreamDestroy(s);
  }

  void* Upload(int local_index, const std::string& bytes, size_t capacity) {
    cudaSetDevice(plan_.local[local_index].gpu);
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(capacity, 1)), cudaSuccess);
    buffers_.push_back(p);
    // Garbage first, so that a collective that writes nothing is caught. (On the member's
    // non-blocking stream: a legacy-stream cudaMemset would not be ordered with it.)
    EXPECT_EQ(cudaMemsetAsync(p, 0x7f, std::max<size_t>(capacity, 1), streams_[local_index]),
              cudaSuccess);
    // Queued on the member's stream: the engine must order the collective after it.
    EXPECT_EQ(cudaMemcpyAsync(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice,
                              streams_[local_index]),
              cudaSuccess);
    return p;
  }

  std::string Download(int local_index, const void* p, size_t bytes) {
    std::string out(bytes, '\0');
    cudaSetDevice(plan_.local[local_index].gpu);
    EXPECT_EQ(cudaMemcpyAsync(out.data(), p, bytes, cudaMemcpyDeviceToHost,
                              streams_[local_index]),
              cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(streams_[local_index]), cudaSuccess);
    return out;
  }

  cudaStream_t stream(int local_index) const { return streams_[local_index]; }

 private:
  DevicePlan plan_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaStream_t> owned_;
  std::vector<void*> buffers_;
};

absl::Status Issue(CollectiveEngine& engine, const Case& c, const std::vector<int64_t>& group,
                   const std::vector<MemberBuffers>& local, int64_t count, ElementType type) {
  switch (c.coll) {
    case Coll::kAllGather: return engine.AllGather(group, local, count, type);
    case Coll::kReduceScatter: return engine.ReduceScatter(group, local, count, type, c.op);
    case Coll::kAllReduce: return engine.AllReduce(group, local, count, type, c.op);
    case Coll::kAllToAll: return engine.AllToAll(group, local, count, type);
    case Coll::kShift: return engine.Shift(group, local, count, type, c.offset);
  }
  return absl::InternalError("unreachable");
}

// Runs one collective on every group of `partition` (as the executor does: one call per
// group, local members only) and checks every local member's result.
void CheckCollective(CollectiveEngine& engine, const DevicePlan& plan, const Groups& partition,
                     const Case& c, ElementType type, int64_t count, bool shared_stream) {
  SCOPED_TRACE(CaseName(c, type));
  Harness h(plan, shared_stream);
  const int64_t esize = ElementTypeByteWidth(type);
  struct Out {
    int local_index;
    int64_t pos;
    const std::vector<int64_t>* group;
    void* recv;
  };
  std::vector<Out> outs;
  for (const std::vector<int64_t>& group : partition) {
    const int64_t n = static_cast<int64_t>(group.size());
    std::vector<MemberBuffers> local;
    for (int64_t pos = 0; pos < n; ++pos) {
      int li = plan.LocalIndex(group[pos]);
      if (li < 0) continue;
      const int64_t recv_bytes = RecvCount(c.coll, count, n) * esize;
      void* send = h.Upload(li, Encode(type, InputOf(type, group[pos], count)),
                            std::max(count * esize, recv_bytes));
      void* recv = c.in_place ? send : h.Upload(li, "", recv_bytes);
      local.push_back({group[pos], send, recv, h.stream(li)});
      outs.push_back({li, pos, &group, recv});
    }
    if (local.empty()) continue;
    absl::Status s = Issue(engine, c, group, local, count, type);
    ASSERT_TRUE(s.ok()) << s;
  }
  absl::Status s = engine.WaitAll(absl::Seconds(60));
  ASSERT_TRUE(s.ok()) << s;
  for (const Out& o : outs) {
    const int64_t n = static_cast<int64_t>(o.group->size());
    std::vector<double> got =
        Decode(type, h.Download(o.local_index, o.recv, RecvCount(c.coll, count, n) * esize));
    EXPECT_EQ(got, Reference(c, type, *o.group, o.pos, count))
        << "device " << (*o.group)[o.pos];
  }
}

std::vector<Case> AllCases() {
  std::vector<Case> cases = {{Coll::kAllGather}, {Coll::kAllToAll}};
  for (ReductionFn op : {ReductionFn::kSum, ReductionFn::kMax, ReductionFn::kMin}) {
    cases.push_back({Coll::kAllReduce, op});
    cases.push_back({Coll::kAllReduce, op, 0, /*in_place=*/true});
    cases.push_back({Coll::kReduceScatter, op});
  }
  for (int64_t offset : {1, -1, 2, 5, 0}) cases.push_back({Coll::kShift, ReductionFn::kSum, offset});
  return cases;
}

const ElementType kTypes[] = {ElementType::kF32, ElementType::kF16, ElementType::kBF16,
                              ElementType::kF64, ElementType::kI32, ElementType::kI64,
                              ElementType::kI1};

// Every collective, type and partition of a (2, 2) or (2, n/2) mesh.
void CheckAll(CollectiveEngine& engine, const DevicePlan& plan, std::vector<int64_t> shape,
              bool shared_stream) {
  std::vector<std::vector<int64_t>> probes;  // one group per partition
  if (shape.size() == 2) {
    probes = {{0, 1}, {0, shape[1]}};
    if (shape[1] > 2) probes[0] = {0, 1, 2, 3};
  }
  std::vector<int64_t> all;
  for (int64_t d = 0; d < plan.mesh_size; ++d) all.push_back(d);
  probes.push_back(all);
  if (shape.size() == 2) {
    // The whole mesh as the axis group (axis 1, axis 0): axis 1 major, not device order.
    std::vector<int64_t> transposed;
    for (int64_t j = 0; j < shape[1]; ++j) {
      for (int64_t i = 0; i < shape[0]; ++i) transposed.push_back(i * shape[1] + j);
    }
    probes.push_back(transposed);
  }
  for (const std::vector<int64_t>& probe : probes) {
    absl::StatusOr<Groups> partition = engine.PartitionOf(probe);
    ASSERT_TRUE(partition.ok()) << partition.status();
    for (ElementType type : kTypes) {
      for (const Case& c : AllCases()) {
        CheckCollective(engine, plan, *partition, c, type, /*count=*/24, shared_stream);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// ---- mode (c): four mesh devices on one GPU ------------------------------------------

EngineOptions WithP2p(P2pTransport p2p) {
  EngineOptions options;
  options.p2p = p2p;
  return options;
}

// Both transports: --p2p=nccl keeps the copies on the members' streams, --p2p=ce moves
// all_gather, all_to_all and shift to the transfer streams.
TEST(CollectiveEngineGpuTest, SharedGpuEveryCollectiveMatchesReference) {
  REQUIRE_GPUS(1);
  LaunchInfo launch;
  absl::StatusOr<DevicePlan> plan = PlanDevices(launch, 4, /*visible_gpus=*/1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->shares_gpus());
  for (P2pTransport p2p : {P2pTransport::kNccl, P2pTransport::kCopyEngine}) {
    SCOPED_TRACE(P2pTransportName(p2p));
    auto engine = CollectiveEngine::Create(launch, *plan, {2, 2}, WithP2p(p2p));
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_EQ((*engine)->RouteOf(CollectiveKind::kShift, {0, 1}),
              p2p == P2pTransport::kNccl ? Route::kMemberStreamCopies : Route::kCopyEngine);
    EXPECT_EQ((*engine)->RouteOf(CollectiveKind::kAllReduce, {0, 1}), Route::kMemberStreamCopies);
    CheckAll(**engine, *plan, {2, 2}, /*shared_stream=*/false);
    CheckAll(**engine, *plan, {2, 2}, /*shared_stream=*/true);
  }
}

TEST(CollectiveEngineGpuTest, SharedGpuAcrossTwoGpusUsesPeerCopies) {
  REQUIRE_GPUS(2);
  LaunchInfo launch;
  absl::StatusOr<DevicePlan> plan = PlanDevices(launch, 4, /*visible_gpus=*/2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->shares_gpus());  // devices 0,1 on GPU 0 and 2,3 on GPU 1
  for (P2pTransport p2p : {P2pTransport::kNccl, P2pTransport::kCopyEngine}) {
    SCOPED_TRACE(P2pTransportName(p2p));
    auto engine = CollectiveEngine::Create(launch, *plan, {2, 2}, WithP2p(p2p));
    ASSERT_TRUE(engine.ok()) << engine.status();
    CheckAll(**engine, *plan, {2, 2}, /*shared_stream=*/false);
  }
}

TEST(CollectiveEngineGpuTest, SharedGpuHalfPrecisionSumRoundsOnceLikeTheCpuBackend) {
  REQUIRE_GPUS(1);
  // 1 + 2^-11 + 2^-11 + 2^-11 in f16 (spacing 2^-10 near 1): rounding after each add
  // gives 1 every time (a tie, to even); one rounding of the f32 sum 1 + 1.5 * 2^-10 gives
  // 1 + 2 * 2^-10 (a tie, to even). The cpu backend rounds once.
  LaunchInfo launch;
  absl::StatusOr<DevicePlan> plan = PlanDevices(launch, 4, 1);
  ASSERT_TRUE(plan.ok());
  auto engine = CollectiveEngine::Create(launch, *plan, {4}, EngineOptions());
  ASSERT_TRUE(engine.ok());
  Harness h(*plan, false);
  const double tiny = 1.0 / 2048;
  std::vector<double> parts[4] = {{1.0}, {tiny}, {tiny}, {tiny}};
  std::vector<MemberBuffers> local;
  for (int d = 0; d < 4; ++d) {
    void* send = h.Upload(d, Encode(ElementType::kF16, parts[d]), 2);
    local.push_back({d, send, h.Upload(d, "", 2), h.stream(d)});
  }
  ASSERT_TRUE((*engine)->AllReduce({0, 1, 2, 3}, local, 1, ElementType::kF16, ReductionFn::kSum).ok());
  ASSERT_TRUE((*engine)->WaitAll().ok());
  EXPECT_EQ(Decode(ElementType::kF16, h.Download(3, local[3].recv, 2))[0], 1.0 + 2.0 / 1024);
}

TEST(CollectiveEngineGpuTest, WaitAllTimesOutInsteadOfHanging) {
  REQUIRE_GPUS(1);
  LaunchInfo launch;
  absl::StatusOr<DevicePlan> plan = PlanDevices(launch, 2, 1);
  ASSERT_TRUE(plan.ok());
  auto engine = CollectiveEngine::Create(launch, *plan, {2}, EngineOptions());
  ASSERT_TRUE(engine.ok());
  Harness h(*plan, false);
  // A stream stalled by a slow host callback stands in for a hung peer.
  cudaLaunchHostFunc(
      h.stream(0), [](void*) { usleep(1500 * 1000); }, nullptr);
  std::vector<MemberBuffers> local;
  for (int d = 0; d < 2; ++d) {
    void* send = h.Upload(d, Encode(ElementType::kF32, {1, 2}), 8);
    local.push_back({d, send, h.Upload(d, "", 16), h.stream(d)});
  }
  ASSERT_TRUE((*engine)->AllGather({0, 1}, local, 2, ElementType::kF32).ok());
  absl::Time start = absl::Now();
  absl::Status s = (*engine)->WaitAll(absl::Milliseconds(100));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("did not finish within"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  // The engine stays failed.
  EXPECT_FALSE((*engine)->AllGather({0, 1}, local, 2, ElementType::kF32).ok());
}

// ---- mode (b): one process, one mesh device per GPU, NCCL ------------------------------

TEST(CollectiveEngineGpuTest, SingleProcessNcclEveryCollectiveMatchesReference) {
  REQUIRE_GPUS(2);
  const int gpus = VisibleGpus() >= 4 ? 4 : 2;
  LaunchInfo launch;
  absl::StatusOr<DevicePlan> plan = PlanDevices(launch, gpus, gpus);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_FALSE(plan->shares_gpus());
  std::vector<int64_t> shape = gpus == 4 ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{2};
  EngineOptions options = WithP2p(P2pTransport::kNccl);
  options.nccl_max_ctas = 4;  // the SM budget reaches NCCL (a bad one would fail init)
  auto engine = CollectiveEngine::Create(launch, *plan, shape, options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  CheckAll(**engine, *plan, shape, /*shared_stream=*/false);
}

// Mode (b) with copy engines: peer copies on transfer streams, reductions over NCCL.
TEST(CollectiveEngineGpuTest, SingleProcessCopyEngineEveryCollectiveMatchesReference) {
  REQUIRE_GPUS(2);
  LaunchInfo launch;
  absl::StatusOr<DevicePlan> plan = PlanDevices(launch, 2, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto engine = CollectiveEngine::Create(launch, *plan, {2}, WithP2p(P2pTransport::kCopyEngine));
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->RouteOf(CollectiveKind::kShift, {0, 1}), Route::kCopyEngine);
  EXPECT_EQ((*engine)->RouteOf(CollectiveKind::kAllReduce, {0, 1}), Route::kNccl);
  CheckAll(**engine, *plan, {2}, /*shared_stream=*/false);
}

// ---- mode (a): one process per GPU, NCCL id over TCP or a file -------------------------
//
// The parent re-runs this binary once per rank with torchrun-style variables; each child
// runs MultiProcessWorker below, which is skipped when not started that way.

std::string SelfExe() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, n) : "";
}

int FreePortGuess() { return 20000 + (getpid() % 20000); }

// Starts `world` ranks; returns their exit statuses.
std::vector<int> RunRanks(int world, const std::vector<std::string>& extra_env) {
  std::vector<pid_t> pids;
  const std::string exe = SelfExe();
  const int port = FreePortGuess();
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      // The children must not write the parent's test.xml or premature-exit marker.
      absl::string_view var(*e);
      bool overridden = false;
      for (const std::string& extra : extra_env) {
        overridden |= absl::StartsWith(var, extra.substr(0, extra.find('=') + 1));
      }
      if (overridden) continue;
      if (absl::StartsWith(var, "XML_OUTPUT_FILE=") || absl::StartsWith(var, "GTEST_OUTPUT=") ||
          absl::StartsWith(var, "TEST_PREMATURE_EXIT_FILE=")) {
        continue;
      }
      env.push_back(*e);
    }
    env.push_back("COMMIR_COMM_TEST_WORKER=1");
    env.push_back(absl::StrFormat("RANK=%d", r));
    env.push_back(absl::StrFormat("WORLD_SIZE=%d", world));
    env.push_back(absl::StrFormat("LOCAL_RANK=%d", r));
    env.push_back(absl::StrFormat("LOCAL_WORLD_SIZE=%d", world));
    env.push_back("MASTER_ADDR=localhost");
    env.push_back(absl::StrFormat("MASTER_PORT=%d", port));
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string filter = "--gtest_filter=CollectiveEngineGpuTest.MultiProcessWorker";
    char* argv[] = {const_cast<char*>(exe.c_str()), filter.data(), nullptr};
    pid_t pid;
    EXPECT_EQ(posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()), 0);
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

TEST(CollectiveEngineGpuTest, MultiProcessWorker) {
  if (std::getenv("COMMIR_COMM_TEST_WORKER") == nullptr) {
    GTEST_SKIP() << "runs only as a child of the MultiProcess* tests";
  }
  absl::StatusOr<LaunchInfo> launch = DetectLaunch(ProcessEnv());
  ASSERT_TRUE(launch.ok()) << launch.status();
  absl::StatusOr<DevicePlan> plan = PlanDevices(*launch, launch->world_size, VisibleGpus());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EngineOptions options;
  if (const char* file = std::getenv("COMMIR_COMM_TEST_FILE")) options.rendezvous_file = file;
  options.timeout = absl::Seconds(60);
  const bool hang_test = std::getenv("COMMIR_COMM_TEST_HANG") != nullptr;
  if (hang_test) options.timeout = absl::Seconds(3);
  if (const char* p2p = std::getenv("COMMIR_COMM_TEST_P2P")) options.p2p = *ParseP2pTransport(p2p);
  auto engine = CollectiveEngine::Create(*launch, *plan, {launch->world_size}, options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  if (std::getenv("COMMIR_COMM_TEST_IPC_SHIFT") != nullptr) {
    // Two processes, possibly on one GPU (NCCL refuses that): shifts only, over IPC.
    std::vector<int64_t> group;
    for (int64_t d = 0; d < launch->world_size; ++d) group.push_back(d);
    ASSERT_EQ((*engine)->RouteOf(CollectiveKind::kShift, group), Route::kCopyEngineIpc);
    for (ElementType type : kTypes) {
      for (int64_t offset : {1, -1, 2, 3, 0}) {
        CheckCollective(**engine, *plan, {group}, {Coll::kShift, ReductionFn::kSum, offset},
                        type, /*count=*/24, false);
      }
    }
    // Past the first 1 MiB staging slot: every process grows it and exchanges handles
    // again; then small again, in the grown slot.
    for (int64_t count : {int64_t{3} << 20, int64_t{5}}) {
      CheckCollective(**engine, *plan, {group}, {Coll::kShift, ReductionFn::kSum, 1},
                      ElementType::kF32, count, false);
    }
    std::_Exit(HasFailure() ? 1 : 0);
  }
  if (!hang_test) {
    CheckAll(**engine, *plan, {launch->world_size}, /*shared_stream=*/false);
    return;
  }
  // Rank 1 leaves after the first collective; rank 0's second one must fail, not hang.
  Harness h(*plan, false);
  std::vector<int64_t> group;
  for (int64_t d = 0; d < launch->world_size; ++d) group.push_back(d);
  void* buffer = h.Upload(0, Encode(ElementType::kF32, {1, 2, 3, 4}), 16);
  std::vector<MemberBuffers> local = {{plan->local[0].mesh_device, buffer, buffer, h.stream(0)}};
  ASSERT_TRUE((*engine)->AllReduce(group, local, 4, ElementType::kF32, ReductionFn::kSum).ok());
  ASSERT_TRUE((*engine)->WaitAll().ok());
  if (launch->rank != 0) std::_Exit(0);
  absl::Status s = (*engine)->AllReduce(group, local, 4, ElementType::kF32, ReductionFn::kSum);
  if (s.ok()) s = (*engine)->WaitAll(absl::Seconds(3));
  EXPECT_TRUE(s.code() == absl::StatusCode::kDeadlineExceeded ||
              s.code() == absl::StatusCode::kUnavailable)
      << s;
  std::_Exit(HasFailure() ? 1 : 0);  // skip destructors of a poisoned CUDA context
}

TEST(CollectiveEngineGpuTest, MultiProcessTcpRendezvous) {
  REQUIRE_GPUS(2);
  for (int code : RunRanks(2, {"COMMIR_COMM_TEST_P2P=nccl"})) EXPECT_EQ(code, 0);
}

// Copy engines across two processes on two GPUs: shifts over IPC, the rest over NCCL.
TEST(CollectiveEngineGpuTest, MultiProcessCopyEngine) {
  REQUIRE_GPUS(2);
  for (int code : RunRanks(2, {"COMMIR_COMM_TEST_P2P=ce"})) EXPECT_EQ(code, 0);
}

// Two processes on ONE GPU open each other's IPC staging and shift through it (TCP and
// file rendezvous); this runs on a single-GPU machine.
TEST(CollectiveEngineGpuTest, TwoProcessesOnOneGpuShiftOverIpc) {
  REQUIRE_GPUS(1);
  const std::vector<std::string> env = {"COMMIR_COMM_TEST_P2P=ce", "COMMIR_COMM_TEST_IPC_SHIFT=1",
                                        "CUDA_VISIBLE_DEVICES=0"};
  for (int code : RunRanks(2, env)) EXPECT_EQ(code, 0);
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::vector<std::string> with_file = env;
  with_file.push_back(absl::StrFormat("COMMIR_COMM_TEST_FILE=%s/ipc_id.%d", tmp ? tmp : "/tmp",
                                      getpid()));
  for (int code : RunRanks(2, with_file)) EXPECT_EQ(code, 0);
}

TEST(CollectiveEngineGpuTest, MultiProcessFileRendezvous) {
  REQUIRE_GPUS(2);
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string path = absl::StrFormat("%s/nccl_id.%d", tmp ? tmp : "/tmp", getpid());
  unlink(path.c_str());
  for (int code : RunRanks(2, {"COMMIR_COMM_TEST_FILE=" + path})) EXPECT_EQ(code, 0);
}

TEST(CollectiveEngineGpuTest, MultiProcessMissingPeerBecomesAnError) {
  REQUIRE_GPUS(2);
  for (int code : RunRanks(2, {"COMMIR_COMM_TEST_HANG=1"})) EXPECT_EQ(code, 0);
}

// ---- argument checks (no device needed) ----------------------------------------------

class CollectiveEngineArgsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plan_ = *PlanDevices(launch_, 4, 1);
    engine_ = *CollectiveEngine::Create(launch_, plan_, {2, 2}, EngineOptions());
  }
  LaunchInfo launch_;
  DevicePlan plan_;
  std::unique_ptr<CollectiveEngine> engine_;
  char a_[64], b_[64], c_[64], d_[64];
};

TEST_F(CollectiveEngineArgsTest, CreateChecksTheMeshShape) {
  EXPECT_THAT(CollectiveEngine::Create(launch_, plan_, {2, 3}, EngineOptions()).status().message(),
              HasSubstr("has 6 devices but the device plan has 4"));
}

TEST_F(CollectiveEngineArgsTest, RejectsBadGroupsAndBuffers) {
  std::vector<MemberBuffers> both = {{0, a_, b_, nullptr}, {1, c_, d_, nullptr}};
  // Not a group of the mesh (0 and 3 differ on both axes but the partition is the mesh).
  EXPECT_EQ(engine_->AllGather({0, 3}, both, 4, ElementType::kF32).code(),
            absl::StatusCode::kInvalidArgument);
  // Members out of coordinate order.
  EXPECT_EQ(engine_->AllGather({1, 0}, both, 4, ElementType::kF32).code(),
            absl::StatusCode::kInvalidArgument);
  // A local member missing.
  EXPECT_THAT(engine_->AllGather({0, 1}, {{0, a_, b_, nullptr}}, 4, ElementType::kF32).message(),
              HasSubstr("2 of the group's devices but 1 buffers"));
  // A buffer for a device outside the group.
  EXPECT_THAT(engine_->AllGather({0, 1}, {{0, a_, b_, nullptr}, {2, c_, d_, nullptr}}, 4,
                                 ElementType::kF32)
                  .message(),
              HasSubstr("device 2 is not in the group"));
  // Indivisible reduce_scatter.
  EXPECT_THAT(engine_->ReduceScatter({0, 1}, both, 3, ElementType::kF32, ReductionFn::kSum)
                  .message(),
              HasSubstr("do not split into 2 blocks"));
  // Overlapping send/recv (only all_reduce may be in place).
  EXPECT_THAT(engine_->AllGather({0, 1}, {{0, a_, a_ + 8, nullptr}, {1, c_, d_, nullptr}}, 4,
                                 ElementType::kF32)
                  .message(),
              HasSubstr("overlap"));
  EXPECT_THAT(engine_->Shift({0, 1}, {{0, a_, a_, nullptr}, {1, c_, d_, nullptr}}, 4,
                             ElementType::kF32, 1)
                  .message(),
              HasSubstr("overlap"));
  // Null buffers.
  EXPECT_THAT(engine_->AllReduce({0, 1}, {{0, nullptr, b_, nullptr}, {1, c_, d_, nullptr}}, 4,
                                 ElementType::kF32, ReductionFn::kSum)
                  .message(),
              HasSubstr("null buffer"));
}

TEST_F(CollectiveEngineArgsTest, NcclCtasAreBounded) {
  EngineOptions options;
  options.nccl_max_ctas = kMaxNcclCtas + 1;
  EXPECT_THAT(CollectiveEngine::Create(launch_, plan_, {2, 2}, options).status().message(),
              HasSubstr("NCCL CTAs must be from 1 to 64"));
  options.nccl_max_ctas = 4;
  options.nccl_min_ctas = 8;
  EXPECT_THAT(CollectiveEngine::Create(launch_, plan_, {2, 2}, options).status().message(),
              HasSubstr("min CTAs (8) above max CTAs (4)"));
  options.nccl_min_ctas = 2;
  EXPECT_TRUE(CollectiveEngine::Create(launch_, plan_, {2, 2}, options).ok());
}

TEST_F(CollectiveEngineArgsTest, EmptyCollectivesDoNothing) {
  std::vector<MemberBuffers> both = {{0, nullptr, nullptr, nullptr}, {1, nullptr, nullptr, nullptr}};
  EXPECT_TRUE(engine_->AllGather({0, 1}, both, 0, ElementType::kF32).ok());
}

TEST(CollectiveEngineModeTest, SharedGpusAcrossProcessesIsUnsupported) {
  LaunchInfo launch;
  launch.world_size = 2;
  launch.rank = 0;
  launch.local_world_size = 2;
  // 4 devices on 2 processes with one GPU each: devices 0 and 1 share GPU 0.
  DevicePlan plan = *PlanDevices(launch, 4, 2);
  ASSERT_TRUE(plan.shares_gpus());
  auto engine = CollectiveEngine::Create(launch, plan, {4}, EngineOptions());
  ASSERT_TRUE(engine.ok());
  char a[8], b[32], c[8], d[32];
  absl::Status s = (*engine)->AllGather({0, 1, 2, 3}, {{0, a, b, nullptr}, {1, c, d, nullptr}},
                                        2, ElementType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("spans processes while mesh devices share GPUs"));
}

TEST(CommStatusTest, ErrorsNameTheCallAndMapToExitThreeCodes) {
  absl::Status s = NcclStatus(ncclSystemError, nullptr, "ncclAllReduce on device 3");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("NCCL: ncclAllReduce on device 3 failed: "));
  EXPECT_THAT(s.message(), HasSubstr(ncclGetErrorString(ncclSystemError)));
  EXPECT_EQ(NcclStatus(ncclInvalidUsage, nullptr, "x").code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(NcclStatus(ncclSuccess, nullptr, "x").ok());
  EXPECT_EQ(CommCudaStatus(cudaErrorMemoryAllocation, "cudaMallocAsync").code(),
            absl::StatusCode::kResourceExhausted);
  s = CommCudaStatus(cudaErrorNoDevice, "cudaSetDevice");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("cudaSetDevice failed"));
  EXPECT_THAT(s.message(), HasSubstr("cudaErrorNoDevice"));
}

}  // namespace
}  // namespace commir::cuda::comm
