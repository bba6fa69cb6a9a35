// attention_merge's kernel against the cpu backend's AttentionMerge (the same steps of
// commir/online_softmax.h; device exp/log are a few ulp from the host's), masked rows,
// more partials than one launch takes, and its refusals.
#include "backend_cuda/kernels/attention_merge.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backend_cpu/kernels.h"
#include "backend_cuda/kernels/gpu_test_util.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::cuda_kernels {
namespace {

using ::commir::cuda_kernels::testing::DeviceBuffer;
using ::commir::cuda_kernels::testing::Download;
using ::commir::cuda_kernels::testing::ExpectNear;
using ::commir::cuda_kernels::testing::RandomTensor;
using ::commir::cuda_kernels::testing::Ulp;
using ::commir::cuda_kernels::testing::Upload;
using runtime::Tensor;

// Merges `partials` random (o, lse) pairs of `part` type into an `acc` accumulator on the
// GPU and on the cpu; some rows of some partials are fully masked (lse = -inf).
void CompareWithCpu(ElementType acc, ElementType part, int partials, int64_t rows, int64_t width) {
  SCOPED_TRACE(std::string(ElementTypeName(acc)) + " <- " + std::string(ElementTypeName(part)) +
               ", " + std::to_string(partials) + " partials");
  std::vector<Tensor> o = {RandomTensor(acc, {rows, width}, 1)};
  std::vector<Tensor> lse = {RandomTensor(acc, {rows}, 2, -3, 3)};
  for (int i = 0; i < partials; ++i) {
    o.push_back(RandomTensor(part, {rows, width}, 10 + i));
    Tensor l = RandomTensor(ElementType::kF32, {rows}, 100 + i, -3, 3);
    if (rows > 0) l.SetFromDouble((i * 7) % rows, -std::numeric_limits<double>::infinity());
    lse.push_back(std::move(l));
  }
  std::vector<const Tensor*> o_ptrs, lse_ptrs;
  for (size_t i = 0; i < o.size(); ++i) {
    o_ptrs.push_back(&o[i]);
    lse_ptrs.push_back(&lse[i]);
  }
  absl::StatusOr<cpu::AttentionMergeResult> want = cpu::AttentionMerge(o_ptrs, lse_ptrs);
  ASSERT_TRUE(want.ok()) << want.status();

  std::vector<DeviceBuffer> buffers;
  for (size_t i = 0; i < o.size(); ++i) {
    buffers.push_back(Upload(o[i]));
    buffers.push_back(Upload(lse[i]));
  }
  std::vector<KMergePartial> parts;
  for (size_t i = 1; i < o.size(); ++i) {
    parts.push_back({buffers[2 * i].get(), buffers[2 * i + 1].get(), o[i].element_type(),
                     lse[i].element_type()});
  }
  DeviceBuffer o_out(o[0].byte_size() + 1), lse_out(lse[0].byte_size() + 1);
  COMMIR_ASSERT_CUDA_OK(LaunchAttentionMerge(acc, buffers[0].get(), buffers[1].get(), parts,
                                             o_out.get(), lse_out.get(), rows, width, nullptr));
  const double tolerance = 64 * Ulp(acc) * partials;
  ExpectNear(Download(o_out.get(), acc, {rows, width}), want->output, tolerance, tolerance, "o");
  ExpectNear(Download(lse_out.get(), acc, {rows}), want->lse, tolerance, tolerance, "lse");
}

TEST(AttentionMergeKernelTest, MatchesCpu) {
  COMMIR_SKIP_WITHOUT_GPU();
  for (ElementType acc : {ElementType::kF32, ElementType::kF64}) {
    for (ElementType part : {ElementType::kBF16, ElementType::kF16, ElementType::kF32}) {
      CompareWithCpu(acc, part, 1, 300, 128);
      CompareWithCpu(acc, part, 2, 37, 40);
    }
  }
}

TEST(AttentionMergeKernelTest, MorePartialsThanOneLaunchTakes) {
  COMMIR_SKIP_WITHOUT_GPU();
  CompareWithCpu(ElementType::kF32, ElementType::kBF16, kMaxMergePartials + 3, 50, 64);
}

TEST(AttentionMergeKernelTest, EmptyHeadDimStillWritesTheLse) {
  COMMIR_SKIP_WITHOUT_GPU();
  CompareWithCpu(ElementType::kF32, ElementType::kF32, 1, 16, 0);
}

// Checked before any launch: runs without a GPU.
TEST(AttentionMergeKernelTest, RejectsBadArguments) {
  const KMergePartial part{nullptr, nullptr, KDType::kBF16, KDType::kF32};
  const KMergePartial integer{nullptr, nullptr, KDType::kI32, KDType::kF32};
  EXPECT_EQ(LaunchAttentionMerge(KDType::kBF16, nullptr, nullptr, {&part, 1}, nullptr, nullptr, 4,
                                 4, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchAttentionMerge(KDType::kF32, nullptr, nullptr, {&integer, 1}, nullptr, nullptr,
                                 4, 4, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchAttentionMerge(KDType::kF32, nullptr, nullptr, {}, nullptr, nullptr, 4, 4,
                                 nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchAttentionMerge(KDType::kF32, nullptr, nullptr, {&part, 1}, nullptr, nullptr, -1,
                                 4, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace commir::cuda_kernels
