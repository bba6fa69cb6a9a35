// Ring schedules' accumulators on the cpu backend: each step's matmul writes its block
// straight into the loop-carried output (a row block at an offset pointer, a column block
// with the full row as its stride) and the dynamic_update_slice copies nothing. Checked
// against products computed here with a plain loop, and by counting the heap allocations
// of the accumulator's size: one (the `full` that starts it) per device, where a backend
// that copies the destination at every update makes one more per step. Likewise the
// reduce_scatter ring's GEMMs read their blocks of the input in place: no allocation of a
// block's size, where a backend that runs the slices makes one per step.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "backend_cpu/cpu_backend.h"
#include "commir/diagnostics.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "runtime/in_place.h"
#include "runtime/interpreter.h"
#include "runtime/tensor.h"

namespace {

// Heap allocations of exactly `g_counted_size` bytes while it is nonzero.
std::atomic<size_t> g_counted_size{0};
std::atomic<int64_t> g_counted{0};

void* Allocate(size_t size) {
  if (size != 0 && size == g_counted_size.load(std::memory_order_relaxed)) {
    g_counted.fetch_add(1, std::memory_order_relaxed);
  }
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(size_t size) { return Allocate(size); }
void* operator new[](size_t size) { return Allocate(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace commir::cpu {
namespace {

using runtime::Interpreter;
using runtime::Tensor;

constexpr int kDevices = 4;
// Every device's rows of a (dim 0) or columns of b (dim 1), and the contraction.
constexpr int64_t kBlockRows = 16, kBlockCols = 13, kDepth = 24;

// The ag_matmul ring (ring_cm_ag_matmul_uni.golden's shape): a gathered by rows, each
// step's [16, 13] block written at its source's rows of the [64, 13] accumulator.
constexpr char kRowBlocks[] = R"(mesh @m(tp=4)

spmd func @f(%a: f32[64@tp, 24], %b: f32[24, 52@tp]) -> f32[64, 52@tp] on @m {
  %r = rank() {axis = tp} : index
  %c_init = full() {value = 0.0} : f32[64, 13]
  %c_part, %a_last = for %i = 0 to 3 step 1 iter(%c_acc = %c_init, %a_blk = %a) {
    %a_next = shift(%a_blk) {axis = tp, offset = 1, stream = 1} : f32[16, 24]
    %src_raw = sub(%r, %i) : index
    %src = rem(%src_raw, 4) : index
    %off = mul(%src, 16) : index
    %c_blk = matmul(%a_blk, %b) : f32[16, 13]
    %c_acc_1 = dynamic_update_slice(%c_acc, %c_blk, %off) {dim = 0} : f32[64, 13]
    yield %c_acc_1, %a_next
  } : (f32[64, 13], f32[16, 24])
  %src_last_raw = add(%r, 1) : index
  %src_last = rem(%src_last_raw, 4) : index
  %off_1 = mul(%src_last, 16) : index
  %c_blk_1 = matmul(%a_last, %b) : f32[16, 13]
  %c = dynamic_update_slice(%c_part, %c_blk_1, %off_1) {dim = 0} : f32[64, 13]
  return %c
}
)";

// kRowBlocks with the activations as [1, rows, cols], as the plan's layer programs hold
// them ([batch 1, sequence, hidden]): each step's [1, 16, 13] block is one matrix, written
// at its rows of the [1, 64, 13] accumulator (dim 1) as the rank-2 one is.
constexpr char kRowBlocksUnitBatch[] = R"(mesh @m(tp=4)

spmd func @f(%a: f32[64@tp, 24], %b: f32[24, 52@tp]) -> f32[64, 52@tp] on @m {
  %r = rank() {axis = tp} : index
  %c_init = full() {value = 0.0} : f32[1, 64, 13]
  %c_part, %a_last = for %i = 0 to 3 step 1 iter(%c_acc = %c_init, %a_blk = %a) {
    %a_next = shift(%a_blk) {axis = tp, offset = 1, stream = 1} : f32[16, 24]
    %src_raw = sub(%r, %i) : index
    %src = rem(%src_raw, 4) : index
    %off = mul(%src, 16) : index
    %a_3d = reshape(%a_blk) : f32[1, 16, 24]
    %c_blk = matmul(%a_3d, %b) : f32[1, 16, 13]
    %c_acc_1 = dynamic_update_slice(%c_acc, %c_blk, %off) {dim = 1} : f32[1, 64, 13]
    yield %c_acc_1, %a_next
  } : (f32[1, 64, 13], f32[16, 24])
  %src_last_raw = add(%r, 1) : index
  %src_last = rem(%src_last_raw, 4) : index
  %off_1 = mul(%src_last, 16) : index
  %a_3d_1 = reshape(%a_last) : f32[1, 16, 24]
  %c_blk_1 = matmul(%a_3d_1, %b) : f32[1, 16, 13]
  %c_3d = dynamic_update_slice(%c_part, %c_blk_1, %off_1) {dim = 1} : f32[1, 64, 13]
  %c = reshape(%c_3d) : f32[64, 13]
  return %c
}
)";

// b gathered by columns the other way round (offset -1): each step's [16, 13] block is a
// column block of the [16, 52] accumulator.
constexpr char kColumnBlocks[] = R"(mesh @m(tp=4)

spmd func @f(%a: f32[64@tp, 24], %b: f32[24, 52@tp]) -> f32[64@tp, 52] on @m {
  %r = rank() {axis = tp} : index
  %c_init = full() {value = 0.0} : f32[16, 52]
  %c_part, %b_last = for %i = 0 to 3 step 1 iter(%c_acc = %c_init, %b_blk = %b) {
    %b_next = shift(%b_blk) {axis = tp, offset = -1, stream = 1} : f32[24, 13]
    %src_raw = add(%r, %i) : index
    %src = rem(%src_raw, 4) : index
    %off = mul(%src, 13) : index
    %c_blk = matmul(%a, %b_blk) : f32[16, 13]
    %c_acc_1 = dynamic_update_slice(%c_acc, %c_blk, %off) {dim = 1} : f32[16, 52]
    yield %c_acc_1, %b_next
  } : (f32[16, 52], f32[24, 13])
  %src_last_raw = add(%r, 3) : index
  %src_last = rem(%src_last_raw, 4) : index
  %off_1 = mul(%src_last, 13) : index
  %c_blk_1 = matmul(%a, %b_last) : f32[16, 13]
  %c = dynamic_update_slice(%c_part, %c_blk_1, %off_1) {dim = 1} : f32[16, 52]
  return %c
}
)";

// Small integers and halves: every product and sum is exact in f32, so the schedule and
// the loop below agree bit for bit.
Tensor Input(int64_t rows, int64_t cols, int64_t seed) {
  Tensor t(ElementType::kF32, {rows, cols});
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    t.SetFromDouble(i, static_cast<double>((i * 7 + seed * 5) % 11 - 5) / 2);
  }
  return t;
}

// The result device `d` must hold: the row-gathered a times its b (dim 0), or its a times
// the column-gathered b (dim 1), by a triple loop.
Tensor Expected(const std::vector<std::vector<Tensor>>& inputs, int d, int dim) {
  const int64_t rows = dim == 0 ? kDevices * kBlockRows : kBlockRows;
  const int64_t cols = dim == 0 ? kBlockCols : kDevices * kBlockCols;
  Tensor c(ElementType::kF32, {rows, cols});
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < kDepth; ++p) {
        const Tensor& a = inputs[dim == 0 ? i / kBlockRows : d][0];
        const Tensor& b = inputs[dim == 0 ? d : j / kBlockCols][1];
        sum += a.GetAsDouble((i % kBlockRows) * kDepth + p) *
               b.GetAsDouble(p * kBlockCols + j % kBlockCols);
      }
      c.SetFromDouble(i * cols + j, sum);
    }
  }
  return c;
}

