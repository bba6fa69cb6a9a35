// Attention that reads q, k and v blocks where they lie (runtime/in_place.h:
// SliceReadInPlace; the cpu backend's Attention on MatrixOperands) gives the bits the
// copied slices give: sequence blocks at every offset, batches of one and two, grouped
// kv heads, causal masks with query and key positions, several element types, and
// through the interpreter static and dynamic slices against a backend that runs every
// slice as an op. The reference slices first (DynamicSlice copies the block into a
// packed tensor).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "backend_cpu/cpu_backend.h"
#include "backend_cpu/kernels.h"
#include "backend_cpu/test_util.h"
#include "commir/diagnostics.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "runtime/in_place.h"
#include "runtime/interpreter.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

using runtime::Interpreter;
using runtime::Tensor;
using ::commir::cpu::testing::RandomTensor;
using ::commir::cpu::testing::SliceView;

TEST(AttentionViewTest, SequenceBlocksGiveTheCopiedSlicesBits) {
  constexpr int64_t kBase = 12, kBlock = 4;
  for (int64_t batch : {1, 2}) {
    for (int64_t kv_heads : {1, 2}) {
      for (ElementType type : {ElementType::kF32, ElementType::kBF16, ElementType::kF64}) {
        // Every operand is a block of a [B, H, 12, D] tensor (k and v of kv_heads heads).
        const Tensor q = RandomTensor(type, {batch, 2, kBase, 8}, 1);
        const Tensor k = RandomTensor(type, {batch, kv_heads, kBase, 8}, 2);
        const Tensor v = RandomTensor(type, {batch, kv_heads, kBase, 5}, 3);
        for (int64_t q_off : {0, 3, 8}) {
          for (int64_t kv_off = 0; kv_off + kBlock <= kBase; ++kv_off) {
            for (bool causal : {false, true}) {
              AttentionOptions options;
              options.causal = causal;
              // Positions that leave some queries seeing part of the keys, some none.
              options.q_pos = 100 + q_off;
              options.k_pos = 100 + kv_off + 1;
              const absl::StatusOr<Tensor> q_blk = DynamicSlice(q, 2, q_off, kBlock);
              const absl::StatusOr<Tensor> k_blk = DynamicSlice(k, 2, kv_off, kBlock);
              const absl::StatusOr<Tensor> v_blk = DynamicSlice(v, 2, kv_off, kBlock);
              ASSERT_TRUE(q_blk.ok() && k_blk.ok() && v_blk.ok());
              const absl::StatusOr<AttentionResult> expected =
                  Attention(*q_blk, *k_blk, *v_blk, options);
              const absl::StatusOr<AttentionResult> actual =
                  Attention(SliceView(q, 2, q_off, kBlock), SliceView(k, 2, kv_off, kBlock),
                            SliceView(v, 2, kv_off, kBlock), options);
              ASSERT_TRUE(expected.ok()) << expected.status();
              ASSERT_TRUE(actual.ok()) << actual.status();
              const std::string where = absl::StrCat(
                  ElementTypeName(type), " b=", batch, " hkv=", kv_heads, " q_off=", q_off,
                  " kv_off=", kv_off, causal ? " causal" : "");
              EXPECT_TRUE(actual->output.BitwiseEqual(expected->output)) << where;
              EXPECT_TRUE(actual->lse.BitwiseEqual(expected->lse)) << where;
              // A view mixed with a whole operand.
              const absl::StatusOr<AttentionResult> mixed =
                  Attention(WholeMatrices(*q_blk), SliceView(k, 2, kv_off, kBlock),
                            WholeMatrices(*v_blk), options);
              ASSERT_TRUE(mixed.ok()) << mixed.status();
              EXPECT_TRUE(mixed->output.BitwiseEqual(expected->output)) << where;
            }
          }
        }
      }
    }
  }
}

// The cpu backend with every slice run as an op (the interpreter asks the backend).
class SlicingBackend : public CpuBackend {
 public:
  bool ReadsSlicesInPlace() const override { return false; }
};

// zigzag's step: static halves of a k/v block, each read by two attentions, and blocks
// at offsets computed from a loop index with positions from it.
constexpr char kProgram[] = R"(mesh @m(sp=1)

