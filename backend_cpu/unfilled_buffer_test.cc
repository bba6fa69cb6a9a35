// A buffer every element of which is written before it is read (runtime/in_place.h:
// FillOverwrittenBeforeRead) is allocated without its fill on the cpu backend: the
// interpreter asks for it with AllocateUnfilled, and no `full` kernel runs. A buffer
// left partly unwritten, or read before its last write, keeps its fill, and its 7.0s
// show in the result where no block was written: were the fill skipped there, those
// rows would read 0 (the host allocation's value), so the values alone check that the
// rule is not too broad.
#include <memory>
#include <string>
#include <vector>

#include "backend_cpu/cpu_backend.h"
#include "commir/diagnostics.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "runtime/fill_test_programs.h"
#include "runtime/interpreter.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

namespace ft = runtime::fill_test;
using runtime::Interpreter;
using runtime::Tensor;

// The cpu backend, counting the fill kernels it runs and the buffers it allocates unfilled.
class CountingBackend : public CpuBackend {
 public:
  absl::StatusOr<std::vector<Tensor>> RunOp(const Operation& op,
                                            const runtime::OpContext& context,
                                            absl::Span<const Tensor* const> tensors,
                                            absl::Span<const int64_t> indices) override {
    if (op.Is(OpKind::kFull) && op.result(0)->type().is_tensor()) ++fills;
    return CpuBackend::RunOp(op, context, tensors, indices);
  }
  absl::StatusOr<std::vector<Tensor>> AllocateUnfilled(const Operation& full,
                                                       const runtime::OpContext& context) override {
    ++unfilled;
    return CpuBackend::AllocateUnfilled(full, context);
  }
  int fills = 0;
  int unfilled = 0;
};

// Device d's block: 100 * (d + 1) + its element's index.
Tensor Block(int d) {
  Tensor t(ElementType::kF32, {ft::kRows, ft::kCols});
  for (int64_t i = 0; i < t.num_elements(); ++i) t.SetFromDouble(i, 100.0 * (d + 1) + i);
  return t;
}

struct Outcome {
  std::vector<std::vector<Tensor>> outputs;
  int fills = 0;
  int unfilled = 0;
};

Outcome RunProgram(const std::string& source) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(source, diagnostics);
  EXPECT_NE(module, nullptr) << source;
  Outcome run;
  if (module == nullptr) return run;
  CountingBackend backend;
  Interpreter interpreter(*module->functions()[0], backend);
  std::vector<std::vector<Tensor>> inputs;
  for (int d = 0; d < ft::kDevices; ++d) inputs.push_back({Block(d)});
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(inputs);
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  if (outputs.ok()) run.outputs = *std::move(outputs);
  run.fills = backend.fills;
  run.unfilled = backend.unfilled;
  return run;
}

// Block `slot` (rows slot*8 .. slot*8+7) of `result` equals device `source`'s block, or
// the fill's value when `source` is negative.
void ExpectSlot(const Tensor& result, int slot, int source, int device) {
  const int64_t block = ft::kRows * ft::kCols;
  for (int64_t i = 0; i < block; ++i) {
    const double want = source < 0 ? ft::kFillValue : 100.0 * (source + 1) + i;
    ASSERT_EQ(result.GetAsDouble(slot * block + i), want)
        << "device " << device << " slot " << slot << " element " << i;
  }
}

int Mod(int a) { return ((a % ft::kDevices) + ft::kDevices) % ft::kDevices; }

TEST(UnfilledBufferTest, RingWritingEveryBlockRunsNoFill) {
  Outcome run = RunProgram(ft::Covered());
  ASSERT_EQ(run.outputs.size(), static_cast<size_t>(ft::kDevices));
  EXPECT_EQ(run.fills, 0);
  EXPECT_EQ(run.unfilled, ft::kDevices);
  for (int d = 0; d < ft::kDevices; ++d) {
    for (int j = 0; j < ft::kDevices; ++j) ExpectSlot(run.outputs[d][0], j, j, d);
  }
}

TEST(UnfilledBufferTest, OwnerSlotsRunNoFill) {
  Outcome run = RunProgram(ft::Slots());
  ASSERT_EQ(run.outputs.size(), static_cast<size_t>(ft::kDevices));
  EXPECT_EQ(run.fills, 0);
  EXPECT_EQ(run.unfilled, ft::kDevices);
  for (int d = 0; d < ft::kDevices; ++d) {
    // Slot s - 1 holds what a shift by s brought: device d - s's block; slot 3 the own.
    for (int s = 1; s < ft::kDevices; ++s) ExpectSlot(run.outputs[d][0], s - 1, Mod(d - s), d);
    ExpectSlot(run.outputs[d][0], 3, d, d);
  }
}

TEST(UnfilledBufferTest, PartlyWrittenBufferKeepsItsFill) {
  Outcome run = RunProgram(ft::OneBlockShort());
  ASSERT_EQ(run.outputs.size(), static_cast<size_t>(ft::kDevices));
  EXPECT_EQ(run.fills, ft::kDevices);
  EXPECT_EQ(run.unfilled, 0);
  // Two shifts: the block held after the loop is rank - 2's, written at rank + 1's rows;
  // rank + 2's rows (rank - 2's) are never written.
  for (int d = 0; d < ft::kDevices; ++d) {
    for (int j = 0; j < ft::kDevices; ++j) {
      const int source = j == Mod(d + 2) ? -1 : j == Mod(d + 1) ? Mod(d - 2) : j;
      ExpectSlot(run.outputs[d][0], j, source, d);
    }
  }
  Outcome slots = RunProgram(ft::SlotsOneShort());
  ASSERT_EQ(slots.outputs.size(), static_cast<size_t>(ft::kDevices));
  EXPECT_EQ(slots.fills, ft::kDevices);
  for (int d = 0; d < ft::kDevices; ++d) ExpectSlot(slots.outputs[d][0], 3, -1, d);
}

TEST(UnfilledBufferTest, BufferReadBeforeItsLastWriteKeepsItsFill) {
  Outcome run = RunProgram(ft::ReadBeforeLastWrite());
  ASSERT_EQ(run.outputs.size(), static_cast<size_t>(ft::kDevices));
  EXPECT_EQ(run.fills, ft::kDevices);
  for (int d = 0; d < ft::kDevices; ++d) {
    // The loop's result, read before the last update, shows the fill in block rank + 1.
    ExpectSlot(run.outputs[d][1], Mod(d + 1), -1, d);
    ExpectSlot(run.outputs[d][0], Mod(d + 1), Mod(d + 1), d);
  }
}

}  // namespace
}  // namespace commir::cpu
