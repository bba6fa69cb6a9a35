#include "backend_cuda/launchers.h"

#include "backend_cuda/collective_kernels.h"

#include "absl/strings/str_cat.h"
#include "commir/op_def.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace commir::cuda {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(CudaLaunchersTest, EveryOpThatNeedsAKernelHasALauncher) {
  EXPECT_TRUE(CheckCudaTensorLaunchers(CudaTensorLaunchers()).ok());
}

TEST(CudaLaunchersTest, CollectivesAndInterpreterOnlyOpsHaveNoTensorLauncher) {
  for (const OpDef* def : AllOpDefs()) {
    if (NeedsTensorKernel(*def)) continue;
    EXPECT_EQ(CudaTensorLaunchers().Find(def->kind), nullptr) << def->name;
  }
}

TEST(CudaLaunchersTest, AMissingLauncherIsReportedByName) {
  for (OpKind kind : {OpKind::kAttention, OpKind::kSilu, OpKind::kMin, OpKind::kFull,
                      OpKind::kDynamicUpdateSlice}) {
    TensorLauncherTable table = CudaTensorLaunchers();
    table.Remove(kind);
    absl::Status status = CheckCudaTensorLaunchers(table);
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(status.message(), AllOf(HasSubstr("cuda backend"),
                                        HasSubstr(absl::StrCat("'", GetOpDef(kind).name, "'"))));
  }
}

TEST(CudaCollectiveKernelsTest, EveryCollectiveHasAKernel) {
  EXPECT_TRUE(CheckCudaCollectiveKernels(CudaCollectiveKernels()).ok());
  for (const OpDef* def : AllOpDefs()) {
    EXPECT_EQ(static_cast<bool>(CudaCollectiveKernels().Find(def->kind)), def->Has(kCollective))
        << def->name;
  }
}

TEST(CudaCollectiveKernelsTest, AMissingCollectiveIsReportedByName) {
  CollectiveKernelTable table = CudaCollectiveKernels();
  table.Remove(OpKind::kShift);
  absl::Status status = CheckCudaCollectiveKernels(table);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("collective"), HasSubstr("'shift'")));
}

}  // namespace
}  // namespace commir::cuda
