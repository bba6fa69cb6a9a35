// A model written as CommIR read back: the sizes of the spec it was generated from, for
// GPT and Llama (grouped-query attention); and the errors that name what a file lacks.
#include "search/plan/model_reader.h"

#include <memory>
#include <string>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "commir/printer.h"
#include "parser/parser.h"
#include "search/plan/layer_cost.h"
#include "search/plan/layer_program.h"
#include "search/plan/megatron_layout.h"
#include "search/plan/model_program.h"
#include "search/plan/model_spec.h"
#include "sim/hardware.h"

namespace commir::search::plan {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Module> Parse(const std::string& text) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "m.commir");
  EXPECT_TRUE(module.ok()) << module.status() << "\n" << text;
  return module.ok() ? *std::move(module) : nullptr;
}

std::string Emitted(const std::string& spec, int64_t micro_batch) {
  absl::StatusOr<ModelSpec> m = ParseModelSpec(spec);
  EXPECT_TRUE(m.ok()) << m.status();
  absl::StatusOr<std::string> text = ModelProgram(*m, micro_batch);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

TEST(ModelReader, ReadsTheSpecItWasGeneratedFrom) {
  // attention=unfused: the scores' batched matmul, softmax and the matmul with v.
  for (const char* preset : {"gpt3-1.3b,layers=5", "llama3-70b,layers=3", "llama3-8b,dtype=f16",
                             "gpt3-1.3b,layers=2,attention=unfused"}) {
    SCOPED_TRACE(preset);
    absl::StatusOr<ModelSpec> m = ParseModelSpec(preset);
    ASSERT_TRUE(m.ok());
    std::unique_ptr<Module> module = Parse(Emitted(preset, 4));
    ASSERT_NE(module, nullptr);
    absl::StatusOr<ModelFromIr> read = ReadModelFromIr(*module, "m.commir", m->name, 96);
    ASSERT_TRUE(read.ok()) << read.status();
    m->global_batch = 96;
    EXPECT_EQ(FormatModelSpec(read->spec), FormatModelSpec(*m));
    EXPECT_EQ(read->micro_batch, 4);
    EXPECT_EQ(read->layer().name(), "layer");
    EXPECT_EQ(read->head().name(), "head");
    EXPECT_EQ(read->functions->functions().size(), 2u);
  }
}

constexpr char kTiny[] =
    "name=t,arch=llama,layers=2,hidden=16,heads=4,kv_heads=2,ffn=24,seq=8,"
    "vocab=40,global_batch=8,dtype=f32";

absl::Status ReadEdited(const std::vector<std::pair<std::string, std::string>>& edits) {
  std::unique_ptr<Module> module = Parse(absl::StrReplaceAll(Emitted(kTiny, 1), edits));
  if (module == nullptr) return absl::InternalError("did not parse");
  return ReadModelFromIr(*module, "m.commir", "t", 8).status();
}

TEST(ModelReader, ALayerWithoutAttentionIsNamedAtItsFunction) {
  // The attention replaced by its q (same shape): the layer is no transformer layer.
  absl::Status s = ReadEdited({{"attention(%qh, %kh, %vh) {causal}", "neg(%qh)"}});
  EXPECT_THAT(s.message(), HasSubstr("m.commir:"));
  EXPECT_THAT(s.message(), HasSubstr("@layer is not a pre-norm attention + MLP"));
  EXPECT_THAT(s.message(), HasSubstr("0 attention ops"));
}

TEST(ModelReader, ALayerTheLayoutStepCannotLayOutIsNamedAtTheOp) {
  // A reduction in the MLP: the rules lay out no reduce_max; named at its line:col.
  absl::Status s = ReadEdited({{"%a = mul(%s, %w) : f32[1, 8, 24]",
                                "%a0 = mul(%s, %w) : f32[1, 8, 24]\n  %m = reduce_max(%a0) {dims "
                                "= [2]} : f32[1, 8]\n  %a = tanh(%a0) : f32[1, 8, 24]"}});
  EXPECT_THAT(std::string(s.message()), ::testing::MatchesRegex(
                               "m\\.commir:[0-9]+:[0-9]+: @layer: the Megatron layout: .*"));
  EXPECT_THAT(s.message(), HasSubstr("no Megatron layout rule for `reduce_max`"));
}

int LineOf(const std::string& text, const std::string& what) {
  const size_t at = text.find(what);
  EXPECT_NE(at, std::string::npos) << what;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
}

// The functions handed to the search are copies of the file's that keep its positions,
// so that a layout error found later (for a tp the search tries) points into the file,
// after the module the file was parsed into is gone.
TEST(ModelReader, TheFunctionsKeepTheFilesPositions) {
  const std::string text = Emitted(kTiny, 1);
  absl::StatusOr<ModelFromIr> read = [&]() -> absl::StatusOr<ModelFromIr> {
    std::unique_ptr<Module> module = Parse(text);
    if (module == nullptr) return absl::InternalError("did not parse");
    return ReadModelFromIr(*module, "m.commir", "t", 8);
  }();
  ASSERT_TRUE(read.ok()) << read.status();
  // 4 heads split over tp=3 cannot be laid out: the error names the layer's output
  // projection weight where the file declares it (found in the text here), not where a
  // re-printed copy would have it.
  MegatronLayoutOptions o;
  o.layout = LayerLayout{3, 1, false, 1};
  o.file = "m.commir";
  absl::Status s = MegatronLayoutModule(read->layer(), o).status();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(": @layer: the Megatron layout: %wo's dimension 0 (16) "
                                     "does not split over 3 devices"));
  const int layer_line = LineOf(text, "func @layer(");
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  const std::string declaration(lines[layer_line - 1]);
  const size_t col = declaration.find("%wo:");
  ASSERT_NE(col, std::string::npos);
  EXPECT_THAT(std::string(s.message()),
              ::testing::StartsWith(absl::StrCat("m.commir:", layer_line, ":", col + 1, ": ")));
}

