#include "sim/op_time.h"

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "runtime/fill_test_programs.h"

namespace commir::sim {
namespace {

const HardwareSpec& H100() { return *FindBuiltinHardware("h100-sxm"); }
constexpr double kLaunch = 3e-6;  // H100's kernel launch overhead
constexpr double kHbm = 3.35e12;

// Parses a module whose first function's first op is the op under test.
class OpTimeTest : public ::testing::Test {
 protected:
  const Operation& FirstOp(const std::string& source) {
    absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(source, "test.commir");
    EXPECT_TRUE(module.ok()) << module.status();
    module_ = std::move(*module);
    function_ = module_->functions().front();
    return **function_->body()->begin();
  }
  double Time(const std::string& source, const HardwareSpec& hw = H100()) {
    const Operation& op = FirstOp(source);
    absl::StatusOr<double> t = OpTime(hw, op, *function_);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : -1;
  }

  std::unique_ptr<Module> module_;
  Function* function_ = nullptr;
};

TEST(WaveEfficiencyTest, OneTileTooManyHalvesTheEfficiency) {
  EXPECT_DOUBLE_EQ(WaveEfficiency(132, 132), 1.0);
  EXPECT_DOUBLE_EQ(WaveEfficiency(264, 132), 1.0);
  EXPECT_DOUBLE_EQ(WaveEfficiency(133, 132), 133.0 / 264.0);  // ~50%
  EXPECT_DOUBLE_EQ(WaveEfficiency(66, 132), 0.5);
}

// A matmul op is priced as the GEMM its shape describes: M, N and the batch from the
// result, K from the operands, A and B bytes from the operand types.
TEST_F(OpTimeTest, MatmulIsPricedByItsGemmShape) {
  double t = Time(R"(func @f(%a: bf16[4, 1024, 4096], %b: bf16[4, 4096, 1024]) -> bf16[4, 1024, 1024] {
    %c = matmul(%a, %b)
    return %c
  })");
  GemmShape shape;
  shape.batch = 4;
  shape.m = 1024;
  shape.n = 1024;
  shape.k = 4096;
  shape.operand_bytes = 2.0 * (4 * 1024 * 4096 + 4 * 4096 * 1024);
  EXPECT_NEAR(t, *GemmTime(H100(), shape), 1e-15);
}

TEST_F(OpTimeTest, TransposedAndBroadcastOperands) {
  // transpose_a: a is [K, M]; b has no batch dim and is read once.
  double t = Time(R"(func @f(%a: bf16[2, 4096, 256], %b: bf16[4096, 2048]) -> bf16[2, 256, 2048] {
    %c = matmul(%a, %b) {transpose_a}
    return %c
  })");
  GemmShape shape;
  shape.batch = 2;
  shape.m = 256;
  shape.n = 2048;
  shape.k = 4096;
  shape.operand_bytes = 2.0 * (2 * 4096 * 256 + 4096 * 2048);
  EXPECT_NEAR(t, *GemmTime(H100(), shape), 1e-15);
}

TEST_F(OpTimeTest, LargeBf16GemmReachesTheMeasuredThroughput) {
  double t = Time(R"(func @f(%a: bf16[8192, 8192], %b: bf16[8192, 8192]) -> bf16[8192, 8192] {
    %c = matmul(%a, %b)
    return %c
  })");
  // calibration.md: cuBLAS reaches 750-800 TFLOP/s on this shape (the model: ~802).
  double flops = 2.0 * 8192 * 8192 * 8192;
  EXPECT_GT(flops / t, 750e12);
  EXPECT_LT(flops / t, 810e12);
}

TEST_F(OpTimeTest, SmallKGemmIsMemoryBound) {
  double t = Time(R"(func @f(%a: bf16[8192, 64], %b: bf16[64, 8192]) -> bf16[8192, 8192] {
    %c = matmul(%a, %b)
    return %c
  })");
  // Its bytes over HBM, the launch and 16 waves' latency (sim/gemm_time_test.cc).
  double bytes = 2.0 * (8192 * 64 * 2) + 8192.0 * 8192 * 2;
  EXPECT_NEAR(t, kLaunch + 16 * 2e-6 + bytes / kHbm, 1e-12);
}

