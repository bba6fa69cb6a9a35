// FoldAllToAllIntoSums (sum_scatter.h) on spmd code: which pairs fold, the scattered
// dimension once the summed ones are dropped, and what is left alone.
#include <memory>
#include <string>

#include "commir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transforms/sharding/sum_scatter.h"
#include "transforms/test_util.h"

namespace commir::sharding {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Fold(const std::string& text, int expected) {
  std::unique_ptr<Module> module = testing::ParseForTest(text);
  if (module == nullptr) return "";
  absl::StatusOr<int> folded = FoldAllToAllIntoSums(*module->functions()[0]);
  EXPECT_TRUE(folded.ok()) << folded.status();
  EXPECT_EQ(folded.value_or(-1), expected);
  return PrintModule(*module);
}

TEST(FoldAllToAllIntoSums, SumOverTheConcatenatedDimBecomesAReduceScatter) {
  std::string out = Fold(R"(mesh @m(dp=2)
spmd func @f(%x: f32[2@dp, 4, 8]) -> f32[4, 8@dp] on @m {
  %t = all_to_all(%x) {axis = dp, split_dim = 2, concat_dim = 0} : f32[2, 4, 4]
  %y = reduce_sum(%t) {dims = [0]} : f32[4, 4]
  return %y
}
)",
                         1);
  // Without keepdim the split dimension 2 is dimension 1 of the sum.
  EXPECT_THAT(out, HasSubstr("%y_local = reduce_sum(%x) {dims = [0]} : f32[4, 8]"));
  EXPECT_THAT(out, HasSubstr("%y = reduce_scatter(%y_local) {axis = dp, dim = 1} : f32[4, 4]"));
  EXPECT_THAT(out, Not(HasSubstr("all_to_all")));
}

TEST(FoldAllToAllIntoSums, LeavesOtherPairsAlone) {
  // The split dimension summed too; a second user of the all_to_all; a sum that keeps
  // the concatenated dimension.
  const std::string text = R"(mesh @m(dp=2)
spmd func @f(%x: f32[2@dp, 4, 8]) -> (f32[1, 1, 1], f32[2, 4, 4], f32[2]) on @m {
  %t = all_to_all(%x) {axis = dp, split_dim = 2, concat_dim = 0} : f32[2, 4, 4]
  %a = reduce_sum(%t) {dims = [0, 1, 2], keepdim} : f32[1, 1, 1]
  %u = all_to_all(%x) {axis = dp, split_dim = 1, concat_dim = 0} : f32[2, 2, 8]
  %b = reduce_sum(%u) {dims = [0]} : f32[2, 8]
  %c = add(%u, %u) : f32[2, 2, 8]
  %v = all_to_all(%x) {axis = dp, split_dim = 2, concat_dim = 0} : f32[2, 4, 4]
  %w = reduce_sum(%v) {dims = [1, 2]} : f32[2]
  return %a, %t, %w
}
)";
  std::unique_ptr<Module> module = testing::ParseForTest(text);
  ASSERT_NE(module, nullptr);
  const std::string before = PrintModule(*module);
  absl::StatusOr<int> folded = FoldAllToAllIntoSums(*module->functions()[0]);
  ASSERT_TRUE(folded.ok()) << folded.status();
  EXPECT_EQ(*folded, 0);
  EXPECT_EQ(PrintModule(*module), before);
}

}  // namespace
}  // namespace commir::sharding
