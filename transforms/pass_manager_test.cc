#include "transforms/pass_manager.h"

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "commir/diagnostics.h"
#include "commir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transforms/registry/pass_registry.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ParseForTest;

constexpr char kInput[] = R"(func @f(%x: f32[4]) -> f32[4] {
  %a = neg(%x) : f32[4]
  %b = neg(%a) : f32[4]
  return %b
}
)";

std::vector<std::string>& Log() {
  static auto* log = new std::vector<std::string>();
  return *log;
}

// Appends its name to Log().
class RecordingPass : public Pass {
 public:
  using Pass::Pass;
  absl::Status Run(Module&) override {
    Log().push_back(name());
    return absl::OkStatus();
  }
};

// Reports a located error and fails.
class FailingPass : public Pass {
 public:
  using Pass::Pass;
  absl::Status Run(Module& module) override {
    Log().push_back(name());
    Operation* first = module.functions()[0]->body()->front();
    diagnostics().Error(first->loc(), "cannot handle this op");
    return absl::UnimplementedError("unsupported input");
  }
};

// Gives the first op a result type its operand cannot produce: invalid IR.
class BreakingPass : public Pass {
 public:
  using Pass::Pass;
  absl::Status Run(Module& module) override {
    Log().push_back(name());
    module.functions()[0]->body()->front()->result(0)->set_type(
        Type::Tensor(ElementType::kF32, {5}));
    return absl::OkStatus();
  }
};

// Counts its runs in a statistic and remarks on the module and on the first op; then
// fails when asked to, after remarking.
class RemarkingPass : public Pass {
 public:
  using Pass::Pass;
  absl::Status Run(Module& module) override {
    Log().push_back(name());
    AddToStatistic("runs", "Times run", 1);
    AddToStatistic("runs", "Times run", 1);
    ReportRewrites(0, "Things rewritten", "nothing to rewrite here");
    Remark("about the first op", module.functions()[0]->body()->front()->loc());
    if (name() == "remark-then-fail") return absl::InternalError("gave up");
    return absl::OkStatus();
  }
};

const std::vector<PassInfo>& TestRegistry() {
  static const auto* registry = new std::vector<PassInfo>{
      {"record", "records its run", {}, MakePass<RecordingPass>},
      {"remark", "remarks", {}, MakePass<RemarkingPass>},
      {"remark-then-fail", "remarks, then fails", {}, MakePass<RemarkingPass>},
      {"fail", "fails", {}, MakePass<FailingPass>},
      {"break", "breaks the IR", {}, MakePass<BreakingPass>},
  };
  return *registry;
}

std::unique_ptr<Pass> Make(absl::string_view name) {
  for (const PassInfo& info : TestRegistry()) {
    if (info.name == name) return info.CreateWithDefaults();
  }
  return nullptr;
}

class PassManagerTest : public ::testing::Test {
 protected:
  void SetUp() override { Log().clear(); }
};

TEST_F(PassManagerTest, RunsPassesInOrder) {
  std::unique_ptr<Module> module = ParseForTest(kInput);
  ASSERT_NE(module, nullptr);
  PassManager pm;
  pm.AddPass(Make("record"));
  pm.AddPass(Make("break"));
  pm.AddPass(Make("record"));
  EXPECT_TRUE(pm.Run(*module).ok());
  EXPECT_THAT(Log(), ElementsAre("record", "break", "record"));
}

TEST_F(PassManagerTest, PrintsIrAfterEveryPass) {
  std::unique_ptr<Module> module = ParseForTest(kInput);
  ASSERT_NE(module, nullptr);
  PassManager pm;
  pm.AddPass(FindRegisteredPass("canonicalize")->CreateWithDefaults());
  pm.AddPass(Make("record"));
  std::ostringstream dump;
  pm.set_print_ir_after_all(&dump);
  ASSERT_TRUE(pm.Run(*module).ok());
  EXPECT_EQ(dump.str(), R"(// -----// IR Dump After canonicalize //----- //
func @f(%x: f32[4]) -> f32[4] {
  return %x
}
// -----// IR Dump After record //----- //
func @f(%x: f32[4]) -> f32[4] {
  return %x
}
)");
}

TEST_F(PassManagerTest, AFailingPassStopsThePipeline) {
  std::unique_ptr<Module> module = ParseForTest(kInput);
  ASSERT_NE(module, nullptr);
  PassManager pm;
  pm.AddPass(Make("fail"));
  pm.AddPass(Make("record"));
  std::ostringstream dump;
  pm.set_print_ir_after_all(&dump);
  DiagnosticEngine diagnostics;
  absl::Status status = pm.Run(*module, diagnostics);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), "pass 'fail' failed: unsupported input");
  EXPECT_THAT(Log(), ElementsAre("fail"));
  EXPECT_EQ(dump.str(), "");
  EXPECT_EQ(diagnostics.Render("in.commir", kInput),
            "in.commir:2:8: error: pass 'fail': cannot handle this op\n"
            "  %a = neg(%x) : f32[4]\n"
            "       ^\n");
}

TEST_F(PassManagerTest, RunWithoutEngineFoldsLocatedErrorsIntoTheMessage) {
  std::unique_ptr<Module> module = ParseForTest(kInput);
  ASSERT_NE(module, nullptr);
  PassManager pm;
  pm.AddPass(Make("fail"));
  absl::Status status = pm.Run(*module);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(status.message()),
            "pass 'fail' failed: unsupported input\n2:8: error: pass 'fail': cannot handle this op");
}

