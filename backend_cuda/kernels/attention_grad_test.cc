// attention_grad's cuda kernel against the cpu backend's (backend_cpu/attention_grad.cc),
// on the cpu forward's o and lse.
#include "backend_cuda/kernels/attention_grad.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
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

struct GradCase {
  std::string name;
  int64_t b, h, hkv, sq, skv, d, dv;
  bool causal = false;
  std::optional<int64_t> q_pos = std::nullopt;
  int64_t k_pos = 0;
  std::optional<double> scale = std::nullopt;
  // lse used as is (attention_grad's partial_keys): the rows of p are not renormalised.
  bool partial_keys = false;
};

// GQA, causal masks with default and explicit positions (rows that see no key), more
// queries than the cpu kernel's block, unequal head dims, empty key sets, and partial_keys
// (the lse used as is), each against the cpu kernel under the same options.
const std::vector<GradCase> kCases = {
    {"plain", 2, 4, 4, 17, 30, 16, 16},
    {"gqa causal", 2, 8, 2, 32, 32, 32, 32, true},
    {"causal sq>skv (rows see nothing)", 1, 2, 1, 20, 9, 8, 8, true},
    {"explicit positions", 1, 2, 2, 70, 90, 16, 24, true, 90, 100, 0.3},
    {"no keys", 1, 2, 1, 5, 0, 8, 8},
    {"partial keys gqa causal", 2, 8, 2, 32, 32, 32, 32, true, std::nullopt, 0, std::nullopt,
     true},
    {"partial keys positions", 1, 2, 2, 70, 90, 16, 24, true, 90, 100, 0.3, true},
};

TEST(AttentionGradKernelTest, MatchesCpuKernel) {
  COMMIR_SKIP_WITHOUT_GPU();
  uint32_t seed = 1;
  for (ElementType type : {ElementType::kF32, ElementType::kBF16, ElementType::kF16,
                           ElementType::kF64}) {
    for (const GradCase& c : kCases) {
      const Tensor q = RandomTensor(type, {c.b, c.h, c.sq, c.d}, seed++, -2, 2);
      const Tensor k = RandomTensor(type, {c.b, c.hkv, c.skv, c.d}, seed++, -2, 2);
      const Tensor v = RandomTensor(type, {c.b, c.hkv, c.skv, c.dv}, seed++, -2, 2);
      const Tensor dout = RandomTensor(type, {c.b, c.h, c.sq, c.dv}, seed++, -2, 2);
      cpu::AttentionOptions options;
      options.causal = c.causal;
      options.scale = c.scale;
      options.q_pos = c.q_pos;
      options.k_pos = c.k_pos;
      const auto forward = cpu::Attention(q, k, v, options);
      ASSERT_TRUE(forward.ok()) << forward.status();
      cpu::AttentionOptions grad_options = options;
      grad_options.partial_keys = c.partial_keys;
      const auto want =
          cpu::AttentionGrad(q, k, v, forward->output, forward->lse, dout, grad_options);
      ASSERT_TRUE(want.ok()) << want.status();

      DeviceBuffer d_q = Upload(q), d_k = Upload(k), d_v = Upload(v), d_o = Upload(forward->output),
                   d_lse = Upload(forward->lse), d_dout = Upload(dout);
      DeviceBuffer d_dq(std::max<int64_t>(q.byte_size(), 8)),
          d_dk(std::max<int64_t>(k.byte_size(), 8)), d_dv(std::max<int64_t>(v.byte_size(), 8));
      KAttentionGradArgs args;
      args.dtype = type;
      args.q = d_q.get();
      args.k = d_k.get();
      args.v = d_v.get();
      args.o = d_o.get();
      args.lse = static_cast<const float*>(d_lse.get());
      args.dout = d_dout.get();
      args.dq = d_dq.get();
      args.dk = d_dk.get();
      args.dv_out = d_dv.get();
      args.batch = c.b;
      args.heads = c.h;
      args.kv_heads = c.hkv;
      args.sq = c.sq;
      args.skv = c.skv;
      args.d = c.d;
      args.dv = c.dv;
      args.scale = c.scale.value_or(1.0 / std::sqrt(static_cast<double>(c.d)));
      args.causal = c.causal;
      args.partial_keys = c.partial_keys;
      args.q_pos = c.q_pos.value_or(c.skv - c.sq);
      args.k_pos = c.k_pos;
      COMMIR_ASSERT_CUDA_OK(LaunchAttentionGrad(args, nullptr));
      const std::string what = absl::StrFormat("%s (%s)", c.name, ElementTypeName(type));
      // Same math, another summation order; narrow types may round differently by a unit.
      const double tol = type == ElementType::kF64 ? 1e-11
                         : type == ElementType::kF32 ? 1e-4
                                                     : 4 * Ulp(type);
      ExpectNear(Download(d_dq.get(), type, q.shape()), want->dq, tol, tol, what + " dq");
      ExpectNear(Download(d_dk.get(), type, k.shape()), want->dk, tol, tol, what + " dk");
      ExpectNear(Download(d_dv.get(), type, v.shape()), want->dv, tol, tol, what + " dv");
    }
  }
}

// Runs without a GPU: the argument checks come before any device call.
TEST(AttentionGradKernelTest, RejectsHeadsNotAMultipleOfKvHeads) {
  KAttentionGradArgs args;
  args.batch = 1;
  args.heads = 3;
  args.kv_heads = 2;
  EXPECT_EQ(LaunchAttentionGrad(args, nullptr), cudaErrorInvalidValue);
  args.heads = -1;
  EXPECT_EQ(LaunchAttentionGrad(args, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace commir::cuda_kernels
