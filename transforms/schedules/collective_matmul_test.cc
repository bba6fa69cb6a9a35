// pipeline-collective-matmul and ring-collective-matmul: every schedule of small global
// programs, on meshes of 2, 4 and 8 devices, in f32 and bf16, runs on the cpu backend
// and equals the one-device run of the global program; and the schedules have the
// shape they promise (steps, streams, collectives left).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "transforms/schedules/ring_collective_matmul.h"
#include "transforms/schedules/schedule_report.h"
#include "testing/spmd_check.h"

namespace commir::schedules {
namespace {

// A global program, written with $N (mesh size), $H (half of it), $T (element type) and
// $8N, $4N (sizes that scale with the mesh so that every device's block is 8 or 4 rows).
struct Program {
  std::string name;
  std::string text;
  int pairs = 0;                // collective + matmul pairs the schedules rewrite
  int rewritten_matmuls = 0;    // matmuls inside those pairs
  int kept_collectives = 0;     // collectives executed that no schedule removes
  int lowered_collectives = 0;  // collectives of the lowered program (0: pairs)
  int scatters = 0;             // of the pairs, matmul -> reduce_scatter ones
  int scatter_matmuls = 0;      // matmuls inside those
};

std::string Instantiate(const std::string& text, int n, const std::string& type) {
  return absl::StrReplaceAll(text, {{"$8N", absl::StrCat(8 * n)},
                                    {"$H", absl::StrCat(n / 2)},
                                    {"$4N", absl::StrCat(4 * n)},
                                    {"$N", absl::StrCat(n)},
                                    {"$T", type}});
}

std::vector<Program> Programs() {
  return {
      {"ag_matmul",
       "mesh @m(tp=$N)\n"
       "func @f(%a: $T[$8N@tp, 32], %b: $T[32, $4N@tp]) -> $T[$8N, $4N@tp] {\n"
       "  %c = matmul(%a, %b)\n"
       "  return %c\n"
       "}\n",
       1, 1, 0},
      // The gathered value is operand b, split along N.
      {"ag_matmul_n",
       "mesh @m(tp=$N)\n"
       "func @f(%a: $T[$4N@tp, 32], %b: $T[32, $8N@tp]) -> $T[$4N@tp, $8N] {\n"
       "  %c = matmul(%a, %b)\n"
       "  return %c\n"
       "}\n",
       1, 1, 0},
      {"matmul_rs",
       "mesh @m(tp=$N)\n"
       "func @f(%x: $T[$8N, $4N@tp], %w: $T[$4N@tp, 16]) -> $T[$8N@tp, 16] {\n"
       "  %y = matmul(%x, %w)\n"
       "  return %y\n"
       "}\n",
       1, 1, 0, 0, 1, 1},
      // Scattered along N: operand b is sliced.
      {"matmul_rs_n",
       "mesh @m(tp=$N)\n"
       "func @f(%x: $T[16, $4N@tp], %w: $T[$4N@tp, $8N]) -> $T[16, $8N@tp] {\n"
       "  %y = matmul(%x, %w)\n"
       "  return %y\n"
       "}\n",
       1, 1, 0, 0, 1, 1},
      {"mlp",
       "mesh @m(tp=$N)\n"
       "func @f(%x: $T[$8N@tp, 32], %w1: $T[32, $4N@tp], %w2: $T[$4N@tp, 32]) -> $T[$8N@tp, 32] {\n"
       "  %h = matmul(%x, %w1) : $T[$8N, $4N@tp]\n"
       "  %a = gelu(%h)\n"
       "  %y = matmul(%a, %w2) : $T[$8N@tp, 32]\n"
       "  return %y\n"
       "}\n",
       2, 2, 0, 0, 1, 1},
      // Gathered along a batch dimension that b shares: b is sliced per block too.
      {"batched_ag",
       "mesh @m(tp=$N)\n"
       "func @f(%a: $T[$8N@tp, 4, 16], %b: $T[$8N, 16, 8]) -> $T[$8N, 4, 8] {\n"
       "  %g = reshard(%a) : $T[$8N, 4, 16]\n"
       "  %c = matmul(%g, %b) : $T[$8N, 4, 8]\n"
       "  return %c\n"
       "}\n",
       1, 1, 0},
      // Scattered along a batch dimension of both operands.
      {"batched_rs",
       "mesh @m(tp=$N)\n"
       "func @f(%x: $T[$8N, 4, $4N@tp], %w: $T[$8N, $4N@tp, 8]) -> $T[$8N@tp, 4, 8] {\n"
       "  %y = matmul(%x, %w)\n"
       "  return %y\n"
       "}\n",
       1, 1, 0, 0, 1, 1},
      // A sum of two matmuls scattered once (a gradient function's q/k/v input
      // gradient): each block's addend is the sum of both matmuls' blocks.
      {"summed_rs",
       "mesh @m(tp=$N)\n"
       "func @f(%x: $T[$8N, $4N@tp], %w: $T[$4N@tp, 16], %z: $T[$8N, $4N@tp], %v: $T[$4N@tp, 16]) "
       "-> $T[$8N@tp, 16] {\n"
       "  %p = matmul(%x, %w)\n"
       "  %q = matmul(%z, %v)\n"
       "  %y = add(%p, %q)\n"
       "  return %y\n"
       "}\n",
       1, 2, 0, 0, 1, 2},
      // A collective over an axis group of a 2-D mesh: shifts and ranks over (dp, tp).
      {"axis_group",
       "mesh @m(dp=2, tp=$H)\n"
       "func @f(%a: $T[$8N@(dp, tp), 16], %b: $T[16, 64]) -> $T[$8N, 64] {\n"
       "  %c = matmul(%a, %b)\n"
       "  return %c\n"
       "}\n",
       1, 1, 0},
      // Two matmuls share one gather (one loop); relu reads the gathered value the
      // schedule assembles from the blocks it moves (no all_gather is kept).
      {"shared_gather",
       "mesh @m(tp=$N)\n"
       "func @f(%x: $T[$8N@tp, 32], %wq: $T[32, $4N@tp], %wk: $T[32, $4N@tp]) -> "
       "($T[$8N, $4N@tp], $T[$8N, $4N@tp], $T[$8N, 32]) {\n"
       "  %g = reshard(%x) : $T[$8N, 32]\n"
       "  %q = matmul(%g, %wq)\n"
       "  %k = matmul(%g, %wk)\n"
       "  %e = relu(%g) : $T[$8N, 32]\n"
       "  return %q, %k, %e\n"
       "}\n",
       1, 2, 0, 1},
  };
}

struct Param {
  int n;
  std::string type;
};

class CollectiveMatmulTest : public ::testing::TestWithParam<Param> {};

int64_t StreamsUsedByCollectives(const commir::testing::SpmdCheck& check, int64_t stream) {
  int64_t count = 0;
  for (const runtime::OpEvent& e : check.events) {
    if (e.device == 0 && e.op->def().Has(kCollective) && e.stream == stream) ++count;
  }
  return count;
}

TEST_P(CollectiveMatmulTest, PipelinedEqualsGlobal) {
  const Param& p = GetParam();
  for (const Program& program : Programs()) {
    std::string text = Instantiate(program.text, p.n, p.type);
    for (int64_t chunks : {1, 2, 4, 8}) {
      const int64_t streams = chunks == 4 ? 3 : 2;
      SCOPED_TRACE(absl::StrFormat("%s n=%d %s chunks=%d streams=%d", program.name, p.n, p.type,
                                   chunks, streams));
      absl::StatusOr<commir::testing::SpmdCheck> check = commir::testing::CheckSpmd(
          text, "f",
          {.pipeline = absl::StrFormat("pipeline-collective-matmul{chunks=%d,streams=%d}", chunks,
                                       streams),
           .record_events = true});
      ASSERT_TRUE(check.ok()) << check.status();
      EXPECT_TRUE(check->pass) << check->report << check->lowered;
      ScheduleStats stats = ComputeScheduleStats(*check->module->FindFunction("f"));
      EXPECT_EQ(stats.shifts, 0);
      if (chunks == 1) {
        // Unchanged.
        EXPECT_EQ(stats.collectives,
                  program.lowered_collectives > 0 ? program.lowered_collectives : program.pairs);
        continue;
      }
      EXPECT_EQ(stats.collectives, program.pairs * chunks + program.kept_collectives)
          << check->lowered;
      EXPECT_EQ(stats.gemms, program.rewritten_matmuls * chunks) << check->lowered;
      // Chunk i's collective runs on stream i mod K: every stream gets its share.
      for (int64_t s = 0; s < std::min(chunks, streams); ++s) {
        EXPECT_GE(StreamsUsedByCollectives(*check, s), program.pairs) << "stream " << s;
      }
    }
  }
}

TEST_P(CollectiveMatmulTest, RingEqualsGlobal) {
  const Param& p = GetParam();
  const int64_t n = p.n;
  for (const Program& program : Programs()) {
    std::string text = Instantiate(program.text, p.n, p.type);
    for (RingDirection direction : {RingDirection::kUni, RingDirection::kBi}) {
      for (bool owner : {true, false}) {
        bool bi = direction == RingDirection::kBi;
        SCOPED_TRACE(absl::StrFormat("%s n=%d %s %s rs=%s", program.name, p.n, p.type,
                                     bi ? "bi" : "uni", owner ? "owner" : "ring"));
        absl::StatusOr<commir::testing::SpmdCheck> check = commir::testing::CheckSpmd(
            text, "f",
            {.pipeline = absl::StrCat("ring-collective-matmul{direction=", bi ? "bi" : "uni",
                                      ",rs=", owner ? "owner" : "ring", "}"),
             .record_events = true});
        ASSERT_TRUE(check.ok()) << check.status();
        EXPECT_TRUE(check->pass) << check->report << check->lowered;
        ScheduleStats stats = ComputeScheduleStats(*check->module->FindFunction("f"));
        // n-1 block transfers per pair, none wasted. bi (the blocks here are even) sends
        // n-1 half-blocks each way: twice the shifts, each half as long, and two half-block
        // GEMMs per step. The owner form's scatter goes one way whatever the direction: n-1
        // sends straight to the owners and n whole-block GEMMs.
        const int gathers = program.pairs - program.scatters;
        const int gather_matmuls = program.rewritten_matmuls - program.scatter_matmuls;
        const int ways = bi ? 2 : 1;
        const int scatter_ways = owner ? 1 : ways;
        EXPECT_EQ(stats.shifts, (gathers * ways + program.scatters * scatter_ways) * (n - 1))
            << check->lowered;
        EXPECT_EQ(stats.ring_steps, program.pairs * (n - 1)) << check->lowered;
        EXPECT_EQ(stats.collectives, program.kept_collectives) << check->lowered;
        EXPECT_EQ(stats.gemms, (gather_matmuls * ways + program.scatter_matmuls * scatter_ways) * n)
            << check->lowered;
        // Communication on side streams, compute on the main stream.
        for (const runtime::OpEvent& e : check->events) {
          if (e.op->Is(OpKind::kShift)) {
            EXPECT_EQ(e.stream, e.op->attrs().GetInt("offset", 1) > 0 ? 1 : 2);
          }
          if (e.op->Is(OpKind::kMatmul)) {
            EXPECT_EQ(e.stream, 0);
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, CollectiveMatmulTest,
                         ::testing::Values(Param{2, "f32"}, Param{4, "f32"}, Param{8, "f32"},
                                           Param{2, "bf16"}, Param{4, "bf16"}, Param{8, "bf16"}),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return absl::StrCat("n", info.param.n, "_", info.param.type);
                         });

}  // namespace
}  // namespace commir::schedules