TEST_F(OpTimeTest, F32GemmRunsOnPlainF32UnlessTf32IsOn) {
  const std::string program = R"(func @f(%a: f32[4096, 4096], %b: f32[4096, 4096]) -> f32[4096, 4096] {
    %c = matmul(%a, %b)
    return %c
  })";
  // Compute-bound either way: the plain f32 peak is 495 / 67 times slower than tf32.
  double flops = 2.0 * 4096 * 4096 * 4096;
  double f32 = Time(program);
  HardwareSpec tf32 = H100();
  tf32.f32_matmul_uses_tf32 = true;
  double with_tf32 = Time(program, tf32);
  EXPECT_GT(f32, flops / 67e12);
  EXPECT_GT(with_tf32, flops / 495e12);
  EXPECT_NEAR(f32 / with_tf32, 495.0 / 67.0, 0.15 * 495.0 / 67.0);
}

TEST_F(OpTimeTest, ElementwiseAddIsBytesOverHbmPlusLaunch) {
  double t = Time(R"(func @f(%a: f32[4096, 4096], %b: f32[4096, 4096]) -> f32[4096, 4096] {
    %c = add(%a, %b)
    return %c
  })");
  EXPECT_NEAR(t, kLaunch + 3.0 * 4096 * 4096 * 4 / kHbm, 1e-12);
  // H200's faster HBM.
  double t200 = Time(R"(func @f(%a: f32[4096, 4096], %b: f32[4096, 4096]) -> f32[4096, 4096] {
    %c = add(%a, %b)
    return %c
  })", *FindBuiltinHardware("h200"));
  EXPECT_NEAR(t200, kLaunch + 3.0 * 4096 * 4096 * 4 / 4.8e12, 1e-12);
}

// A matmul whose block a dynamic_update_slice puts into an accumulator that dies there
// writes the block itself (the GEMM's output pointer at the block): the update costs
// nothing and the matmul costs what it does alone. An update whose destination is read
// again, or whose block no matmul makes, is an in-place kernel: it reads the block and
// writes its region, launch + 2 x block bytes / HBM.
TEST_F(OpTimeTest, UpdateOfAMatmulBlockIsTheMatmulsEpilogue) {
  const std::string source = R"(mesh @m(tp=1)
  spmd func @f(%a: f32[1024, 256], %b: f32[256, 512], %c: f32[4096, 512],
               %x: f32[1024, 512]) -> (f32[4096, 512], f32[4096, 512], f32[4096, 512]) on @m {
    %off = full() {value = 1024} : index
    %blk = matmul(%a, %b) : f32[1024, 512]
    %fused = dynamic_update_slice(%c, %blk, %off) {dim = 0} : f32[4096, 512]
    %blk2 = matmul(%a, %b) : f32[1024, 512]
    %kept = dynamic_update_slice(%fused, %blk2, %off) {dim = 0} : f32[4096, 512]
    %plain = dynamic_update_slice(%kept, %x, %off) {dim = 0} : f32[4096, 512]
    %again = add(%kept, %plain) : f32[4096, 512]
    return %fused, %plain, %again
  })";
  FirstOp(source);
  absl::flat_hash_map<std::string, const Operation*> ops;
  for (const Operation* op : *function_->body()) {
    if (op->num_results() == 1) ops[op->result(0)->name()] = op;
  }
  auto time = [&](const std::string& name) {
    absl::StatusOr<double> t = OpTime(H100(), *ops.at(name), *function_);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : -1;
  };
  GemmShape shape;
  shape.m = 1024;
  shape.n = 512;
  shape.k = 256;
  shape.type = ElementType::kF32;
  shape.result_element_bytes = 4;
  shape.operand_bytes = (1024.0 * 256 + 256.0 * 512) * 4;
  EXPECT_NEAR(time("blk"), *GemmTime(H100(), shape), 1e-15);
  // %c's last use is %fused.
  EXPECT_EQ(time("fused"), 0.0);
  // %fused is returned, a use after %kept: the block cannot go into a live buffer.
  EXPECT_NEAR(time("kept"), kLaunch + 2.0 * 1024 * 512 * 4 / kHbm, 1e-15);
  // %x is no matmul's block.
  EXPECT_NEAR(time("plain"), kLaunch + 2.0 * 1024 * 512 * 4 / kHbm, 1e-15);
}

