// A model written as CommIR read back: the sizes of the spec it was generated from, for
// GPT and Llama (grouped-query attention); and the errors that name what a file lacks.
#include "search/plan/model_reader.h"

#include <memory>
#include <string>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "commir/printer.h"
#include "parser/parser.h"
#include "search/plan/megatron_layout.h"
#include "search/plan/model_program.h"
#include "search/plan/model_spec.h"

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
  for (const char* preset : {"gpt3-1.3b,layers=5", "llama3-70b,layers=3", "llama3-8b,dtype=f16"}) {
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
    EXPECT_THAT(read->layer_function, HasSubstr("func @layer("));
    EXPECT_THAT(read->head_function, HasSubstr("func @head("));
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

// The functions handed to the search are the file's own lines at the file's positions, so
// that a layout error found later (for a tp the search tries) points into the file.
TEST(ModelReader, TheFunctionsKeepTheFilesPositions) {
  const std::string text = Emitted(kTiny, 1);
  std::unique_ptr<Module> module = Parse(text);
  ASSERT_NE(module, nullptr);
  absl::StatusOr<ModelFromIr> read = ReadModelFromIr(*module, "m.commir", "t", 8, text);
  ASSERT_TRUE(read.ok()) << read.status();
  const size_t at = text.find("func @layer(");
  const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
  // 4 heads split over tp=3 cannot be laid out: the error names a line of the layer in
  // the file, not of a re-printed copy.
  MegatronLayoutOptions o;
  o.layout = LayerLayout{3, 1, false, 1};
  o.file = "m.commir";
  absl::Status s = MegatronLayoutText(read->layer_function, o).status();
  ASSERT_FALSE(s.ok());
  absl::string_view message = s.message();
  ASSERT_TRUE(absl::ConsumePrefix(&message, "m.commir:")) << s;
  int error_line = 0;
  ASSERT_TRUE(absl::SimpleAtoi(message.substr(0, message.find(':')), &error_line)) << s;
  EXPECT_THAT(s.message(), HasSubstr(": @layer: the Megatron layout: "));
  EXPECT_GE(error_line, line);
  EXPECT_LT(error_line, line + 30);
  // Laid out from the file's own text or from the print, the same program.
  o.layout = LayerLayout{2, 1, true, 1};
  absl::StatusOr<ModelFromIr> printed = ReadModelFromIr(*module, "m.commir", "t", 8);
  ASSERT_TRUE(printed.ok());
  EXPECT_EQ(*MegatronLayoutText(read->layer_function, o),
            *MegatronLayoutText(printed->layer_function, o));
}

TEST(ModelReader, AFunctionTheLineScanCannotCutOutIsPrinted) {
  // The layer's closing brace on its return's line: the scan would run into the head.
  const std::string text =
      absl::StrReplaceAll(Emitted(kTiny, 1), {{"  return %out\n}", "  return %out }"}});
  std::unique_ptr<Module> module = Parse(text);
  ASSERT_NE(module, nullptr);
  absl::StatusOr<ModelFromIr> read = ReadModelFromIr(*module, "m.commir", "t", 8, text);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->layer_function, PrintFunction(*module->FindFunction("layer")));
  EXPECT_EQ(read->head_function.front(), '\n');  // the head is cut out as written
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
  // An op the search would not cost, on the top function's third line.
  absl::Status s = ReadEdited({{"  %x2 = call @layer(", "  %t = tanh(%x1) : f32[1, 8, 16]\n  %x2 = call @layer("}});
  EXPECT_THAT(s.message(), HasSubstr("m.commir:3:8: the top function @model holds `tanh`"));
}

TEST(ModelReader, ACallOfAnotherFunctionIsAnErrorAtItsLine) {
  std::unique_ptr<Module> module = Parse(
      absl::StrReplaceAll(Emitted(kTiny, 1),
                          {{"  %x2 = call @layer(%x1,", "  %h = call @helper(%x1) : f32[1, 8, 16]\n  %x2 = call @layer(%h,"}}) +
      "\nfunc @helper(%a: f32[1, 8, 16]) -> f32[1, 8, 16] {\n  return %a\n}\n");
  ASSERT_NE(module, nullptr);
  absl::Status s = ReadModelFromIr(*module, "m.commir", "t", 8).status();
  EXPECT_THAT(s.message(), HasSubstr("m.commir:3:8: the top function @model calls @helper besides "
                                     "the layer @layer and the head @head"));
}

}  // namespace
}  // namespace commir::search::plan