// The cpu backend as it would be without buffer reuse: every update copies its
// destination and every matmul makes its block.
class CopyingBackend : public CpuBackend {
 public:
  bool ReadsSlicesInPlace() const override { return false; }
  absl::StatusOr<std::vector<Tensor>> RunOp(const Operation& op,
                                            const runtime::OpContext& context,
                                            absl::Span<const Tensor* const> tensors,
                                            absl::Span<const int64_t> indices) override {
    runtime::OpContext copied = context;
    copied.donated = nullptr;
    return CpuBackend::RunOp(op, copied, tensors, indices);
  }
  absl::StatusOr<bool> RunMatmulInto(const Operation&, const runtime::OpContext&,
                                     absl::Span<const Tensor* const>, const Operation&, int64_t,
                                     Tensor&) override {
    return false;
  }
};

struct Outcome {
  std::vector<std::vector<Tensor>> outputs;
  int64_t accumulator_allocations = 0;
};

Outcome RunSchedule(const std::string& source, runtime::Backend& backend, size_t accumulator_bytes) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(source, diagnostics);
  EXPECT_NE(module, nullptr) << source;
  Outcome outcome;
  if (module == nullptr) return outcome;
  std::vector<std::vector<Tensor>> inputs;
  for (int d = 0; d < kDevices; ++d) {
    inputs.push_back({Input(kBlockRows, kDepth, 2 * d), Input(kDepth, kBlockCols, 2 * d + 1)});
  }
  Interpreter interpreter(*module->functions()[0], backend);
  g_counted.store(0);
  g_counted_size.store(accumulator_bytes);
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(inputs);
  g_counted_size.store(0);
  outcome.accumulator_allocations = g_counted.load();
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  if (!outputs.ok()) return outcome;
  const int dim = source == kColumnBlocks ? 1 : 0;
  for (int d = 0; d < kDevices; ++d) {
    EXPECT_TRUE((*outputs)[d][0].BitwiseEqual(Expected(inputs, d, dim))) << "device " << d;
  }
  outcome.outputs = *std::move(outputs);
  return outcome;
}