TEST_F(OpTimeTest, SoftmaxIsMemoryBound) {
  double t = Time(R"(func @f(%a: bf16[8, 4096, 4096]) -> bf16[8, 4096, 4096] {
    %c = softmax(%a)
    return %c
  })");
  EXPECT_NEAR(t, kLaunch + 2.0 * 8 * 4096 * 4096 * 2 / kHbm, 1e-12);
}

// dropout is one kernel: a read and a write of each element, or the generator's integer
// work where that takes longer: 64 integer instructions per element (Philox's 10 rounds
// of 6, and 4 more), each an f32 FMA's issue slot, 2 FLOPs, against H100's 67 TFLOP/s of
// f32. bf16 (4 bytes per element moved) is bound by the generator; f32 (8) by HBM.
TEST_F(OpTimeTest, DropoutIsBoundByHbmOrByTheGenerator) {
  const double n = 8.0 * 4096 * 4096;
  const double alu = n * 64 * 2 / 67e12;
  double bf16 = Time(R"(func @f(%a: bf16[8, 4096, 4096]) -> bf16[8, 4096, 4096] {
    %c = dropout(%a) {rate = 0.1, seed = 1}
    return %c
  })");
  EXPECT_GT(alu, 2 * n * 2 / kHbm);
  EXPECT_NEAR(bf16, kLaunch + alu, 1e-12);
  double f32 = Time(R"(func @f(%a: f32[8, 4096, 4096]) -> f32[8, 4096, 4096] {
    %c = dropout(%a) {rate = 0.1, seed = 1}
    return %c
  })");
  EXPECT_LT(alu, 2 * n * 4 / kHbm);
  EXPECT_NEAR(f32, kLaunch + 2 * n * 4 / kHbm, 1e-12);
}

// An embedding lookup reads its ids and each looked-up row, and writes the rows: Llama 3
// 8B's bf16 table of 128256 x 4096 looked up by 8192 ids moves 8192 x 4 + 2 x 8192 x 4096
// x 2 bytes, whatever the table's size.
TEST_F(OpTimeTest, GatherMovesOnlyTheRowsItLooksUp) {
  double t = Time(R"(func @f(%emb: bf16[128256, 4096], %ids: i32[8192]) -> bf16[8192, 4096] {
    %y = gather(%emb, %ids) {axis = 0}
    return %y
  })");
  EXPECT_NEAR(t, kLaunch + (8192.0 * 4 + 2.0 * 8192 * 4096 * 2) / kHbm, 1e-12);
}

// Its gradient copies the f32 base into the result, reads the ids and the updates, and
// reads and writes each addressed row once more per update.
TEST_F(OpTimeTest, ScatterAddCopiesTheBaseAndUpdatesItsRows) {
  double t = Time(R"(func @f(%z: f32[128256, 4096], %ids: i32[8192], %dy: f32[8192, 4096]) -> f32[128256, 4096] {
    %d = scatter_add(%z, %ids, %dy) {axis = 0}
    return %d
  })");
  const double table = 128256.0 * 4096 * 4, updates = 8192.0 * 4096 * 4;
  EXPECT_NEAR(t, kLaunch + (2 * table + 8192.0 * 4 + 3 * updates) / kHbm, 1e-12);
}

// Llama 3's vocabulary (128256) over 8192 bf16 tokens: the logits' bytes over HBM
// bandwidth, plus two launches forward (rows, then the token losses' reduction) and one
// backward, which also writes dlogits (f32 here).
TEST_F(OpTimeTest, CrossEntropyIsMemoryBoundByTheLogits) {
  const double logits = 8192.0 * 128256 * 2;
  double forward = Time(R"(func @f(%x: bf16[8192, 128256], %l: i32[8192]) -> bf16[] {
    %loss, %lse = cross_entropy(%x, %l)
    return %loss
  })");
  EXPECT_NEAR(forward, 2 * kLaunch + (logits + 8192 * 4 + 2 + 8192 * 4) / kHbm, 1e-12);
  double backward = Time(R"(func @f(%x: bf16[8192, 128256], %l: i32[8192], %lse: f32[8192], %g: f32[]) -> f32[8192, 128256] {
    %dx = cross_entropy_grad(%x, %l, %lse, %g)
    return %dx
  })");
  EXPECT_NEAR(backward, kLaunch + (logits + 8192 * 4 + 8192 * 4 + 4 + 2 * logits) / kHbm, 1e-12);
}

