// The pieces of the search space: meshes, dimension classes and layouts.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "search/dim_classes.h"
#include "search/layout_space.h"
#include "search/mesh_shapes.h"
#include "search/schedule_space.h"

namespace commir::search {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> Shapes(int64_t devices, int max_axes = 3) {
  std::vector<std::string> out;
  for (const MeshShape& m : MeshShapes(devices, max_axes)) out.push_back(m.ToString());
  return out;
}

TEST(MeshShapes, EveryOrderedFactorizationIntoAtMostThreeAxes) {
  EXPECT_THAT(Shapes(8), ElementsAre("8", "2x4", "4x2", "2x2x2"));
  EXPECT_THAT(Shapes(12), ElementsAre("12", "2x6", "3x4", "4x3", "6x2", "2x2x3", "2x3x2", "3x2x2"));
  EXPECT_THAT(Shapes(7), ElementsAre("7"));
  EXPECT_THAT(Shapes(8, 1), ElementsAre("8"));
  EXPECT_THAT(Shapes(1), ElementsAre("1"));
  EXPECT_EQ(MeshShapes(64).size(), 16u);  // 1 + 5 + 10
  EXPECT_EQ((MeshShape{{2, 4}}.Declaration()), "mesh @m(a=2, b=4)");
}

std::unique_ptr<Module> Parse(const std::string& text) {
  absl::StatusOr<std::unique_ptr<Module>> m = ParseModuleOrError(text, "test.commir");
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

struct ClassView {
  std::string name;
  int64_t divisible_size;
  bool pinned;
  size_t occurrences;
  friend bool operator==(const ClassView& a, const ClassView& b) {
    return a.name == b.name && a.divisible_size == b.divisible_size && a.pinned == b.pinned &&
           a.occurrences == b.occurrences;
  }
  friend std::ostream& operator<<(std::ostream& os, const ClassView& c) {
    return os << c.name << "/" << c.divisible_size << (c.pinned ? "/pinned" : "") << "/"
              << c.occurrences;
  }
};

std::vector<ClassView> Classes(const std::string& text) {
  std::unique_ptr<Module> m = Parse(text);
  absl::StatusOr<std::vector<DimClass>> classes = FindDimClasses(*m->functions().front());
  EXPECT_TRUE(classes.ok()) << classes.status();
  std::vector<ClassView> out;
  for (const DimClass& c : *classes) {
    out.push_back({c.name, c.divisible_size, c.pinned, c.signature_dims.size()});
  }
  return out;
}

constexpr char kMlp[] = R"(
mesh @m(d=1)
func @mlp(%x: f32[64, 32], %w1: f32[32, 128], %w2: f32[128, 32]) -> f32[64, 32] {
  %u = matmul(%x, %w1) : f32[64, 128]
  %a = gelu(%u)
  %y = matmul(%a, %w2) : f32[64, 32]
  return %y
}
)";

TEST(DimClasses, MlpHasRowsHiddenAndFfn) {
  // Rows: x.0 and the result's rows; the contracted hidden: x.1, w1.0; FFN: w1.1, w2.0;
  // the output's hidden: w2.1, result.1 (no residual ties it to the input's here).
  EXPECT_THAT(Classes(kMlp),
              ElementsAre(ClassView{"x.0", 64, false, 2}, ClassView{"x.1", 32, false, 2},
                          ClassView{"w1.1", 128, false, 2}, ClassView{"w2.1", 32, false, 2}));
}

TEST(DimClasses, ReshapeLimitsTheSplitToTheMajorFactorAndAttentionJoinsTheSequences) {
  // wq's columns become 4 heads of 8: they split over at most 4 devices (wq.1 with the
  // heads of k, v and the result). Self-attention gives the keys' sequence the queries'
  // class (x.0: with k.2, v.2 and result.2). The head dimension d of q and k is a class
  // of its own (k.3), offered because the reshape of q could split it; v's (v.3, the
  // result's too) is another.
  constexpr char kText[] = R"(
mesh @m(tp=2)
func @f(%x: f32[16, 32@tp], %wq: f32[32, 32], %k: f32[1, 4, 16, 8], %v: f32[1, 4, 16, 8]) -> f32[1, 4, 16, 8] {
  %q = matmul(%x, %wq) : f32[16, 32]
  %q3 = reshape(%q) : f32[16, 4, 8]
  %qh = transpose(%q3) {perm = [1, 0, 2]} : f32[4, 16, 8]
  %q4 = reshape(%qh) : f32[1, 4, 16, 8]
  %o = attention(%q4, %k, %v) {causal}
  return %o
}
)";
  EXPECT_THAT(Classes(kText),
              ElementsAre(ClassView{"x.0", 16, false, 4}, ClassView{"x.1", 32, true, 2},
                          ClassView{"wq.1", 4, false, 4}, ClassView{"k.3", 8, false, 1},
                          ClassView{"v.3", 8, false, 2}));
}

