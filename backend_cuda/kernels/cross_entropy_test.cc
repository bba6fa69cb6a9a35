// cross_entropy and cross_entropy_grad against the cpu backend's kernels on random
// logits (the op is not exact: exp and tree sums, so a few ulp of f32, not bit for bit).
#include "backend_cuda/kernels/cross_entropy.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "absl/strings/str_format.h"
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
using ::commir::cuda_kernels::testing::Upload;
using runtime::Tensor;

ElementType StatsType(ElementType t) {
  return t == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32;
}

TEST(CrossEntropyKernelTest, MatchesCpu) {
  COMMIR_SKIP_WITHOUT_GPU();
  uint32_t seed = 7;
  for (ElementType type : {ElementType::kF32, ElementType::kBF16, ElementType::kF64}) {
    for (int64_t classes : {5, 1000, 50257}) {
      for (LossReduction reduction : {LossReduction::kMean, LossReduction::kSum, LossReduction::kNone}) {
        const int64_t tokens = 37;
        SCOPED_TRACE(absl::StrFormat("%s classes %d reduction %d", ElementTypeName(type), classes,
                                     static_cast<int>(reduction)));
        const Tensor logits = RandomTensor(type, {tokens, classes}, seed++, -8, 8);
        Tensor labels = RandomTensor(ElementType::kI64, {tokens}, seed++, 0, classes - 1);
        std::vector<int64_t> l = labels.ToInt64();
        l[3] = -100;
        l[11] = -100;
        labels = Tensor::FromInt64(ElementType::kI64, {tokens}, l);
        CrossEntropyOptions options;
        options.reduction = reduction;
        options.label_smoothing = 0.1;
        options.z_loss = 1e-3;
        absl::StatusOr<cpu::CrossEntropyResult> cpu_result =
            cpu::CrossEntropy(logits, labels, options);
        ASSERT_TRUE(cpu_result.ok()) << cpu_result.status();

        KCrossEntropyArgs args;
        args.dtype = type;
        args.label_dtype = ElementType::kI64;
        DeviceBuffer x = Upload(logits), y = Upload(labels);
        args.logits = x.get();
        args.labels = y.get();
        args.tokens = tokens;
        args.classes = classes;
        args.reduction = reduction == LossReduction::kMean ? 0 : reduction == LossReduction::kSum ? 1 : 2;
        args.label_smoothing = options.label_smoothing;
        args.z_loss = options.z_loss;
        const ElementType st = StatsType(type);
        DeviceBuffer loss(cpu_result->loss.byte_size()), lse(cpu_result->lse.byte_size());
        DeviceBuffer scratch(tokens * ElementTypeByteWidth(st));
        DeviceBuffer flag(sizeof(int32_t));
        COMMIR_ASSERT_CUDA_OK(cudaMemset(flag.get(), 0, sizeof(int32_t)));
        COMMIR_ASSERT_CUDA_OK(
            LaunchCrossEntropy(args, loss.get(), lse.get(), scratch.get(), static_cast<int32_t*>(flag.get()), nullptr));
        COMMIR_ASSERT_CUDA_OK(cudaDeviceSynchronize());
        const double tol = type == ElementType::kF64 ? 1e-12 : type == ElementType::kBF16 ? 1e-2 : 1e-5;
        ExpectNear(Download(loss.get(), type, cpu_result->loss.shape()), cpu_result->loss, tol, tol, "loss");
        ExpectNear(Download(lse.get(), st, {tokens}), cpu_result->lse, tol, tol, "lse");

        const Tensor dloss = RandomTensor(ElementType::kF32, cpu_result->loss.shape(), seed++, 0.5, 1.5);
        absl::StatusOr<Tensor> cpu_dx =
            cpu::CrossEntropyGrad(logits, labels, cpu_result->lse, dloss, options);
        ASSERT_TRUE(cpu_dx.ok()) << cpu_dx.status();
        DeviceBuffer g = Upload(dloss), dx(cpu_dx->byte_size());
        COMMIR_ASSERT_CUDA_OK(LaunchCrossEntropyGrad(args, lse.get(), ElementType::kF32, g.get(), dx.get(),
                                                  static_cast<int32_t*>(flag.get()), nullptr));
        COMMIR_ASSERT_CUDA_OK(cudaDeviceSynchronize());
        ExpectNear(Download(dx.get(), ElementType::kF32, {tokens, classes}), *cpu_dx, 1e-5, 1e-7, "dlogits");
        int32_t raised = 0;
        COMMIR_ASSERT_CUDA_OK(cudaMemcpy(&raised, flag.get(), sizeof(int32_t), cudaMemcpyDeviceToHost));
        EXPECT_EQ(raised, 0);
      }
    }
  }
}

TEST(CrossEntropyKernelTest, RejectsNoClasses) {
  KCrossEntropyArgs args;
  args.classes = 0;
  args.tokens = 4;
  EXPECT_EQ(LaunchCrossEntropy(args, nullptr, nullptr, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(LaunchCrossEntropyGrad(args, nullptr, ElementType::kF32, nullptr, nullptr, nullptr,
                                   nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace commir::cuda_kernels