// The ring schedules' online-softmax merge is one memory-bound kernel: it reads the f32
// accumulator (o and lse) and each partial in its own type (bf16 o, f32 lse) once and
// writes the new accumulator, plus one launch.
TEST_F(OpTimeTest, AttentionMergeIsOneMemoryBoundKernel) {
  double t = Time(R"(func @f(%o: f32[1, 32, 16384, 128], %l: f32[1, 32, 16384], %ob: bf16[1, 32, 16384, 128],
                             %lb: f32[1, 32, 16384]) -> f32[1, 32, 16384, 128] {
    %m, %n = attention_merge(%o, %l, %ob, %lb)
    return %m
  })");
  const double rows = 32.0 * 16384, elements = rows * 128;
  const double bytes = elements * (4 + 2 + 4) + rows * (4 + 4 + 4);
  EXPECT_NEAR(t, kLaunch + bytes / kHbm, 1e-12);
}

// Sampling's top-50 over Llama 3's 128256-token vocabulary: one kernel that reads the
// logits once and writes the bf16 values and i64 indices (its ~6 comparisons an element
// are far below the roofline's compute side).
TEST_F(OpTimeTest, TopKIsOneMemoryBoundKernel) {
  double t = Time(R"(func @f(%a: bf16[8, 128256]) -> bf16[8, 50] {
    %v, %i = top_k(%a) {k = 50}
    return %v
  })");
  EXPECT_NEAR(t, kLaunch + (8.0 * 128256 * 2 + 8.0 * 50 * 2 + 8.0 * 50 * 8) / kHbm, 1e-12);
}

// Mixtral 8x7B's dispatch and collect of 4096 tokens (hidden 4096, top-2 of 8 experts,
// capacity factor 1.25: ceil(4096 x 2 x 1.25 / 8) = 1280 slots an expert): memory-bound
// copies. Dispatch reads the indices and the 8192 kept rows and writes every slot, empty
// ones included; collect reads the indices and the kept slots and writes every choice's row.
TEST_F(OpTimeTest, MoeDispatchAndCollectAreMemoryBoundCopies) {
  double dispatch = Time(R"(func @f(%x: bf16[4096, 4096], %e: i64[4096, 2]) -> bf16[8, 1280, 4096] {
    %b = moe_dispatch(%x, %e) {experts = 8, capacity_factor = 1.25}
    return %b
  })");
  const double indices = 4096.0 * 2 * 8, row = 4096.0 * 2;
  EXPECT_NEAR(dispatch, kLaunch + (indices + 8 * 1280 * row + 8192 * row) / kHbm, 1e-12);
  double collect = Time(R"(func @f(%b: bf16[8, 1280, 4096], %e: i64[4096, 2]) -> bf16[4096, 2, 4096] {
    %r = moe_collect(%b, %e)
    return %r
  })");
  EXPECT_NEAR(collect, kLaunch + (indices + 8192 * row + 8192 * row) / kHbm, 1e-12);
}

constexpr char kGqaCausalAttention[] = R"(
func @f(%q: bf16[1, 32, 4096, 128], %k: bf16[1, 8, 4096, 128], %v: bf16[1, 8, 4096, 128]) -> bf16[1, 32, 4096, 128] {
  %o = attention(%q, %k, %v) {causal}
  return %o
})";

// Default positions, queries and keys aligned: query tile t (of 32) walks t + 1 key blocks
// of 128 plus the CTA's fixed cost; 32 heads x 32 tiles = 1024 CTAs in waves of 132 SMs.
TEST_F(OpTimeTest, CausalGqaAttention) {
  double t = Time(kGqaCausalAttention);
  const HardwareSpec& hw = H100();
  const double block_s = 128.0 * 128 * 2 * (128 + 128) * 132 / (989e12 * hw.attention_peak_fraction);
  const double blocks = 32 * (32 * hw.attention_tile_overhead_blocks + 32 * 33 / 2.0);
  EXPECT_NEAR(t, kLaunch + blocks * block_s / (132 * (1024.0 / 1056.0)), 1e-12);
}