TEST(LayoutSpace, RulesDropRedundantAndInvalidAssignments) {
  std::unique_ptr<Module> m = Parse(kMlp);
  const Function& f = *m->functions().front();
  absl::StatusOr<std::vector<DimClass>> classes = FindDimClasses(f);
  ASSERT_TRUE(classes.ok());
  LayoutSpaceStats stats;
  std::vector<LayoutCandidate> one_axis = EnumerateLayouts(f, *classes, MeshShape{{4}}, 3, stats);
  std::vector<std::string> described;
  for (const LayoutCandidate& c : one_axis) described.push_back(c.description);
  // Sets with two classes of one tensor ({x.0, x.1}, {x.1, w1.1}, {w1.1, w2.1}, ...) split
  // it twice and are dropped.
  EXPECT_THAT(described, ElementsAre("x.0@a", "x.1@a", "w1.1@a", "w2.1@a", "x.0@a w1.1@a",
                                     "x.1@a w2.1@a"));
  EXPECT_EQ(one_axis[4].arg_types[0].ToString(), "f32[64@a, 32]");
  EXPECT_EQ(one_axis[4].arg_types[1].ToString(), "f32[32, 128@a]");
  EXPECT_EQ(one_axis[4].arg_types[2].ToString(), "f32[128@a, 32]");
  EXPECT_EQ(one_axis[4].result_types[0].ToString(), "f32[64@a, 32]");

  // Every axis splits something; two axes may split the same classes.
  stats = {};
  bool both_on_rows = false;
  for (const LayoutCandidate& c : EnumerateLayouts(f, *classes, MeshShape{{2, 2}}, 3, stats)) {
    bool a = false, b = false;
    for (const AxisList& axes : c.class_axes) {
      for (const std::string& axis : axes) (axis == "a" ? a : b) = true;
    }
    EXPECT_TRUE(a && b) << c.description;
    both_on_rows |= c.description == "x.0@(a,b)";
  }
  EXPECT_TRUE(both_on_rows);
  EXPECT_GT(stats.rejected, 0);

  // 32 hidden does not split over 64.
  stats = {};
  for (const LayoutCandidate& c : EnumerateLayouts(f, *classes, MeshShape{{64}}, 3, stats)) {
    EXPECT_EQ(c.description.find("x.1"), std::string::npos) << c.description;
  }
}

