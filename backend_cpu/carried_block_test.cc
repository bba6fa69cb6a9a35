// A ring's carried block lives in its slot of the gathered value (runtime/in_place.h:
// CarriedBlockInSlot): each step's shift receives the next block straight into its slot,
// the next shift sends it from there and the matmuls read it there, so no update copies
// it. Checked against the gathered value and product written out here (integer-valued
// inputs, exact in f32), against the single-device program for the ring schedule of a
// layer whose weight gradient reads the gathered rows, bit for bit against the same run
// with every block copied, and by counting the copies the interpreter asks for.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "backend_cpu/cpu_backend.h"
#include "backend_cpu/move_counting_backend.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "runtime/in_place.h"
#include "runtime/interpreter.h"
#include "runtime/memory_estimate.h"
#include "runtime/tensor.h"
#include "testing/spmd_check.h"

namespace commir::cpu {
namespace {

using runtime::Tensor;

// Counts the copies: with the carried block in its slot, and copying it.
MoveCountingBackend CopyCounter(bool carried_in_slot) {
  return MoveCountingBackend({.receive_in_place = true, .carried_in_slot = carried_in_slot});
}

constexpr int64_t kDevices = 4;

// A ring all-gather of %x (rows 2s..2s+2 of %g from device s) that multiplies each block
// by %w on the way (%c = %g %w), the ring schedules' form. $OFF is the body's offset of
// the block from device %src; $BODY and $AFTER add ops.
constexpr char kRing[] = R"(mesh @m(tp=4)
spmd func @f(%x: f32[2, 3], %w: f32[3, 5]) -> (f32[8, 3], f32[8, 5]$RESULTS) on @m {
  %r = rank() {axis = tp} : index
  %g_init = full() {value = 0.0} : f32[8, 3]
  %c_init = full() {value = 0.0} : f32[8, 5]
  %g_part, %c_part, %blk_last = for %i = 0 to 3 step 1 iter(%g_acc = %g_init, %c_acc = %c_init, %blk = %x) {
    %blk_next = shift(%blk) {axis = tp, offset = 1} : f32[2, 3]
    %src_raw = sub(%r, %i) : index
    %src = rem(%src_raw, 4) : index
    %off = $OFF
    %c_blk = matmul(%blk, %w) : f32[2, 5]
    %c_acc_1 = dynamic_update_slice(%c_acc, %c_blk, %off) {dim = 0} : f32[8, 5]
$BODY    %g_acc_1 = dynamic_update_slice(%g_acc, %blk, %off) {dim = 0} : f32[8, 3]
    yield %g_acc_1, %c_acc_1, %blk_next
  } : (f32[8, 3], f32[8, 5], f32[2, 3])
  %src_last_raw = add(%r, 1) : index
  %src_last = rem(%src_last_raw, 4) : index
  %off_1 = $OFF_LAST
  %c_blk_1 = matmul(%blk_last, %w) : f32[2, 5]
  %c = dynamic_update_slice(%c_part, %c_blk_1, %off_1) {dim = 0} : f32[8, 5]
  %g = dynamic_update_slice(%g_part, %blk_last, %off_1) {dim = 0} : f32[8, 3]
$AFTER}
)";

struct RingCase {
  std::string off = "mul(%src, 2) : index";
  std::string off_last = "mul(%src_last, 2) : index";
  std::string body;
  std::string after = "  return %g, %c\n";
  std::string results;
};

std::unique_ptr<Module> ParseRing(const RingCase& c) {
  const std::string source =
      absl::StrReplaceAll(kRing, {{"$OFF_LAST", c.off_last}, {"$OFF", c.off}, {"$BODY", c.body},
                                  {"$AFTER", c.after}, {"$RESULTS", c.results}});
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(source, diagnostics);
  EXPECT_NE(module, nullptr) << source;
  return module;
}

// Device d's %x: element (i, j) = 10 * d + 3 * i + j + 1; %w: (k, n) = k - n (small
// integers, so every product and sum is exact in f32).
float X(int64_t d, int64_t i, int64_t j) { return static_cast<float>(10 * d + 3 * i + j + 1); }
float W(int64_t k, int64_t n) { return static_cast<float>(k - n); }

std::vector<std::vector<Tensor>> Inputs() {
  std::vector<std::vector<Tensor>> inputs(kDevices);
  for (int64_t d = 0; d < kDevices; ++d) {
    Tensor x(ElementType::kF32, {2, 3}), w(ElementType::kF32, {3, 5});
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 3; ++j) x.data<float>()[i * 3 + j] = X(d, i, j);
    }
    for (int64_t k = 0; k < 3; ++k) {
      for (int64_t n = 0; n < 5; ++n) w.data<float>()[k * 5 + n] = W(k, n);
    }
    inputs[d].push_back(std::move(x));
    inputs[d].push_back(std::move(w));
  }
  return inputs;
}

