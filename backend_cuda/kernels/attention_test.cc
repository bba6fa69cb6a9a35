// Fused attention against the cpu backend's reference (explicit scores, softmax, P V).
#include "backend_cuda/kernels/attention.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
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
using ::commir::cuda_kernels::testing::Ulp;
using ::commir::cuda_kernels::testing::Upload;
using runtime::Tensor;

struct AttentionCase {
  std::string name;
  int64_t b, h, hkv, sq, skv, d, dv;
  bool causal = false;
  std::optional<int64_t> q_pos = std::nullopt;
  int64_t k_pos = 0;
  std::optional<double> scale = std::nullopt;
};

// Tiled kernel (d, dv <= 64 and <= 128), the row fallback (> 128), GQA, causal masks
// with default and explicit positions (including queries that see no key), partial tiles,
// decode (sq = 1) and empty key sets.
const std::vector<AttentionCase> kCases = {
    {"plain", 2, 4, 4, 37, 70, 64, 64},
    {"gqa causal", 2, 8, 2, 64, 64, 64, 64, true},
    {"causal sq<skv", 1, 4, 2, 33, 100, 32, 48, true},
    {"causal sq>skv (rows see nothing)", 1, 2, 1, 50, 20, 16, 16, true},
    {"explicit positions", 1, 2, 2, 40, 90, 64, 64, true, 90, 100},
    {"positions far apart", 1, 2, 1, 8, 8, 8, 8, true, -1000, 1000},
    {"d 128 dv 96 scale", 1, 3, 1, 45, 77, 128, 96, false, std::nullopt, 0, 0.3},
    {"d 80", 2, 2, 1, 31, 65, 80, 80, true},
    {"d 256 fallback", 1, 2, 1, 9, 300, 256, 200, true},
    {"decode", 3, 8, 2, 1, 129, 64, 64, true},
    {"no keys", 1, 2, 1, 5, 0, 16, 16},
    {"long", 1, 1, 1, 300, 1000, 64, 64, true},
};

struct GpuResult {
  Tensor output;
  Tensor lse;
};

cpu::AttentionOptions CpuOptions(const AttentionCase& c) {
  cpu::AttentionOptions options;
  options.causal = c.causal;
  options.scale = c.scale;
  options.q_pos = c.q_pos;
  options.k_pos = c.k_pos;
  return options;
}

// Runs `kernel` on the GPU; q, k, v and out start `offset_bytes` past an aligned address.
// Launch failures are reported as test failures and give std::nullopt.
std::optional<GpuResult> RunOnGpu(const AttentionCase& c, const Tensor& q, const Tensor& k,
                                  const Tensor& v, KAttentionKernel kernel,
                                  size_t offset_bytes = 0) {
  const ElementType type = q.element_type();
  const std::vector<int64_t> out_shape = {c.b, c.h, c.sq, c.dv};
  const std::vector<int64_t> lse_shape = {c.b, c.h, c.sq};
  const int64_t out_bytes = c.b * c.h * c.sq * c.dv * ElementTypeByteWidth(type);
  DeviceBuffer dq = Upload(q, offset_bytes), dk = Upload(k, offset_bytes),
               dv = Upload(v, offset_bytes);
  DeviceBuffer dout(std::max<int64_t>(out_bytes, 8), offset_bytes);
  DeviceBuffer dlse(std::max<int64_t>(c.b * c.h * c.sq * 4, 8));
  KAttentionArgs args;
  args.dtype = type;
  args.q = dq.get();
  args.k = dk.get();
  args.v = dv.get();
  args.out = dout.get();
  args.lse = static_cast<float*>(dlse.get());
  args.batch = c.b;
  args.heads = c.h;
  args.kv_heads = c.hkv;
  args.sq = c.sq;
  args.skv = c.skv;
  args.d = c.d;
  args.dv = c.dv;
  args.scale = c.scale.value_or(1.0 / std::sqrt(static_cast<double>(c.d)));
  args.causal = c.causal;
  args.q_pos = c.q_pos.value_or(c.skv - c.sq);
  args.k_pos = c.k_pos;
  args.kernel = kernel;
  if (const cudaError_t e = LaunchAttention(args, nullptr); e != cudaSuccess) {
    ADD_FAILURE() << c.name << ": LaunchAttention: " << cudaGetErrorString(e);
    return std::nullopt;
  }
  if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    ADD_FAILURE() << c.name << ": kernel: " << cudaGetErrorString(e);
    return std::nullopt;
  }
  return GpuResult{Download(dout.get(), type, out_shape),
                   Download(dlse.get(), ElementType::kF32, lse_shape)};
}

// Output tolerance against the cpu's f32 reference (both tolerances, |a - e| <= tol +
// tol |e|). f32: accumulation in another order. f16/bf16 on CUDA cores: the same f32 math,
// then possibly one unit apart after rounding. f16/bf16 on tensor cores: p is rounded to
// the input type before p v (relative error <= u = ulp / 2 on each term, so at most
// u max|v| = ulp on the output for |v| <= 2) plus the output's rounding: within 2 ulp.
double OutputTolerance(ElementType type) {
  return type == ElementType::kF64 ? 1e-12 : type == ElementType::kF32 ? 2e-5 : 2 * Ulp(type);
}

