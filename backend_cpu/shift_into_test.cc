// A shift whose block an update writes into a gathered buffer receives it straight into
// the buffer's slot (runtime/in_place.h: ShiftReceivesInto): the cpu backend copies each
// source member's block once, into the receiver's slot, and the update runs no kernel.
// Checked against the gathered values written out here element by element, and by
// counting the kernels and bytes the interpreter asks the backend to move.
#include "backend_cpu/shift_into.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend_cpu/cpu_backend.h"
#include "backend_cpu/move_counting_backend.h"
#include "commir/diagnostics.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "runtime/interpreter.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

using runtime::Interpreter;
using runtime::Tensor;

constexpr int64_t kDevices = 4;

// Device d's block: element (i, j) = 100 * d + 10 * i + j + 1 (no element is 0).
Tensor Block(int64_t d, int64_t rows, int64_t cols) {
  Tensor t(ElementType::kF32, {rows, cols});
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) t.data<float>()[i * cols + j] = 100 * d + 10 * i + j + 1;
  }
  return t;
}

TEST(ShiftIntoTest, EachMemberReceivesItsPredecessorsBlockInItsSlot) {
  std::vector<Tensor> parts, buffers;
  for (int64_t d = 0; d < kDevices; ++d) {
    parts.push_back(Block(d, 2, 3));
    buffers.push_back(Tensor(ElementType::kF32, {8, 3}));
  }
  std::vector<const Tensor*> part_ptrs;
  std::vector<Tensor*> destinations;
  for (int64_t d = 0; d < kDevices; ++d) {
    part_ptrs.push_back(&parts[d]);
    destinations.push_back(&buffers[d]);
  }
  // Rows 2d..2d+2 for member d; offset -1: member c receives from c + 1.
  const std::vector<int64_t> offsets = {0, 2, 4, 6};
  ASSERT_TRUE(ShiftInto(part_ptrs, -1, 0, offsets, destinations));
  for (int64_t c = 0; c < kDevices; ++c) {
    const int64_t source = (c + 1) % kDevices;
    for (int64_t i = 0; i < 8; ++i) {
      for (int64_t j = 0; j < 3; ++j) {
        const bool slot = i >= offsets[c] && i < offsets[c] + 2;
        const float expected = slot ? 100 * source + 10 * (i - offsets[c]) + j + 1 : 0;
        EXPECT_EQ(buffers[c].data<float>()[i * 3 + j], expected) << c << " " << i << " " << j;
      }
    }
  }
}

TEST(ShiftIntoTest, AColumnSlotIsAStridedCopy) {
  std::vector<Tensor> parts, buffers;
  std::vector<const Tensor*> part_ptrs;
  std::vector<Tensor*> destinations;
  for (int64_t d = 0; d < kDevices; ++d) {
    parts.push_back(Block(d, 3, 2));
    buffers.push_back(Tensor(ElementType::kF32, {3, 8}));
  }
  for (int64_t d = 0; d < kDevices; ++d) {
    part_ptrs.push_back(&parts[d]);
    destinations.push_back(&buffers[d]);
  }
  const std::vector<int64_t> offsets = {6, 0, 2, 4};
  ASSERT_TRUE(ShiftInto(part_ptrs, 1, -1, offsets, destinations));
  for (int64_t c = 0; c < kDevices; ++c) {
    const int64_t source = (c + kDevices - 1) % kDevices;
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 8; ++j) {
        const bool slot = j >= offsets[c] && j < offsets[c] + 2;
        const float expected = slot ? 100 * source + 10 * i + (j - offsets[c]) + 1 : 0;
        EXPECT_EQ(buffers[c].data<float>()[i * 8 + j], expected) << c << " " << i << " " << j;
      }
    }
  }
}

