#include "commir/op_kernel_table.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace commir {
namespace {

using ::testing::HasSubstr;

// Kernels that only say which family they were registered as.
using FakeKernel = int (*)();
int Unary() { return 1; }
int Binary() { return 2; }
int Ternary() { return 3; }
int Other() { return 4; }

TEST(OpKernelTableTest, ElementwiseOpsRegisterByTheirDefinitionsArity) {
  OpKernelTable<FakeKernel> table;
  table.RegisterElementwise(Unary, Binary, Ternary);
  for (OpKind kind : {OpKind::kNeg, OpKind::kExp, OpKind::kGelu, OpKind::kSilu}) {
    ASSERT_NE(table.Find(kind), nullptr) << GetOpDef(kind).name;
    EXPECT_EQ(table.Find(kind)(), 1) << GetOpDef(kind).name;
  }
  for (OpKind kind : {OpKind::kAdd, OpKind::kDiv, OpKind::kPow, OpKind::kMin, OpKind::kCompare}) {
    ASSERT_NE(table.Find(kind), nullptr) << GetOpDef(kind).name;
    EXPECT_EQ(table.Find(kind)(), 2) << GetOpDef(kind).name;
  }
  ASSERT_NE(table.Find(OpKind::kSelect), nullptr);
  EXPECT_EQ(table.Find(OpKind::kSelect)(), 3);
  // Elementwise, but computing no scalar function: kernels of their own, or none.
  EXPECT_EQ(table.Find(OpKind::kConvert), nullptr);
  EXPECT_EQ(table.Find(OpKind::kRem), nullptr);
  EXPECT_EQ(table.Find(OpKind::kMatmul), nullptr);
}

TEST(OpKernelTableTest, ElementwiseFunctionsComeFromTheOpDefinition) {
  AttrDict none;
  EXPECT_EQ(GetOpDef(OpKind::kExp).elementwise_fn(none), ElementwiseFn::kExp);
  EXPECT_EQ(GetOpDef(OpKind::kPow).elementwise_fn(none), ElementwiseFn::kPow);
  EXPECT_EQ(GetOpDef(OpKind::kGelu).elementwise_fn(none), ElementwiseFn::kGeluErf);
  AttrDict tanh;
  tanh.Set("approximate", Attribute::Ident("tanh"));
  EXPECT_EQ(GetOpDef(OpKind::kGelu).elementwise_fn(tanh), ElementwiseFn::kGeluTanh);
  AttrDict le;
  le.Set("cmp", Attribute::Ident("le"));
  EXPECT_EQ(GetOpDef(OpKind::kCompare).elementwise_fn(le), ElementwiseFn::kLe);
  EXPECT_TRUE(ElementwiseFnIsPredicate(GetOpDef(OpKind::kCompare).elementwise_fn(le)));
  EXPECT_EQ(GetOpDef(OpKind::kSelect).elementwise_fn(none), ElementwiseFn::kSelect);
  for (const OpDef* def : AllOpDefs()) {
    if (def->elementwise_fn == nullptr) continue;
    EXPECT_TRUE(def->Has(kElementwise)) << def->name;
    // A verified op carries its required attributes: give each required enum each value.
    std::vector<AttrDict> variants(1);
    for (const AttrSpec& spec : def->attrs) {
      if (!spec.required || spec.kind != AttrKind::kEnum) continue;
      variants.clear();
      for (absl::string_view value : spec.enum_values) {
        variants.emplace_back().Set(std::string(spec.name), Attribute::Ident(std::string(value)));
      }
    }
    for (const AttrDict& attrs : variants) {
      EXPECT_EQ(ElementwiseFnArity(def->elementwise_fn(attrs)), def->max_operands) << def->name;
    }
  }
}

TEST(OpKernelTableTest, CheckCompleteNamesEveryMissingOp) {
  OpKernelTable<FakeKernel> table;
  for (const OpDef* def : AllOpDefs()) {
    if (NeedsCollectiveKernel(*def)) table.Register(def->kind, Other);
  }
  EXPECT_TRUE(table.CheckComplete("test", "collective", NeedsCollectiveKernel).ok());
  table.Remove(OpKind::kShift);
  table.Remove(OpKind::kAllGather);
  absl::Status status = table.CheckComplete("test", "collective", NeedsCollectiveKernel);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("the test backend's collective table has no kernel for "
                                          "'all_gather', 'shift'"));
}

TEST(OpKernelTableTest, InterpreterOnlyOpsNeedNoKernel) {
  for (OpKind kind : {OpKind::kRank, OpKind::kRem, OpKind::kFor, OpKind::kReturn,
                      OpKind::kYield}) {
    EXPECT_FALSE(NeedsTensorKernel(GetOpDef(kind))) << GetOpDef(kind).name;
    EXPECT_FALSE(NeedsCollectiveKernel(GetOpDef(kind))) << GetOpDef(kind).name;
  }
  EXPECT_TRUE(NeedsTensorKernel(GetOpDef(OpKind::kFull)));
  EXPECT_TRUE(NeedsTensorKernel(GetOpDef(OpKind::kAdd)));
  EXPECT_FALSE(NeedsTensorKernel(GetOpDef(OpKind::kAllReduce)));
}

}  // namespace
}  // namespace commir
