#include "search/shrink.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "commir/ir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "search/dim_classes.h"
#include "search/test_programs.h"

namespace commir::search {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Module> Parse(const std::string& text) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "test");
  EXPECT_TRUE(module.ok()) << module.status();
  return module.ok() ? *std::move(module) : nullptr;
}

// Every value of `function` in `before` and its counterpart in `after`, in order.
std::vector<std::pair<Type, Type>> ValueTypes(const Module& before, const Module& after,
                                              absl::string_view function) {
  const Function* a = before.FindFunction(function);
  const Function* b = after.FindFunction(function);
  std::vector<std::pair<Type, Type>> types;
  for (int i = 0; i < a->body()->num_arguments(); ++i) {
    types.push_back({a->body()->argument(i)->type(), b->body()->argument(i)->type()});
  }
  for (Operation *x = a->body()->front(), *y = b->body()->front(); x != nullptr && y != nullptr;
       x = x->next(), y = y->next()) {
    for (int r = 0; r < x->num_results(); ++r) {
      types.push_back({x->result(r)->type(), y->result(r)->type()});
    }
  }
  return types;
}

// The shrunk function keeps every dimension's divisibility by each divisor of `k`, and no
// dimension grows.
void ExpectDivisibilityKept(const Module& before, const Module& after,
                            absl::string_view function, int64_t k) {
  for (const auto& [old_type, new_type] : ValueTypes(before, after, function)) {
    if (!old_type.is_tensor()) continue;
    ASSERT_EQ(old_type.rank(), new_type.rank());
    for (int64_t d = 0; d < old_type.rank(); ++d) {
      int64_t from = old_type.dims()[d], to = new_type.dims()[d];
      EXPECT_LE(to, from) << old_type.ToString() << " -> " << new_type.ToString();
      for (int64_t divisor = 2; divisor <= k; ++divisor) {
        if (k % divisor != 0 || from % divisor != 0) continue;
        EXPECT_EQ(to % divisor, 0) << old_type.ToString() << " -> " << new_type.ToString()
                                   << " loses the divisor " << divisor;
      }
    }
  }
}

Type ResultType(const Module& module, absl::string_view function, absl::string_view value) {
  for (Operation* op = module.FindFunction(function)->body()->front(); op != nullptr;
       op = op->next()) {
    for (Value* r : op->results()) {
      if (r->name() == value) return r->type();
    }
  }
  ADD_FAILURE() << "no %" << value;
  return Type();
}

TEST(ShrinkFunction, LlamaLayerKeepsHeadsAndGroupsAndShrinksTheRest) {
  std::unique_ptr<Module> module = Parse(LlamaLayer("tp=8", "tp", "tp"));
  absl::StatusOr<ShrunkModule> shrunk = ShrinkFunction(*module, "attention", 16, 1 << 16);
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  // The query heads are 8 key/value heads x 4 queries each: both survive; the sequence
  // and head dim keep their divisibility by 16.
  EXPECT_THAT(ResultType(*shrunk->module, "attention", "q3").dims(), ElementsAre(16, 32, 16));
  EXPECT_THAT(ResultType(*shrunk->module, "attention", "k4").dims(),
              ElementsAre(1, 8, 16, 16));
  EXPECT_THAT(shrunk->module->FindFunction("attention")->arg_types()[0].ToString(),
              "f32[16@tp, 16]");
  EXPECT_THAT(FormatSizes(shrunk->sizes), HasSubstr("4096->16"));
  EXPECT_LE(shrunk->max_elements, 1 << 16);
  ExpectDivisibilityKept(*module, *shrunk->module, "attention", 16);

  absl::StatusOr<ShrunkModule> mlp = ShrinkFunction(*module, "mlp", 16, 1 << 16);
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  EXPECT_THAT(ResultType(*mlp->module, "mlp", "a").dims(), ElementsAre(16, 16));
  ExpectDivisibilityKept(*module, *mlp->module, "mlp", 16);
}

TEST(ShrinkFunction, SharedExamplesKeepTheirDivisibility) {
  for (const char* name : {"mlp", "attention", "transformer_block", "ag_matmul",
                           "ag_matmul_global4", "ring_ag_matmul"}) {
    SCOPED_TRACE(name);
    std::unique_ptr<Module> module = Parse(Example(name));
    ASSERT_NE(module, nullptr);
    for (Function* function : module->functions()) {
      if (function->is_spmd()) continue;
      for (int64_t k : {16, 48}) {
        absl::StatusOr<ShrunkModule> shrunk =
            ShrinkFunction(*module, function->name(), k, 1 << 20);
        ASSERT_TRUE(shrunk.ok()) << shrunk.status();
        ExpectDivisibilityKept(*module, *shrunk->module, function->name(), k);
      }
    }
  }
}

