// The dropout kernel against the cpu kernel, bit for bit: both draw from commir/philox.h.
#include "backend_cuda/kernels/dropout.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backend_cpu/dropout.h"
#include "backend_cuda/kernels/gpu_test_util.h"
#include "commir/dropout_indexing.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::cuda_kernels {
namespace {

using ::commir::cuda_kernels::testing::DeviceBuffer;
using ::commir::cuda_kernels::testing::Download;
using ::commir::cuda_kernels::testing::ExpectSameBits;
using ::commir::cuda_kernels::testing::RandomTensor;
using ::commir::cuda_kernels::testing::Upload;
using runtime::Tensor;

struct BlockCase {
  std::vector<int64_t> block;
  std::vector<int64_t> global;   // empty: the block is the whole tensor
  std::vector<int64_t> offsets;
};

// Whole tensors, row blocks (contiguous in the whole), column blocks (strided), a block
// split in every dimension, unit and empty dimensions.
const std::vector<BlockCase> kCases = {
    {{1000}, {}, {}},
    {{37, 129}, {}, {}},
    {{8, 64}, {32, 64}, {16, 0}},
    {{32, 16}, {32, 64}, {0, 48}},
    {{2, 3, 5, 7}, {4, 6, 10, 14}, {2, 3, 5, 7}},
    {{1, 4, 1, 9}, {3, 8, 2, 9}, {2, 4, 1, 0}},
    {{0, 5}, {4, 5}, {4, 0}},
    {{}, {}, {}},
};

TEST(DropoutKernelTest, MatchesCpuBitForBit) {
  COMMIR_SKIP_WITHOUT_GPU();
  uint32_t seed = 1;
  for (ElementType type :
       {ElementType::kF32, ElementType::kF16, ElementType::kBF16, ElementType::kF64}) {
    for (const BlockCase& c : kCases) {
      for (double rate : {0.0, 0.1, 0.5}) {
        const std::string what =
            absl::StrFormat("%s block [%s] of [%s] at [%s] rate %g", ElementTypeName(type),
                            absl::StrJoin(c.block, ","), absl::StrJoin(c.global, ","),
                            absl::StrJoin(c.offsets, ","), rate);
        const Tensor x = RandomTensor(type, c.block, seed++);
        std::optional<std::vector<int64_t>> global;
        if (!c.global.empty()) global = c.global;
        absl::StatusOr<DropoutIndexing> indexing = DropoutIndexingOf(c.block, global, c.offsets, rate);
        ASSERT_TRUE(indexing.ok()) << indexing.status() << " " << what;
        const uint64_t key = 0x0123456789abcdefull + seed;
        absl::StatusOr<Tensor> expected = cpu::Dropout(x, key, *indexing);
        ASSERT_TRUE(expected.ok()) << expected.status();
        DeviceBuffer in = Upload(x);
        DeviceBuffer out(x.byte_size() == 0 ? 1 : x.byte_size());
        COMMIR_ASSERT_CUDA_OK(LaunchDropout(type, in.get(), out.get(), c.block, indexing->base,
                                            indexing->strides, key, indexing->threshold,
                                            indexing->scale, nullptr));
        COMMIR_ASSERT_CUDA_OK(cudaDeviceSynchronize());
        ExpectSameBits(Download(out.get(), type, c.block), *expected, what);
      }
    }
  }
}

// Refused before any launch, so it needs no GPU.
TEST(DropoutKernelTest, RejectsIntegerTypesAndMismatchedRanks) {
  const int64_t dims[] = {4, 4};
  const uint64_t strides[] = {4, 1};
  EXPECT_EQ(LaunchDropout(ElementType::kI32, nullptr, nullptr, dims, 0, strides, 0, 0, 1.0, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchDropout(ElementType::kF32, nullptr, nullptr, dims, 0,
                          std::span<const uint64_t>(strides, 1), 0, 0, 1.0, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace commir::cuda_kernels
