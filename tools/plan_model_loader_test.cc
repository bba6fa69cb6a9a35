// `--plan FILE.commir,global_batch=N`: a file written by --emit-model searches to the
// same ranked plans as its spec with the search kept to the file's micro-batch; the
// errors for a missing global batch, a bad option, a file that does not parse; an
// edited layer is costed as written (the costs change), one outside the layout rules is
// refused when the file is read.
#include "tools/plan_model_loader.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/plan/layer_cost.h"
#include "search/plan/model_program.h"
#include "search/plan/model_spec.h"
#include "search/plan/parallel_plan.h"
#include "search/plan/plan_search.h"
#include "sim/hardware.h"

namespace commir::search {
namespace {

using ::testing::HasSubstr;

constexpr char kSpec[] =
    "name=tiny,arch=llama,layers=6,hidden=512,heads=8,kv_heads=2,ffn=1536,seq=512,"
    "vocab=8000,global_batch=16";

std::string WriteFile(const std::string& name, const std::string& text) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = (std::filesystem::path(tmp != nullptr ? tmp : "/tmp") / name).string();
  std::ofstream(path) << text;
  return path;
}

std::string EmittedFile(const std::string& name, int64_t micro_batch) {
  absl::StatusOr<plan::ModelSpec> m = plan::ParseModelSpec(kSpec);
  EXPECT_TRUE(m.ok()) << m.status();
  absl::StatusOr<std::string> text = plan::ModelProgram(*m, micro_batch);
  EXPECT_TRUE(text.ok()) << text.status();
  return WriteFile(name, text.ok() ? *text : "");
}

// The search as --plan runs it: on a file's own functions when it has them.
plan::PlanSearchResult Search(const plan::ModelSpec& m, int64_t only_micro_batch,
                              const LoadedModel* file = nullptr) {
  plan::LayerCostOptions o;
  o.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
  o.predict.gpus_per_node = 8;
  if (file != nullptr) {
    o.functions = file->functions;
    o.layer_name = file->layer_name;
    o.head_name = file->head_name;
    o.functions_file = file->file;
  }
  plan::LayerCostCache layers(o);
  plan::PlanSearchOptions options;
  options.gpus = 4;
  options.top = 8;
  options.threads = 1;
  options.only_micro_batch = only_micro_batch;
  absl::StatusOr<plan::PlanSearchResult> r = plan::SearchPlans(m, options, layers);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : plan::PlanSearchResult{};
}

TEST(PlanModelLoader, EmittedFileSearchesLikeItsSpecAtItsMicroBatch) {
  const std::string path = EmittedFile("tiny.commir", 2);
  absl::StatusOr<LoadedModel> loaded = LoadPlanModel(path + ",global_batch=16");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->micro_batch, 2);
  absl::StatusOr<plan::ModelSpec> spec = plan::ParseModelSpec(kSpec);
  ASSERT_TRUE(spec.ok());
  spec->name = "tiny";
  EXPECT_EQ(plan::FormatModelSpec(loaded->spec), plan::FormatModelSpec(*spec));

  const plan::PlanSearchResult by_file = Search(loaded->spec, loaded->micro_batch, &*loaded);
  const plan::PlanSearchResult by_spec = Search(*spec, 2);
  ASSERT_FALSE(by_file.ranked.empty());
  ASSERT_EQ(by_file.ranked.size(), by_spec.ranked.size());
  for (size_t i = 0; i < by_file.ranked.size(); ++i) {
    EXPECT_EQ(by_file.ranked[i].plan.micro_batch, 2);
    EXPECT_EQ(plan::DescribePlan(by_file.ranked[i].plan),
              plan::DescribePlan(by_spec.ranked[i].plan));
    EXPECT_EQ(by_file.ranked[i].cost.time.breakdown.total_s,
              by_spec.ranked[i].cost.time.breakdown.total_s);
  }
}