TEST_F(PassManagerTest, VerifyEachNamesThePassThatBrokeTheIr) {
  std::unique_ptr<Module> module = ParseForTest(kInput);
  ASSERT_NE(module, nullptr);
  PassManager pm;
  pm.set_verify_each(true);
  pm.AddPass(Make("record"));
  pm.AddPass(Make("break"));
  pm.AddPass(Make("record"));
  DiagnosticEngine diagnostics;
  absl::Status status = pm.Run(*module, diagnostics);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message(), "pass 'break' produced invalid IR");
  EXPECT_THAT(Log(), ElementsAre("record", "break"));
  ASSERT_TRUE(diagnostics.has_errors());
  EXPECT_THAT(diagnostics.Sorted()[0].message, HasSubstr("invalid IR after pass 'break': "));
  EXPECT_EQ(diagnostics.Sorted()[0].loc.line, 2);
}

TEST_F(PassManagerTest, WithoutVerifyEachBrokenIrGoesUnnoticed) {
  std::unique_ptr<Module> module = ParseForTest(kInput);
  ASSERT_NE(module, nullptr);
  PassManager pm;
  pm.AddPass(Make("break"));
  EXPECT_TRUE(pm.Run(*module).ok());
}

TEST_F(PassManagerTest, RemarksReachTheHandlerAfterEachPassInOrder) {
  std::unique_ptr<Module> module = ParseForTest(kInput);
  ASSERT_NE(module, nullptr);
  PassManager pm;
  pm.AddPass(Make("remark"));
  pm.AddPass(Make("record"));
  pm.AddPass(Make("remark"));
  std::vector<std::string> seen;
  std::ostringstream dump;
  pm.set_print_ir_after_all(&dump);
  pm.set_remark_handler([&](const Pass& pass, const PassRemark& remark) {
    // Remarks come before the pass's IR dump: the handler sees the dumps so far (one
    // '@' each).
    const std::string dumped = dump.str();
    seen.push_back(absl::StrCat(pass.name(), " ", remark.loc.line, ":", remark.loc.col, " ",
                                remark.message, " after ",
                                std::count(dumped.begin(), dumped.end(), '@'), " dumps"));
  });
  ASSERT_TRUE(pm.Run(*module).ok());
  EXPECT_THAT(seen,
              ElementsAre("remark 0:0 pass 'remark' rewrote nothing: nothing to rewrite here "
                          "after 0 dumps",
                          "remark 2:8 about the first op after 0 dumps",
                          "remark 0:0 pass 'remark' rewrote nothing: nothing to rewrite here "
                          "after 2 dumps",
                          "remark 2:8 about the first op after 2 dumps"));
}

TEST_F(PassManagerTest, RemarksOfAFailingPassAreStillDelivered) {
  std::unique_ptr<Module> module = ParseForTest(kInput);
  ASSERT_NE(module, nullptr);
  PassManager pm;
  pm.AddPass(Make("remark-then-fail"));
  int remarks = 0;
  pm.set_remark_handler([&](const Pass&, const PassRemark&) { ++remarks; });
  EXPECT_EQ(pm.Run(*module).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(remarks, 2);
}

TEST_F(PassManagerTest, WithoutAHandlerRemarksStayOnThePass) {
  std::unique_ptr<Module> module = ParseForTest(kInput);
  ASSERT_NE(module, nullptr);
  PassManager pm;
  pm.AddPass(Make("remark"));
  ASSERT_TRUE(pm.Run(*module).ok());
  ASSERT_EQ(pm.passes()[0]->remarks().size(), 2u);
  EXPECT_EQ(pm.passes()[0]->remarks()[1].message, "about the first op");
  // A second run starts from no reports: counters do not accumulate across runs.
  ASSERT_TRUE(pm.Run(*module).ok());
  EXPECT_EQ(pm.passes()[0]->remarks().size(), 2u);
  EXPECT_EQ(pm.passes()[0]->statistics()[0].value, 2);
}

TEST_F(PassManagerTest, FormatsStatisticsInPipelineOrder) {
  std::unique_ptr<Module> module = ParseForTest(kInput);
  ASSERT_NE(module, nullptr);
  PassManager pm;
  pm.AddPass(Make("remark"));
  pm.AddPass(Make("record"));
  ASSERT_TRUE(pm.Run(*module).ok());
  EXPECT_EQ(FormatPassStatistics(pm.passes()),
            "===-------------------------------------------------------------------------===\n"
            "                         ... Pass statistics report ...\n"
            "===-------------------------------------------------------------------------===\n"
            "remark\n"
            "  (runs) 2 : Times run\n"
            "  (rewrites) 0 : Things rewritten\n"
            "record\n"
            "  (no statistics)\n");
}

TEST_F(PassManagerTest, RealPipelineWithVerifyEach) {
  std::unique_ptr<Module> module = ParseForTest(R"(func @f(%x: f32[4]) -> f32[4] {
  %a = mul(%x, 1.0) : f32[4]
  %b = exp(%a) : f32[4]
  %c = exp(%x) : f32[4]
  %d = add(%b, %c) : f32[4]
  %e = neg(%x) : f32[4]
  return %d
}
)");
  ASSERT_NE(module, nullptr);
  PassManager pm;
  pm.set_verify_each(true);
  for (const char* name : {"canonicalize", "cse", "dce"}) {
    pm.AddPass(FindRegisteredPass(name)->CreateWithDefaults());
  }
  ASSERT_TRUE(pm.Run(*module).ok());
  EXPECT_EQ(PrintModule(*module), R"(func @f(%x: f32[4]) -> f32[4] {
  %b = exp(%x) : f32[4]
  %d = add(%b, %b) : f32[4]
  return %d
}
)");
}

}  // namespace
}  // namespace commir
