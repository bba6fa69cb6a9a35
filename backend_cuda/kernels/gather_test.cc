// gather and scatter_add kernels against the cpu backend's: gather copies bits, and
// scatter_add sums each element's updates in the cpu's order with one rounding, so both
// must give the cpu's bits exactly, repeated indices and 16-bit types included.
#include "backend_cuda/kernels/gather.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "backend_cpu/gather.h"
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

constexpr ElementType kTypes[] = {ElementType::kI1, ElementType::kF16, ElementType::kBF16,
                                  ElementType::kF32, ElementType::kI32, ElementType::kF64,
                                  ElementType::kI64};

struct Case {
  std::vector<int64_t> table;
  std::vector<int64_t> indices;
  int64_t axis;
};

// Table, index and row-group shapes: an embedding, a middle axis, the last axis, a scalar
// index, and empty indices.
const Case kCases[] = {
    {{50, 7}, {3, 9}, 0},
    {{3, 20, 5}, {33}, 1},
    {{4, 6}, {2, 2}, -1},
    {{10, 3}, {}, 0},
    {{10, 3}, {0}, 0},
};

RowsShape RowsOf(const Case& c) {
  RowsShape s;
  const int64_t axis = c.axis < 0 ? c.axis + static_cast<int64_t>(c.table.size()) : c.axis;
  for (int64_t d = 0; d < axis; ++d) s.outer *= c.table[d];
  s.rows = c.table[axis];
  for (size_t d = axis + 1; d < c.table.size(); ++d) s.inner *= c.table[d];
  s.count = 1;
  for (int64_t d : c.indices) s.count *= d;
  return s;
}

// Indices in [0, rows), with repeats.
Tensor Indices(ElementType type, const Case& c, int64_t rows, uint32_t seed) {
  return RandomTensor(type, c.indices, seed, 0, static_cast<double>(rows - 1));
}

