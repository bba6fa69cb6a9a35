// moe_dispatch and moe_collect kernels against the cpu backend's: both copy bits, so the
// device must give the cpu's bits exactly, with choices dropped over capacity, per-token
// and per-choice rows, i32 and i64 indices, and an out-of-range expert flagged.
#include "backend_cuda/kernels/moe.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "backend_cpu/moe.h"
#include "backend_cuda/kernels/gpu_test_util.h"
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

constexpr ElementType kTypes[] = {ElementType::kF16, ElementType::kBF16, ElementType::kF32,
                                  ElementType::kI32, ElementType::kF64,  ElementType::kI64};

int32_t ReadFlag(const DeviceBuffer& flag) {
  int32_t host = -1;
  EXPECT_EQ(cudaMemcpy(&host, flag.get(), sizeof(host), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

// 40 tokens, top-2 over 6 experts, capacity 9 of the 14 a factor of 6 would give: the
// random routing overflows some experts. Once whole, once in 4 groups of 10 tokens with
// capacity 3 each (expert parallelism's per-device routing).
TEST(MoeKernelTest, MatchesCpuBitForBit) {
  COMMIR_SKIP_WITHOUT_GPU();
  uint32_t seed = 1;
  for (const MoeShape s :
       {MoeShape{.tokens = 40, .k = 2, .experts = 6, .capacity = 9, .hidden = 5},
        MoeShape{.tokens = 40, .k = 2, .experts = 6, .capacity = 3, .hidden = 5, .groups = 4}}) {
  for (ElementType type : kTypes) {
    for (ElementType index_type : {ElementType::kI32, ElementType::kI64}) {
      for (bool per_choice : {false, true}) {
        const Tensor ids = RandomTensor(index_type, {s.tokens, s.k}, seed++, 0, s.experts - 1);
        const Tensor rows = RandomTensor(type,
                                         per_choice ? std::vector<int64_t>{s.tokens, s.k, s.hidden}
                                                    : std::vector<int64_t>{s.tokens, s.hidden},
                                         seed++, -10, 10);
        const auto buffer = cpu::MoeDispatch(rows, ids, s.experts, s.capacity, s.groups);
        ASSERT_TRUE(buffer.ok()) << buffer.status();
        const auto back = cpu::MoeCollect(*buffer, ids, s.groups);
        ASSERT_TRUE(back.ok()) << back.status();
        DeviceBuffer dr = Upload(rows), di = Upload(ids), db = Upload(*buffer),
                     slots(s.tokens * s.k * 8), dd(buffer->byte_size()), dc(back->byte_size()),
                     flag(sizeof(int32_t));
        ASSERT_EQ(cudaMemset(flag.get(), 0, sizeof(int32_t)), cudaSuccess);
        auto* slot_data = static_cast<int64_t*>(slots.get());
        ASSERT_EQ(LaunchMoeSlots(index_type, di.get(), s, slot_data,
                                 static_cast<int32_t*>(flag.get()), nullptr),
                  cudaSuccess);
        ASSERT_EQ(LaunchMoeDispatch(type, dr.get(), per_choice, s, slot_data, dd.get(), nullptr),
                  cudaSuccess);
        ASSERT_EQ(LaunchMoeCollect(type, db.get(), s, slot_data, dc.get(), nullptr), cudaSuccess);
        const std::string what =
            absl::StrFormat("%s %s per_choice=%d groups=%d", ElementTypeName(type),
                            ElementTypeName(index_type), per_choice, s.groups);
        ExpectSameBits(Download(dd.get(), type, buffer->shape()), *buffer, what + " dispatch");
        ExpectSameBits(Download(dc.get(), type, back->shape()), *back, what + " collect");
        EXPECT_EQ(ReadFlag(flag), 0) << what;
      }
    }
  }
  }
}

TEST(MoeKernelTest, OutOfRangeExpertIsFlaggedAndDropped) {
  COMMIR_SKIP_WITHOUT_GPU();
  const MoeShape s{.tokens = 2, .k = 1, .experts = 2, .capacity = 2, .hidden = 1};
  const Tensor ids = Tensor::FromInt64(ElementType::kI64, {2, 1}, {7, 1});
  DeviceBuffer di = Upload(ids), slots(2 * 8), flag(sizeof(int32_t));
  ASSERT_EQ(cudaMemset(flag.get(), 0, sizeof(int32_t)), cudaSuccess);
  ASSERT_EQ(LaunchMoeSlots(ElementType::kI64, di.get(), s, static_cast<int64_t*>(slots.get()),
                           static_cast<int32_t*>(flag.get()), nullptr),
            cudaSuccess);
  EXPECT_EQ(ReadFlag(flag), kErrIndexOutOfRange);
  std::vector<int64_t> host(2);
  ASSERT_EQ(cudaMemcpy(host.data(), slots.get(), 16, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host, (std::vector<int64_t>{-1, 2}));  // expert 1, position 0
  EXPECT_EQ(LaunchMoeSlots(ElementType::kF32, di.get(), s, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace commir::cuda_kernels
