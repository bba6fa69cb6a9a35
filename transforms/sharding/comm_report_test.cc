#include "transforms/sharding/comm_report.h"

#include <memory>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "transforms/pass.h"
#include "transforms/test_util.h"

namespace commir::sharding {
namespace {

TEST(CommReport, CountsEachKindAndItsBytesPerDevice) {
  std::unique_ptr<Module> m = testing::ParseForTest(R"(mesh @m(tp=4)
spmd func @f(%x: f32[256@tp, 128], %y: f32[256, 128] partial(tp)) -> (f32[256, 128], f32[256@tp, 128], f32[256, 128]) {
  %a = all_gather(%x) {axis = tp, dim = 0} : f32[256, 128]
  %b = reduce_scatter(%y) {axis = tp, dim = 0} : f32[64, 128]
  %c = all_reduce(%y) {axis = tp} : f32[256, 128]
  %d = all_gather(%b) {axis = tp, dim = 0} : f32[256, 128]
  return %a, %b, %c
}
)");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(FormatCommReport(*m),
            "// comm-report @f: spmd on @m (4 devices)\n"
            "//   all_gather       count 2  bytes/device 196608\n"
            "//   reduce_scatter   count 1  bytes/device 98304\n"
            "//   all_reduce       count 1  bytes/device 196608\n"
            "//   total            count 4  bytes/device 491520\n");
}

TEST(CommReport, LoopsMultiplyByTheirTripCount) {
  std::unique_ptr<Module> m = testing::ParseForTest(R"(mesh @m(tp=4)
spmd func @ring(%a: f32[512@tp, 256], %b: f32[256, 128@tp]) -> f32[512, 128@tp] {
  %r = rank() {axis = tp} : index
  %c0 = full() {value = 0.0} : f32[512, 32]
  %c, %last = for %i = 0 to 4 step 1 iter(%acc = %c0, %blk = %a) {
    %next = shift(%blk) {axis = tp, offset = 1, stream = 1} : f32[128, 256]
    %part = matmul(%blk, %b) : f32[128, 32]
    %src = sub(%r, %i) : index
    %src4 = rem(%src, 4) : index
    %off = mul(%src4, 128) : index
    %acc1 = dynamic_update_slice(%acc, %part, %off) {dim = 0} : f32[512, 32]
    yield %acc1, %next
  } : (f32[512, 32], f32[128, 256])
  return %c
}
)");
  ASSERT_NE(m, nullptr);
  FunctionCommReport report = ComputeCommReport(*m->functions()[0]);
  ASSERT_EQ(report.collectives.size(), 1u);
  EXPECT_EQ(report.collectives[0].kind, OpKind::kShift);
  EXPECT_EQ(report.collectives[0].count, 4);
  // Each shift sends its whole 128 KiB block.
  EXPECT_DOUBLE_EQ(report.total_bytes(), 4 * 131072.0);
}

TEST(CommReport, GlobalFunctionsAndFunctionsWithoutCollectives) {
  std::unique_ptr<Module> m = testing::ParseForTest(R"(mesh @m(tp=2)
func @g(%x: f32[4@tp]) -> f32[4] {
  return %x
}
spmd func @s(%x: f32[4@tp]) -> f32[4@tp] {
  %y = neg(%x) : f32[2]
  return %y
}
)");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(FormatCommReport(*m),
            "// comm-report @g: global function on @m (2 devices), no explicit communication "
            "(lower it with lower-to-spmd)\n"
            "// comm-report @s: spmd on @m (2 devices)\n"
            "//   no collectives\n");
  EXPECT_TRUE(ComputeCommReport(*m->functions()[0]).collectives.empty());
}

TEST(CommReportPass, WritesTheReportAndLeavesTheModule) {
  std::unique_ptr<Module> m = testing::ParseForTest(R"(mesh @m(tp=2)
spmd func @s(%x: f32[4@tp]) -> f32[4] {
  %y = all_gather(%x) {axis = tp, dim = 0} : f32[4]
  return %y
}
)");
  ASSERT_NE(m, nullptr);
  CommReportPass pass;
  std::ostringstream out;
  pass.set_output(&out);
  ASSERT_TRUE(pass.Run(*m).ok());
  EXPECT_EQ(out.str(),
            "// comm-report @s: spmd on @m (2 devices)\n"
            "//   all_gather       count 1  bytes/device 8\n"
            "//   total            count 1  bytes/device 8\n");
  EXPECT_EQ(m->functions()[0]->body()->size(), 2u);
}

}  // namespace
}  // namespace commir::sharding
