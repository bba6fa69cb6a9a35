// Matmuls that read a dynamic_slice block where it lies (runtime/in_place.h:
// SliceReadInPlace) give the bits the copied slice gives: row and column blocks, blocks
// of a batch, transposed operands, every offset, several shapes and types, and offsets
// computed at run time (a loop's index). The reference slices first (DynamicSlice copies
// the block into a packed tensor) and multiplies the packed operands.
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

struct Case {
  std::vector<int64_t> base;  // the sliced operand's shape
  int64_t dim;
  int64_t size;
  bool transpose;            // of the sliced operand
  std::vector<int64_t> other;  // the other operand's shape
  bool sliced_is_a;          // the sliced operand is a (else b)
};

TEST(SliceViewTest, ViewsGiveTheCopiedSlicesBits) {
  const std::vector<Case> cases = {
      // Row blocks of a: [48, 24] in blocks of 16 rows times [24, 13].
      {{48, 24}, 0, 16, false, {24, 13}, true},
      // Column blocks of a (the reduce_scatter ring's K blocks): a row stride of 40.
      {{16, 40}, 1, 8, false, {8, 13}, true},
      {{16, 40}, -1, 8, false, {8, 13}, true},
      // Transposed a stored [K, M]: a column block is M's block.
      {{24, 30}, 1, 10, true, {24, 7}, true},
      // b's column block (the all_gather ring's N blocks) and row block.
      {{24, 52}, 1, 13, false, {16, 24}, false},
      {{52, 24}, 0, 13, false, {16, 13}, false},
      // Transposed b stored [N, K]: a row block is N's block.
      {{52, 24}, 0, 13, true, {16, 24}, false},
      // Long contraction (several depth blocks of the reproducible GEMM).
      {{8, 600}, 1, 300, false, {300, 5}, true},
      // Batches: rows and columns of each matrix, and a contiguous range of matrices.
      {{3, 20, 12}, 1, 5, false, {12, 4}, true},
      {{3, 20, 12}, 2, 6, false, {6, 4}, true},
      {{1, 6, 10, 12}, 1, 2, false, {12, 4}, true},
  };
  for (const Case& c : cases) {
    for (ElementType type : {ElementType::kF32, ElementType::kF64, ElementType::kBF16}) {
      const Tensor base = RandomTensor(type, c.base, 7);
      const Tensor other = RandomTensor(type, c.other, 11);
      const int64_t d = c.dim < 0 ? c.dim + static_cast<int64_t>(c.base.size()) : c.dim;
      for (int64_t offset = 0; offset + c.size <= c.base[d]; ++offset) {
        absl::StatusOr<Tensor> copied = DynamicSlice(base, c.dim, offset, c.size);
        ASSERT_TRUE(copied.ok()) << copied.status();
        const MatrixOperand view = SliceView(base, c.dim, offset, c.size);
        absl::StatusOr<Tensor> expected =
            c.sliced_is_a ? MatMul(*copied, other, c.transpose, false, type)
                          : MatMul(other, *copied, false, c.transpose, type);
        absl::StatusOr<Tensor> actual =
            c.sliced_is_a
                ? MatMul(view, WholeMatrices(other), c.transpose, false, type)
                : MatMul(WholeMatrices(other), view, false, c.transpose, type);
        ASSERT_TRUE(expected.ok()) << expected.status();
        ASSERT_TRUE(actual.ok()) << actual.status();
        EXPECT_TRUE(actual->BitwiseEqual(*expected))
            << ElementTypeName(type) << " base " << base.DebugTypeString() << " dim " << c.dim
            << " offset " << offset;
      }
    }
  }
}

// A block read in place and written in place: the product of a column block of a and a
// row block of b, stored at a column block of the destination.
TEST(SliceViewTest, ViewsIntoADestinationGiveTheCopiedSlicesBits) {
  const Tensor a = RandomTensor(ElementType::kF32, {16, 40}, 3);
  const Tensor b = RandomTensor(ElementType::kF32, {40, 9}, 5);
  for (int64_t k_off = 0; k_off + 8 <= 40; k_off += 8) {
    Tensor expected(ElementType::kF32, {16, 27});
    Tensor actual(ElementType::kF32, {16, 27});
    absl::StatusOr<Tensor> a_blk = DynamicSlice(a, 1, k_off, 8);
    absl::StatusOr<Tensor> b_blk = DynamicSlice(b, 0, k_off, 8);
    ASSERT_TRUE(a_blk.ok() && b_blk.ok());
    absl::StatusOr<bool> wrote_expected = MatMulInto(*a_blk, *b_blk, false, false, expected, 1, 9);
    absl::StatusOr<bool> wrote = MatMulInto(SliceView(a, 1, k_off, 8), SliceView(b, 0, k_off, 8),
                                            false, false, actual, 1, 9);
    ASSERT_TRUE(wrote_expected.ok() && *wrote_expected);
    ASSERT_TRUE(wrote.ok() && *wrote);
    EXPECT_TRUE(actual.BitwiseEqual(expected)) << k_off;
  }
}