std::vector<std::vector<Tensor>> RunRing(const Module& module, MoveCountingBackend& backend) {
  runtime::Interpreter interpreter(*module.functions()[0], backend);
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(Inputs());
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  return outputs.ok() ? *std::move(outputs) : std::vector<std::vector<Tensor>>{};
}

// %g and %c when row block s of %g is `source(s)`'s %x (-1: zeros).
template <typename Source>
void ExpectGatheredAndProduct(const std::vector<Tensor>& out, Source source) {
  ASSERT_GE(out.size(), 2u);
  for (int64_t s = 0; s < 4; ++s) {
    const int64_t from = source(s);
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 3; ++j) {
        EXPECT_EQ(out[0].data<float>()[(2 * s + i) * 3 + j], from < 0 ? 0 : X(from, i, j))
            << "g row " << 2 * s + i << " col " << j;
      }
      for (int64_t n = 0; n < 5; ++n) {
        double sum = 0;
        for (int64_t k = 0; k < 3; ++k) sum += from < 0 ? 0 : X(from, i, k) * W(k, n);
        EXPECT_EQ(out[1].data<float>()[(2 * s + i) * 5 + n], static_cast<float>(sum))
            << "c row " << 2 * s + i << " col " << n;
      }
    }
  }
}

TEST(CarriedBlockInSlotTest, TheRingsBlocksAreReceivedInTheirSlotsAndNeverCopied) {
  std::unique_ptr<Module> module = ParseRing({});
  ASSERT_NE(module, nullptr);
  MoveCountingBackend in_slot = CopyCounter(/*carried_in_slot=*/true);
  MoveCountingBackend copying = CopyCounter(/*carried_in_slot=*/false);
  const std::vector<std::vector<Tensor>> got = RunRing(*module, in_slot);
  const std::vector<std::vector<Tensor>> copied = RunRing(*module, copying);
  ASSERT_EQ(got.size(), static_cast<size_t>(kDevices));
  ASSERT_EQ(copied.size(), static_cast<size_t>(kDevices));
  for (int64_t d = 0; d < kDevices; ++d) {
    ExpectGatheredAndProduct(got[d], [](int64_t s) { return s; });
    ExpectGatheredAndProduct(copied[d], [](int64_t s) { return s; });
  }
  // Three steps, each shift received in its slot; the second and third send the block
  // from the slot the step before received it in.
  EXPECT_EQ(in_slot.shifts_into_slots, 3);
  EXPECT_EQ(in_slot.sent_from_slots, 2 * kDevices);
  EXPECT_EQ(in_slot.shifts_into_new_blocks, 0);
  // The one copy left is the device's own block, written once into the gathered value.
  EXPECT_EQ(in_slot.update_kernels, kDevices);
  EXPECT_EQ(in_slot.update_bytes, kDevices * 2 * 3 * 4);
  // Copying: each step's update and the last one copy a block.
  EXPECT_EQ(copying.shifts_into_new_blocks, 3);
  EXPECT_EQ(copying.update_kernels, 4 * kDevices);
  EXPECT_EQ(copying.update_bytes, 4 * kDevices * 2 * 3 * 4);
  std::printf("ring all-gather of 4 blocks on %lld devices: %lld block bytes copied by "
              "updates, %lld with the carried block in its slot\n",
              static_cast<long long>(kDevices), static_cast<long long>(copying.update_bytes),
              static_cast<long long>(in_slot.update_bytes));
}

// Where the rule does not hold the ring copies each block, and is still right.
TEST(CarriedBlockInSlotTest, ARingWhereTheConditionFailsCopiesAndIsRight) {
  // The block is also read by an elementwise op (no view): it needs a tensor of its own.
  RingCase read = {};
  read.body = "    %n = neg(%blk) : f32[2, 3]\n";
  // The gathered value's loop result is read besides the last update.
  RingCase twice = {};
  twice.after = "  return %g, %c, %g_part\n";
  twice.results = ", f32[8, 3]";
  for (const RingCase& c : {read, twice}) {
    std::unique_ptr<Module> module = ParseRing(c);
    ASSERT_NE(module, nullptr);
    int rings = 0;
    WalkOps(module->functions()[0]->body(),
            [&](Operation* op) { rings += runtime::CarriedBlockInSlot(*op).has_value(); });
    EXPECT_EQ(rings, 0);
    MoveCountingBackend backend = CopyCounter(/*carried_in_slot=*/true);
    const std::vector<std::vector<Tensor>> got = RunRing(*module, backend);
    ASSERT_EQ(got.size(), static_cast<size_t>(kDevices));
    for (int64_t d = 0; d < kDevices; ++d) {
      ExpectGatheredAndProduct(got[d], [](int64_t s) { return s; });
    }
    EXPECT_EQ(backend.shifts_into_slots, 0);
    EXPECT_EQ(backend.shifts_into_new_blocks, 3);
    EXPECT_GE(backend.update_kernels, 4 * kDevices);
  }
}

