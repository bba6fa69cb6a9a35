// Attribute defaults live in the op definitions, and typed reads fall back to them.
#include "gtest/gtest.h"
#include "commir/attribute.h"
#include "commir/op_def.h"

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

}  // namespace
}  // namespace commir