// `--emit-model=SPEC,attention=unfused` read back by `--plan FILE.commir,global_batch=N`:
// the reader finds the unfused attention (q k^T, softmax, times v) and gives back the
// spec, and the plan search on the file's own functions ranks the plans the spec's
// generated layers do, at the same costs.
TEST(PlanModelLoader, AnUnfusedAttentionFileRoundTripsToItsSpec) {
  constexpr char kUnfused[] =
      "name=tinyu,arch=gpt,layers=4,hidden=256,heads=4,ffn=1024,seq=256,vocab=8000,"
      "global_batch=16,attention=unfused";
  absl::StatusOr<plan::ModelSpec> spec = plan::ParseModelSpec(kUnfused);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::string> text = plan::ModelProgram(*spec, 2);
  ASSERT_TRUE(text.ok()) << text.status();
  const std::string path = WriteFile("tinyu.commir", *text);
  absl::StatusOr<LoadedModel> loaded = LoadPlanModel(path + ",global_batch=16");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->micro_batch, 2);
  EXPECT_EQ(loaded->spec.attention, plan::AttentionKind::kUnfused);
  EXPECT_EQ(plan::FormatModelSpec(loaded->spec), plan::FormatModelSpec(*spec));

  const plan::PlanSearchResult by_file = Search(loaded->spec, loaded->micro_batch, &*loaded);
  const plan::PlanSearchResult by_spec = Search(*spec, 2);
  ASSERT_FALSE(by_file.ranked.empty());
  ASSERT_EQ(by_file.ranked.size(), by_spec.ranked.size());
  for (size_t i = 0; i < by_file.ranked.size(); ++i) {
    EXPECT_EQ(plan::DescribePlan(by_file.ranked[i].plan),
              plan::DescribePlan(by_spec.ranked[i].plan));
    EXPECT_EQ(by_file.ranked[i].cost.time.breakdown.total_s,
              by_spec.ranked[i].cost.time.breakdown.total_s);
  }
}

TEST(PlanModelLoader, AFileNeedsItsGlobalBatch) {
  const std::string path = EmittedFile("nobatch.commir", 1);
  absl::StatusOr<LoadedModel> loaded = LoadPlanModel(path);
  EXPECT_THAT(loaded.status().message(), HasSubstr("holds no global batch"));
  loaded = LoadPlanModel(path + ",seq=4");
  EXPECT_THAT(loaded.status().message(), HasSubstr("'seq' is not an option of a model file"));
  // An unknown key is named even without a global batch (not told to add one).
  EXPECT_THAT(CommirModelGlobalBatch(path + ",foo=1").status().message(),
              HasSubstr("'foo' is not an option of a model file"));
  loaded = LoadPlanModel(path + ",global_batch=4,global_batch=8");
  EXPECT_THAT(loaded.status().message(), HasSubstr("global_batch is given twice"));
  EXPECT_EQ(*CommirModelGlobalBatch(path + ",global_batch=4"), 4);
  EXPECT_EQ(*CommirModelGlobalBatch(path), 0);
}

TEST(PlanModelLoader, AMissingCommirFileIsSaidToBeMissing) {
  absl::StatusOr<LoadedModel> loaded = LoadPlanModel("nosuch.commir");
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(loaded.status().message(), HasSubstr("nosuch.commir: no such file"));
  EXPECT_THAT(loaded.status().message(), ::testing::Not(HasSubstr("preset")));
}

// A directory is read like commir-opt reads one: refused with that reason, not sized
// by seeking to its end (which asked for an impossible buffer).
TEST(PlanModelLoader, ADirectoryIsRefusedAsOne) {
  const std::string dir = WriteFile("", "") + "models.commir";
  std::filesystem::create_directories(dir);
  const std::string plain_dir = WriteFile("", "") + "models";
  std::filesystem::create_directories(plain_dir);
  absl::StatusOr<LoadedModel> plain = LoadPlanModel(plain_dir + ",global_batch=4");
  ASSERT_FALSE(plain.ok());
  EXPECT_THAT(plain.status().message(),
              HasSubstr(plain_dir + ": cannot read file: it is a directory"));
  for (const std::string& arg : {dir + ",global_batch=4", dir}) {
    absl::StatusOr<LoadedModel> loaded = LoadPlanModel(arg);
    ASSERT_FALSE(loaded.ok()) << arg;
    EXPECT_THAT(loaded.status().message(), HasSubstr(dir + ": cannot read file: it is a directory"))
        << arg;
  }
}