TEST(LayoutSpace, PinnedClassesAreAlwaysSplit) {
  constexpr char kPinned[] = R"(
mesh @m(tp=2)
func @mlp(%x: f32[64, 32], %w1: f32[32, 128@tp], %w2: f32[128@tp, 32]) -> f32[64, 32] {
  %u = matmul(%x, %w1) : f32[64, 128@tp]
  %y = matmul(%u, %w2) : f32[64, 32]
  return %y
}
)";
  std::unique_ptr<Module> m = Parse(kPinned);
  const Function& f = *m->functions().front();
  absl::StatusOr<std::vector<DimClass>> classes = FindDimClasses(f);
  ASSERT_TRUE(classes.ok());
  LayoutSpaceStats stats;
  std::vector<LayoutCandidate> layouts = EnumerateLayouts(f, *classes, MeshShape{{2, 2}}, 3, stats);
  ASSERT_FALSE(layouts.empty());
  for (const LayoutCandidate& c : layouts) {
    EXPECT_NE(c.description.find("w1.1@"), std::string::npos) << c.description;
  }
}


// Three classes that share no tensor (each argument is its own result): every class set
// of an axis is allowed, so the count has a closed form.
constexpr char kIndependent16[] = R"(
mesh @m(d=1)
func @f(%a: f32[16], %b: f32[16], %c: f32[16]) -> (f32[16], f32[16], f32[16]) {
  %x = exp(%a)
  %y = exp(%b)
  %z = exp(%c)
  return %x, %y, %z
}
)";

int64_t Count(const Function& f, const std::vector<DimClass>& classes, const MeshShape& mesh,
              int max_classes_per_axis = 3, int64_t limit = 1 << 30) {
  return CountLayouts(f, classes, mesh, max_classes_per_axis, limit);
}

TEST(LayoutSpace, CountMatchesClosedForms) {
  std::unique_ptr<Module> m = Parse(kIndependent16);
  const Function& f = *m->functions().front();
  absl::StatusOr<std::vector<DimClass>> classes = FindDimClasses(f);
  ASSERT_TRUE(classes.ok());
  ASSERT_EQ(classes->size(), 3u);
  // Any of the 7 non-empty subsets of 3 classes on each axis (16 divides by 2*2*2).
  EXPECT_EQ(Count(f, *classes, MeshShape{{2}}), 7);
  EXPECT_EQ(Count(f, *classes, MeshShape{{2, 2}}), 7 * 7);
  EXPECT_EQ(Count(f, *classes, MeshShape{{2, 2, 2}}), 7 * 7 * 7);
  EXPECT_EQ(AssignmentBound(3, 3, 3), 343.0);
  // At most 2 classes per axis: 3 + 3 subsets.
  EXPECT_EQ(Count(f, *classes, MeshShape{{2, 2, 2}}, 2), 6 * 6 * 6);
  EXPECT_EQ(AssignmentBound(3, 2, 3), 216.0);
  // On 4x8, no class divides over both axes (32 > 16): the two axes' sets are disjoint
  // and non-empty: each class goes to a, b or neither (3^3), less a empty (2^3), less b
  // empty (2^3), plus both empty (1).
  EXPECT_EQ(Count(f, *classes, MeshShape{{4, 8}}), 27 - 8 - 8 + 1);
  // 16 over 32: nothing.
  EXPECT_EQ(Count(f, *classes, MeshShape{{32}}), 0);
  // The count stops one past the limit.
  EXPECT_EQ(Count(f, *classes, MeshShape{{2, 2, 2}}, 3, 100), 101);
  // 1000 classes on three axes: C(1000,1)+C(1000,2)+C(1000,3) = 166,667,500 sets per axis.
  EXPECT_DOUBLE_EQ(AssignmentBound(1000, 3, 3), 166667500.0 * 166667500.0 * 166667500.0);
}