// The cpu backend with every slice run as an op (the interpreter asks the backend).
class SlicingBackend : public CpuBackend {
 public:
  bool ReadsSlicesInPlace() const override { return false; }
};

// A loop whose matmuls read blocks at offsets computed from its index: a's column blocks
// against b's row blocks (the contraction split, as a reduce_scatter ring reads it), and
// the blocks read again, transposed.
constexpr char kLoop[] = R"(mesh @m(tp=1)

spmd func @f(%a: $T[16, 40], %b: $T[40, 9], %c: $T[12, 40]) -> ($T[16, 9], $T[16, 12]) on @m {
  %acc0 = full() {value = 0.0} : $T[16, 9]
  %t0 = full() {value = 0.0} : $T[16, 12]
  %acc, %t = for %i = 0 to 5 step 1 iter(%s = %acc0, %u = %t0) {
    %off = mul(%i, 8) : index
    %a_blk = dynamic_slice(%a, %off) {dim = 1, size = 8} : $T[16, 8]
    %b_blk = dynamic_slice(%b, %off) {dim = 0, size = 8} : $T[8, 9]
    %c_blk = dynamic_slice(%c, %off) {dim = -1, size = 8} : $T[12, 8]
    %p = matmul(%a_blk, %b_blk) : $T[16, 9]
    %q = matmul(%a_blk, %c_blk) {transpose_b} : $T[16, 12]
    %s1 = add(%s, %p) : $T[16, 9]
    %u1 = add(%u, %q) : $T[16, 12]
    yield %s1, %u1
  } : ($T[16, 9], $T[16, 12])
  return %acc, %t
}
)";

absl::StatusOr<std::vector<std::vector<Tensor>>> RunOnDevices(
    const std::string& source, runtime::Backend& backend,
    const std::vector<std::vector<Tensor>>& inputs) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(source, diagnostics);
  if (module == nullptr) return absl::InvalidArgumentError("parse error:\n" + source);
  Interpreter interpreter(*module->functions()[0], backend);
  return interpreter.Run(inputs);
}

absl::StatusOr<std::vector<std::vector<Tensor>>> RunProgram(const std::string& source,
                                                            runtime::Backend& backend,
                                                            const std::vector<Tensor>& inputs) {
  return RunOnDevices(source, backend, {inputs});
}

TEST(SliceViewTest, DynamicOffsetsThroughTheInterpreter) {
  for (const char* type : {"f32", "f64", "bf16", "i32"}) {
    const std::string source = absl::StrReplaceAll(kLoop, {{"$T", type}});
    DiagnosticEngine diagnostics;
    std::unique_ptr<Module> module = ParseModule(source, diagnostics);
    ASSERT_NE(module, nullptr) << source;
    int views = 0;
    WalkOps(module->functions()[0]->body(), [&](Operation* op) {
      if (runtime::SliceReadInPlace(*op)) ++views;
    });
    EXPECT_EQ(views, 3) << "every slice is read by matmuls only";
    const ElementType element = *ParseElementType(type);
    const std::vector<Tensor> inputs = {RandomTensor(element, {16, 40}, 1, -4, 4),
                                        RandomTensor(element, {40, 9}, 2, -4, 4),
                                        RandomTensor(element, {12, 40}, 3, -4, 4)};
    CpuBackend in_place;
    SlicingBackend slicing;
    absl::StatusOr<std::vector<std::vector<Tensor>>> actual = RunProgram(source, in_place, inputs);
    absl::StatusOr<std::vector<std::vector<Tensor>>> expected = RunProgram(source, slicing, inputs);
    ASSERT_TRUE(actual.ok()) << actual.status();
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE((*actual)[0][r].BitwiseEqual((*expected)[0][r])) << type << " result " << r;
    }
  }
}

// The reduce_scatter ring's row blocks of each device's input, read at the ring step's
// offset, and column blocks of b read in place and written in place into the
// accumulator's column blocks, on four devices.
constexpr char kRing[] = R"(mesh @m(tp=4)

