#include "transforms/schedules/ring_attention.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "backend_cpu/cpu_backend.h"
#include "commir/printer.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "runtime/interpreter.h"
#include "transforms/test_util.h"
#include "transforms/schedules/attention_test_programs.h"
#include "transforms/schedules/schedule_report.h"
#include "testing/spmd_check.h"

namespace commir::schedules {
namespace {

using testing::AllOnSideStream;
using testing::AttentionCase;
using testing::ComputeOnMainStream;
using testing::CountLines;
using testing::GlobalAttention;

const char* RingPipeline(bool zigzag) {
  return zigzag ? "ring-attention{zigzag=true}" : "ring-attention";
}

// Lowers the case's global program, applies ring-attention and checks it against the
// one-device run; then the structure: no all_gather, the ring's shifts on stream 1.
void ExpectRingMatches(const AttentionCase& c, bool zigzag) {
  SCOPED_TRACE(c.Name() + (zigzag ? " zigzag" : ""));
  absl::StatusOr<commir::testing::SpmdCheck> check = commir::testing::CheckSpmd(
      GlobalAttention(c), "attn", {.seed = 7, .pipeline = RingPipeline(zigzag)});
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(check->pass) << check->report << check->lowered;
  const std::string& ir = check->lowered;
  EXPECT_EQ(CountLines(ir, "all_gather("), 0) << ir;
  // Two shifts (k, v) before the loop and two in it; none after the last step.
  EXPECT_EQ(CountLines(ir, "shift("), c.devices == 2 ? 2 : 4) << ir;
  EXPECT_EQ(CountLines(ir, " = for "), c.devices == 2 ? 0 : 1) << ir;
  EXPECT_TRUE(AllOnSideStream(ir, "shift(")) << ir;
  EXPECT_TRUE(AllOnSideStream(ir, "all_to_all(")) << ir;
  EXPECT_TRUE(ComputeOnMainStream(ir)) << ir;
  // Zigzag permutes q, k, v in and the output (and lse) out, one all_to_all each.
  // (Odd groups keep the contiguous ring: the permutation needs n even.)
  bool zigzagged = zigzag && c.causal && c.devices % 2 == 0;
  // A declared zigzag layout needs neither: the ring works on the arguments as they are.
  int permutations = c.zigzag_layout ? 0 : 4 + (c.lse ? 1 : 0);
  EXPECT_EQ(CountLines(ir, "all_to_all("), zigzagged ? permutations : 0) << ir;
  // One attention per step, or one per chunk pair in a zigzag step: four, or three when
  // queries and keys align, where query chunk r never sees key chunk 2n-1-s.
  int steps = c.devices == 2 ? 2 : 3;
  int pairs = c.queries == c.keys ? 3 : 4;
  EXPECT_EQ(CountLines(ir, "= attention("), zigzagged ? pairs * steps : steps) << ir;
}

TEST(RingAttentionTest, MatchesGlobalAttentionF32) {
  for (int64_t n : {2, 4, 8}) {
    for (bool causal : {true, false}) {
      for (bool zigzag : {false, true}) {
        ExpectRingMatches({.devices = n, .causal = causal}, zigzag);
      }
    }
  }
  for (bool zigzag : {false, true}) {
    ExpectRingMatches({.devices = 3, .queries = 48, .keys = 48}, zigzag);
  }
}

// A signature that declares the zigzag layout: causal, with and without GQA, on 2, 4
// and 8 devices, with the log-sum-exp; matches the one-device run.
TEST(RingAttentionTest, DeclaredZigzagLayoutMatchesGlobalAttention) {
  for (int64_t n : {2, 4, 8}) {
    for (int64_t kv_heads : {8, 2, 1}) {
      ExpectRingMatches({.devices = n, .kv_heads = kv_heads, .zigzag_layout = true}, true);
    }
  }
  ExpectRingMatches({.devices = 4, .kv_heads = 2, .lse = true, .zigzag_layout = true}, true);
  ExpectRingMatches({.devices = 4, .dtype = "bf16", .kv_heads = 2, .zigzag_layout = true}, true);
  ExpectRingMatches({.devices = 4, .heads = 4, .kv_heads = 2, .queries = 32, .keys = 64,
                     .zigzag_layout = true}, true);
}

// The attention's output feeds a projection before the return: the zigzag layout flows
// through it, and the ring still needs no permutation.
TEST(RingAttentionTest, DeclaredZigzagLayoutThroughAProjection) {
  for (int64_t n : {2, 4, 8}) {
    SCOPED_TRACE(n);
    std::string program = absl::StrCat("mesh @m(sp=", n, R"()

func @attn(%q: f32[1, 4, 64@sp zigzag, 8], %k: f32[1, 2, 64@sp zigzag, 8], %v: f32[1, 2, 64@sp zigzag, 8], %w: f32[8, 8]) -> f32[1, 4, 64@sp zigzag, 8] {
  %o = attention(%q, %k, %v) {causal}
  %p = matmul(%o, %w)
  return %p
}
)");
    absl::StatusOr<commir::testing::SpmdCheck> check =
        commir::testing::CheckSpmd(program, "attn", {.seed = 5, .pipeline = RingPipeline(true)});
    ASSERT_TRUE(check.ok()) << check.status();
    EXPECT_TRUE(check->pass) << check->report << check->lowered;
    EXPECT_EQ(CountLines(check->lowered, "all_to_all("), 0) << check->lowered;
    EXPECT_EQ(CountLines(check->lowered, "all_gather("), 0) << check->lowered;
  }
}

// Bytes each device sends after `pipeline` on the lowered program of `c`.
double RingBytes(const AttentionCase& c, bool zigzag) {
  absl::StatusOr<commir::testing::SpmdCheck> check = commir::testing::CheckSpmd(
      GlobalAttention(c), "attn", {.seed = 7, .pipeline = RingPipeline(zigzag)});
  EXPECT_TRUE(check.ok()) << check.status();
  if (!check.ok()) return -1;
  return ComputeScheduleStats(*check->module->FindFunction("attn")).bytes_per_device;
}

// The point of declaring the layout: zigzag ring attention sends exactly the bytes of the
// contiguous ring, where permuting inside the function sends more.
TEST(RingAttentionTest, DeclaredZigzagLayoutSendsTheContiguousRingsBytes) {
  for (int64_t n : {2, 4, 8}) {
    for (int64_t kv_heads : {8, 2}) {
      SCOPED_TRACE(absl::StrCat("n=", n, " kv_heads=", kv_heads));
      AttentionCase contiguous{.devices = n, .kv_heads = kv_heads, .queries = 128, .keys = 128};
      AttentionCase declared = contiguous;
      declared.zigzag_layout = true;
      double ring = RingBytes(contiguous, false);
      EXPECT_GT(ring, 0);
      EXPECT_EQ(RingBytes(declared, true), ring);
      EXPECT_GT(RingBytes(contiguous, true), ring);
    }
  }
}

TEST(RingAttentionTest, MatchesGlobalAttentionBf16) {
  for (int64_t n : {2, 4, 8}) {
    for (bool causal : {true, false}) {
      for (bool zigzag : {false, true}) {
        ExpectRingMatches({.devices = n, .causal = causal, .dtype = "bf16"}, zigzag);
      }
    }
  }
}

TEST(RingAttentionTest, GroupedQueryAttention) {
  for (int64_t n : {2, 4, 8}) {
    for (int64_t kv_heads : {1, 2, 4}) {
      for (bool zigzag : {false, true}) {
        ExpectRingMatches({.devices = n, .kv_heads = kv_heads}, zigzag);
      }
    }
  }
  ExpectRingMatches({.devices = 4, .dtype = "bf16", .kv_heads = 2}, true);
  ExpectRingMatches({.devices = 4, .causal = false, .kv_heads = 2}, false);
}

// Several block sizes per device (sequence lengths 32 to 256 over 2 to 8 devices).
TEST(RingAttentionTest, BlockSizes) {
  for (int64_t n : {2, 4, 8}) {
    for (int64_t s : {32, 128, 256}) {
      for (bool zigzag : {false, true}) {
        ExpectRingMatches({.devices = n, .heads = 2, .kv_heads = 2, .queries = s, .keys = s}, zigzag);
      }
    }
  }
}

// Fewer queries than keys: causal queries sit at the end (q_pos = Skv - Sq + offset).
TEST(RingAttentionTest, ShorterQuerySequence) {
  for (int64_t n : {2, 4}) {
    for (bool zigzag : {false, true}) {
      ExpectRingMatches({.devices = n, .heads = 4, .kv_heads = 2, .queries = 32, .keys = 64}, zigzag);
    }
  }
}

TEST(RingAttentionTest, ReturnsMergedLogSumExp) {
  for (bool zigzag : {false, true}) {
    ExpectRingMatches({.devices = 4, .lse = true}, zigzag);
    ExpectRingMatches({.devices = 2, .dtype = "bf16", .lse = true}, zigzag);
  }
}

// Keys placed after some queries: those rows see no key in any block, their lse stays
// -inf through every merge and the output row 0, never NaN.
TEST(RingAttentionTest, RowsThatSeeNoKeyStayZero) {
  constexpr char kProgram[] = R"(mesh @m(sp=4)

func @attn(%q: f32[1, 2, 64@sp, 16], %k: f32[1, 2, 64@sp, 16], %v: f32[1, 2, 64@sp, 16]) -> (f32[1, 2, 64@sp, 16], f32[1, 2, 64@sp]) {
  %qp = full() {value = 0} : index
  %kp = full() {value = 20} : index
  %o, %lse = attention(%q, %k, %v, %qp, %kp) {causal}
  return %o, %lse
}
)";
  for (bool zigzag : {false, true}) {
    absl::StatusOr<commir::testing::SpmdCheck> check =
        commir::testing::CheckSpmd(kProgram, "attn", {.pipeline = RingPipeline(zigzag)});
    ASSERT_TRUE(check.ok()) << check.status();
    EXPECT_TRUE(check->pass) << check->report << check->lowered;
    EXPECT_EQ(CountLines(check->lowered, "all_gather("), 0);
  }
}

// Records, per device, the causally visible (query, key) pairs of each attention call:
// the work a kernel that skips masked keys does.
class AttentionWorkRecorder : public cpu::CpuBackend {
 public:
  absl::StatusOr<std::vector<runtime::Tensor>> RunOp(const Operation& op,
                                                     const runtime::OpContext& context,
                                                     absl::Span<const runtime::Tensor* const> tensors,
                                                     absl::Span<const int64_t> indices) override {
    if (op.Is(OpKind::kAttention) && indices.size() == 2) {
      // From the op's types: a block read in place arrives as its whole tensor
      // (OpContext::sliced).
      int64_t queries = op.operand(0)->type().dims()[2], keys = op.operand(1)->type().dims()[2];
      int64_t visible = 0;
      for (int64_t i = 0; i < queries; ++i) {
        visible += std::clamp<int64_t>(indices[0] + i - indices[1] + 1, 0, keys);
      }
      work[context.device].push_back(visible);
    }
    return cpu::CpuBackend::RunOp(op, context, tensors, indices);
  }
  absl::flat_hash_map<int64_t, std::vector<int64_t>> work;
};

// Runs ring-attention on causal attention over n devices and returns, per device, the
// visible pairs of each ring step (the sum over the step's attention calls).
std::vector<std::vector<int64_t>> WorkPerStep(int64_t n, bool zigzag) {
  AttentionCase c{.devices = n, .heads = 1, .kv_heads = 1, .queries = 16 * n, .keys = 16 * n};
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(GlobalAttention(c), "in");
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return {};
  EXPECT_TRUE(commir::testing::RunDefaultSpmdPipeline(**module).ok());
  EXPECT_TRUE(RingAttention(**module, zigzag).ok());
  const Function& function = *(*module)->FindFunction("attn");
  AttentionWorkRecorder backend;
  runtime::Interpreter interpreter(function, backend);
  std::vector<std::vector<runtime::Tensor>> inputs(n);
  for (int64_t d = 0; d < n; ++d) {
    for (Value* arg : function.body()->arguments()) {
      inputs[d].push_back(runtime::Tensor(arg->type().element_type(), arg->type().dims()));
    }
  }
  EXPECT_TRUE(interpreter.Run(inputs).ok());
  // Zigzag: three chunk pairs a step (aligned queries and keys: query chunk r never
  // meets key chunk 2n-1-s, and that pair is not emitted).
  int calls_per_step = zigzag ? 3 : 1;
  std::vector<std::vector<int64_t>> steps(n);
  for (int64_t d = 0; d < n; ++d) {
    const std::vector<int64_t>& calls = backend.work[d];
    EXPECT_EQ(calls.size(), static_cast<size_t>(n * calls_per_step));
    for (size_t i = 0; i < calls.size(); i += calls_per_step) {
      int64_t sum = 0;
      for (int j = 0; j < calls_per_step; ++j) sum += calls[i + j];
      steps[d].push_back(sum);
    }
  }
  return steps;
}

// Zigzag: at every step every device has the same unmasked work; after the first step
// it is two full chunk pairs out of the three it runs. The contiguous ring is unbalanced: device r
// has work only in its first r + 1 steps.
TEST(RingAttentionTest, ZigzagBalancesCausalWorkPerStep) {
  for (int64_t n : {2, 4, 8}) {
    SCOPED_TRACE(n);
    std::vector<std::vector<int64_t>> zigzag = WorkPerStep(n, true);
    ASSERT_EQ(zigzag.size(), static_cast<size_t>(n));
    const int64_t chunk = 8;  // 16 * n positions in 2n chunks
    for (int64_t d = 0; d < n; ++d) {
      EXPECT_EQ(zigzag[d], zigzag[0]) << "device " << d;
      for (int64_t s = 1; s < n; ++s) EXPECT_EQ(zigzag[d][s], 2 * chunk * chunk);
    }
    std::vector<std::vector<int64_t>> ring = WorkPerStep(n, false);
    ASSERT_EQ(ring.size(), static_cast<size_t>(n));
    for (int64_t d = 0; d < n; ++d) {
      for (int64_t s = 1; s < n; ++s) EXPECT_EQ(ring[d][s] > 0, s <= d) << d << " " << s;
    }
  }
}

// Ops the pass does not handle stay as they are: attention on replicated k/v, and the
// gathered form over a group of one device.
TEST(RingAttentionTest, LeavesOtherAttentionUnchanged) {
  constexpr char kProgram[] = R"(mesh @m(sp=4, dp=1)

spmd func @local(%q: f32[1, 2, 16@sp, 8], %k: f32[1, 2, 64, 8], %v: f32[1, 2, 64, 8]) -> f32[1, 2, 16@sp, 8] {
  %o = attention(%q, %k, %v) {causal}
  return %o
}

spmd func @one(%q: f32[1, 2, 16, 8], %k: f32[1, 2, 16, 8], %v: f32[1, 2, 16, 8]) -> f32[1, 2, 16, 8] {
  %kg = all_gather(%k) {axis = dp, dim = 2} : f32[1, 2, 16, 8]
  %vg = all_gather(%v) {axis = dp, dim = 2} : f32[1, 2, 16, 8]
  %o = attention(%q, %kg, %vg)
  return %o
}

spmd func @mixed(%q: f32[1, 2, 16@sp, 8], %k: f32[1, 2, 64@sp, 8], %v: f32[1, 2, 64, 8]) -> f32[1, 2, 16@sp, 8] {
  %kg = all_gather(%k) {axis = sp, dim = 2} : f32[1, 2, 64, 8]
  %o = attention(%q, %kg, %v)
  return %o
}
)";
  std::unique_ptr<Module> module = commir::testing::ParseForTest(kProgram);
  ASSERT_NE(module, nullptr);
  std::string before = PrintModule(*module);
  ASSERT_TRUE(RingAttention(*module, true).ok());
  EXPECT_EQ(PrintModule(*module), before);
}

}  // namespace
}  // namespace commir::schedules