// Every tuple of class subsets (one per axis, empty ones too), filtered by the rules
// as layout_space.h states them: a brute force independent of the enumerator.
int64_t BruteForceCount(const Function& f, const std::vector<DimClass>& classes,
                        const MeshShape& mesh, int max_classes_per_axis) {
  const int n = static_cast<int>(classes.size());
  const int axes = static_cast<int>(mesh.sizes.size());
  // Per tensor (arguments, then results), the classes of its dimensions.
  int args = static_cast<int>(f.arg_types().size());
  std::vector<std::vector<int>> tensor_classes(args + f.result_types().size());
  for (int c = 0; c < n; ++c) {
    for (const SignatureDim& d : classes[c].signature_dims) {
      tensor_classes[(d.is_result ? args : 0) + d.index].push_back(c);
    }
  }
  int64_t count = 0;
  std::vector<uint32_t> subset(axes, 0);
  int64_t tuples = 1;
  for (int a = 0; a < axes; ++a) tuples <<= n;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t rest = t;
    for (int a = 0; a < axes; ++a) {
      subset[a] = static_cast<uint32_t>(rest & ((int64_t{1} << n) - 1));
      rest >>= n;
    }
    bool ok = true;
    for (int a = 0; a < axes && ok; ++a) {
      int size = __builtin_popcount(subset[a]);
      if (size == 0 || size > max_classes_per_axis) ok = false;  // splits nothing / too many
      for (const std::vector<int>& cs : tensor_classes) {
        int hits = 0;
        for (int c : cs) hits += (subset[a] >> c) & 1;
        if (hits > 1) ok = false;  // one tensor split twice over an axis
      }
    }
    for (int c = 0; c < n && ok; ++c) {
      int64_t group = 1;
      for (int a = 0; a < axes; ++a) {
        if ((subset[a] >> c) & 1) group *= mesh.sizes[a];
      }
      if (classes[c].divisible_size % group != 0) ok = false;
      if (classes[c].pinned && group == 1) ok = false;
    }
    count += ok;
  }
  return count;
}

TEST(LayoutSpace, CountMatchesBruteForceAndTheEnumeration) {
  constexpr char kPinned[] = R"(
mesh @m(tp=2)
func @mlp(%x: f32[64, 32], %w1: f32[32, 128@tp], %w2: f32[128@tp, 32]) -> f32[64, 32] {
  %u = matmul(%x, %w1) : f32[64, 128@tp]
  %y = matmul(%u, %w2) : f32[64, 32]
  return %y
}
)";
  for (const char* text : {kMlp, kPinned, kIndependent16}) {
    std::unique_ptr<Module> m = Parse(text);
    const Function& f = *m->functions().front();
    absl::StatusOr<std::vector<DimClass>> classes = FindDimClasses(f);
    ASSERT_TRUE(classes.ok());
    for (int64_t devices : {2, 4, 8, 12, 64}) {
      for (const MeshShape& mesh : MeshShapes(devices)) {
        for (int per_axis : {1, 2, 3}) {
          int64_t brute = BruteForceCount(f, *classes, mesh, per_axis);
          LayoutSpaceStats stats;
          EXPECT_EQ(Count(f, *classes, mesh, per_axis), brute) << mesh.ToString();
          EXPECT_EQ(static_cast<int64_t>(EnumerateLayouts(f, *classes, mesh, per_axis, stats).size()),
                    brute)
              << mesh.ToString();
          EXPECT_LE(static_cast<double>(brute),
                    AssignmentBound(static_cast<int64_t>(classes->size()), per_axis,
                                    static_cast<int>(mesh.sizes.size())));
        }
      }
    }
  }
}