void ExpectMatchesCpu(const GpuResult& got, const cpu::AttentionResult& want, ElementType type,
                      const std::string& what) {
  const double tol = OutputTolerance(type);
  ExpectNear(got.output, want.output, tol, tol, what + " output");
  // lse: f32 sums in another order, exp2 of log2(e)-prescaled scores on tensor cores.
  ExpectNear(got.lse, want.lse, type == ElementType::kF64 ? 1e-6 : 2e-5, 2e-5, what + " lse");
}

TEST(AttentionKernelTest, MatchesCpuReference) {
  COMMIR_SKIP_WITHOUT_GPU();
  uint32_t seed = 1;
  for (ElementType type : {ElementType::kF32, ElementType::kBF16, ElementType::kF16,
                           ElementType::kF64}) {
    for (const AttentionCase& c : kCases) {
      const Tensor q = RandomTensor(type, {c.b, c.h, c.sq, c.d}, seed++, -2, 2);
      const Tensor k = RandomTensor(type, {c.b, c.hkv, c.skv, c.d}, seed++, -2, 2);
      const Tensor v = RandomTensor(type, {c.b, c.hkv, c.skv, c.dv}, seed++, -2, 2);
      const auto want = cpu::Attention(q, k, v, CpuOptions(c));
      ASSERT_TRUE(want.ok()) << want.status();
      const auto got = RunOnGpu(c, q, k, v, KAttentionKernel::kAuto);
      ASSERT_TRUE(got.has_value());
      ExpectMatchesCpu(*got, *want, type,
                       absl::StrFormat("%s (%s)", c.name, ElementTypeName(type)));
    }
  }
}

// The tensor-core kernel, forced, on both padded head sizes (64, 128) and heads padded into
// them, causal and not, GQA, sequence lengths that are not multiples of the 128-query and
// 64- or 32-key tiles, sq != skv, and the positions of ring attention's steps (the key block
// wholly before the queries, wholly after, on the diagonal, partly overlapping).
const std::vector<AttentionCase> kTensorCoreCases = {
    {"d64 full", 2, 4, 4, 37, 70, 64, 64},
    {"d128 full sq>skv", 1, 4, 2, 200, 150, 128, 128},
    {"d64 causal gqa", 2, 8, 2, 130, 130, 64, 64, true},
    {"d128 causal gqa", 1, 8, 2, 257, 257, 128, 128, true},
    {"d128 causal sq<skv", 1, 4, 1, 70, 300, 128, 128, true},
    {"d64 causal sq>skv (rows see nothing)", 1, 2, 1, 300, 65, 64, 64, true},
    {"ring: keys before", 1, 4, 2, 100, 100, 128, 128, true, 100, 0},
    {"ring: keys after", 1, 4, 2, 100, 100, 128, 128, true, 0, 100},
    {"ring: diagonal", 1, 4, 2, 100, 100, 64, 64, true, 500, 500},
    {"ring: partial overlap", 1, 2, 1, 150, 90, 64, 64, true, 1000, 1050},
    {"d32 padded", 1, 2, 1, 45, 77, 32, 32, true},
    {"d128 dv96 scale", 1, 3, 1, 45, 77, 128, 96, false, std::nullopt, 0, 0.3},
    {"d80 padded", 2, 2, 1, 31, 65, 80, 80, true},
    {"decode", 3, 8, 2, 1, 129, 64, 64, true},
    {"no keys", 1, 2, 1, 5, 0, 64, 64},
    {"long", 1, 2, 1, 300, 1000, 128, 128, true},
};

TEST(AttentionKernelTest, TensorCoreKernelMatchesCpuAndCudaCoreKernel) {
  COMMIR_SKIP_WITHOUT_GPU();
  uint32_t seed = 1000;
  for (ElementType type : {ElementType::kBF16, ElementType::kF16}) {
    for (const AttentionCase& c : kTensorCoreCases) {
      const std::string what = absl::StrFormat("%s (%s)", c.name, ElementTypeName(type));
      const Tensor q = RandomTensor(type, {c.b, c.h, c.sq, c.d}, seed++, -2, 2);
      const Tensor k = RandomTensor(type, {c.b, c.hkv, c.skv, c.d}, seed++, -2, 2);
      const Tensor v = RandomTensor(type, {c.b, c.hkv, c.skv, c.dv}, seed++, -2, 2);
      const auto want = cpu::Attention(q, k, v, CpuOptions(c));
      ASSERT_TRUE(want.ok()) << want.status();
      const auto tensor_core = RunOnGpu(c, q, k, v, KAttentionKernel::kTensorCore);
      const auto cuda_core = RunOnGpu(c, q, k, v, KAttentionKernel::kCudaCore);
      ASSERT_TRUE(tensor_core.has_value() && cuda_core.has_value()) << what;
      ExpectMatchesCpu(*tensor_core, *want, type, what + " tensor cores");
      ExpectMatchesCpu(*cuda_core, *want, type, what + " CUDA cores");
      // Each within 2 ulp of the cpu, so within 4 ulp of each other.
      const double tol = 2 * OutputTolerance(type);
      ExpectNear(tensor_core->output, cuda_core->output, tol, tol, what + " kernels agree");
    }
  }
}

