// Attribute defaults live in the op definitions, and typed reads fall back to them.
#include <cstdint>
#include <vector>

#include "commir/attention_op.h"
#include "commir/attribute.h"
#include "commir/op_def.h"
#include "gtest/gtest.h"

namespace commir {
namespace {

TEST(OpAttrDefaultsTest, AbsentAttributesReadAsTheirSpecDefault) {
  const AttrDict none;
  EXPECT_EQ(GetOpDef(OpKind::kSoftmax).IntAttr(none, "dim"), -1);
  EXPECT_EQ(GetOpDef(OpKind::kLayerNorm).NumberAttr(none, "eps"), 1e-5);
  EXPECT_EQ(GetOpDef(OpKind::kRmsNorm).NumberAttr(none, "eps"), 1e-6);
  EXPECT_FALSE(GetOpDef(OpKind::kAttention).BoolAttr(none, "causal"));
  EXPECT_FALSE(GetOpDef(OpKind::kMatmul).BoolAttr(none, "transpose_b"));
  EXPECT_FALSE(GetOpDef(OpKind::kReduceSum).BoolAttr(none, "keepdim"));
  EXPECT_EQ(GetOpDef(OpKind::kGelu).EnumAttr(none, "approximate"), "none");
  EXPECT_EQ(GetOpDef(OpKind::kAllReduce).EnumAttr(none, "reduce"), "sum");
  EXPECT_EQ(GetOpDef(OpKind::kShift).IntAttr(none, "offset"), 1);
  EXPECT_EQ(GetOpDef(OpKind::kFor).IntAttr(none, "step"), 1);
}

TEST(OpAttrDefaultsTest, WrittenValuesWin) {
  AttrDict attrs;
  attrs.Set("dim", Attribute::Int(0));
  attrs.Set("eps", Attribute::Int(1));
  attrs.Set("approximate", Attribute::Ident("tanh"));
  EXPECT_EQ(GetOpDef(OpKind::kSoftmax).IntAttr(attrs, "dim"), 0);
  EXPECT_EQ(GetOpDef(OpKind::kLayerNorm).NumberAttr(attrs, "eps"), 1.0);
  EXPECT_EQ(GetOpDef(OpKind::kGelu).EnumAttr(attrs, "approximate"), "tanh");
}

TEST(OpAttrDefaultsTest, AskingForAnUndeclaredDefaultIsAnInternalError) {
  const AttrDict none;
  // No such attribute on the op, and an attribute whose absence has no single value.
  EXPECT_DEATH(GetOpDef(OpKind::kSoftmax).IntAttr(none, "eps"), "no such attribute");
  EXPECT_DEATH(GetOpDef(OpKind::kAttention).NumberAttr(none, "scale"), "no default");
}

TEST(OpAttrDefaultsTest, RequiredAttributesReadTheirWrittenValue) {
  AttrDict attrs;
  attrs.Set("dim", Attribute::Int(-2));
  attrs.Set("size", Attribute::Int(4));
  attrs.Set("value", Attribute::Float(2.5));
  attrs.Set("perm", Attribute::IntList({1, 0}));
  EXPECT_EQ(GetOpDef(OpKind::kConcat).RequiredIntAttr(attrs, "dim"), -2);
  EXPECT_EQ(GetOpDef(OpKind::kDynamicSlice).RequiredIntAttr(attrs, "size"), 4);
  EXPECT_EQ(GetOpDef(OpKind::kFull).RequiredNumberAttr(attrs, "value"), 2.5);
  EXPECT_EQ(GetOpDef(OpKind::kTranspose).RequiredIntListAttr(attrs, "perm"),
            (std::vector<int64_t>{1, 0}));
}

TEST(OpAttrDefaultsTest, MisusingARequiredReadIsAnInternalError) {
  AttrDict attrs;
  attrs.Set("dim", Attribute::Int(0));
  // An optional attribute, an attribute the op lacks, a missing one and one of another kind.
  EXPECT_DEATH(GetOpDef(OpKind::kSoftmax).RequiredIntAttr(attrs, "dim"), "optional");
  EXPECT_DEATH(GetOpDef(OpKind::kConcat).RequiredIntAttr(attrs, "size"), "no such attribute");
  EXPECT_DEATH(GetOpDef(OpKind::kDynamicSlice).RequiredIntAttr(attrs, "size"), "missing");
  EXPECT_DEATH(GetOpDef(OpKind::kTranspose).RequiredIntListAttr(attrs, "perm"), "missing");
  attrs.Set("perm", Attribute::Int(3));
  EXPECT_DEATH(GetOpDef(OpKind::kTranspose).RequiredIntListAttr(attrs, "perm"), "not a list");
}

TEST(OpAttrDefaultsTest, AttentionDefaultScaleIsOneOverSqrtHeadDim) {
  EXPECT_DOUBLE_EQ(AttentionOp::DefaultScale(64), 0.125);
  EXPECT_EQ(AttentionOp::DefaultScale(0), 1.0);
}

}  // namespace
}  // namespace commir