int32_t ReadFlag(const DeviceBuffer& flag) {
  int32_t host = -1;
  EXPECT_EQ(cudaMemcpy(&host, flag.get(), sizeof(host), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

TEST(GatherKernelTest, GatherMatchesCpuBitForBit) {
  COMMIR_SKIP_WITHOUT_GPU();
  uint32_t seed = 1;
  for (ElementType type : kTypes) {
    for (const Case& c : kCases) {
      for (ElementType index_type : {ElementType::kI32, ElementType::kI64}) {
        const RowsShape s = RowsOf(c);
        const Tensor table = RandomTensor(type, c.table, seed++, -10, 10);
        const Tensor ids = Indices(index_type, c, s.rows, seed++);
        const auto want = cpu::Gather(table, ids, c.axis);
        ASSERT_TRUE(want.ok()) << want.status();
        DeviceBuffer dt = Upload(table), di = Upload(ids),
                     dy(std::max<int64_t>(want->byte_size(), 8)), flag(sizeof(int32_t));
        ASSERT_EQ(cudaMemset(flag.get(), 0, sizeof(int32_t)), cudaSuccess);
        ASSERT_EQ(LaunchGather(type, dt.get(), s, index_type, di.get(), 0, false, dy.get(),
                               static_cast<int32_t*>(flag.get()), nullptr),
                  cudaSuccess);
        const std::string what = absl::StrFormat("%s gather axis %d", ElementTypeName(type), c.axis);
        ExpectSameBits(Download(dy.get(), type, want->shape()), *want, what);
        EXPECT_EQ(ReadFlag(flag), 0) << what;
      }
    }
  }
}

TEST(GatherKernelTest, OffsetFormAndOutOfRangeIndices) {
  COMMIR_SKIP_WITHOUT_GPU();
  const Tensor table = RandomTensor(ElementType::kF32, {4, 3}, 5, -1, 1);
  const Tensor ids = Tensor::FromInt64(ElementType::kI32, {4}, {5, 0, 7, 3});
  const RowsShape s{.outer = 1, .rows = 4, .inner = 3, .count = 4};
  DeviceBuffer dt = Upload(table), di = Upload(ids), dy(4 * 3 * 4), flag(sizeof(int32_t));
  // As the device holding global rows [4, 8): the cpu's zero rows for the others' ids.
  ASSERT_EQ(cudaMemset(flag.get(), 0, sizeof(int32_t)), cudaSuccess);
  ASSERT_EQ(LaunchGather(ElementType::kF32, dt.get(), s, ElementType::kI32, di.get(), 4, true,
                         dy.get(), static_cast<int32_t*>(flag.get()), nullptr),
            cudaSuccess);
  const auto want = cpu::Gather(table, ids, 0, 4);
  ASSERT_TRUE(want.ok()) << want.status();
  ExpectSameBits(Download(dy.get(), ElementType::kF32, {4, 3}), *want, "offset form");
  EXPECT_EQ(ReadFlag(flag), 0);
  // Without the offset, ids 5 and 7 are out of range: the flag says so.
  ASSERT_EQ(LaunchGather(ElementType::kF32, dt.get(), s, ElementType::kI32, di.get(), 0, false,
                         dy.get(), static_cast<int32_t*>(flag.get()), nullptr),
            cudaSuccess);
  EXPECT_EQ(ReadFlag(flag), kErrIndexOutOfRange);
  // scatter_add's offset form: ids 5 and 7 add to rows 1 and 3, ids 0 and 3 are skipped.
  const Tensor updates = RandomTensor(ElementType::kF32, {4, 3}, 6, -1, 1);
  DeviceBuffer du = Upload(updates), dz(4 * 3 * 4);
  ASSERT_EQ(cudaMemset(flag.get(), 0, sizeof(int32_t)), cudaSuccess);
  ASSERT_EQ(LaunchScatterAdd(ElementType::kF32, dt.get(), s, ElementType::kI32, di.get(), 4, true,
                             du.get(), dz.get(), dz.get(), static_cast<int32_t*>(flag.get()),
                             nullptr),
            cudaSuccess);
  const auto added = cpu::ScatterAdd(table, ids, updates, 0, 4);
  ASSERT_TRUE(added.ok()) << added.status();
  ExpectSameBits(Download(dz.get(), ElementType::kF32, {4, 3}), *added, "scatter_add offset form");
  EXPECT_EQ(ReadFlag(flag), 0);
}

TEST(GatherKernelTest, ScatterAddMatchesCpuBitForBit) {
  COMMIR_SKIP_WITHOUT_GPU();
  uint32_t seed = 100;
  for (ElementType type : kTypes) {
    for (const Case& c : kCases) {
      const RowsShape s = RowsOf(c);
      const Tensor base = RandomTensor(type, c.table, seed++, -10, 10);
      const Tensor ids = Indices(ElementType::kI32, c, s.rows, seed++);
      const auto rows = cpu::Gather(base, ids, c.axis);  // the updates' shape
      ASSERT_TRUE(rows.ok()) << rows.status();
      const Tensor updates = RandomTensor(type, rows->shape(), seed++, -10, 10);
      const auto want = cpu::ScatterAdd(base, ids, updates, c.axis);
      ASSERT_TRUE(want.ok()) << want.status();
      const ElementType compute = ScatterAddComputeType(type);
      DeviceBuffer db = Upload(base), di = Upload(ids), du = Upload(updates),
                   dy(std::max<int64_t>(want->byte_size(), 8)),
                   acc(std::max<int64_t>(base.num_elements() * ElementTypeByteWidth(compute), 8)),
                   flag(sizeof(int32_t));
      ASSERT_EQ(cudaMemset(flag.get(), 0, sizeof(int32_t)), cudaSuccess);
      void* accumulator = compute == type ? dy.get() : acc.get();
      ASSERT_EQ(LaunchScatterAdd(type, db.get(), s, ElementType::kI32, di.get(), 0, false,
                                 du.get(), accumulator, dy.get(), static_cast<int32_t*>(flag.get()),
                                 nullptr),
                cudaSuccess);
      const std::string what =
          absl::StrFormat("%s scatter_add axis %d", ElementTypeName(type), c.axis);
      ExpectSameBits(Download(dy.get(), type, want->shape()), *want, what);
      EXPECT_EQ(ReadFlag(flag), 0) << what;
    }
  }
}

TEST(GatherKernelTest, RejectsBadArgumentsWithoutLaunching) {
  const RowsShape bad{.outer = 1, .rows = -1, .inner = 1, .count = 1};
  EXPECT_EQ(LaunchGather(KDType::kF32, nullptr, bad, KDType::kI32, nullptr, 0, false, nullptr,
                         nullptr, nullptr),
            cudaErrorInvalidValue);
  const RowsShape ok{.outer = 1, .rows = 2, .inner = 1, .count = 1};
  // Float indices, and an f16 sum without a wider accumulator.
  EXPECT_EQ(LaunchGather(KDType::kF32, nullptr, ok, KDType::kF32, nullptr, 0, false, nullptr,
                         nullptr, nullptr),
            cudaErrorInvalidValue);
  int fake = 0;
  EXPECT_EQ(LaunchScatterAdd(KDType::kF16, nullptr, ok, KDType::kI32, nullptr, 0, false, nullptr,
                             &fake, &fake, nullptr, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace commir::cuda_kernels
