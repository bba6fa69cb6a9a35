// Layout kernels against the cpu backend: these move bits, so results must be identical.
#include "backend_cuda/kernels/layout.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backend_cpu/kernels.h"
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

// One type per element width (1, 2, 4, 8 bytes) plus bf16.
constexpr ElementType kTypes[] = {ElementType::kI1, ElementType::kF16, ElementType::kBF16,
                                  ElementType::kF32, ElementType::kI32, ElementType::kF64,
                                  ElementType::kI64};

Tensor Random(ElementType type, std::vector<int64_t> shape, uint32_t seed) {
  return RandomTensor(type, std::move(shape), seed, IsIntegerType(type) ? -1000 : -10,
                      type == ElementType::kI1 ? 1 : (IsIntegerType(type) ? 1000 : 10));
}

TEST(LayoutKernelTest, TransposeMatchesCpu) {
  COMMIR_SKIP_WITHOUT_GPU();
  const struct {
    std::vector<int64_t> shape, perm;
  } cases[] = {
      {{33, 65}, {1, 0}},                // tiled, partial tiles on both sides
      {{64, 128}, {-1, 0}},              // tiled, negative perm entry
      {{2, 3, 4, 5}, {3, 1, 0, 2}},      // tiled with batch dimensions
      {{2, 3, 4, 5}, {1, 0, 2, 3}},      // innermost stays: strided copy
      {{4, 1, 7}, {2, 1, 0}},            // unit dimension dropped
      {{5, 6, 7}, {0, 1, 2}},            // identity: memcpy
      {{3, 0, 2}, {2, 0, 1}},            // empty
      {{}, {}},                          // 0-d
      {{7, 50, 3, 40}, {2, 0, 3, 1}},
  };
  uint32_t seed = 1;
  for (ElementType type : kTypes) {
    for (const auto& c : cases) {
      const Tensor x = Random(type, c.shape, seed++);
      const auto want = cpu::Transpose(x, c.perm);
      ASSERT_TRUE(want.ok()) << want.status();
      DeviceBuffer dx = Upload(x), dy(std::max<int64_t>(x.byte_size(), 8));
      COMMIR_ASSERT_CUDA_OK(LaunchTranspose(type, dx.get(), x.shape(), c.perm, dy.get(), nullptr));
      ExpectSameBits(Download(dy.get(), type, want->shape()), *want,
                     absl::StrFormat("transpose %s [%s] perm [%s]", ElementTypeName(type),
                                     absl::StrJoin(c.shape, ","), absl::StrJoin(c.perm, ",")));
    }
  }
}

TEST(LayoutKernelTest, SliceMatchesCpu) {
  COMMIR_SKIP_WITHOUT_GPU();
  const struct {
    std::vector<int64_t> shape, start, size;
  } cases[] = {
      {{7, 9, 11}, {1, 2, 3}, {5, 6, 7}},
      {{4, 64}, {1, 8}, {3, 32}},   // 16-byte aligned rows: widened copies
      {{4, 64}, {0, 3}, {4, 13}},   // misaligned: element copies
      {{10}, {10}, {0}},            // empty at the end
      {{3, 4}, {0, 0}, {3, 4}},     // everything
  };
  uint32_t seed = 100;
  for (ElementType type : kTypes) {
    for (const auto& c : cases) {
      const Tensor x = Random(type, c.shape, seed++);
      const auto want = cpu::Slice(x, c.start, c.size);
      ASSERT_TRUE(want.ok()) << want.status();
      DeviceBuffer dx = Upload(x), dy(std::max<int64_t>(want->byte_size(), 8));
      COMMIR_ASSERT_CUDA_OK(LaunchSlice(type, dx.get(), x.shape(), c.start, c.size, dy.get(), nullptr));
      ExpectSameBits(Download(dy.get(), type, want->shape()), *want,
                     absl::StrFormat("slice %s [%s] start [%s] size [%s]", ElementTypeName(type),
                                     absl::StrJoin(c.shape, ","), absl::StrJoin(c.start, ","),
                                     absl::StrJoin(c.size, ",")));
    }
  }
}

