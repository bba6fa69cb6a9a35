#include "transforms/autodiff/pass_options.h"

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kModule[] = R"(mesh @m(tp=2)
func @a(%x: f32[4]) -> f32[4] {
  return %x
}
func @b(%x: f32[4]) -> f32[4] {
  return %x
}
spmd func @c(%x: f32[4]) -> f32[4] on @m {
  return %x
}
)";

TEST(PickFunctionsTest, EmptyPicksEveryGlobalFunction) {
  std::unique_ptr<Module> module = testing::ParseForTest(kModule);
  ASSERT_NE(module, nullptr);
  absl::StatusOr<std::vector<Function*>> picked = PickFunctions(*module, "", "autodiff");
  ASSERT_TRUE(picked.ok()) << picked.status();
  ASSERT_EQ(picked->size(), 2u);
  EXPECT_EQ((*picked)[0]->name(), "a");
  EXPECT_EQ((*picked)[1]->name(), "b");
}

TEST(PickFunctionsTest, NamedWithOrWithoutAt) {
  std::unique_ptr<Module> module = testing::ParseForTest(kModule);
  ASSERT_NE(module, nullptr);
  for (const char* name : {"@b", "b"}) {
    absl::StatusOr<std::vector<Function*>> picked = PickFunctions(*module, name, "autodiff");
    ASSERT_TRUE(picked.ok()) << picked.status();
    ASSERT_EQ(picked->size(), 1u);
    EXPECT_EQ((*picked)[0]->name(), "b");
  }
}

TEST(PickFunctionsTest, AnUndefinedNameIsAnErrorNamingThePass) {
  std::unique_ptr<Module> module = testing::ParseForTest(kModule);
  ASSERT_NE(module, nullptr);
  absl::StatusOr<std::vector<Function*>> picked = PickFunctions(*module, "@nope", "training-step");
  ASSERT_FALSE(picked.ok());
  EXPECT_THAT(picked.status().message(),
              HasSubstr("training-step: func names @nope, which the module does not define"));
}

TEST(ValueNameListTest, StripsPercentAndSpaces) {
  EXPECT_THAT(*ValueNameList("%w1, w2 ,%b", "autodiff", "wrt"), ElementsAre("w1", "w2", "b"));
  EXPECT_THAT(*ValueNameList("", "autodiff", "wrt"), ElementsAre());
  EXPECT_THAT(*ValueNameList("  ", "autodiff", "wrt"), ElementsAre());
}

TEST(ValueNameListTest, ANameGivenTwiceIsAnError) {
  // With or without its '%', a name is the same name.
  for (const char* list : {"x,x", "%x, x", "w1,w2,%w1"}) {
    absl::StatusOr<std::vector<std::string>> names = ValueNameList(list, "autodiff", "wrt");
    ASSERT_FALSE(names.ok()) << list;
    EXPECT_THAT(names.status().message(), HasSubstr("autodiff: wrt names %")) << list;
    EXPECT_THAT(names.status().message(), HasSubstr(" twice")) << list;
  }
}

TEST(ValueNameListTest, EmptyItemsAndSpacedNamesAreErrors) {
  for (const char* list : {",,,", "a,,b", "a,", ",a", "%"}) {
    absl::StatusOr<std::vector<std::string>> names =
        ValueNameList(list, "autodiff", "remat-at");
    ASSERT_FALSE(names.ok()) << list;
    EXPECT_THAT(names.status().message(), HasSubstr("autodiff: remat-at=\"")) << list;
    EXPECT_THAT(names.status().message(), HasSubstr("has an empty name")) << list;
  }
  absl::StatusOr<std::vector<std::string>> spaced = ValueNameList("a b", "training-step", "params");
  ASSERT_FALSE(spaced.ok());
  EXPECT_THAT(spaced.status().message(), HasSubstr("training-step: params item 'a b'"));
}

}  // namespace
}  // namespace commir
