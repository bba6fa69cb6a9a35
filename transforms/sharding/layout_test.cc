#include "transforms/sharding/layout.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "commir/builder.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "gtest/gtest.h"

namespace commir::sharding {
namespace {

const Mesh& Mesh1D() {
  static const Mesh* mesh = new Mesh("m", {{"tp", 4, {}}});
  return *mesh;
}

const Mesh& Mesh2D() {
  static const Mesh* mesh = new Mesh("m", {{"dp", 2, {}}, {"tp", 4, {}}});
  return *mesh;
}

Layout L(std::vector<AxisList> dims, AxisList partial = {}) {
  Layout layout;
  layout.dims = std::move(dims);
  layout.partial = std::move(partial);
  return layout;
}

// The plan as text, one step per entry.
std::string Plan(std::vector<int64_t> dims, const Layout& from, const Layout& to,
                 const Mesh& mesh = Mesh2D()) {
  std::vector<std::string> steps;
  for (const ReshardStep& step : PlanReshard(dims, from, to, mesh)) {
    steps.push_back(StepToString(step));
  }
  return absl::StrJoin(steps, "; ");
}

TEST(Layout, OfTypePutsPartialAxesInMeshOrder) {
  Type t = Type::Tensor(ElementType::kF32, {8, 4}, {{"tp"}, {}}, {"tp2"});
  Mesh mesh("m", {{"dp", 2, {}}, {"tp2", 2, {}}, {"tp", 2, {}}});
  Type written = Type::Tensor(ElementType::kF32, {8, 4}, {{}, {}}, {"tp", "dp"});
  EXPECT_EQ(Layout::Of(written, mesh).partial, (AxisList{"dp", "tp"}));
  EXPECT_EQ(Layout::Of(t, mesh).ToString(), "[tp, -] partial(tp2)");
  EXPECT_EQ(Layout::Of(Type::Index(), mesh).rank(), 0u);
}

TEST(Layout, ToStringAndQueries) {
  Layout layout = L({{"dp", "tp"}, {}}, {"x"});
  EXPECT_EQ(layout.ToString(), "[(dp, tp), -] partial(x)");
  layout.partial_kind = ReductionFn::kMax;
  EXPECT_EQ(layout.ToString(), "[(dp, tp), -] max(x)");
  EXPECT_TRUE(layout.UsesAxis("tp"));
  EXPECT_TRUE(layout.UsesAxis("x"));
  EXPECT_FALSE(layout.UsesAxis("y"));
  EXPECT_EQ(layout.UsedAxes(), (AxisList{"dp", "tp", "x"}));
  EXPECT_TRUE(Layout::Replicated(3).IsReplicated());
  EXPECT_FALSE(L({{}, {}}, {"tp"}).IsReplicated());
}

TEST(Layout, EqualityIgnoresTheKindOfAnEmptyPartial) {
  Layout a = L({{"tp"}});
  Layout b = a;
  b.partial_kind = ReductionFn::kMax;
  EXPECT_EQ(a, b);
  a.partial = b.partial = {"dp"};
  EXPECT_NE(a, b);
}

TEST(Layout, LocalDimsAndValidity) {
  EXPECT_EQ(LocalDims({16, 8}, L({{"dp", "tp"}, {}}), Mesh2D()), (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(LocalTypeOf(Type::Tensor(ElementType::kBF16, {16, 8}), L({{}, {"tp"}}), Mesh2D()),
            Type::Tensor(ElementType::kBF16, {16, 2}));
  EXPECT_TRUE(IsValidLayout({16, 8}, L({{"dp"}, {"tp"}}), Mesh2D()));
  EXPECT_FALSE(IsValidLayout({16, 6}, L({{"dp"}, {"tp"}}), Mesh2D()));       // 6 % 4
  EXPECT_FALSE(IsValidLayout({16, 8}, L({{"dp"}, {"dp"}}), Mesh2D()));       // dp twice
  EXPECT_FALSE(IsValidLayout({16, 8}, L({{"dp"}, {}}, {"dp"}), Mesh2D()));   // and partial
  EXPECT_FALSE(IsValidLayout({16, 8}, L({{"zz"}, {}}), Mesh2D()));           // unknown axis
  EXPECT_FALSE(IsValidLayout({16}, L({{}, {}}), Mesh2D()));                  // rank
}

TEST(PlanReshard, NothingWhenLayoutsMatch) {
  EXPECT_EQ(Plan({8, 8}, L({{"tp"}, {}}), L({{"tp"}, {}})), "");
}

TEST(PlanReshard, SplittingAReplicatedDimIsALocalSlice) {
  EXPECT_EQ(Plan({8, 8}, L({{}, {}}), L({{"tp"}, {}})), "slice(dim 0 over tp)");
  EXPECT_EQ(Plan({8, 8}, L({{"dp"}, {}}), L({{"dp", "tp"}, {}})), "slice(dim 0 over tp)");
  EXPECT_EQ(Plan({8, 8}, L({{}, {}}), L({{"dp", "tp"}, {}})), "slice(dim 0 over (dp, tp))");
}

TEST(PlanReshard, RemovingAnAxisIsAnAllGather) {
  EXPECT_EQ(Plan({8, 8}, L({{"tp"}, {}}), L({{}, {}})), "all_gather(dim 0 over tp)");
  EXPECT_EQ(Plan({8, 8}, L({{"dp", "tp"}, {}}), L({{"dp"}, {}})), "all_gather(dim 0 over tp)");
  // The minor axes go as one group.
  EXPECT_EQ(Plan({8, 8}, L({{"dp", "tp"}, {}}), L({{}, {}})), "all_gather(dim 0 over (dp, tp))");
  // A major axis that must go takes the minor ones with it; they come back by slicing.
  EXPECT_EQ(Plan({8, 8}, L({{"dp", "tp"}, {}}), L({{"tp"}, {}})),
            "all_gather(dim 0 over (dp, tp)); slice(dim 0 over tp)");
}

TEST(PlanReshard, MovingAnAxisBetweenDimsIsAnAllToAll) {
  EXPECT_EQ(Plan({8, 8}, L({{"tp"}, {}}), L({{}, {"tp"}})), "all_to_all(tp from dim 0 to dim 1)");
  EXPECT_EQ(Plan({8, 8}, L({{"dp", "tp"}, {}}), L({{"dp"}, {"tp"}})),
            "all_to_all(tp from dim 0 to dim 1)");
  // Two axes trade places.
  EXPECT_EQ(Plan({8, 8}, L({{"dp"}, {"tp"}}), L({{"tp"}, {"dp"}})),
            "all_gather(dim 0 over dp); all_to_all(tp from dim 1 to dim 0); slice(dim 1 over dp)");
}

TEST(PlanReshard, PartialToSplitIsAReduceScatter) {
  EXPECT_EQ(Plan({8, 8}, L({{}, {}}, {"tp"}), L({{"tp"}, {}})), "reduce_scatter(dim 0 over tp)");
  EXPECT_EQ(Plan({8, 8}, L({{"dp"}, {}}, {"tp"}), L({{"dp", "tp"}, {}})),
            "reduce_scatter(dim 0 over tp)");
  EXPECT_EQ(Plan({8, 8}, L({{}, {}}, {"dp", "tp"}), L({{}, {"dp", "tp"}})),
            "reduce_scatter(dim 1 over (dp, tp))");
  // Only the axes the target drops are reduced.
  EXPECT_EQ(Plan({8, 8}, L({{}, {}}, {"dp", "tp"}), L({{"tp"}, {}}, {"dp"})),
            "reduce_scatter(dim 0 over tp)");
}

TEST(PlanReshard, PartialToReplicatedIsAnAllReduce) {
  EXPECT_EQ(Plan({8, 8}, L({{}, {}}, {"tp"}), L({{}, {}})), "all_reduce(tp)");
  EXPECT_EQ(Plan({8, 8}, L({{}, {}}, {"dp", "tp"}), L({{}, {}})), "all_reduce((dp, tp))");
  // Reduce while the tensor is small, then gather.
  EXPECT_EQ(Plan({8, 8}, L({{"tp"}, {}}, {"dp"}), L({{}, {}})),
            "all_reduce(dp); all_gather(dim 0 over tp)");
}

TEST(PlanReshard, MaxPartialsReduceWithMax) {
  Layout pending = L({{}, {}}, {"tp"});
  pending.partial_kind = ReductionFn::kMax;
  EXPECT_EQ(Plan({8, 8}, pending, L({{}, {}})), "all_reduce max(tp)");
  EXPECT_EQ(Plan({8, 8}, pending, L({{"tp"}, {}})), "reduce_scatter max(dim 0 over tp)");
  // A max never becomes a sum: reduced first, then made partial again.
  EXPECT_EQ(Plan({8, 8}, pending, L({{}, {}}, {"tp"})), "all_reduce max(tp); make_partial(tp)");
  EXPECT_EQ(ReducePartial(pending, L({{"tp"}, {}}), Mesh2D()), L({{"tp"}, {}}));
  EXPECT_EQ(ReducePartial(pending, L({{}, {}}), Mesh2D()), L({{}, {}}));
}

TEST(PlanReshard, BecomingPartial) {
  EXPECT_EQ(Plan({8, 8}, L({{}, {}}), L({{}, {}}, {"tp"})), "make_partial(tp)");
  EXPECT_EQ(Plan({8, 8}, L({{"tp"}, {}}), L({{}, {}}, {"dp"})),
            "all_gather(dim 0 over tp); make_partial(dp)");
}

TEST(PlanReshard, EveryPairOfLayoutsOfASmallTensorIsReachable) {
  // All layouts of a [4, 8] tensor on a (dp=2, tp=4) mesh: each dim takes no axis, one
  // axis or both; partial over the axes left.
  std::vector<AxisList> choices = {{}, {"dp"}, {"tp"}, {"dp", "tp"}, {"tp", "dp"}};
  std::vector<Layout> layouts;
  for (const AxisList& d0 : choices) {
    for (const AxisList& d1 : choices) {
      for (const AxisList& partial : std::vector<AxisList>{{}, {"dp"}, {"tp"}, {"dp", "tp"}}) {
        Layout layout = L({d0, d1}, partial);
        if (IsValidLayout({4, 8}, layout, Mesh2D())) layouts.push_back(layout);
      }
    }
  }
  ASSERT_GT(layouts.size(), 10u);
  Type type = Type::Tensor(ElementType::kF32, {4, 8});
  for (const Layout& from : layouts) {
    for (const Layout& to : layouts) {
      std::vector<ReshardStep> steps = PlanReshard(type.dims(), from, to, Mesh2D());
      Layout cur = from;
      for (const ReshardStep& step : steps) {
        ASSERT_TRUE(IsValidLayout({4, 8}, step.after, Mesh2D()))
            << from.ToString() << " -> " << to.ToString() << " at " << StepToString(step);
        cur = step.after;
      }
      EXPECT_EQ(cur, to) << from.ToString() << " -> " << to.ToString();
      EXPECT_LE(steps.size(), 6u) << from.ToString() << " -> " << to.ToString();
    }
  }
}

TEST(ReshardCost, BytesFollowTheCollectiveCostFormulas) {
  Type t = Type::Tensor(ElementType::kF32, {256, 128});
  // all_gather over 4: each device receives 3/4 of the 128 KiB result.
  EXPECT_DOUBLE_EQ(ReshardBytes(t, L({{"tp"}, {}}), L({{}, {}}), Mesh1D()), 98304);
  // reduce_scatter over 4: 3/4 of the 128 KiB operand.
  EXPECT_DOUBLE_EQ(ReshardBytes(t, L({{}, {}}, {"tp"}), L({{"tp"}, {}}), Mesh1D()), 98304);
  // all_reduce: twice that.
  EXPECT_DOUBLE_EQ(ReshardBytes(t, L({{}, {}}, {"tp"}), L({{}, {}}), Mesh1D()), 196608);
  // all_to_all: 3/4 of the 32 KiB per-device result.
  EXPECT_DOUBLE_EQ(ReshardBytes(t, L({{"tp"}, {}}), L({{}, {"tp"}}), Mesh1D()), 24576);
  // Local slices and equal layouts are free.
  EXPECT_DOUBLE_EQ(ReshardBytes(t, L({{}, {}}), L({{"tp"}, {}}), Mesh1D()), 0);
  EXPECT_DOUBLE_EQ(ReshardBytes(t, L({{"tp"}, {}}), L({{"tp"}, {}}), Mesh1D()), 0);
  // The cost adds a latency per collective.
  EXPECT_DOUBLE_EQ(ReshardCost(t, L({{"tp"}, {}}), L({{}, {}}), Mesh1D()),
                   98304 + kCollectiveLatencyBytes);
  EXPECT_DOUBLE_EQ(ReshardCost(t, L({{}, {}}), L({{"tp"}, {}}), Mesh1D()), 0);
}

// Emits a reshard in a spmd function with argument layout `from` returning layout `to`.
std::string Emit(Type global, const Layout& from, const Layout& to) {
  Module local;
  Mesh* mesh = local.AddMesh(
      std::make_unique<Mesh>("m", std::vector<MeshAxis>{{"dp", 2, {}}, {"tp", 4, {}}}));
  Function* f = AddFunction(local, "f", true, mesh, {from.ApplyTo(global)}, {to.ApplyTo(global)},
                            {"x"});
  OpBuilder emitter(f, f->body(), nullptr);
  absl::StatusOr<Value*> out = EmitReshard(emitter, f->body()->argument(0), global, from, to, "y");
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return "";
  OpBuilder(f).Return({*out});
  absl::Status verified = VerifyModule(local);
  EXPECT_TRUE(verified.ok()) << verified << PrintModule(local);
  std::string text = PrintFunction(*f);
  // Just the body.
  return text.substr(text.find("{\n") + 2);
}

TEST(EmitReshard, EmitsOneOpPerCollectiveStep) {
  Type t = Type::Tensor(ElementType::kF32, {16, 8});
  EXPECT_EQ(Emit(t, L({{"tp"}, {}}), L({{}, {"tp"}})),
            "  %y = all_to_all(%x) {axis = tp, split_dim = 1, concat_dim = 0} : f32[16, 2]\n"
            "  return %y\n}\n");
  EXPECT_EQ(Emit(t, L({{}, {}}, {"dp", "tp"}), L({{"tp"}, {}})),
            "  %x_rs = reduce_scatter(%x) {axis = tp, dim = 0} : f32[4, 8]\n"
            "  %y = all_reduce(%x_rs) {axis = dp} : f32[4, 8]\n"
            "  return %y\n}\n");
}

TEST(EmitReshard, SlicesAtTheDeviceBlockOffset) {
  Type t = Type::Tensor(ElementType::kF32, {16, 8});
  EXPECT_EQ(Emit(t, L({{}, {}}), L({{"dp", "tp"}, {}})),
            "  %0 = rank() {axis = (dp, tp)} : index\n"
            "  %1 = mul(%0, 2) : index\n"
            "  %y = dynamic_slice(%x, %1) {dim = 0, size = 2} : f32[2, 8]\n"
            "  return %y\n}\n");
}

TEST(EmitReshard, MakesPartialByKeepingTheValueOnCoordinateZero) {
  Type t = Type::Tensor(ElementType::kF32, {});
  EXPECT_EQ(Emit(t, L({}), L({}, {"tp"})),
            "  %0 = reshape(%x) : f32[1]\n"
            "  %1 = full() {value = 0.0} : f32[1]\n"
            "  %2 = concat(%0, %1) {dim = 0} : f32[2]\n"
            "  %3 = rank() {axis = tp} : index\n"
            "  %4 = add(%3, 3) : index\n"
            "  %5 = div(%4, 4) : index\n"
            "  %6 = dynamic_slice(%2, %5) {dim = 0, size = 1} : f32[1]\n"
            "  %y = reshape(%6) : f32[]\n"
            "  return %y\n}\n");
}

TEST(EmitReshard, ReturnsTheValueItselfWhenNothingChanges) {
  Type t = Type::Tensor(ElementType::kF32, {16, 8});
  EXPECT_EQ(Emit(t, L({{"tp"}, {}}), L({{"tp"}, {}})), "  return %x\n}\n");
}

}  // namespace
}  // namespace commir::sharding