spmd func @f(%a: $T[64, 24@tp], %w: $T[24@tp, 52]) -> $T[64@tp, 52] on @m {
  %r = rank() {axis = tp} : index
  %dst_raw = add(%r, 3) : index
  %dst = rem(%dst_raw, 4) : index
  %off = mul(%dst, 16) : index
  %a_blk = dynamic_slice(%a, %off) {dim = 0, size = 16} : $T[16, 6]
  %zero = full() {value = 0} : index
  %half = full() {value = 26} : index
  %y0 = full() {value = 0.0} : $T[16, 52]
  %w_l = dynamic_slice(%w, %zero) {dim = 1, size = 26} : $T[6, 26]
  %y_l = matmul(%a_blk, %w_l) : $T[16, 26]
  %y1 = dynamic_update_slice(%y0, %y_l, %zero) {dim = 1} : $T[16, 52]
  %w_r = dynamic_slice(%w, %half) {dim = 1, size = 26} : $T[6, 26]
  %y_r = matmul(%a_blk, %w_r) : $T[16, 26]
  %y_part = dynamic_update_slice(%y1, %y_r, %half) {dim = 1} : $T[16, 52]
  %y = for %i = 1 to 4 step 1 iter(%y_acc = %y_part) {
    %y_recv = shift(%y_acc) {axis = tp, offset = 1, stream = 1} : $T[16, 52]
    %dst_raw_1 = sub(%r, %i) : index
    %dst_sum = add(%dst_raw_1, 3) : index
    %dst_1 = rem(%dst_sum, 4) : index
    %off_1 = mul(%dst_1, 16) : index
    %a_blk_1 = dynamic_slice(%a, %off_1) {dim = 0, size = 16} : $T[16, 6]
    %y_part_1 = matmul(%a_blk_1, %w) : $T[16, 52]
    %y_next = add(%y_recv, %y_part_1) : $T[16, 52]
    yield %y_next
  } : $T[16, 52]
  return %y
}
)";

TEST(SliceViewTest, RingBlocksThroughTheInterpreter) {
  for (const char* type : {"f32", "f64", "bf16"}) {
    const std::string source = absl::StrReplaceAll(kRing, {{"$T", type}});
    const ElementType element = *ParseElementType(type);
    std::vector<std::vector<Tensor>> inputs;
    for (uint32_t d = 0; d < 4; ++d) {
      inputs.push_back({RandomTensor(element, {64, 6}, 2 * d + 1),
                        RandomTensor(element, {6, 52}, 2 * d + 2)});
    }
    CpuBackend in_place;
    SlicingBackend slicing;
    absl::StatusOr<std::vector<std::vector<Tensor>>> actual =
        RunOnDevices(source, in_place, inputs);
    absl::StatusOr<std::vector<std::vector<Tensor>>> expected =
        RunOnDevices(source, slicing, inputs);
    ASSERT_TRUE(actual.ok()) << actual.status();
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (int d = 0; d < 4; ++d) {
      EXPECT_TRUE((*actual)[d][0].BitwiseEqual((*expected)[d][0])) << type << " device " << d;
    }
  }
}

// An offset past the end is dynamic_slice's run-time error, whether or not the block
// would have been read in place.
TEST(SliceViewTest, AnOutOfRangeOffsetIsTheSlicesError) {
  const std::string source = absl::StrReplaceAll(
      absl::StrReplaceAll(kLoop, {{"$T", "f32"}}), {{"for %i = 0 to 5", "for %i = 0 to 6"}});
  const std::vector<Tensor> inputs = {RandomTensor(ElementType::kF32, {16, 40}, 1),
                                      RandomTensor(ElementType::kF32, {40, 9}, 2),
                                      RandomTensor(ElementType::kF32, {12, 40}, 3)};
  CpuBackend in_place;
  SlicingBackend slicing;
  absl::StatusOr<std::vector<std::vector<Tensor>>> actual = RunProgram(source, in_place, inputs);
  absl::StatusOr<std::vector<std::vector<Tensor>>> expected = RunProgram(source, slicing, inputs);
  ASSERT_FALSE(actual.ok());
  ASSERT_FALSE(expected.ok());
  EXPECT_EQ(actual.status(), expected.status());
  EXPECT_NE(actual.status().message().find("offset 40 with size 8 is out of range"),
            std::string::npos)
      << actual.status();
}

}  // namespace
}  // namespace commir::cpu