TEST(InPlaceTest, SchedulesWriteBlocksIntoTheAccumulator) {
  for (const char* source : {kRowBlocks, kColumnBlocks, kRowBlocksUnitBatch}) {
    DiagnosticEngine diagnostics;
    std::unique_ptr<Module> module = ParseModule(source, diagnostics);
    ASSERT_NE(module, nullptr);
    int fused = 0;
    WalkOps(module->functions()[0]->body(), [&](Operation* op) {
      if (runtime::MatmulWritesInto(*op) != nullptr) ++fused;
    });
    EXPECT_EQ(fused, 2) << "the loop's matmul and the last step's";
  }
}

TEST(InPlaceTest, RowBlocksAreNotCopied) {
  const size_t accumulator_bytes = kDevices * kBlockRows * kBlockCols * sizeof(float);
  CpuBackend in_place;
  CopyingBackend copying;
  const Outcome reused = RunSchedule(kRowBlocks, in_place, accumulator_bytes);
  const Outcome copied = RunSchedule(kRowBlocks, copying, accumulator_bytes);
  // One `full` per device; copying adds a copy per update: 4 per device.
  EXPECT_EQ(reused.accumulator_allocations, kDevices);
  EXPECT_EQ(copied.accumulator_allocations, kDevices * (1 + kDevices));
}

TEST(InPlaceTest, UnitBatchRowBlocksAreNotCopied) {
  const size_t accumulator_bytes = kDevices * kBlockRows * kBlockCols * sizeof(float);
  CpuBackend in_place;
  CopyingBackend copying;
  const Outcome reused = RunSchedule(kRowBlocksUnitBatch, in_place, accumulator_bytes);
  const Outcome copied = RunSchedule(kRowBlocksUnitBatch, copying, accumulator_bytes);
  // The `full` and the final reshape's copy per device; copying adds a copy per update.
  EXPECT_EQ(reused.accumulator_allocations, 2 * kDevices);
  EXPECT_EQ(copied.accumulator_allocations, kDevices * (2 + kDevices));
}

TEST(InPlaceTest, ColumnBlocksAreNotCopied) {
  const size_t accumulator_bytes = kBlockRows * kDevices * kBlockCols * sizeof(float);
  CpuBackend in_place;
  CopyingBackend copying;
  const Outcome reused = RunSchedule(kColumnBlocks, in_place, accumulator_bytes);
  const Outcome copied = RunSchedule(kColumnBlocks, copying, accumulator_bytes);
  EXPECT_EQ(reused.accumulator_allocations, kDevices);
  EXPECT_EQ(copied.accumulator_allocations, kDevices * (1 + kDevices));
}

// A destination still read after the update keeps its contents: the update copies it,
// and the later read sees the old values.
TEST(InPlaceTest, LiveDestinationIsCopied) {
  constexpr char kSource[] = R"(mesh @m(tp=1)

spmd func @f(%x: f32[4, 3], %u: f32[1, 3]) -> (f32[4, 3], f32[4, 3]) on @m {
  %one = full() {value = 1} : index
  %two = full() {value = 2} : index
  %z = full() {value = 1.0} : f32[4, 3]
  %y = dynamic_update_slice(%z, %u, %two) {dim = 0} : f32[4, 3]
  %w = add(%z, %x) : f32[4, 3]
  %v = dynamic_update_slice(%x, %u, %one) {dim = 0} : f32[4, 3]
  return %y, %w
}
)";
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(kSource, diagnostics);
  ASSERT_NE(module, nullptr);
  Tensor x = Input(4, 3, 1), u = Input(1, 3, 2);
  const Tensor x_before = x;
  CpuBackend backend;
  Interpreter interpreter(*module->functions()[0], backend);
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run({{x, u}});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  for (int64_t i = 0; i < 12; ++i) {
    const double y = i / 3 == 2 ? u.GetAsDouble(i % 3) : 1.0;
    EXPECT_EQ((*outputs)[0][0].GetAsDouble(i), y) << i;
    EXPECT_EQ((*outputs)[0][1].GetAsDouble(i), 1.0 + x.GetAsDouble(i)) << i;
  }
  // The caller's argument is never written (%v's destination is %x).
  EXPECT_TRUE(x.BitwiseEqual(x_before));
}