// Without the mask every tile walks all 32 blocks: the causal kernel takes
// (32 c + 528) / (32 c + 1024) of it, a little over half.
TEST_F(OpTimeTest, CausalMaskSkipsTheBlocksAfterTheDiagonal) {
  double causal = Time(kGqaCausalAttention) - kLaunch;
  std::string full = kGqaCausalAttention;
  full.replace(full.find(" {causal}"), 9, "");
  const double c = H100().attention_tile_overhead_blocks;
  EXPECT_NEAR(causal / (Time(full) - kLaunch), (32 * c + 528) / (32 * c + 1024), 1e-12);
}

TEST_F(OpTimeTest, ViewsAndLoopsLaunchNothing) {
  EXPECT_EQ(Time(R"(func @f(%a: f32[64, 64]) -> f32[4096] {
    %c = reshape(%a) : f32[4096]
    return %c
  })"), 0);
}

TEST_F(OpTimeTest, CollectivesAreAnError) {
  const Operation& op = FirstOp(R"(mesh @m(tp=8)
spmd func @f(%a: f32[16, 4]) -> f32[128, 4] {
  %b = all_gather(%a) {axis = tp, dim = 0} : f32[128, 4]
  return %b
})");
  absl::StatusOr<double> t = OpTime(H100(), op, *function_);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "'all_gather' is a collective: its time depends on its device group (EstimateCollective)");
}


// The blocks a GEMM reads or writes in place (sim/gemm_views.h) launch no kernel; the
// same ops beside anything but a GEMM are copies: launch + their bytes over HBM.
class GemmBlockTest : public OpTimeTest {
 protected:
  double TimeOf(const std::string& source, const std::string& name) {
    absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(source, "test.commir");
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) return -1;
    module_ = std::move(*module);
    function_ = module_->functions().front();
    for (Operation* op : *function_->body()) {
      for (Value* result : op->results()) {
        if (result->name() != name) continue;
        absl::StatusOr<double> t = OpTime(H100(), *op, *function_);
        EXPECT_TRUE(t.ok()) << t.status();
        return t.ok() ? *t : -1;
      }
    }
    ADD_FAILURE() << "no value %" << name;
    return -1;
  }
};

constexpr char kBlocks[] = R"(mesh @m(tp=4)
spmd func @f(%x: bf16[1, 1024, 512], %w: bf16[512, 256], %y: bf16[2, 3, 64, 512], %buf: bf16[1, 1024, 256], %z: bf16[1, 256, 256]) -> (bf16[1, 1024, 256], bf16[1, 256, 512], bf16[2, 1, 64, 512], bf16[1, 256, 256], bf16[1, 1024, 256]) on @m {
  %r = rank() {axis = tp} : index
  %off = mul(%r, 256) : index
  %rows = dynamic_slice(%x, %off) {dim = 1, size = 256} : bf16[1, 256, 512]
  %p = matmul(%rows, %w) : bf16[1, 256, 256]
  %out = dynamic_update_slice(%buf, %p, %off) {dim = 1} : bf16[1, 1024, 256]
  %copied = dynamic_slice(%x, %off) {dim = 1, size = 256} : bf16[1, 256, 512]
  %twice = add(%copied, %copied) : bf16[1, 256, 512]
  %i = rem(%r, 3) : index
  %strided = dynamic_slice(%y, %i) {dim = 1, size = 1} : bf16[2, 1, 64, 512]
  %q = matmul(%strided, %strided) {transpose_b} : bf16[2, 1, 64, 64]
  %p2 = matmul(%rows, %w) : bf16[1, 256, 256]
  %both = dynamic_update_slice(%buf, %p2, %off) {dim = 1} : bf16[1, 1024, 256]
  %p3 = add(%p2, %p2) : bf16[1, 256, 256]
  %got = shift(%z) {axis = tp, offset = 1} : bf16[1, 256, 256]
  %put = dynamic_update_slice(%buf, %got, %off) {dim = 1} : bf16[1, 1024, 256]
  return %out, %twice, %strided, %p3, %put
}
)";

TEST_F(GemmBlockTest, RowsAGemmReadsAreAPointerOffset) {
  EXPECT_EQ(TimeOf(kBlocks, "rows"), 0.0);
}

