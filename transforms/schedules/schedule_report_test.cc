// schedule-report's loop fast-forward: for every trip count up to well past the point
// where it starts skipping iterations, the report equals a run of every iteration; a
// loop of 10^12 trips reports its exact counts (the old simulation never returned);
// counts beyond int64 are reported, not wrapped.
#include "transforms/schedules/schedule_report.h"

#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "transforms/test_util.h"

namespace commir::schedules {
namespace {

// Loop programs over TRIPS (replaced by the test), one pattern of carried buffers each.
struct LoopProgram {
  const char* name;
  const char* text;
};

const LoopProgram kPrograms[] = {
    // A ring: the block is shifted on stream 1 while the GEMM writes its product into
    // the accumulator in place.
    {"ring", R"(mesh @m(tp=4)
spmd func @f(%a: f32[8, 16], %b: f32[16, 4]) -> f32[32, 4] on @m {
  %r = rank() {axis = tp} : index
  %z = full() {value = 0.0} : f32[32, 4]
  %out, %last = for %i = 0 to TRIPS step 1 iter(%acc = %z, %blk = %a) {
    %next = shift(%blk) {axis = tp, offset = 1, stream = 1} : f32[8, 16]
    %src = sub(%r, %i) : index
    %src4 = rem(%src, 4) : index
    %off = mul(%src4, 8) : index
    %p = matmul(%blk, %b) : f32[8, 4]
    %acc1 = dynamic_update_slice(%acc, %p, %off) {dim = 0} : f32[32, 4]
    yield %acc1, %next
  } : (f32[32, 4], f32[8, 16])
  return %out
})"},
    // Two carried values that swap without new buffers: the iterations repeat with
    // period 2, not 1.
    {"swap", R"(mesh @m(tp=4)
spmd func @f(%a: f32[8, 16], %b: f32[8, 16]) -> (f32[8, 16], f32[8, 16]) on @m {
  %x0 = neg(%a) : f32[8, 16]
  %out0, %out1 = for %i = 0 to TRIPS step 1 iter(%x = %x0, %y = %b) {
    yield %y, %x
  } : (f32[8, 16], f32[8, 16])
  return %out0, %out1
})"},
    // A rotation through three slots: each buffer lives three iterations, and the ones
    // returned are created in the last three.
    {"rotation", R"(mesh @m(tp=4)
spmd func @f(%a: f32[8, 16]) -> (f32[8, 16], f32[8, 16], f32[8, 16]) on @m {
  %o0, %o1, %o2 = for %i = 0 to TRIPS step 1 iter(%x = %a, %y = %a, %w = %a) {
    %n = shift(%x) {axis = tp, offset = 1, stream = 2} : f32[8, 16]
    %g = all_gather(%y) {axis = tp, dim = 0} : f32[32, 16]
    %h = slice(%g) {start = [0, 0], size = [8, 16]} : f32[8, 16]
    yield %n, %x, %h
  } : (f32[8, 16], f32[8, 16], f32[8, 16])
  return %o0, %o1, %o2
})"},
    // Nested loops, a stream chosen by the index, an init that stays live after the
    // loop (so the first update is a copy, the others in place), an outer value yielded.
    {"nested", R"(mesh @m(tp=4)
spmd func @f(%a: f32[8, 16], %b: f32[16, 4]) -> (f32[32, 4], f32[32, 4], f32[8, 16]) on @m {
  %z = full() {value = 0.0} : f32[32, 4]
  %out, %w = for %i = 0 to TRIPS step 1 iter(%acc = %z, %v = %a) {
    %st = rem(%i, 2) : index
    %inner = for %j = 0 to 3 step 1 iter(%u = %v) {
      %s = shift(%u) {axis = tp, offset = -1, stream = %st} : f32[8, 16]
      yield %s
    } : f32[8, 16]
    %p = matmul(%inner, %b) : f32[8, 4]
    %acc1 = dynamic_update_slice(%acc, %p, %st) {dim = 0} : f32[32, 4]
    %r = reduce_scatter(%acc1) {axis = tp, dim = 0} : f32[8, 4]
    yield %acc1, %a
  } : (f32[32, 4], f32[8, 16])
  return %out, %z, %w
})"},
};

std::unique_ptr<Module> Parse(const LoopProgram& program, absl::string_view trips) {
  return testing::ParseForTest(absl::StrReplaceAll(program.text, {{"TRIPS", trips}}));
}

void ExpectSameStats(const ScheduleStats& a, const ScheduleStats& b) {
  EXPECT_EQ(a.collectives, b.collectives);
  EXPECT_EQ(a.shifts, b.shifts);
  EXPECT_EQ(a.ring_steps, b.ring_steps);
  EXPECT_EQ(a.ring_bytes, b.ring_bytes);
  EXPECT_EQ(a.gemms, b.gemms);
  EXPECT_EQ(a.attentions, b.attentions);
  EXPECT_EQ(a.bytes_per_device, b.bytes_per_device);
  EXPECT_EQ(a.peak_extra_bytes, b.peak_extra_bytes);
  EXPECT_EQ(a.overflow_at, nullptr);
  EXPECT_EQ(b.overflow_at, nullptr);
}

TEST(ScheduleReportTest, FastForwardEqualsRunningEveryIteration) {
  for (const LoopProgram& program : kPrograms) {
    for (int trips = 0; trips <= 48; ++trips) {
      SCOPED_TRACE(absl::StrCat(program.name, " with ", trips, " trips"));
      std::unique_ptr<Module> module = Parse(program, absl::StrCat(trips));
      ASSERT_NE(module, nullptr);
      const Function& f = *module->FindFunction("f");
      ExpectSameStats(ComputeScheduleStats(f, LoopSimulation::kFastForward),
                      ComputeScheduleStats(f, LoopSimulation::kEveryIteration));
    }
  }
}

// The peak of a long loop is that of a short one (its iterations repeat), and every
// count is per-iteration work times 10^12.
TEST(ScheduleReportTest, TrillionTripLoopReportsExactCounts) {
  constexpr int64_t kTrips = 1'000'000'000'000;
  for (const LoopProgram& program : kPrograms) {
    SCOPED_TRACE(program.name);
    std::unique_ptr<Module> shorter = Parse(program, "100");
    std::unique_ptr<Module> longer = Parse(program, absl::StrCat(kTrips));
    ASSERT_NE(shorter, nullptr);
    ASSERT_NE(longer, nullptr);
    ScheduleStats s = ComputeScheduleStats(*shorter->FindFunction("f"));
    ScheduleStats l = ComputeScheduleStats(*longer->FindFunction("f"));
    ASSERT_EQ(l.overflow_at, nullptr);
    EXPECT_EQ(l.shifts, s.shifts / 100 * kTrips);
    EXPECT_EQ(l.collectives, s.collectives / 100 * kTrips);
    EXPECT_EQ(l.gemms, s.gemms / 100 * kTrips);
    EXPECT_EQ(l.ring_steps, s.ring_steps / 100 * kTrips);
    EXPECT_EQ(l.bytes_per_device, s.bytes_per_device / 100 * kTrips);
    EXPECT_EQ(l.ring_bytes, s.ring_bytes / 100 * kTrips);
    EXPECT_EQ(l.peak_extra_bytes, s.peak_extra_bytes);
  }
  // The ring by hand: one shift of 8x16 f32 (512 bytes) and one GEMM per trip.
  std::unique_ptr<Module> ring = Parse(kPrograms[0], absl::StrCat(kTrips));
  ScheduleStats r = ComputeScheduleStats(*ring->FindFunction("f"));
  EXPECT_EQ(r.shifts, kTrips);
  EXPECT_EQ(r.gemms, kTrips);
  EXPECT_EQ(r.bytes_per_device, 512.0 * kTrips);
}

// The peak by hand, on the liveness shared with the interpreter (commir/liveness.h):
// every f32[8, 4] is 128 bytes and the arguments and the returned buffer do not count.
// %u is unused and dies with its op (w + u = 640); %w is used only inside the loop and
// lives until the loop ends, so from the second trip w, the carried y and the new y are
// live at once (384). Releasing %u late would give 896; releasing %w at its definition
// would give 256 in the loop.
TEST(ScheduleReportTest, PeakFollowsLastUsesByHand) {
  std::unique_ptr<Module> module = testing::ParseForTest(R"(mesh @m(tp=4)
spmd func @f(%a: f32[8, 4]) -> f32[8, 4] on @m {
  %w = neg(%a) : f32[8, 4]
  %u = all_gather(%a) {axis = tp, dim = 0} : f32[32, 4]
  %r = for %i = 0 to 3 step 1 iter(%x = %a) {
    %y = add(%x, %w) : f32[8, 4]
    yield %y
  } : f32[8, 4]
  %z = neg(%r) : f32[8, 4]
  return %z
}
spmd func @g(%a: f32[8, 4]) -> f32[8, 4] on @m {
  %w = neg(%a) : f32[8, 4]
  %r = for %i = 0 to 3 step 1 iter(%x = %a) {
    %y = add(%x, %w) : f32[8, 4]
    yield %y
  } : f32[8, 4]
  return %r
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(ComputeScheduleStats(*module->FindFunction("f")).peak_extra_bytes, 640);
  // Without %u: w, y of trip 1 and y of trip 2 (the last trip's y is returned).
  EXPECT_EQ(ComputeScheduleStats(*module->FindFunction("g")).peak_extra_bytes, 384);
}

TEST(ScheduleReportTest, CountsBeyondInt64AreFlaggedAtTheLoop) {
  std::unique_ptr<Module> module = testing::ParseForTest(R"(mesh @m(tp=4)
spmd func @f(%a: f32[8, 4]) -> f32[8, 4] on @m {
  %r0 = for %i = 0 to 4611686018427387904 step 1 iter(%x = %a) {
    %r1 = for %j = 0 to 8 step 1 iter(%y = %x) {
      %z = shift(%y) {axis = tp, offset = 1, stream = 1} : f32[8, 4]
      yield %z
    } : f32[8, 4]
    yield %r1
  } : f32[8, 4]
  return %r0
})");
  ASSERT_NE(module, nullptr);
  const Function& f = *module->FindFunction("f");
  ScheduleStats s = ComputeScheduleStats(f);
  ASSERT_NE(s.overflow_at, nullptr);
  EXPECT_TRUE(s.overflow_at->Is(OpKind::kFor));
  // The formatted report says so instead of printing the counts reached before it.
  EXPECT_EQ(FormatScheduleReport(*module),
            absl::StrCat("// schedule-report @f: counts do not fit in int64 (the loop at ",
                         s.overflow_at->loc().line, ":", s.overflow_at->loc().col, ")\n"));
}

}  // namespace
}  // namespace commir::schedules
