// Fused attention against the cpu backend's reference (explicit scores, softmax, P V).
#include "backend_cuda/kernels/attention.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
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

TEST(AttentionKernelTest, MatchesCpuReference) {
  COMMIR_SKIP_WITHOUT_GPU();
  uint32_t seed = 1;
  for (ElementType type : {ElementType::kF32, ElementType::kBF16, ElementType::kF16,
                           ElementType::kF64}) {
    for (const AttentionCase& c : kCases) {
      const Tensor q = RandomTensor(type, {c.b, c.h, c.sq, c.d}, seed++, -2, 2);
      const Tensor k = RandomTensor(type, {c.b, c.hkv, c.skv, c.d}, seed++, -2, 2);
      const Tensor v = RandomTensor(type, {c.b, c.hkv, c.skv, c.dv}, seed++, -2, 2);
      cpu::AttentionOptions options;
      options.causal = c.causal;
      options.scale = c.scale;
      options.q_pos = c.q_pos;
      options.k_pos = c.k_pos;
      const auto want = cpu::Attention(q, k, v, options);
      ASSERT_TRUE(want.ok()) << want.status();

      DeviceBuffer dq = Upload(q), dk = Upload(k), dv = Upload(v);
      DeviceBuffer dout(std::max<int64_t>(want->output.byte_size(), 8));
      DeviceBuffer dlse(std::max<int64_t>(want->lse.byte_size(), 8));
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
      COMMIR_ASSERT_CUDA_OK(LaunchAttention(args, nullptr));
      const std::string what = absl::StrFormat("%s (%s)", c.name, ElementTypeName(type));
      // f32 accumulation in a different order; narrow types also round q k v identically
      // but may round the output differently by one unit.
      const double tol = type == ElementType::kF64 ? 1e-12
                         : type == ElementType::kF32 ? 2e-5
                                                     : 2 * Ulp(type);
      ExpectNear(Download(dout.get(), type, want->output.shape()), want->output, tol, tol,
                 what + " output");
      ExpectNear(Download(dlse.get(), ElementType::kF32, want->lse.shape()), want->lse,
                 type == ElementType::kF64 ? 1e-6 : 2e-5, 2e-5, what + " lse");
    }
  }
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
