// propagate-sharding + lower-to-spmd on Llama-shaped layers (the partitioner
// quality commir-search depends on): with x sequence-split and the weights laid out as
// Megatron TP+SP does, the partitioner must find Megatron's plan -- an all_gather of
// each normed activation before the column-parallel projections and a reduce_scatter
// after each row-parallel one -- and never anything that sends more.
//
// The expected figures are derived here from the shapes: each of the four collectives
// moves (n-1)/n of one [sequence, hidden] activation per device (comm_report.h).
//
// Only x and the weights are laid out: the function's arguments always carry their
// layouts (an unsharded argument is replicated, propagate.h), so "weights free" would
// mean replicated weights, which are sliced locally for nothing and make a different
// (cheaper, memory-hungry) plan than Megatron's; it is not compared here.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "gtest/gtest.h"
#include "commir/element_type.h"
#include "commir/ir.h"
#include "testing/spmd_check.h"
#include "transforms/sharding/comm_report.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/propagate.h"
#include "transforms/test_util.h"

namespace commir::sharding {
namespace {

// The path of testdata/partitioning/llama3_8b_layer_report.commir in the runfiles tree
// (the test's first argument).
std::string g_llama_path;

struct LayerShape {
  int64_t sequence;
  int64_t hidden;
  int64_t heads;
  int64_t kv_heads;
  int64_t ffn;
  int tp;
  const char* dtype = "bf16";
  // Megatron's layout of the k and v weights when tp is wider than the key/value heads:
  // every device holds whole key/value heads (on a 1-D mesh: all of them).
  bool replicated_kv_weights = false;
  int64_t head_dim() const { return hidden / heads; }
};

// The layer of testdata/partitioning/llama3_8b_layer_report.commir at other sizes.
std::string Layer(const LayerShape& s) {
  std::string text = absl::Substitute(
      R"(mesh @m(tp=$5)

func @layer(%x: $6[$0@tp, $1], %g1: $6[$1],
            %wq: $6[$1, $1@tp], %wk: $6[$1, $7@tp], %wv: $6[$1, $7@tp],
            %wo: $6[$1@tp, $1], %g2: $6[$1],
            %wg: $6[$1, $4@tp], %wu: $6[$1, $4@tp], %wd: $6[$4@tp, $1]) -> $6[$0@tp, $1] {
  %h = rmsnorm(%x, %g1) {eps = 1e-5}
  %q = matmul(%h, %wq)
  %k = matmul(%h, %wk)
  %v = matmul(%h, %wv)
  %q3 = reshape(%q) : $6[$0, $2, $8]
  %k3 = reshape(%k) : $6[$0, $3, $8]
  %v3 = reshape(%v) : $6[$0, $3, $8]
  %qh = transpose(%q3) {perm = [1, 0, 2]}
  %kh = transpose(%k3) {perm = [1, 0, 2]}
  %vh = transpose(%v3) {perm = [1, 0, 2]}
  %q4 = reshape(%qh) : $6[1, $2, $0, $8]
  %k4 = reshape(%kh) : $6[1, $3, $0, $8]
  %v4 = reshape(%vh) : $6[1, $3, $0, $8]
  %o4 = attention(%q4, %k4, %v4) {causal}
  %o3 = reshape(%o4) : $6[$2, $0, $8]
  %ot = transpose(%o3) {perm = [1, 0, 2]}
  %o = reshape(%ot) : $6[$0, $1]
  %attn = matmul(%o, %wo)
  %r1 = add(%x, %attn)
  %h2 = rmsnorm(%r1, %g2) {eps = 1e-5}
  %gate = matmul(%h2, %wg)
  %up = matmul(%h2, %wu)
  %act = silu(%gate)
  %gu = mul(%act, %up)
  %d = matmul(%gu, %wd)
  %y = add(%r1, %d)
  return %y
}
)",
      s.sequence, s.hidden, s.heads, s.kv_heads, s.ffn, s.tp, s.dtype, s.kv_heads * s.head_dim(),
      s.head_dim());
  if (s.replicated_kv_weights) {
    std::string split = absl::StrCat("[", s.hidden, ", ", s.kv_heads * s.head_dim(), "@tp]");
    std::string whole = absl::StrCat("[", s.hidden, ", ", s.kv_heads * s.head_dim(), "]");
    for (size_t at = text.find(split); at != std::string::npos; at = text.find(split, at)) {
      text.replace(at, split.size(), whole);
    }
  }
  return text;
}

// Megatron TP+SP's bytes per device for one collective of the layer: (n-1)/n of the
// [sequence, hidden] activation (all_gather: of its result; reduce_scatter: of its
// operand), from the type of x.
double MegatronCollectiveBytes(const Function& global) {
  Type x = global.arg_types()[0];
  double elements = static_cast<double>(x.dims()[0]) * static_cast<double>(x.dims()[1]);
  int64_t n = global.mesh()->num_devices();
  return elements * ElementTypeByteWidth(x.element_type()) * static_cast<double>(n - 1) / static_cast<double>(n);
}

struct Lowered {
  std::unique_ptr<Module> module;
  double megatron_collective_bytes = 0;
  FunctionCommReport report;
};

Lowered PropagateAndLower(const std::string& text) {
  Lowered out;
  out.module = testing::ParseForTest(text);
  if (out.module == nullptr) return out;
  Function& f = *out.module->functions()[0];
  out.megatron_collective_bytes = MegatronCollectiveBytes(f);
  EXPECT_TRUE(PropagateSharding(f).ok());
  EXPECT_TRUE(LowerToSpmd(f).ok());
  out.report = ComputeCommReport(f);
  return out;
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

// Megatron's collectives exactly: 2 all_gathers of rmsnorm results, 2 reduce_scatters of
// matmul results, nothing else, each moving one activation.
void ExpectMegatronPlan(const Lowered& lowered, const std::string& label) {
  SCOPED_TRACE(label);
  const FunctionCommReport& r = lowered.report;
  const double one = lowered.megatron_collective_bytes;
  EXPECT_EQ(r.collectives.size(), 2u);
  EXPECT_EQ(CountOf(r, OpKind::kAllGather), 2);
  EXPECT_EQ(CountOf(r, OpKind::kReduceScatter), 2);
  EXPECT_DOUBLE_EQ(BytesOf(r, OpKind::kAllGather), 2 * one);
  EXPECT_DOUBLE_EQ(BytesOf(r, OpKind::kReduceScatter), 2 * one);
  for (Operation* op : *lowered.module->functions()[0]->body()) {
    if (op->Is(OpKind::kAllGather)) {
      // The normed activation, gathered over the sequence before the column-parallel GEMMs.
      ASSERT_NE(op->operand(0)->defining_op(), nullptr);
      EXPECT_TRUE(op->operand(0)->defining_op()->Is(OpKind::kRmsNorm)) << op->operand(0)->name();
      for (Operation* user : op->result(0)->users()) EXPECT_TRUE(user->Is(OpKind::kMatmul));
    } else if (op->Is(OpKind::kReduceScatter)) {
      ASSERT_NE(op->operand(0)->defining_op(), nullptr);
      EXPECT_TRUE(op->operand(0)->defining_op()->Is(OpKind::kMatmul)) << op->operand(0)->name();
    }
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(LlamaLayer, Llama3_8bShapesGetMegatronsPlan) {
  std::string text = ReadFile(g_llama_path);
  ASSERT_FALSE(text.empty()) << "cannot read " << g_llama_path;
  Lowered lowered = PropagateAndLower(text);
  ASSERT_NE(lowered.module, nullptr);
  ExpectMegatronPlan(lowered, "llama3_8b_layer_report.commir");
  // 4096 x 4096 bf16 activations on 8 devices: 4 x 29.4 MB = 117 MB per device (the
  // plan that gathered the k and v weights instead sent 134 MB).
  EXPECT_DOUBLE_EQ(lowered.report.total_bytes(), 4 * 4096.0 * 4096 * 2 * 7 / 8);
  // The generated layer is the same program.
  Lowered generated = PropagateAndLower(Layer({4096, 4096, 32, 8, 14336, 8}));
  EXPECT_DOUBLE_EQ(generated.report.total_bytes(), lowered.report.total_bytes());
}

// Widths of Llama-3 8B and 70B and smaller ones; tp from 2 to 16, the k and v weights
// whole on every device where tp is wider than the key/value heads (Megatron's layout
// for that case). Up to a sequence as long as the hidden size Megatron's plan is the
// cheapest the partitioner knows (beyond, see below), and it must be the one found.
TEST(LlamaLayer, MegatronsPlanAtEverySizeWhereItIsCheapest) {
  const LayerShape widths[] = {
      {0, 4096, 32, 8, 14336, 0}, {0, 8192, 64, 8, 28672, 0},
      {0, 2048, 16, 8, 5632, 0},  {0, 1024, 16, 16, 4096, 0}};
  for (const LayerShape& width : widths) {
    for (int64_t sequence : {512, 1024, 2048, 4096, 8192}) {
      if (sequence > width.hidden) continue;
      for (int tp : {2, 4, 8, 16}) {
        LayerShape s = width;
        s.sequence = sequence;
        s.tp = tp;
        s.replicated_kv_weights = width.kv_heads % tp != 0;
        ExpectMegatronPlan(PropagateAndLower(Layer(s)),
                           absl::StrCat("S=", sequence, " H=", s.hidden, " tp=", tp));
      }
    }
  }
}

// Long sequences: gathering the weights and splitting the sequence can send less than
// Megatron; whatever is chosen, never more.
TEST(LlamaLayer, NeverMoreBytesThanMegatron) {
  const LayerShape widths[] = {
      {0, 4096, 32, 8, 14336, 0}, {0, 2048, 16, 8, 5632, 0}, {0, 1024, 16, 16, 4096, 0}};
  for (const LayerShape& width : widths) {
    for (int64_t sequence : {2048, 4096, 8192, 16384, 32768}) {
      for (int tp : {2, 4, 8, 16}) {
        LayerShape s = width;
        s.sequence = sequence;
        s.tp = tp;
        s.replicated_kv_weights = width.kv_heads % tp != 0;
        Lowered lowered = PropagateAndLower(Layer(s));
        EXPECT_LE(lowered.report.total_bytes(), 4 * lowered.megatron_collective_bytes)
            << "S=" << sequence << " H=" << s.hidden << " tp=" << tp;
      }
    }
  }
}

// The query heads of the attention op's per-device form (the global count when every
// device runs every head).
int64_t LocalQueryHeads(const Module& module) {
  for (Operation* op : *module.functions()[0]->body()) {
    if (op->Is(OpKind::kAttention)) return op->operand(0)->type().dims()[1];
  }
  return -1;
}

// Tensor parallelism wider than the key/value heads (Llama-3-8B on tp=16: 32 query
// heads, 8 key/value heads): the query heads stay split, two per device, and each
// device keeps the one key/value head they use (the plan used to gather q and run all
// 32 heads on every device). With the k and v weights whole on every device, as
// Megatron lays them out for this case, that is Megatron's plan exactly; with them
// split, k and v are gathered once each on top.
TEST(LlamaLayer, TensorParallelismWiderThanKeyValueHeadsReplicatesThem) {
  LayerShape s{4096, 4096, 32, 8, 14336, 16};
  s.replicated_kv_weights = true;
  Lowered lowered = PropagateAndLower(Layer(s));
  ASSERT_NE(lowered.module, nullptr);
  ExpectMegatronPlan(lowered, "tp=16, whole k/v weights");
  EXPECT_EQ(LocalQueryHeads(*lowered.module), 2);

  s.replicated_kv_weights = false;
  Lowered split = PropagateAndLower(Layer(s));
  ASSERT_NE(split.module, nullptr);
  EXPECT_EQ(LocalQueryHeads(*split.module), 2);
  double kv_gather = 4096.0 * 1024 * 2 * 15 / 16;
  EXPECT_DOUBLE_EQ(split.report.total_bytes(), 4 * split.megatron_collective_bytes + 2 * kv_gather);
}

// The same on the cpu mesh with the same ratios (4 query heads, 2 key/value heads on 4
// devices): each device's query head with its key/value head, against the one-device
// run.
TEST(LlamaLayer, ReplicatedKeyValueHeadsMatchTheOneDeviceRun) {
  for (bool whole : {true, false}) {
    LayerShape s{16, 32, 4, 2, 64, 4, "f32"};
    s.replicated_kv_weights = whole;
    absl::StatusOr<testing::SpmdCheck> check = testing::CheckPartitioned(Layer(s), "layer", /*seed=*/7);
    ASSERT_TRUE(check.ok()) << check.status();
    EXPECT_TRUE(check->pass) << check->report << check->lowered;
    EXPECT_EQ(LocalQueryHeads(*check->module), 1) << check->lowered;
  }
}

// The plan with the shared gather computes the layer: a small layer with the same
// ratios (GQA 4:2, one q/k/v gather) on the cpu mesh against the one-device run.
TEST(LlamaLayer, SharedGatherPlanMatchesTheOneDeviceRun) {
  LayerShape s{32, 64, 4, 2, 96, 2, "f32"};
  absl::StatusOr<testing::SpmdCheck> check = testing::CheckPartitioned(Layer(s), "layer", /*seed=*/3);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(check->pass) << check->report << check->lowered;
  FunctionCommReport report = ComputeCommReport(*check->module->functions()[0]);
  EXPECT_EQ(CountOf(report, OpKind::kAllGather), 2) << check->lowered;
  EXPECT_EQ(CountOf(report, OpKind::kReduceScatter), 2) << check->lowered;
  EXPECT_EQ(report.total_count(), 4) << check->lowered;
}

}  // namespace
}  // namespace commir::sharding

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PATH_TO_llama3_8b_layer_report.commir\n", argv[0]);
    return 2;
  }
  commir::sharding::g_llama_path = argv[1];
  return RUN_ALL_TESTS();
}