spmd func @f(%q: $T[$B, 2, 8, 8], %k: $T[$B, 1, 16, 8], %v: $T[$B, 1, 16, 8]) -> ($T[$B, 2, 8, 8], $T[$B, 2, 8, 8], $T[$B, 2, 8, 8]) on @m {
  %k_lo = slice(%k) {start = [0, 0, 0, 0], size = [$B, 1, 8, 8]} : $T[$B, 1, 8, 8]
  %k_hi = slice(%k) {start = [0, 0, 8, 0], size = [$B, 1, 8, 8]} : $T[$B, 1, 8, 8]
  %v_lo = slice(%v) {start = [0, 0, 0, 0], size = [$B, 1, 8, 8]} : $T[$B, 1, 8, 8]
  %v_hi = slice(%v) {start = [0, 0, 8, 0], size = [$B, 1, 8, 8]} : $T[$B, 1, 8, 8]
  %p0 = rank() {axis = sp} : index
  %p8 = add(%p0, 8) : index
  %a, %la = attention(%q, %k_lo, %v_lo, %p8, %p0) {causal} : ($T[$B, 2, 8, 8], f32[$B, 2, 8])
  %b, %lb = attention(%q, %k_hi, %v_hi, %p8, %p8) {causal} : ($T[$B, 2, 8, 8], f32[$B, 2, 8])
  %c0 = full() {value = 0.0} : $T[$B, 2, 8, 8]
  %acc = for %i = 0 to 3 step 1 iter(%s = %c0) {
    %off = mul(%i, 4) : index
    %q_pos = add(%off, 2) : index
    %kb = dynamic_slice(%k, %off) {dim = 2, size = 4} : $T[$B, 1, 4, 8]
    %vb = dynamic_slice(%v, %off) {dim = 2, size = 4} : $T[$B, 1, 4, 8]
    %o, %l = attention(%q, %kb, %vb, %q_pos, %off) {causal} : ($T[$B, 2, 8, 8], f32[$B, 2, 8])
    %s1 = add(%s, %o) : $T[$B, 2, 8, 8]
    yield %s1
  } : $T[$B, 2, 8, 8]
  return %a, %b, %acc
}
)";

absl::StatusOr<std::vector<std::vector<Tensor>>> RunProgram(const std::string& source,
                                                            runtime::Backend& backend,
                                                            const std::vector<Tensor>& inputs) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(source, diagnostics);
  if (module == nullptr) return absl::InvalidArgumentError("parse error:\n" + source);
  Interpreter interpreter(*module->functions()[0], backend);
  return interpreter.Run({inputs});
}

TEST(AttentionViewTest, StaticAndDynamicBlocksThroughTheInterpreter) {
  for (const char* batch : {"1", "2"}) {
    for (const char* type : {"f32", "bf16"}) {
      const std::string source = absl::StrReplaceAll(kProgram, {{"$T", type}, {"$B", batch}});
      DiagnosticEngine diagnostics;
      std::unique_ptr<Module> module = ParseModule(source, diagnostics);
      ASSERT_NE(module, nullptr) << source;
      int views = 0;
      WalkOps(module->functions()[0]->body(), [&](Operation* op) {
        if (runtime::SliceReadInPlace(*op)) ++views;
      });
      EXPECT_EQ(views, 6) << "every slice is read by attention's k or v only";
      const ElementType element = *ParseElementType(type);
      const int64_t b = batch[0] - '0';
      const std::vector<Tensor> inputs = {RandomTensor(element, {b, 2, 8, 8}, 1),
                                          RandomTensor(element, {b, 1, 16, 8}, 2),
                                          RandomTensor(element, {b, 1, 16, 8}, 3)};
      CpuBackend in_place;
      SlicingBackend slicing;
      absl::StatusOr<std::vector<std::vector<Tensor>>> actual = RunProgram(source, in_place, inputs);
      absl::StatusOr<std::vector<std::vector<Tensor>>> expected =
          RunProgram(source, slicing, inputs);
      ASSERT_TRUE(actual.ok()) << actual.status();
      ASSERT_TRUE(expected.ok()) << expected.status();
      for (int r = 0; r < 3; ++r) {
        EXPECT_TRUE((*actual)[0][r].BitwiseEqual((*expected)[0][r]))
            << type << " b=" << batch << " result " << r;
      }
    }
  }
}

// A slice read by anything but a matmul or attention's q, k and v is a kernel.
TEST(AttentionViewTest, OtherReadersAndTwoDimensionCutsCopy) {
  constexpr char kSource[] = R"(mesh @m(sp=1)

spmd func @f(%q: f32[1, 2, 8, 8], %k: f32[1, 2, 16, 8]) -> (f32[1, 2, 8, 8], f32[1, 2, 8, 4]) on @m {
  %k_lo = slice(%k) {start = [0, 0, 0, 0], size = [1, 2, 8, 8]} : f32[1, 2, 8, 8]
  %o = attention(%q, %k_lo, %k_lo) : f32[1, 2, 8, 8]
  %e = exp(%k_lo) : f32[1, 2, 8, 8]
  %corner = slice(%k) {start = [0, 0, 8, 4], size = [1, 2, 8, 4]} : f32[1, 2, 8, 4]
  return %o, %corner
}
)";
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(kSource, diagnostics);
  ASSERT_NE(module, nullptr);
  int views = 0;
  WalkOps(module->functions()[0]->body(), [&](Operation* op) {
    if (runtime::SliceReadInPlace(*op)) ++views;
  });
  EXPECT_EQ(views, 0);
}

}  // namespace
}  // namespace commir::cpu