// Operands that are not 16-byte aligned cannot take cp.async's 16-byte copies: kAuto falls
// back to the CUDA-core kernel (still right), kTensorCore refuses.
TEST(AttentionKernelTest, MisalignedOperandsFallBackToCudaCores) {
  COMMIR_SKIP_WITHOUT_GPU();
  const AttentionCase c = {"misaligned", 1, 2, 1, 40, 50, 64, 64, true};
  const Tensor q = RandomTensor(ElementType::kBF16, {c.b, c.h, c.sq, c.d}, 7, -2, 2);
  const Tensor k = RandomTensor(ElementType::kBF16, {c.b, c.hkv, c.skv, c.d}, 8, -2, 2);
  const Tensor v = RandomTensor(ElementType::kBF16, {c.b, c.hkv, c.skv, c.dv}, 9, -2, 2);
  const auto want = cpu::Attention(q, k, v, CpuOptions(c));
  ASSERT_TRUE(want.ok()) << want.status();
  const auto got = RunOnGpu(c, q, k, v, KAttentionKernel::kAuto, /*offset_bytes=*/2);
  ASSERT_TRUE(got.has_value());
  ExpectMatchesCpu(*got, *want, ElementType::kBF16, "misaligned");

  DeviceBuffer buf(1024, /*offset_bytes=*/2);
  KAttentionArgs args;
  args.dtype = ElementType::kBF16;
  args.q = args.k = args.v = args.out = buf.get();
  args.batch = args.heads = args.kv_heads = 1;
  args.sq = args.skv = 2;
  args.d = args.dv = 64;
  args.kernel = KAttentionKernel::kTensorCore;
  EXPECT_EQ(LaunchAttention(args, nullptr), cudaErrorInvalidValue);
}

TEST(AttentionKernelTest, FullyMaskedRowsGiveZerosAndNegativeInfinityLse) {
  COMMIR_SKIP_WITHOUT_GPU();
  // Keys at positions 100.., queries at 0..: nothing visible under the causal mask.
  const Tensor q = RandomTensor(ElementType::kF32, {1, 1, 4, 8}, 1);
  const Tensor k = RandomTensor(ElementType::kF32, {1, 1, 6, 8}, 2);
  const Tensor v = RandomTensor(ElementType::kF32, {1, 1, 6, 8}, 3);
  DeviceBuffer dq = Upload(q), dk = Upload(k), dv = Upload(v), dout(4 * 8 * 4), dlse(4 * 4);
  KAttentionArgs args;
  args.q = dq.get();
  args.k = dk.get();
  args.v = dv.get();
  args.out = dout.get();
  args.lse = static_cast<float*>(dlse.get());
  args.batch = args.heads = args.kv_heads = 1;
  args.sq = 4;
  args.skv = 6;
  args.d = args.dv = 8;
  args.causal = true;
  args.q_pos = 0;
  args.k_pos = 100;
  COMMIR_ASSERT_CUDA_OK(LaunchAttention(args, nullptr));
  for (double x : Download(dout.get(), ElementType::kF32, {32}).ToDouble()) EXPECT_EQ(x, 0.0);
  for (double x : Download(dlse.get(), ElementType::kF32, {4}).ToDouble()) {
    EXPECT_EQ(x, -std::numeric_limits<double>::infinity());
  }
}

// What the tensor-core kernel does not take (checked before any device call, so this runs
// without a GPU too): f32/f64, heads that are not multiples of 8 or wider than 128.
TEST(AttentionKernelTest, TensorCoreKernelRefusesWhatItDoesNotHandle) {
  KAttentionArgs args;
  args.batch = args.heads = args.kv_heads = 1;
  args.sq = args.skv = 4;
  args.kernel = KAttentionKernel::kTensorCore;
  for (auto [type, d, dv] : {std::tuple{ElementType::kF32, 64, 64},
                             std::tuple{ElementType::kF64, 64, 64},
                             std::tuple{ElementType::kBF16, 12, 16},
                             std::tuple{ElementType::kF16, 64, 20},
                             std::tuple{ElementType::kBF16, 136, 136},
                             std::tuple{ElementType::kF16, 64, 256}}) {
    args.dtype = type;
    args.d = d;
    args.dv = dv;
    EXPECT_EQ(LaunchAttention(args, nullptr), cudaErrorInvalidValue)
        << ElementTypeName(type) << " d=" << d << " dv=" << dv;
  }
}

TEST(AttentionKernelTest, RejectsHeadsNotAMultipleOfKvHeads) {
  KAttentionArgs args;
  args.batch = 1;
  args.heads = 3;
  args.kv_heads = 2;
  args.sq = args.skv = args.d = args.dv = 4;
  EXPECT_EQ(LaunchAttention(args, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace commir::cuda_kernels
