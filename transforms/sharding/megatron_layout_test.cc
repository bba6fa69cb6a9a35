// The megatron-layout pass on the single-device Llama- and GPT-style blocks of
// testdata/layout/: laid out, partitioned by the default spmd pipeline and run on 2 and
// 4 cpu devices, every function computes what the unannotated program computes on one
// device; and the partitioner finds Megatron-LM's collectives for the layout (Korthikanti
// et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", Fig. 5:
// with sequence parallelism a layer's forward is two all-gathers and two
// reduce-scatters of one [sequence, hidden] activation; without it, two all-reduces).
#include "transforms/sharding/megatron_layout.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "commir/element_type.h"
#include "commir/ir.h"
#include "testing/spmd_check.h"
#include "transforms/sharding/comm_report.h"
#include "transforms/test_util.h"

namespace commir::sharding {
namespace {

using ::testing::HasSubstr;
using ::commir::testing::ApplyPassPipeline;
using ::commir::testing::CheckSpmd;
using ::commir::testing::SpmdCheck;
using ::commir::testing::SpmdCheckOptions;

// testdata/layout/llama_block.commir and gpt_block.commir (the test's arguments).
std::string g_llama_path;
std::string g_gpt_path;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Layout {
  int tp;
  int cp;
  bool sp;
  std::string Pipeline() const {
    return absl::StrCat("megatron-layout{tp=", tp, ", cp=", cp, ", sp=", sp ? "true" : "false",
                        "}, propagate-sharding, lower-to-spmd, canonicalize, cse, dce");
  }
};

// 2 and 4 devices: tensor parallelism with and without sequence parallelism, context
// parallelism, and both. The Llama block's 2 key/value heads split over tp=2 and stay
// whole over tp=4.
constexpr Layout kLayouts[] = {{2, 1, false}, {2, 1, true},  {4, 1, false}, {4, 1, true},
                               {1, 2, false}, {1, 4, false}, {2, 2, true},  {2, 2, false}};

TEST(MegatronLayoutPass, PartitionedMatchesTheSingleDeviceProgram) {
  for (const std::string& path : {g_llama_path, g_gpt_path}) {
    const std::string text = ReadFile(path);
    ASSERT_FALSE(text.empty()) << "cannot read " << path;
    std::unique_ptr<Module> single = testing::ParseForTest(text);
    ASSERT_NE(single, nullptr);
    for (const Function* f : single->functions()) {
      for (const Layout& l : kLayouts) {
        SCOPED_TRACE(absl::StrCat(path, " @", f->name(), " ", l.Pipeline()));
        SpmdCheckOptions options;
        options.seed = 11;
        options.default_pipeline = false;
        options.pipeline = l.Pipeline();
        // The reference is @f of `single`, the unannotated program, on one device.
        absl::StatusOr<SpmdCheck> check = CheckSpmd(*single, f->name(), options);
        ASSERT_TRUE(check.ok()) << check.status();
        EXPECT_TRUE(check->pass) << check->report;
        const Function* lowered = check->module->FindFunction(f->name());
        ASSERT_NE(lowered, nullptr);
        EXPECT_TRUE(lowered->is_spmd());
        EXPECT_EQ(lowered->mesh()->num_devices(), l.tp * l.cp);
      }
    }
  }
}

int64_t CountOf(const FunctionCommReport& report, OpKind kind) {
  for (const CollectiveTotals& c : report.collectives) {
    if (c.kind == kind) return c.count;
  }
  return 0;
}

double BytesOf(const FunctionCommReport& report, OpKind kind) {
  for (const CollectiveTotals& c : report.collectives) {
    if (c.kind == kind) return c.bytes_per_device;
  }
  return 0;
}

// The layer's collectives after the layout, against Megatron-LM's: one [batch x
// sequence, hidden] f32 activation is 2 x 8 x 16 x 4 bytes; an all-gather or a
// reduce-scatter over n devices moves (n-1)/n of it per device, an all-reduce twice that.
TEST(MegatronLayoutPass, TheLayerGetsMegatronsCollectives) {
  for (const std::string& path : {g_llama_path, g_gpt_path}) {
    for (const Layout& l : {Layout{2, 1, true}, Layout{4, 1, true}, Layout{2, 1, false},
                            Layout{4, 1, false}}) {
      SCOPED_TRACE(absl::StrCat(path, " ", l.Pipeline()));
      std::unique_ptr<Module> module = testing::ParseForTest(ReadFile(path));
      ASSERT_NE(module, nullptr);
      ASSERT_TRUE(ApplyPassPipeline(l.Pipeline(), *module).ok());
      const FunctionCommReport report = ComputeCommReport(*module->FindFunction("layer"));
      const double activation = 2.0 * 8 * 16 * 4;
      const double n = l.tp;
      if (l.sp) {
        EXPECT_EQ(report.total_count(), 4);
        EXPECT_EQ(CountOf(report, OpKind::kAllGather), 2);
        EXPECT_EQ(CountOf(report, OpKind::kReduceScatter), 2);
        EXPECT_DOUBLE_EQ(BytesOf(report, OpKind::kAllGather), 2 * activation * (n - 1) / n);
        EXPECT_DOUBLE_EQ(BytesOf(report, OpKind::kReduceScatter), 2 * activation * (n - 1) / n);
      } else {
        EXPECT_EQ(report.total_count(), 2);
        EXPECT_EQ(CountOf(report, OpKind::kAllReduce), 2);
      }
    }
  }
}

// A model the rules cannot map is an error at the place that shows why, naming the
// function; the layout of a module that has a mesh already is refused at the mesh.
TEST(MegatronLayoutPass, AModelItCannotMapIsALocatedError) {
  struct Case {
    MegatronLayoutOptions options;
    const char* text;
    Location loc;
    const char* message;
  };
  const Case cases[] = {
      {{3, 1, false},
       "func @f(%x: f32[2, 8, 16], %g: f32[16], %w: f32[16, 16]) -> f32[2, 8, 16] {\n"
       "  %h = rmsnorm(%x, %g)\n  %y = matmul(%h, %w)\n  return %y\n}\n",
       {1, 41}, "@f: %w's dimension 1 (16) does not split over 3 devices"},
      {{2, 1, true},
       "func @f(%x: f32[2, 9, 16], %g: f32[16]) -> f32[2, 9, 16] {\n  return %x\n}\n",
       {1, 9}, "@f: %x's dimension 1 (9) does not split over 2 devices"},
      {{2, 1, false},
       "func @f(%x: f32[2, 8, 16], %w: f32[16, 16]) -> f32[2, 8, 16] {\n"
       "  %y = matmul(%x, %w)\n  return %y\n}\n",
       {2, 8}, "@f: a matmul neither after a norm (column-parallel) nor of tp-split columns"},
      {{2, 1, false},
       "func @f(%x: f32[2, 8, 16], %g: f32[16]) -> f32[2, 8] {\n"
       "  %h = rmsnorm(%x, %g)\n  %s = reduce_sum(%h) {dims = [2]}\n  return %s\n}\n",
       {3, 8}, "@f: no Megatron layout rule for `reduce_sum`"},
      // An attention written as matmuls needs every key: no cp.
      {{1, 2, false},
       "func @f(%x: f32[2, 8, 16], %g: f32[16], %wq: f32[16, 16], %wk: f32[16, 16]) -> "
       "f32[2, 2, 8, 8] {\n"
       "  %h = rmsnorm(%x, %g)\n  %q = matmul(%h, %wq)\n  %k = matmul(%h, %wk)\n"
       "  %q4 = reshape(%q) : f32[2, 8, 2, 8]\n  %k4 = reshape(%k) : f32[2, 8, 2, 8]\n"
       "  %qh = transpose(%q4) {perm = [0, 2, 1, 3]}\n"
       "  %kh = transpose(%k4) {perm = [0, 2, 1, 3]}\n"
       "  %s = matmul(%qh, %kh) {transpose_b}\n  return %s\n}\n",
       {9, 8}, "@f: an attention written as batched matmuls needs the whole sequence"},
      {{1, 2, false}, "func @f(%x: f32[2, 8]) -> f32[2, 8] {\n  return %x\n}\n", {1, 1},
       "@f: the first argument is not the residual stream [batch, seq, hidden]"},
      {{2, 1, false},
       "mesh @m(tp=2)\n\nfunc @f(%x: f32[2, 8, 16]) -> f32[2, 8, 16] {\n  return %x\n}\n",
       {1, 1}, "the module has a mesh (@m)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    std::unique_ptr<Module> module = testing::ParseForTest(c.text);
    ASSERT_NE(module, nullptr);
    DiagnosticEngine diagnostics;
    EXPECT_FALSE(LayOutMegatron(*module, c.options, diagnostics).ok());
    ASSERT_EQ(diagnostics.size(), 1u);
    const Diagnostic d = diagnostics.Sorted()[0];
    EXPECT_EQ(d.loc.line, c.loc.line);
    EXPECT_EQ(d.loc.col, c.loc.col);
    EXPECT_THAT(d.message, HasSubstr(c.message));
  }
}

// The pass's options are range-checked when the pipeline is parsed.
TEST(MegatronLayoutPass, OptionsOutOfRangeAreBadUsage) {
  for (const char* pipeline : {"megatron-layout{tp=0}", "megatron-layout{cp=0}",
                               "megatron-layout{tp=65537}", "megatron-layout{sp=2}"}) {
    std::unique_ptr<Module> module = testing::ParseForTest(ReadFile(g_gpt_path));
    ASSERT_NE(module, nullptr);
    absl::Status s = ApplyPassPipeline(pipeline, *module);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << pipeline << ": " << s;
  }
}

}  // namespace
}  // namespace commir::sharding

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s LLAMA_BLOCK.commir GPT_BLOCK.commir\n", argv[0]);
    return 2;
  }
  commir::sharding::g_llama_path = argv[1];
  commir::sharding::g_gpt_path = argv[2];
  return RUN_ALL_TESTS();
}