// The rule holds in the program, but at run time every step's slot is the same one: the
// block a step sends would be overwritten by its own shift, so the ring is run as
// written (received apart, copied), the last block winning the slot.
TEST(CarriedBlockInSlotTest, SlotsThatOverlapAtRunTimeAreCopiedAndRight) {
  RingCase same;
  same.off = "mul(%src, 0) : index";
  same.off_last = "mul(%src_last, 0) : index";
  std::unique_ptr<Module> module = ParseRing(same);
  ASSERT_NE(module, nullptr);
  int rings = 0;
  WalkOps(module->functions()[0]->body(),
          [&](Operation* op) { rings += runtime::CarriedBlockInSlot(*op).has_value(); });
  EXPECT_EQ(rings, 1);
  MoveCountingBackend backend = CopyCounter(/*carried_in_slot=*/true);
  const std::vector<std::vector<Tensor>> got = RunRing(*module, backend);
  ASSERT_EQ(got.size(), static_cast<size_t>(kDevices));
  for (int64_t d = 0; d < kDevices; ++d) {
    // Rows 0..2 hold the last block, from device d + 1 (three shifts along the ring).
    ExpectGatheredAndProduct(got[d], [d](int64_t s) { return s == 0 ? (d + 1) % kDevices : -1; });
  }
  EXPECT_EQ(backend.shifts_into_slots, 0);
  EXPECT_EQ(backend.shifts_into_new_blocks, 3);
  EXPECT_EQ(backend.update_kernels, 4 * kDevices);
}

// A linear layer's forward and weight gradient on sequence-split rows: the ring schedule
// passes x's blocks on and assembles the gathered x the weight gradient reads.
constexpr char kLinear[] = R"(mesh @m(tp=$N)
func @f(%x: f32[32@tp, 8], %w: f32[8, 24@tp], %dy: f32[32, 24@tp]) -> (f32[32, 24@tp], f32[8, 24@tp]) {
  %y = matmul(%x, %w) : f32[32, 24@tp]
  %dw = matmul(%x, %dy) {transpose_a} : f32[8, 24@tp]
  return %y, %dw
}
)";

TEST(CarriedBlockInSlotTest, RingScheduleMatchesOneDeviceAndTheCopyingRunBitForBit) {
  for (int devices : {2, 4, 8}) {
    SCOPED_TRACE(devices);
    const std::string source = absl::StrReplaceAll(kLinear, {{"$N", absl::StrCat(devices)}});
    testing::SpmdCheckOptions options;
    options.seed = 7;
    options.pipeline = "ring-collective-matmul";
    absl::StatusOr<testing::SpmdCheck> check = testing::CheckSpmd(source, "f", options);
    ASSERT_TRUE(check.ok()) << check.status();
    EXPECT_TRUE(check->pass) << check->report << check->lowered;
    const Function& function = *check->module->FindFunction("f");
    int rings = 0;
    WalkOps(function.body(),
            [&](Operation* op) { rings += runtime::CarriedBlockInSlot(*op).has_value(); });
    EXPECT_EQ(rings, 1) << check->lowered;
    // Each device's inputs: its parts, from a fixed pattern.
    std::vector<std::vector<Tensor>> inputs(devices);
    for (int d = 0; d < devices; ++d) {
      for (const Value* arg : function.body()->arguments()) {
        Tensor t(arg->type().element_type(), arg->type().dims());
        for (int64_t k = 0; k < t.num_elements(); ++k) {
          t.data<float>()[k] = static_cast<float>(std::sin(0.37 * k + 1.3 * d + arg->index()));
        }
        inputs[d].push_back(std::move(t));
      }
    }
    MoveCountingBackend in_slot = CopyCounter(true), copying = CopyCounter(false);
    absl::StatusOr<std::vector<std::vector<Tensor>>> got =
        runtime::Interpreter(function, in_slot).Run(inputs);
    absl::StatusOr<std::vector<std::vector<Tensor>>> copied =
        runtime::Interpreter(function, copying).Run(inputs);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(copied.ok()) << copied.status();
    for (int d = 0; d < devices; ++d) {
      ASSERT_EQ((*got)[d].size(), (*copied)[d].size());
      for (size_t r = 0; r < (*got)[d].size(); ++r) {
        const Tensor& a = (*got)[d][r];
        const Tensor& b = (*copied)[d][r];
        ASSERT_EQ(a.byte_size(), b.byte_size());
        EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()), 0)
            << "device " << d << " result " << r;
      }
    }
    // Copying, each of the devices - 1 steps' updates and the last copy a block of x
    // (32 / devices rows of 8 floats) on every device; in the slot only the first.
    const int64_t block_bytes = 32 / devices * 8 * 4;
    EXPECT_EQ(in_slot.shifts_into_new_blocks, 0);
    EXPECT_EQ(in_slot.update_bytes, devices * block_bytes);
    EXPECT_EQ(copying.update_bytes, devices * devices * block_bytes);
  }
}

}  // namespace
}  // namespace commir::cpu