TEST(ShiftIntoTest, DeclinesWithEveryDestinationUnchangedWhereASlotDoesNotFit) {
  std::vector<Tensor> parts, buffers;
  std::vector<const Tensor*> part_ptrs;
  std::vector<Tensor*> destinations;
  for (int64_t d = 0; d < kDevices; ++d) {
    parts.push_back(Block(d, 2, 3));
    buffers.push_back(Tensor(ElementType::kF32, {8, 3}));
  }
  for (int64_t d = 0; d < kDevices; ++d) {
    part_ptrs.push_back(&parts[d]);
    destinations.push_back(&buffers[d]);
  }
  // The last member's offset is past the end: nobody's slot is written.
  EXPECT_FALSE(ShiftInto(part_ptrs, 1, 0, {0, 2, 4, 7}, destinations));
  // Another extent besides the dimension.
  Tensor wide(ElementType::kF32, {8, 4});
  std::vector<Tensor*> mixed = destinations;
  mixed[2] = &wide;
  EXPECT_FALSE(ShiftInto(part_ptrs, 1, 0, {0, 2, 4, 6}, mixed));
  for (const Tensor& buffer : buffers) {
    for (int64_t k = 0; k < buffer.num_elements(); ++k) EXPECT_EQ(buffer.data<float>()[k], 0);
  }
}

// Counts the moves: with the shift received in place, and into a block of its own.
MoveCountingBackend MoveCounter(bool receive_in_place) {
  return MoveCountingBackend({.receive_in_place = receive_in_place, .carried_in_slot = true});
}

// Each device's block %x lands at its predecessor-shifted rows of a buffer the program
// makes (a caller's argument is never written in place): the gathered value is 2 * %buf
// with rows 2r..2r+2 replaced by device r-1's %x. `$EXTRA` adds ops.
constexpr char kProgram[] = R"(mesh @m(tp=4)
spmd func @f(%x: f32[2, 3], %buf: f32[8, 3]) -> ($RESULTS) on @m {
  %r = rank() {axis = tp} : index
  %off = mul(%r, 2) : index
  %acc = add(%buf, %buf) : f32[8, 3]
  %got = shift(%x) {axis = tp, offset = 1} : f32[2, 3]
  %out = dynamic_update_slice(%acc, %got, %off) {dim = 0} : f32[8, 3]
$EXTRA}
)";

std::vector<std::vector<Tensor>> RunProgram(const std::string& extra,
                                            const std::string& results, MoveCountingBackend& backend) {
  std::string source = kProgram;
  source.replace(source.find("$RESULTS"), 8, results);
  source.replace(source.find("$EXTRA"), 6, extra);
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(source, diagnostics);
  EXPECT_NE(module, nullptr) << source;
  if (module == nullptr) return {};
  std::vector<std::vector<Tensor>> inputs(kDevices);
  for (int64_t d = 0; d < kDevices; ++d) {
    inputs[d].push_back(Block(d, 2, 3));
    Tensor buf(ElementType::kF32, {8, 3});
    for (int64_t k = 0; k < 24; ++k) buf.data<float>()[k] = -(k + 1) - 1000 * d;
    inputs[d].push_back(std::move(buf));
  }
  Interpreter interpreter(*module->functions()[0], backend);
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(inputs);
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  return outputs.ok() ? *std::move(outputs) : std::vector<std::vector<Tensor>>{};
}

// Device d's gathered value, written out element by element.
void ExpectGathered(const Tensor& out, int64_t d) {
  const int64_t source = (d + kDevices - 1) % kDevices;
  for (int64_t i = 0; i < 8; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      const int64_t k = i * 3 + j;
      const bool slot = i >= 2 * d && i < 2 * d + 2;
      const float expected =
          slot ? 100 * source + 10 * (i - 2 * d) + j + 1 : 2 * (-(k + 1) - 1000 * d);
      EXPECT_EQ(out.data<float>()[k], expected) << d << " " << i << " " << j;
    }
  }
}

TEST(ShiftIntoSlotTest, TheUpdateRunsNoCopy) {
  MoveCountingBackend backend = MoveCounter(/*receive_in_place=*/true);
  const std::vector<std::vector<Tensor>> outputs =
      RunProgram("  return %out\n", "f32[8, 3]", backend);
  ASSERT_EQ(outputs.size(), static_cast<size_t>(kDevices));
  for (int64_t d = 0; d < kDevices; ++d) ExpectGathered(outputs[d][0], d);
  EXPECT_EQ(backend.shifts_into_slots, 1);
  EXPECT_EQ(backend.received_bytes, kDevices * 2 * 3 * 4);
  EXPECT_EQ(backend.shifts_into_new_blocks, 0);
  EXPECT_EQ(backend.update_kernels, 0);
}