TEST(LayoutKernelTest, ConcatMatchesCpu) {
  COMMIR_SKIP_WITHOUT_GPU();
  uint32_t seed = 200;
  for (ElementType type : kTypes) {
    for (int64_t dim : {0, 1, -1}) {
      std::vector<std::vector<int64_t>> shapes = {{3, 5, 8}, {3, 5, 8}, {3, 5, 8}};
      const int64_t d = dim < 0 ? dim + 3 : dim;
      shapes[0][d] = 2;
      shapes[1][d] = 0;  // an empty part is allowed
      shapes[2][d] = 7;
      std::vector<Tensor> parts;
      for (const auto& s : shapes) parts.push_back(Random(type, s, seed++));
      std::vector<const Tensor*> ptrs;
      for (const Tensor& p : parts) ptrs.push_back(&p);
      const auto want = cpu::Concat(ptrs, dim);
      ASSERT_TRUE(want.ok()) << want.status();
      std::vector<DeviceBuffer> dparts;
      std::vector<const void*> dptrs;
      std::vector<std::span<const int64_t>> spans;
      for (const Tensor& p : parts) dparts.push_back(Upload(p));
      for (size_t i = 0; i < parts.size(); ++i) {
        dptrs.push_back(dparts[i].get());
        spans.push_back(parts[i].shape());
      }
      DeviceBuffer dy(want->byte_size());
      COMMIR_ASSERT_CUDA_OK(LaunchConcat(type, dptrs, spans, dim, dy.get(), nullptr));
      ExpectSameBits(Download(dy.get(), type, want->shape()), *want,
                     absl::StrFormat("concat %s dim %d", ElementTypeName(type), dim));
    }
  }
}

TEST(LayoutKernelTest, BroadcastMatchesCpu) {
  COMMIR_SKIP_WITHOUT_GPU();
  const struct {
    std::vector<int64_t> from, to;
  } cases[] = {{{3, 1, 5}, {2, 3, 4, 5}}, {{}, {4, 4}}, {{8}, {3, 8}}, {{6, 1}, {6, 16}},
               {{2, 3}, {2, 3}}};
  uint32_t seed = 300;
  for (ElementType type : kTypes) {
    for (const auto& c : cases) {
      const Tensor x = Random(type, c.from, seed++);
      const auto want = cpu::Broadcast(x, c.to);
      ASSERT_TRUE(want.ok()) << want.status();
      DeviceBuffer dx = Upload(x), dy(want->byte_size());
      COMMIR_ASSERT_CUDA_OK(LaunchBroadcast(type, dx.get(), x.shape(), dy.get(), c.to, nullptr));
      ExpectSameBits(Download(dy.get(), type, want->shape()), *want,
                     absl::StrFormat("broadcast %s [%s] -> [%s]", ElementTypeName(type),
                                     absl::StrJoin(c.from, ","), absl::StrJoin(c.to, ",")));
    }
  }
}

TEST(LayoutKernelTest, DynamicSliceAndUpdateMatchCpu) {
  COMMIR_SKIP_WITHOUT_GPU();
  uint32_t seed = 400;
  for (ElementType type : kTypes) {
    const Tensor x = Random(type, {6, 10, 4}, seed++);
    for (int64_t dim : {0, 1, -1}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      const int64_t size = x.dim(d) / 2, offset = x.dim(d) - size - 1;
      const auto want = cpu::DynamicSlice(x, dim, offset, size);
      ASSERT_TRUE(want.ok()) << want.status();
      DeviceBuffer dx = Upload(x), dy(want->byte_size());
      COMMIR_ASSERT_CUDA_OK(LaunchDynamicSlice(type, dx.get(), x.shape(), dim, offset, size,
                                               dy.get(), nullptr));
      const std::string what = absl::StrFormat("%s dim %d", ElementTypeName(type), dim);
      ExpectSameBits(Download(dy.get(), type, want->shape()), *want, "dynamic_slice " + what);

      std::vector<int64_t> update_shape = x.shape();
      update_shape[d] = size;
      const Tensor update = Random(type, update_shape, seed++);
      const auto updated = cpu::DynamicUpdateSlice(x, update, dim, offset);
      ASSERT_TRUE(updated.ok()) << updated.status();
      DeviceBuffer du = Upload(update);
      COMMIR_ASSERT_CUDA_OK(LaunchDynamicUpdateSliceInPlace(type, dx.get(), x.shape(),
                                                            du.get(), size, dim, offset, nullptr));
      ExpectSameBits(Download(dx.get(), type, x.shape()), *updated, "dynamic_update_slice " + what);
    }
  }
}

TEST(LayoutKernelTest, RejectsBadArgumentsWithoutLaunching) {
  const std::vector<int64_t> shape = {4, 5};
  EXPECT_EQ(LaunchSlice(KDType::kF32, nullptr, shape, std::vector<int64_t>{1, 1},
                        std::vector<int64_t>{4, 1}, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchTranspose(KDType::kF32, nullptr, shape, std::vector<int64_t>{0, 0}, nullptr,
                            nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchDynamicSlice(KDType::kF32, nullptr, shape, 1, 3, 3, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchBroadcast(KDType::kF32, nullptr, shape, nullptr, std::vector<int64_t>{4, 6},
                            nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace commir::cuda_kernels