// The reduce_scatter ring (ring_cm_mlp_uni.golden's second GEMM, with a narrower result
// so that a block of the input is the only tensor of its size): each step's matmul reads
// rows of the device's [64, 24] input at an offset computed from the ring step.
constexpr char kRowSlices[] = R"(mesh @m(tp=4)

spmd func @f(%a: f32[64, 24@tp], %w: f32[24@tp, 13]) -> f32[64@tp, 13] on @m {
  %r = rank() {axis = tp} : index
  %dst_raw = add(%r, 3) : index
  %dst = rem(%dst_raw, 4) : index
  %off = mul(%dst, 16) : index
  %a_blk = dynamic_slice(%a, %off) {dim = 0, size = 16} : f32[16, 6]
  %y_part = matmul(%a_blk, %w) : f32[16, 13]
  %y = for %i = 1 to 4 step 1 iter(%y_acc = %y_part) {
    %y_recv = shift(%y_acc) {axis = tp, offset = 1, stream = 1} : f32[16, 13]
    %dst_raw_1 = sub(%r, %i) : index
    %dst_sum = add(%dst_raw_1, 3) : index
    %dst_1 = rem(%dst_sum, 4) : index
    %off_1 = mul(%dst_1, 16) : index
    %a_blk_1 = dynamic_slice(%a, %off_1) {dim = 0, size = 16} : f32[16, 6]
    %y_part_1 = matmul(%a_blk_1, %w) : f32[16, 13]
    %y_next = add(%y_recv, %y_part_1) : f32[16, 13]
    yield %y_next
  } : f32[16, 13]
  return %y
}
)";

// Device d's result: rows d*16.. of the sum over devices s of a_s * w_s (plain loop).
Tensor ReducedRows(const std::vector<std::vector<Tensor>>& inputs, int d) {
  Tensor y(ElementType::kF32, {16, 13});
  for (int64_t i = 0; i < 16; ++i) {
    for (int64_t j = 0; j < 13; ++j) {
      double sum = 0;
      for (int s = 0; s < kDevices; ++s) {
        for (int64_t p = 0; p < 6; ++p) {
          sum += inputs[s][0].GetAsDouble((d * 16 + i) * 6 + p) * inputs[s][1].GetAsDouble(p * 13 + j);
        }
      }
      y.SetFromDouble(i * 13 + j, sum);
    }
  }
  return y;
}

int64_t SliceBlockAllocations(runtime::Backend& backend) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(kRowSlices, diagnostics);
  EXPECT_NE(module, nullptr);
  if (module == nullptr) return -1;
  std::vector<std::vector<Tensor>> inputs;
  for (int d = 0; d < kDevices; ++d) {
    inputs.push_back({Input(64, 6, 2 * d), Input(6, 13, 2 * d + 1)});
  }
  Interpreter interpreter(*module->functions()[0], backend);
  g_counted.store(0);
  g_counted_size.store(16 * 6 * sizeof(float));
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(inputs);
  g_counted_size.store(0);
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  if (!outputs.ok()) return -1;
  for (int d = 0; d < kDevices; ++d) {
    EXPECT_TRUE((*outputs)[d][0].BitwiseEqual(ReducedRows(inputs, d))) << "device " << d;
  }
  return g_counted.load();
}

TEST(InPlaceTest, RowSlicesAreReadInPlace) {
  CpuBackend in_place;
  CopyingBackend copying;
  // Four slices per device (the first block and three ring steps), each a [16, 6] copy
  // when the slices run; none when the GEMM reads the rows where they lie.
  EXPECT_EQ(SliceBlockAllocations(in_place), 0);
  EXPECT_EQ(SliceBlockAllocations(copying), kDevices * kDevices);
}

}  // namespace
}  // namespace commir::cpu