// The plan search's layer cost lays out the file's functions themselves (clones, no
// text): its error for a layout they cannot take points at the file's line:col, after the
// module the file was parsed into is gone; a function built in memory has no file.
TEST(ModelReader, LayerCostErrorsPointIntoTheFile) {
  const std::string text = Emitted(kTiny, 1);
  absl::StatusOr<ModelFromIr> read = [&]() -> absl::StatusOr<ModelFromIr> {
    std::unique_ptr<Module> module = Parse(text);
    if (module == nullptr) return absl::InternalError("did not parse");
    return ReadModelFromIr(*module, "m.commir", "t", 8);
  }();
  ASSERT_TRUE(read.ok()) << read.status();
  LayerCostOptions o;
  o.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
  o.schedule = LayerSchedule::None();
  o.functions = read->functions;
  o.layer_name = read->layer_name;
  o.head_name = read->head_name;
  o.functions_file = "m.commir";
  const LayerLayout tp3{3, 1, false, 1};
  absl::Status s = MeasureLayerCost(read->spec, LayerKind::kTransformer, tp3, o).status();
  ASSERT_FALSE(s.ok());
  const int layer_line = LineOf(text, "func @layer(");
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  const size_t col = std::string(lines[layer_line - 1]).find("%wo:");
  ASSERT_NE(col, std::string::npos);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("m.commir:", layer_line, ":", col + 1,
                                     ": @layer: the Megatron layout: %wo's dimension 0")));
  // The same function built in memory (the generator's): no file, no position.
  absl::StatusOr<std::unique_ptr<Module>> built = SingleDeviceLayer(read->spec, 1);
  ASSERT_TRUE(built.ok()) << built.status();
  o.functions = std::shared_ptr<const Module>(*std::move(built));
  o.layer_name = kLayerFunction;
  o.functions_file = "";
  s = MeasureLayerCost(read->spec, LayerKind::kTransformer, tp3, o).status();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(": @layer: the Megatron layout: "));
  EXPECT_THAT(std::string(s.message()), ::testing::Not(HasSubstr(".commir")));
  // And with the layout it can take, the file's functions cost what the spec's do.
  const LayerLayout tp2{2, 1, false, 1};
  o.functions = read->functions;
  o.layer_name = read->layer_name;
  absl::StatusOr<LayerCost> own = MeasureLayerCost(read->spec, LayerKind::kTransformer, tp2, o);
  ASSERT_TRUE(own.ok()) << own.status();
  LayerCostOptions generated = o;
  generated.functions = nullptr;
  absl::StatusOr<LayerCost> spec = MeasureLayerCost(read->spec, LayerKind::kTransformer, tp2,
                                                    generated);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_DOUBLE_EQ(own->forward_s, spec->forward_s);
  EXPECT_DOUBLE_EQ(own->backward_s, spec->backward_s);
  EXPECT_EQ(own->activation_bytes, spec->activation_bytes);
}