// A ".commir" inside a directory name is part of the path: the options start after the
// file's own ".commir".
TEST(PlanModelLoader, ADirectoryNamedCommirHoldsTheFile) {
  std::filesystem::create_directories(WriteFile("", "") + "my.commir.d");
  const std::string path = EmittedFile("my.commir.d/tiny.commir", 1);
  EXPECT_TRUE(IsCommirModel(path + ",global_batch=16"));
  absl::StatusOr<int64_t> global_batch = CommirModelGlobalBatch(path + ",global_batch=16");
  ASSERT_TRUE(global_batch.ok()) << global_batch.status();
  EXPECT_EQ(*global_batch, 16);
  absl::StatusOr<LoadedModel> loaded = LoadPlanModel(path + ",global_batch=16");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->file, path);
  EXPECT_EQ(loaded->spec.global_batch, 16);
}

TEST(PlanModelLoader, ParseErrorsNameTheFileLineAndColumn) {
  const std::string path = WriteFile(
      "broken.commir", "func @model(%x: f32[2]) -> f32[2] {\n  %y = nope(%x)\n  return %y\n}\n");
  absl::StatusOr<LoadedModel> loaded = LoadPlanModel(path + ",global_batch=4");
  EXPECT_THAT(loaded.status().message(), HasSubstr("broken.commir:2:"));
}

TEST(PlanModelLoader, AnEditedLayerIsCostedAsWritten) {
  std::ifstream in(EmittedFile("plain.commir", 1));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // An extra elementwise op in the layer's MLP (after the SwiGLU product).
  const std::string edited = absl::StrReplaceAll(
      text, {{"%a = mul(%s, %w)", "%a0 = mul(%s, %w) : bf16[1, 512, 1536]\n  %a = tanh(%a0)"}});
  ASSERT_NE(edited, text);
  absl::StatusOr<LoadedModel> plain =
      LoadPlanModel(WriteFile("plain.commir", text) + ",global_batch=16");
  absl::StatusOr<LoadedModel> loaded =
      LoadPlanModel(WriteFile("edited.commir", edited) + ",global_batch=16");
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(
      plan::FormatModelSpec(loaded->spec),
      absl::StrReplaceAll(plan::FormatModelSpec(plain->spec), {{"name=plain", "name=edited"}}));
  const plan::PlanSearchResult by_plain = Search(plain->spec, 1, &*plain);
  const plan::PlanSearchResult by_edited = Search(loaded->spec, 1, &*loaded);
  ASSERT_FALSE(by_plain.ranked.empty());
  ASSERT_FALSE(by_edited.ranked.empty());
  // The tanh is real work: the best plan's iteration takes longer.
  EXPECT_GT(by_edited.ranked.front().cost.time.breakdown.total_s,
            by_plain.ranked.front().cost.time.breakdown.total_s);
}

TEST(PlanModelLoader, ALayerOutsideTheLayoutRulesIsAnError) {
  std::ifstream in(EmittedFile("plain2.commir", 1));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A reduction in the MLP: no Megatron rule lays it out.
  const std::string edited =
      absl::StrReplaceAll(text, {{"%a = mul(%s, %w)",
                                  "%a0 = mul(%s, %w) : bf16[1, 512, 1536]\n  %m = reduce_max(%a0) "
                                  "{dims = [2]} : bf16[1, 512]\n  %a = mul(%a0, %a0)"}});
  ASSERT_NE(edited, text);
  absl::StatusOr<LoadedModel> loaded =
      LoadPlanModel(WriteFile("reduce.commir", edited) + ",global_batch=16");
  EXPECT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(), HasSubstr("reduce.commir:"));
  EXPECT_THAT(loaded.status().message(), HasSubstr("no Megatron layout rule for `reduce_max`"));
  // At the reduce_max's own line in the file.
  const size_t at = edited.find("reduce_max");
  const int line = 1 + static_cast<int>(std::count(edited.begin(), edited.begin() + at, '\n'));
  EXPECT_THAT(loaded.status().message(),
              HasSubstr(absl::StrCat("reduce.commir:", line, ":")));
}

TEST(PlanModelLoader, SpecsAndSpecFilesStillLoad) {
  absl::StatusOr<LoadedModel> loaded = LoadPlanModel("llama3-8b");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->micro_batch, 0);
  EXPECT_FALSE(IsCommirModel("llama3-8b"));
  EXPECT_TRUE(IsCommirModel(EmittedFile("ir.commir", 1)));
  EXPECT_FALSE(IsCommirModel(WriteFile("spec.commir", "// a spec\nllama3-8b,seq=1024\n")));
  EXPECT_TRUE(IsCommirModel("b.commir,global_batch=8"));
  EXPECT_FALSE(IsCommirModel("b.commirx"));
}

}  // namespace
}  // namespace commir::search
