// The backend seam driven directly, for schedules the SPMD interpreter cannot produce
// (devices at different points of the program).
#include "sim/sim_backend.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "parser/parser.h"
#include "sim/collective_op.h"
#include "sim/op_time.h"

namespace commir::sim {
namespace {

using runtime::Tensor;

// Device 0 runs a GEMM before the all_gather, device 1 does not: both members start the
// collective when device 0 (the slowest) is ready and end together.
TEST(SimBackendTest, CollectiveWaitsForItsSlowestParticipant) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(R"(
mesh @m(tp=2)
spmd func @f(%a: bf16[4096@tp, 4096], %b: bf16[4096, 4096]) -> (bf16[4096, 4096]) {
  %x = matmul(%a, %b) : bf16[2048, 4096]
  %g = all_gather(%x) {axis = tp, dim = 0} : bf16[4096, 4096]
  return %g
})",
                                                                       "test.commir");
  ASSERT_TRUE(module.ok()) << module.status();
  const Function& f = *(*module)->functions().front();
  auto it = f.body()->begin();
  const Operation& matmul = **it;
  const Operation& gather = **++it;
  const HardwareSpec& hw = *FindBuiltinHardware("h100-sxm");

  SimBackend backend(hw, f, /*num_devices=*/2, /*gpus_per_node=*/8);
  std::vector<SimEvent> events;
  backend.set_event_sink([&](const SimEvent& e) { events.push_back(e); });
  Tensor a = backend.MakeValue(0, ElementType::kBF16, {2048, 4096}, 0);
  Tensor b = backend.MakeValue(0, ElementType::kBF16, {4096, 4096}, 0);
  std::vector<const Tensor*> operands = {&a, &b};
  absl::StatusOr<std::vector<Tensor>> x0 = backend.RunOp(matmul, {0, 0}, operands, {});
  ASSERT_TRUE(x0.ok()) << x0.status();
  Tensor x1 = backend.MakeValue(1, ElementType::kBF16, {2048, 4096}, 0);  // ready at once

  runtime::CollectiveContext context{{0, 1}, {0, 1}, {0, 0}};
  std::vector<const Tensor*> parts = {&(*x0)[0], &x1};
  absl::StatusOr<std::vector<Tensor>> g = backend.RunCollective(gather, context, parts);
  ASSERT_TRUE(g.ok()) << g.status();

  double t_matmul = *OpTime(hw, matmul, f);
  double t_gather = EstimateCollectiveOp(hw, gather, f, 0, 8)->seconds;
  ASSERT_EQ(events.size(), 3u);  // the GEMM, then the gather on each member
  for (int i = 1; i <= 2; ++i) {
    EXPECT_DOUBLE_EQ(events[i].start_s, t_matmul);
    EXPECT_DOUBLE_EQ(events[i].end_s, t_matmul + t_gather);
  }
  EXPECT_DOUBLE_EQ(backend.finish_s(1), t_matmul + t_gather);
  // Memory: device 0 holds a, b, x and its gathered result; device 1 x1 and its result.
  EXPECT_EQ(backend.memory().live_bytes(1), (2048 + 4096) * 4096 * 2);
}

TEST(SimBackendTest, InconsistentCollectiveGroupIsAnError) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(R"(
mesh @m(tp=2)
spmd func @f(%a: bf16[4@tp, 4]) -> (bf16[4, 4]) {
  %g = all_gather(%a) {axis = tp, dim = 0} : bf16[4, 4]
  return %g
})",
                                                                       "test.commir");
  ASSERT_TRUE(module.ok()) << module.status();
  const Function& f = *(*module)->functions().front();
  SimBackend backend(*FindBuiltinHardware("h100-sxm"), f, 2, 8);
  Tensor a = backend.MakeValue(0, ElementType::kBF16, {2, 4}, 0);
  std::vector<const Tensor*> parts = {&a};
  runtime::CollectiveContext context{{0, 1}, {0, 1}, {0, 0}};  // two members, one part
  EXPECT_FALSE(backend.RunCollective(**f.body()->begin(), context, parts).ok());
}

// A long chain of kernels issued one after another: the backend keeps none of them (no
// sink) and holds only the intervals a later kernel can still meet, while the totals
// still add up every kernel.
TEST(SimBackendTest, HoldsBoundedStateHoweverManyKernels) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(R"(
mesh @m(tp=2)
spmd func @f(%a: bf16[1024, 1024]) -> (bf16[1024, 1024]) {
  %x = matmul(%a, %a) : bf16[1024, 1024]
  return %x
})",
                                                                       "test.commir");
  ASSERT_TRUE(module.ok()) << module.status();
  const Function& f = *(*module)->functions().front();
  const Operation& matmul = **f.body()->begin();
  const HardwareSpec& hw = *FindBuiltinHardware("h100-sxm");
  SimBackend backend(hw, f, /*num_devices=*/2, /*gpus_per_node=*/8);
  Tensor x = backend.MakeValue(0, ElementType::kBF16, {1024, 1024}, 0);
  constexpr int kKernels = 100000;
  for (int i = 0; i < kKernels; ++i) {
    std::vector<const Tensor*> operands = {&x, &x};
    absl::StatusOr<std::vector<Tensor>> y = backend.RunOp(matmul, {0, 0}, operands, {});
    ASSERT_TRUE(y.ok()) << y.status();
    x = (*y)[0];
  }
  const double gemm = *OpTime(hw, matmul, f);
  EXPECT_EQ(backend.simulated_kernels(), kKernels);
  EXPECT_LE(backend.retained_intervals(), 2100);  // pruned each time they double past 1024
  EXPECT_NEAR(backend.finish_s(0), kKernels * gemm, 1e-9 * kKernels * gemm);
  EXPECT_NEAR(backend.compute_s(0), kKernels * gemm, 1e-9 * kKernels * gemm);
  EXPECT_EQ(backend.communication_s(0), 0);
}

}  // namespace
}  // namespace commir::sim