TEST(ShiftIntoSlotTest, ABackendThatDeclinesCopiesTheBlockAndIsStillRight) {
  MoveCountingBackend backend = MoveCounter(/*receive_in_place=*/false);
  const std::vector<std::vector<Tensor>> outputs =
      RunProgram("  return %out\n", "f32[8, 3]", backend);
  ASSERT_EQ(outputs.size(), static_cast<size_t>(kDevices));
  for (int64_t d = 0; d < kDevices; ++d) ExpectGathered(outputs[d][0], d);
  EXPECT_EQ(backend.shifts_into_new_blocks, 1);
  EXPECT_EQ(backend.update_kernels, kDevices);
  EXPECT_EQ(backend.update_bytes, kDevices * 2 * 3 * 4);
}

// The received block is read by another op too: it needs a buffer of its own, so the
// shift receives into one and the update copies it into its slot.
TEST(ShiftIntoSlotTest, ABlockReadElsewhereIsReceivedApartAndCopied) {
  MoveCountingBackend backend = MoveCounter(/*receive_in_place=*/true);
  const std::vector<std::vector<Tensor>> outputs =
      RunProgram("  %n = neg(%got) : f32[2, 3]\n  return %out, %n\n", "f32[8, 3], f32[2, 3]",
                 backend);
  ASSERT_EQ(outputs.size(), static_cast<size_t>(kDevices));
  for (int64_t d = 0; d < kDevices; ++d) {
    ExpectGathered(outputs[d][0], d);
    const int64_t source = (d + kDevices - 1) % kDevices;
    for (int64_t k = 0; k < 6; ++k) {
      EXPECT_EQ(outputs[d][1].data<float>()[k], -(100 * source + 10 * (k / 3) + k % 3 + 1));
    }
  }
  EXPECT_EQ(backend.shifts_into_slots, 0);
  EXPECT_EQ(backend.shifts_into_new_blocks, 1);
  EXPECT_EQ(backend.update_kernels, kDevices);
}

// The destination is a caller's argument, which the interpreter never hands over: the
// rule holds in the program, but at run time the shift receives apart and the update
// makes the gathered value in a buffer of its own, the caller's left as it was.
TEST(ShiftIntoSlotTest, ACallersBufferIsNotWritten) {
  MoveCountingBackend backend = MoveCounter(/*receive_in_place=*/true);
  const std::string extra =
      "  %got2 = shift(%x) {axis = tp, offset = 1} : f32[2, 3]\n"
      "  %out2 = dynamic_update_slice(%buf, %got2, %off) {dim = 0} : f32[8, 3]\n"
      "  return %out, %out2\n";
  const std::vector<std::vector<Tensor>> outputs =
      RunProgram(extra, "f32[8, 3], f32[8, 3]", backend);
  ASSERT_EQ(outputs.size(), static_cast<size_t>(kDevices));
  for (int64_t d = 0; d < kDevices; ++d) {
    ExpectGathered(outputs[d][0], d);
    const int64_t source = (d + kDevices - 1) % kDevices;
    for (int64_t i = 0; i < 8; ++i) {
      for (int64_t j = 0; j < 3; ++j) {
        const int64_t k = i * 3 + j;
        const bool slot = i >= 2 * d && i < 2 * d + 2;
        EXPECT_EQ(outputs[d][1].data<float>()[k],
                  slot ? 100 * source + 10 * (i - 2 * d) + j + 1 : -(k + 1) - 1000 * d);
      }
    }
  }
  // The first shift into %acc's slot; the second apart, copied by its update.
  EXPECT_EQ(backend.shifts_into_slots, 1);
  EXPECT_EQ(backend.shifts_into_new_blocks, 1);
  EXPECT_EQ(backend.update_kernels, kDevices);
}

}  // namespace
}  // namespace commir::cpu