// %buf is the caller's argument and is read again (%both, %put): no backend writes a
// GEMM's block into it (runtime/in_place.h), so the update is a kernel. A destination
// that dies at the update is the GEMM's epilogue (OpTimeTest.UpdateOfAMatmulBlockIsThe-
// MatmulsEpilogue).
TEST_F(GemmBlockTest, AGemmsBlockIntoALiveBufferIsAnUpdateKernel) {
  EXPECT_GT(TimeOf(kBlocks, "out"), kLaunch);
}

TEST_F(GemmBlockTest, AReceivedBlockLandsInItsSlot) {
  EXPECT_EQ(TimeOf(kBlocks, "put"), 0.0);
}

// In a ring loop the block written into the gathered value is the loop-carried block:
// inside the body (the argument the last iteration's shift replaced) and after it (the
// loop's result). Both land in place; a block the body computes otherwise is a copy.
TEST_F(GemmBlockTest, TheRingsCarriedBlockLandsInItsSlot) {
  constexpr char kRing[] = R"(mesh @m(tp=4)
spmd func @f(%x: bf16[1, 256, 512], %buf: bf16[1, 1024, 512]) -> (bf16[1, 1024, 512], bf16[1, 1024, 512]) on @m {
  %r = rank() {axis = tp} : index
  %acc_out, %blk_last = for %i = 0 to 3 step 1 iter(%acc = %buf, %blk = %x) {
    %next = shift(%blk) {axis = tp, offset = 1, stream = 1} : bf16[1, 256, 512]
    %off = mul(%i, 256) : index
    %acc_1 = dynamic_update_slice(%acc, %blk, %off) {dim = 1} : bf16[1, 1024, 512]
    yield %acc_1, %next
  } : (bf16[1, 1024, 512], bf16[1, 256, 512])
  %off_last = mul(%r, 256) : index
  %gathered = dynamic_update_slice(%acc_out, %blk_last, %off_last) {dim = 1} : bf16[1, 1024, 512]
  %doubled = add(%x, %x) : bf16[1, 256, 512]
  %other = dynamic_update_slice(%buf, %doubled, %off_last) {dim = 1} : bf16[1, 1024, 512]
  return %gathered, %other
}
)";
  EXPECT_EQ(TimeOf(kRing, "gathered"), 0.0);
  EXPECT_GT(TimeOf(kRing, "other"), kLaunch);
  // The body's update: found by walking into the loop.
  const Operation* loop = nullptr;
  for (Operation* op : *function_->body()) {
    if (op->Is(OpKind::kFor)) loop = op;
  }
  ASSERT_NE(loop, nullptr);
  for (Operation* op : *loop->region(0)) {
    if (op->Is(OpKind::kDynamicUpdateSlice)) {
      absl::StatusOr<double> t = OpTime(H100(), *op, *function_);
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_EQ(*t, 0.0);
    }
  }
}

TEST_F(GemmBlockTest, ASliceReadByAnElementwiseOpIsACopy) {
  // A kernel: at least its launch and a read and a write of 256 x 512 bf16 values.
  EXPECT_GE(TimeOf(kBlocks, "copied"), kLaunch + 2.0 * 256 * 512 * 2 / kHbm);
}

TEST_F(GemmBlockTest, ABlockOfAStridedBatchIsACopy) {
  // Along dimension 1 of [2, 3, 64, 512]: two separate runs of rows, not one matrix layout.
  EXPECT_GT(TimeOf(kBlocks, "strided"), kLaunch);
}

// The rule is runtime/in_place.h's, which the backends follow: a column block counted
// from the end (dim = -1) is the same pointer offset with the row's stride, and the same
// slice read also by an add is a copy priced in closed form: the launch plus its bytes
// over HBM, which the op table counts as the whole operand read ([256, 1024] bf16), the
// block written ([256, 256] bf16) and the 8-byte offset.
TEST_F(GemmBlockTest, TheBackendsRuleInClosedForm) {
  constexpr char kColumns[] = R"(mesh @m(tp=4)
spmd func @f(%x: bf16[256, 1024], %w: bf16[256, 128]) -> (bf16[256, 128], bf16[256, 256]) on @m {
  %r = rank() {axis = tp} : index
  %off = mul(%r, 256) : index
  %cols = dynamic_slice(%x, %off) {dim = -1, size = 256} : bf16[256, 256]
  %p = matmul(%cols, %w) : bf16[256, 128]
  %shared = dynamic_slice(%x, %off) {dim = -1, size = 256} : bf16[256, 256]
  %q = matmul(%shared, %w) : bf16[256, 128]
  %twice = add(%shared, %shared) : bf16[256, 256]
  return %p, %twice
}
)";
  EXPECT_EQ(TimeOf(kColumns, "cols"), 0.0);
  EXPECT_NEAR(TimeOf(kColumns, "shared"), kLaunch + ((256.0 * 1024 + 256 * 256) * 2 + 8) / kHbm,
              1e-15);
}