// 16 chained matmuls: 18 classes, about 3.4e8 layouts on 2x2x2. The enumerator yields
// the first ones having considered only a handful of assignments: it never builds the
// space.
TEST(LayoutSpace, EnumerationIsLazy) {
  std::string text = "mesh @m(d=1)\nfunc @chain(%x: f32[64, 64]";
  for (int i = 1; i <= 16; ++i) absl::StrAppend(&text, ", %w", i, ": f32[64, 64]");
  absl::StrAppend(&text, ") -> f32[64, 64] {\n");
  std::string last = "%x";
  for (int i = 1; i <= 16; ++i) {
    absl::StrAppend(&text, "  %h", i, " = matmul(", last, ", %w", i, ") : f32[64, 64]\n");
    last = absl::StrCat("%h", i);
  }
  absl::StrAppend(&text, "  return ", last, "\n}\n");
  std::unique_ptr<Module> m = Parse(text);
  const Function& f = *m->functions().front();
  absl::StatusOr<std::vector<DimClass>> classes = FindDimClasses(f);
  ASSERT_TRUE(classes.ok());
  ASSERT_EQ(classes->size(), 18u);
  MeshShape mesh{{2, 2, 2}};
  LayoutEnumerator enumerator(f, *classes, mesh, 3);
  LayoutCandidate layout;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(enumerator.Next(layout));
  // The first axis's first set, the second's too, and 100 sets of the third (some
  // rejected): a few hundred assignments of the 9.6e8.
  EXPECT_LT(enumerator.stats().assignments, 1000);
  EXPECT_EQ(layout.mesh.ToString(), "2x2x2");
  // Counting stops at its limit, having looked at about as little.
  EXPECT_EQ(CountLayouts(f, *classes, mesh, 3, 1000), 1001);
  EXPECT_GT(AssignmentBound(18, 3, 3), 9e8);
}

// The texts a user would write for each schedule, spelled out here rather than derived.
std::vector<std::string> Texts(const std::vector<Pipeline>& pipelines) {
  std::vector<std::string> texts;
  for (const Pipeline& p : pipelines) texts.push_back(p.ToString());
  return texts;
}

TEST(ScheduleSpace, ComposesAttentionThenMatmulSchedules) {
  std::vector<std::string> matmul = Texts(MatmulSchedules());
  EXPECT_EQ(matmul.front(), "");
  EXPECT_THAT(matmul, ::testing::Contains("ring-collective-matmul{direction=bi}"));
  EXPECT_THAT(matmul, ::testing::Contains("ring-collective-matmul"));
  // The text names only options that differ from the pass's defaults (4 chunks, 2
  // streams).
  EXPECT_THAT(matmul, ::testing::Contains("pipeline-collective-matmul"));
  EXPECT_THAT(matmul, ::testing::Contains("pipeline-collective-matmul{chunks=2}"));
  EXPECT_THAT(matmul, ::testing::Contains("pipeline-collective-matmul{streams=4}"));
  EXPECT_THAT(matmul, ::testing::Contains("pipeline-collective-matmul{chunks=8,streams=4}"));
  EXPECT_EQ(matmul.size(), 8u);
  std::vector<std::string> attention = Texts(AttentionSchedules(MeshShape{{8}}));
  EXPECT_THAT(attention, ::testing::Contains("ulysses-attention"));
  EXPECT_THAT(attention, ::testing::Contains("ring-attention{zigzag=true}"));
  EXPECT_EQ(attention.size(), 4u);
  std::vector<Pipeline> two_d_pipelines = AttentionSchedules(MeshShape{{2, 4}});
  std::vector<std::string> two_d = Texts(two_d_pipelines);
  EXPECT_THAT(two_d, ::testing::Contains("ulysses-attention{axes=b},ring-attention{axes=a}"));
  EXPECT_THAT(two_d, ::testing::Contains("ring-attention{axes=a},ring-attention{axes=b}"));
  EXPECT_THAT(two_d, ::testing::Contains("ring-attention{axes=b}"));
  // Composition appends steps.
  EXPECT_EQ(two_d_pipelines[1].Then(MatmulSchedules().back()).ToString(),
            "ring-attention,ring-collective-matmul{direction=bi}");
  EXPECT_EQ(Pipeline{}.Then(MatmulSchedules()[0]).ToString(), "");
}

TEST(ScheduleSpace, MoePipelinesChunkTheCapacityTwoFourAndEightWays) {
  // The default (2 chunks) is not written out.
  EXPECT_THAT(Texts(MoeSchedules()),
              ::testing::ElementsAre("moe-pipeline", "moe-pipeline{chunks=4}",
                                     "moe-pipeline{chunks=8}"));
}

}  // namespace
}  // namespace commir::search