TEST(ShrinkFunction, TransformerBlockRelatesReshapedHeadsToTheProjection) {
  std::unique_ptr<Module> module = Parse(Example("transformer_block"));
  absl::StatusOr<ShrunkModule> shrunk = ShrinkFunction(*module, "block", 16, 1 << 16);
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  // q: [256, 256] = [256, 8 heads x 32]; the projection's 256 columns become 8 x 16.
  EXPECT_THAT(ResultType(*shrunk->module, "block", "q").dims(), ElementsAre(16, 128));
  EXPECT_THAT(ResultType(*shrunk->module, "block", "q3").dims(), ElementsAre(16, 8, 16));
  EXPECT_THAT(ResultType(*shrunk->module, "block", "u").dims(), ElementsAre(16, 16));
}

TEST(ShrinkFunction, SliceOfAFusedProjectionStillTakesItsPart) {
  std::unique_ptr<Module> module = Parse(R"(
mesh @m(tp=4)
func @f(%x: f32[256, 512], %w: f32[512, 1536]) -> f32[256, 512] {
  %qkv = matmul(%x, %w)
  %k = slice(%qkv) {start = [0, 512], size = [256, 512]}
  return %k
}
)");
  absl::StatusOr<ShrunkModule> shrunk = ShrinkFunction(*module, "f", 16, 1 << 16);
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  EXPECT_THAT(ResultType(*shrunk->module, "f", "qkv").dims(), ElementsAre(16, 48));
  const Operation* slice = shrunk->module->FindFunction("f")->body()->front()->next();
  EXPECT_THAT(slice->RequiredIntListAttr("start"), ElementsAre(0, 16));
  EXPECT_THAT(slice->RequiredIntListAttr("size"), ElementsAre(16, 16));
}

TEST(ShrinkFunction, SliceThatWouldNotFitKeepsItsSizes) {
  std::unique_ptr<Module> module = Parse(R"(
func @f(%x: f32[8, 4]) -> f32[3, 4] {
  %y = slice(%x) {start = [2, 0], size = [3, 4]}
  return %y
}
)");
  // gcd(8, 3) = 1 < gcd(3, 3): the sliced dimension keeps 8 and 3; the other shrinks.
  absl::StatusOr<ShrunkModule> shrunk = ShrinkFunction(*module, "f", 3, 1 << 16);
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  EXPECT_THAT(ResultType(*shrunk->module, "f", "y").dims(), ElementsAre(3, 1));
  EXPECT_THAT(shrunk->module->FindFunction("f")->arg_types()[0].dims(), ElementsAre(8, 1));
  const Operation* slice = shrunk->module->FindFunction("f")->body()->front();
  EXPECT_THAT(slice->RequiredIntListAttr("start"), ElementsAre(2, 0));
}

TEST(ShrinkFunction, ConcatOfEqualPartsKeepsThePartCount) {
  std::unique_ptr<Module> module = Parse(R"(
mesh @m(tp=4)
func @f(%a: f32[64, 128], %b: f32[64, 128], %c: f32[64, 128]) -> f32[64, 384] {
  %y = concat(%a, %b, %c) {dim = 1}
  return %y
}
)");
  absl::StatusOr<ShrunkModule> shrunk = ShrinkFunction(*module, "f", 8, 1 << 16);
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  EXPECT_THAT(ResultType(*shrunk->module, "f", "y").dims(), ElementsAre(8, 24));
}

TEST(ShrinkFunction, ReshapeThatDoesNotFactorSaysWhy) {
  std::unique_ptr<Module> module = Parse(R"(
func @f(%x: f32[6, 4]) -> f32[4, 6] {
  %y = reshape(%x) : f32[4, 6]
  return %y
}
)");
  absl::StatusOr<ShrunkModule> shrunk = ShrinkFunction(*module, "f", 2, 1 << 16);
  ASSERT_FALSE(shrunk.ok());
  EXPECT_THAT(shrunk.status().message(), HasSubstr("cannot be shrunk"));
  EXPECT_THAT(shrunk.status().message(), HasSubstr("reshape at 3:"));
  EXPECT_THAT(shrunk.status().message(), HasSubstr("does not factor"));
}