// zigzag's halves of a k/v block: static sequence slices read only as attention's k
// and v are an offset pointer with the block's strides (FlashAttention with offsets), a
// half also read by an elementwise op is a copy kernel.
TEST_F(GemmBlockTest, SequenceHalvesAttentionReadsAreAPointerOffset) {
  constexpr char kHalves[] = R"(mesh @m(sp=2)

spmd func @f(%q: bf16[1, 8, 512, 128], %k: bf16[1, 8, 1024, 128], %v: bf16[1, 8, 1024, 128]) -> (bf16[1, 8, 512, 128], bf16[1, 8, 512, 128]) on @m {
  %k_lo = slice(%k) {start = [0, 0, 0, 0], size = [1, 8, 512, 128]} : bf16[1, 8, 512, 128]
  %v_lo = slice(%v) {start = [0, 0, 0, 0], size = [1, 8, 512, 128]} : bf16[1, 8, 512, 128]
  %o = attention(%q, %k_lo, %v_lo) : bf16[1, 8, 512, 128]
  %v_hi = slice(%v) {start = [0, 0, 512, 0], size = [1, 8, 512, 128]} : bf16[1, 8, 512, 128]
  %o2 = attention(%q, %k_lo, %v_hi) : bf16[1, 8, 512, 128]
  %e = exp(%v_hi) : bf16[1, 8, 512, 128]
  return %o, %e
}
)";
  EXPECT_EQ(TimeOf(kHalves, "k_lo"), 0.0);
  EXPECT_EQ(TimeOf(kHalves, "v_lo"), 0.0);
  EXPECT_GT(TimeOf(kHalves, "v_hi"), kLaunch);
}

TEST_F(GemmBlockTest, AGemmResultUsedTwiceIsWrittenByACopy) {
  // %p2 is also read by an add: the GEMM writes it once, the update copies it.
  EXPECT_GT(TimeOf(kBlocks, "both"), kLaunch);
}

// A buffer overwritten before any read runs no fill (runtime/in_place.h), as the cpu and
// cuda backends allocate it: no time. One left partly unwritten is filled at the HBM
// write roofline: launch + 32 x 8 f32 (1,024 bytes) / 3.35 TB/s.
class FillTimeTest : public ::testing::Test {
 protected:
  double FillTime(const std::string& source) {
    absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(source, "test.commir");
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) return -1;
    module_ = std::move(*module);
    const Function& function = *module_->functions().front();
    for (const Operation* op : *function.body()) {
      if (!op->Is(OpKind::kFull) || !op->result(0)->type().is_tensor()) continue;
      absl::StatusOr<double> t = OpTime(H100(), *op, function);
      EXPECT_TRUE(t.ok()) << t.status();
      return t.ok() ? *t : -1;
    }
    ADD_FAILURE() << "no tensor full";
    return -1;
  }
  std::unique_ptr<Module> module_;
};

TEST_F(FillTimeTest, OverwrittenBufferIsFree) {
  EXPECT_EQ(FillTime(runtime::fill_test::Covered()), 0.0);
  EXPECT_EQ(FillTime(runtime::fill_test::Slots()), 0.0);
}

TEST_F(FillTimeTest, PartlyWrittenBufferIsFilled) {
  const double fill = kLaunch + 32 * 8 * 4 / kHbm;
  EXPECT_NEAR(FillTime(runtime::fill_test::OneBlockShort()), fill, 1e-12);
  EXPECT_NEAR(FillTime(runtime::fill_test::ReadBeforeLastWrite()), fill, 1e-12);
  EXPECT_NEAR(FillTime(runtime::fill_test::SlotsOneShort()), fill, 1e-12);
}

}  // namespace
}  // namespace commir::sim
