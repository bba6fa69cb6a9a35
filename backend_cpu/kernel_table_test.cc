#include "backend_cpu/kernel_table.h"

#include "backend_cpu/cpu_backend.h"
#include "absl/strings/str_cat.h"
#include "commir/op_def.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace commir::cpu {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(CpuKernelTableTest, EveryOpThatNeedsAKernelHasOne) {
  EXPECT_TRUE(CheckCpuKernelTables(CpuTensorKernels(), CpuCollectiveKernels()).ok());
  CpuBackend backend;  // runs the same check and would abort
  EXPECT_EQ(backend.name(), "cpu");
}

TEST(CpuKernelTableTest, ElementwiseOpsAreRegisteredByTheirDefinition) {
  for (const OpDef* def : AllOpDefs()) {
    if (def->elementwise_fn == nullptr) continue;
    EXPECT_NE(CpuTensorKernels().Find(def->kind), nullptr) << def->name;
  }
}

TEST(CpuKernelTableTest, InterpreterOnlyOpsHaveNoKernel) {
  for (OpKind kind : {OpKind::kRank, OpKind::kRem, OpKind::kFor, OpKind::kReturn,
                      OpKind::kYield}) {
    EXPECT_EQ(CpuTensorKernels().Find(kind), nullptr) << GetOpDef(kind).name;
    EXPECT_EQ(CpuCollectiveKernels().Find(kind), nullptr) << GetOpDef(kind).name;
  }
}

TEST(CpuKernelTableTest, AMissingTensorKernelIsReportedByName) {
  for (OpKind kind : {OpKind::kSoftmax, OpKind::kGelu, OpKind::kPow, OpKind::kConvert}) {
    TensorKernelTable tensor = CpuTensorKernels();
    tensor.Remove(kind);
    absl::Status status = CheckCpuKernelTables(tensor, CpuCollectiveKernels());
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(status.message(),
                AllOf(HasSubstr("cpu backend"), HasSubstr("tensor op"),
                      HasSubstr(absl::StrCat("'", GetOpDef(kind).name, "'"))));
  }
}

TEST(CpuKernelTableTest, AMissingCollectiveKernelIsReportedByName) {
  CollectiveKernelTable collective = CpuCollectiveKernels();
  collective.Remove(OpKind::kAllToAll);
  absl::Status status = CheckCpuKernelTables(CpuTensorKernels(), collective);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("collective"), HasSubstr("'all_to_all'")));
}

}  // namespace
}  // namespace commir::cpu