TEST(ShrinkFunction, ConcatOfUnequalPartsKeepsTheirSizes) {
  std::unique_ptr<Module> module = Parse(R"(
func @f(%a: f32[64, 16], %b: f32[64, 32]) -> f32[64, 48] {
  %y = concat(%a, %b) {dim = 1}
  return %y
}
)");
  absl::StatusOr<ShrunkModule> shrunk = ShrinkFunction(*module, "f", 4, 1 << 16);
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  EXPECT_THAT(ResultType(*shrunk->module, "f", "y").dims(), ElementsAre(4, 48));
}

TEST(ShrinkFunction, TooLargeAfterShrinkingSaysSo) {
  std::unique_ptr<Module> module = Parse(Example("mlp"));
  absl::StatusOr<ShrunkModule> shrunk = ShrinkFunction(*module, "mlp", 256, 100);
  ASSERT_FALSE(shrunk.ok());
  EXPECT_THAT(shrunk.status().message(), HasSubstr("more than 100"));
}

TEST(ShrinkFunction, EmptyDimensionSaysWhy) {
  std::unique_ptr<Module> module = Parse(R"(
func @f(%x: f32[0, 4]) -> f32[0, 4] {
  %y = relu(%x)
  return %y
}
)");
  absl::StatusOr<ShrunkModule> shrunk = ShrinkFunction(*module, "f", 4, 1 << 16);
  ASSERT_FALSE(shrunk.ok());
  EXPECT_THAT(shrunk.status().message(), HasSubstr("empty dimension"));
}

TEST(ShrinkFunction, BadArgumentsAreErrors) {
  std::unique_ptr<Module> module = Parse(Example("mlp"));
  EXPECT_EQ(ShrinkFunction(*module, "nope", 16, 1 << 16).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ShrinkFunction(*module, "mlp", 0, 1 << 16).status().code(),
            absl::StatusCode::kInvalidArgument);
}


// Why the dimension classes (dim_classes.h) and the shrinker's atoms are two analyses
// (search/README.md): neither relation is a coarsening of the other, and the shrinker's
// is partial where the classes' is total.
TEST(ShrinkFunction, TheAtomsAndTheDimensionClassesRelateDimensionsDifferently) {
  // One dimension of 12 factored [4, 3] by one reshape and [6, 2] by another: the
  // classes keep the gcd of the major factors (4 and 6: it splits over 2 devices);
  // the atoms cannot factor 12 both ways, so the shrinker refuses the function.
  std::unique_ptr<Module> reshapes = Parse(R"(
func @f(%x: f32[12, 8]) -> (f32[4, 3, 8], f32[6, 2, 8]) {
  %a = reshape(%x) : f32[4, 3, 8]
  %b = reshape(%x) : f32[6, 2, 8]
  return %a, %b
}
)");
  ASSERT_NE(reshapes, nullptr);
  absl::StatusOr<std::vector<DimClass>> classes = FindDimClasses(*reshapes->FindFunction("f"));
  ASSERT_TRUE(classes.ok()) << classes.status();
  ASSERT_FALSE(classes->empty());
  EXPECT_EQ(classes->front().name, "x.0");
  EXPECT_EQ(classes->front().divisible_size, 2);
  absl::StatusOr<ShrunkModule> shrunk = ShrinkFunction(*reshapes, "f", 4, 1 << 16);
  ASSERT_FALSE(shrunk.ok());
  EXPECT_THAT(shrunk.status().message(), HasSubstr("cannot be shrunk"));

  // Two alike parts concatenated: the classes keep the parts' concatenated dimensions
  // apart (the concat's rule gives each its own factor, which no split may cross), while
  // the shrinker must shrink them alike (VisitConcat aligns their atoms) and shrinks both.
  std::unique_ptr<Module> concat = Parse(R"(
func @g(%a: f32[64, 16], %b: f32[64, 16]) -> f32[128, 16] {
  %an = tanh(%a)
  %bn = tanh(%b)
  %c = concat(%an, %bn) {dim = 0}
  return %c
}
)");
  ASSERT_NE(concat, nullptr);
  classes = FindDimClasses(*concat->FindFunction("g"));
  ASSERT_TRUE(classes.ok()) << classes.status();
  std::vector<std::string> names;
  for (const DimClass& c : *classes) names.push_back(c.name);
  EXPECT_THAT(names, ::testing::Contains("a.0"));
  EXPECT_THAT(names, ::testing::Contains("b.0"));
  shrunk = ShrinkFunction(*concat, "g", 4, 1 << 16);
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  const Function& g = *shrunk->module->FindFunction("g");
  EXPECT_EQ(g.arg_types()[0].dims()[0], g.arg_types()[1].dims()[0]);
  EXPECT_EQ(g.result_types()[0].dims()[0], 2 * g.arg_types()[0].dims()[0]);
}

}  // namespace
}  // namespace commir::search