TEST(ModelReader, AnUnknownMlpIsNamed) {
  absl::Status s = ReadEdited({{"silu(%u)", "gelu(%u)"}});
  EXPECT_THAT(s.message(), HasSubstr("no MLP of a known kind"));
}

TEST(ModelReader, TwoTopFunctionsAreNamed) {
  std::unique_ptr<Module> module =
      Parse(Emitted(kTiny, 1) + "\nfunc @other(%a: f32[2]) -> f32[2] {\n  return %a\n}\n");
  ASSERT_NE(module, nullptr);
  absl::Status s = ReadModelFromIr(*module, "m.commir", "t", 8).status();
  EXPECT_THAT(s.message(), HasSubstr("there are @model, @other"));
}

TEST(ModelReader, AModelWithoutAHeadIsNamed) {
  std::unique_ptr<Module> module = Parse(R"(
func @model(%x: f32[2, 4]) -> f32[2, 4] {
  %a = call @layer(%x) : f32[2, 4]
  return %a
}
func @layer(%x: f32[2, 4]) -> f32[2, 4] {
  %y = tanh(%x)
  return %y
}
)");
  ASSERT_NE(module, nullptr);
  absl::Status s = ReadModelFromIr(*module, "m.commir", "t", 8).status();
  EXPECT_THAT(s.message(), HasSubstr("m.commir:2:1: the top function @model calls only @layer"));
}

TEST(ModelReader, ALaidOutLayerIsRefused) {
  absl::Status s = ReadEdited({{"func @layer(", "mesh @m(tp=2)\nfunc @layer("}});
  EXPECT_THAT(s.message(), HasSubstr("has a mesh or layouts"));
}

TEST(ModelReader, AGlobalBatchNotAMultipleOfTheMicroBatchIsAnError) {
  std::unique_ptr<Module> module = Parse(Emitted(kTiny, 4));
  ASSERT_NE(module, nullptr);
  absl::Status s = ReadModelFromIr(*module, "m.commir", "t", 6).status();
  EXPECT_THAT(s.message(), HasSubstr("not a multiple of the file's micro-batch 4"));
}

TEST(ModelReader, AMicroBatchOfZeroIsRefusedAtTheLayer) {
  // Every batch dimension 0 (the file parses): refused before anything divides by it.
  absl::Status s = ReadEdited({{"[1, ", "[0, "}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("m.commir:"));
  EXPECT_THAT(s.message(), HasSubstr("@layer is not"));
  EXPECT_THAT(s.message(), HasSubstr("is [0, 8, 16]: every size must be at least 1"));
}

TEST(ModelReader, AnOpInTheTopFunctionIsAnErrorAtItsLine) {
  // An op the search would not cost, on the top function's fourth line (after the
  // embedding's and the first layer's calls).
  absl::Status s = ReadEdited({{"  %x2 = call @layer(", "  %t = tanh(%x1) : f32[1, 8, 16]\n  %x2 = call @layer("}});
  EXPECT_THAT(s.message(), HasSubstr("m.commir:4:8: the top function @model holds `tanh`"));
}

TEST(ModelReader, ACallOfAnotherFunctionIsAnErrorAtItsLine) {
  std::unique_ptr<Module> module = Parse(
      absl::StrReplaceAll(Emitted(kTiny, 1),
                          {{"  %x2 = call @layer(%x1,", "  %h = call @helper(%x1) : f32[1, 8, 16]\n  %x2 = call @layer(%h,"}}) +
      "\nfunc @helper(%a: f32[1, 8, 16]) -> f32[1, 8, 16] {\n  return %a\n}\n");
  ASSERT_NE(module, nullptr);
  absl::Status s = ReadModelFromIr(*module, "m.commir", "t", 8).status();
  EXPECT_THAT(s.message(), HasSubstr("m.commir:4:8: the top function @model calls @helper besides "
                                     "the layer @layer and the head @head"));
}

}  // namespace
}  // namespace commir::search::plan
