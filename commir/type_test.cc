// Types (docs/language.md, "Types"): uniquing, canonical text, layout validation and the
// per-device type of a global type.
#include "commir/type.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "commir/element_type.h"
#include "commir/mesh.h"
#include "gtest/gtest.h"

namespace commir {
namespace {

constexpr ElementType kF32 = ElementType::kF32;

Mesh DpTp() { return Mesh("m", {{"dp", 2, {}}, {"tp", 4, {}}}); }

TEST(ElementTypeTest, NamesParseAndWidths) {
  struct Case {
    ElementType type;
    const char* name;
    int width;
    bool is_float;
  };
  for (const Case& c : {Case{ElementType::kF64, "f64", 8, true}, Case{kF32, "f32", 4, true},
                        Case{ElementType::kF16, "f16", 2, true},
                        Case{ElementType::kBF16, "bf16", 2, true},
                        Case{ElementType::kI64, "i64", 8, false},
                        Case{ElementType::kI32, "i32", 4, false},
                        Case{ElementType::kI1, "i1", 1, false}}) {
    EXPECT_EQ(ElementTypeName(c.type), c.name);
    EXPECT_EQ(ParseElementType(c.name), c.type);
    EXPECT_EQ(ElementTypeByteWidth(c.type), c.width) << c.name;
    EXPECT_EQ(IsFloatType(c.type), c.is_float) << c.name;
    EXPECT_EQ(IsIntegerType(c.type), !c.is_float) << c.name;
  }
  EXPECT_EQ(ParseElementType("f8"), std::nullopt);
  EXPECT_EQ(ParseElementType("index"), std::nullopt);
  EXPECT_EQ(ParseElementType("F32"), std::nullopt);
}

TEST(TypeTest, TypesAreUniqued) {
  Type a = Type::Tensor(kF32, {4, 8});
  Type b = Type::Tensor(kF32, {4, 8});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(absl::HashOf(a), absl::HashOf(b));
  // Explicit empty axis lists are the same as none.
  EXPECT_EQ(a, Type::Tensor(kF32, {4, 8}, {{}, {}}, {}));
  EXPECT_EQ(Type::Index(), Type::Index());
  EXPECT_EQ(Type::Scalar(kF32), Type::Tensor(kF32, {}));
  EXPECT_EQ(Type::Tensor(kF32, {8}, {{"dp", "tp"}}), Type::Tensor(kF32, {8}, {{"dp", "tp"}}));
}

TEST(TypeTest, DistinctTypesDiffer) {
  Type base = Type::Tensor(kF32, {4, 8});
  EXPECT_NE(base, Type::Tensor(ElementType::kF16, {4, 8}));
  EXPECT_NE(base, Type::Tensor(kF32, {8, 4}));
  EXPECT_NE(base, Type::Tensor(kF32, {4, 8, 1}));
  EXPECT_NE(base, Type::Tensor(kF32, {4, 8}, {{"tp"}, {}}));
  EXPECT_NE(base, Type::Tensor(kF32, {4, 8}, {}, {"tp"}));
  EXPECT_NE(Type::Tensor(kF32, {8}, {{"dp", "tp"}}), Type::Tensor(kF32, {8}, {{"tp", "dp"}}));
  EXPECT_NE(Type::Tensor(kF32, {4, 8}, {{"tp"}, {}}), Type::Tensor(kF32, {4, 8}, {{}, {"tp"}}));
  EXPECT_NE(base, Type::Index());
  EXPECT_NE(base, Type());
  EXPECT_NE(Type::Scalar(kF32), Type::Index());
}

TEST(TypeTest, KindsAndAccessors) {
  Type null;
  EXPECT_TRUE(null.is_null());
  EXPECT_FALSE(null.is_tensor());
  EXPECT_FALSE(null.is_index());
  EXPECT_FALSE(null.has_sharding());

  Type index = Type::Index();
  EXPECT_TRUE(index.is_index());
  EXPECT_FALSE(index.is_tensor());
  EXPECT_FALSE(index.has_sharding());

  Type t = Type::Tensor(ElementType::kBF16, {2, 3, 4}, {{}, {"tp"}, {}}, {"dp"});
  EXPECT_TRUE(t.is_tensor());
  EXPECT_EQ(t.element_type(), ElementType::kBF16);
  EXPECT_EQ(t.dims(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(t.rank(), 3);
  EXPECT_EQ(t.num_elements(), 24);
  ASSERT_EQ(t.dim_axes().size(), 3u);
  EXPECT_EQ(t.dim_axes()[1], AxisList{"tp"});
  EXPECT_TRUE(t.dim_axes()[0].empty());
  EXPECT_EQ(t.partial(), AxisList{"dp"});
  EXPECT_TRUE(t.has_sharding());

  EXPECT_EQ(Type::Scalar(kF32).num_elements(), 1);
  EXPECT_EQ(Type::Scalar(kF32).rank(), 0);
  EXPECT_EQ(Type::Tensor(kF32, {0, 5}).num_elements(), 0);
  EXPECT_TRUE(Type::Tensor(kF32, {4}, {}, {"tp"}).has_sharding());
  EXPECT_FALSE(Type::Tensor(kF32, {4}).has_sharding());
}

TEST(TypeTest, Derivations) {
  Type t = Type::Tensor(kF32, {8, 4}, {{"tp"}, {}}, {"dp"});
  EXPECT_EQ(t.WithoutSharding(), Type::Tensor(kF32, {8, 4}));
  EXPECT_EQ(t.WithElementType(ElementType::kF16),
            Type::Tensor(ElementType::kF16, {8, 4}, {{"tp"}, {}}, {"dp"}));
  EXPECT_EQ(t.WithDims({32}), Type::Tensor(kF32, {32}));
  EXPECT_EQ(t.WithSharding({{}, {"dp"}}, {}), Type::Tensor(kF32, {8, 4}, {{}, {"dp"}}));
  EXPECT_EQ(Type::Index().WithoutSharding(), Type::Index());
  Type plain = Type::Tensor(kF32, {3});
  EXPECT_EQ(plain.WithoutSharding(), plain);
}

TEST(TypeTest, SameShapeAndElementTypeIgnoresSharding) {
  Type a = Type::Tensor(kF32, {8, 4}, {{"tp"}, {}});
  EXPECT_TRUE(a.SameShapeAndElementType(Type::Tensor(kF32, {8, 4})));
  EXPECT_TRUE(a.SameShapeAndElementType(Type::Tensor(kF32, {8, 4}, {}, {"dp"})));
  EXPECT_FALSE(a.SameShapeAndElementType(Type::Tensor(ElementType::kF16, {8, 4})));
  EXPECT_FALSE(a.SameShapeAndElementType(Type::Tensor(kF32, {4, 8})));
  EXPECT_FALSE(a.SameShapeAndElementType(Type::Index()));
  EXPECT_FALSE(a.SameShapeAndElementType(Type()));
  EXPECT_TRUE(Type::Index().SameShapeAndElementType(Type::Index()));
  EXPECT_FALSE(Type().SameShapeAndElementType(Type()));
}

TEST(TypeTest, ToStringCanonicalForms) {
  EXPECT_EQ(Type().ToString(), "<<null type>>");
  EXPECT_EQ(Type::Index().ToString(), "index");
  EXPECT_EQ(Type::Scalar(kF32).ToString(), "f32[]");
  EXPECT_EQ(Type::Tensor(kF32, {4096, 8}).ToString(), "f32[4096, 8]");
  EXPECT_EQ(Type::Tensor(ElementType::kBF16, {1}).ToString(), "bf16[1]");
  EXPECT_EQ(Type::Tensor(ElementType::kI1, {0}).ToString(), "i1[0]");
  EXPECT_EQ(Type::Tensor(kF32, {4096, 8}, {{"tp"}, {}}).ToString(), "f32[4096@tp, 8]");
  EXPECT_EQ(Type::Tensor(kF32, {4096}, {{"dp", "tp"}}).ToString(), "f32[4096@(dp, tp)]");
  EXPECT_EQ(Type::Tensor(kF32, {64, 32}, {}, {"tp"}).ToString(), "f32[64, 32] partial(tp)");
  EXPECT_EQ(Type::Tensor(kF32, {8}, {}, {"dp", "tp"}).ToString(), "f32[8] partial(dp, tp)");
  EXPECT_EQ(Type::Tensor(ElementType::kF16, {8, 6}, {{}, {"x"}}, {"y"}).ToString(),
            "f16[8, 6@x] partial(y)");
  EXPECT_EQ(Type::Tensor(kF32, {}, {}, {"tp"}).ToString(), "f32[] partial(tp)");
}

TEST(TypeTest, FormatAxes) {
  EXPECT_EQ(FormatAxes({"tp"}), "tp");
  EXPECT_EQ(FormatAxes({"dp", "tp"}), "(dp, tp)");
  EXPECT_EQ(FormatAxes({"a", "b", "c"}), "(a, b, c)");
  EXPECT_EQ(FormatAxes({}), "()");
}

TEST(ValidateLayoutTest, ValidLayouts) {
  Mesh mesh = DpTp();
  for (Type t : {Type::Index(), Type::Tensor(kF32, {3, 5}), Type::Tensor(kF32, {8}, {{"tp"}}),
                 Type::Tensor(kF32, {2, 4}, {{"dp"}, {"tp"}}),
                 Type::Tensor(kF32, {16}, {{"tp", "dp"}}),
                 Type::Tensor(kF32, {4, 3}, {{"tp"}, {}}, {"dp"}),
                 Type::Tensor(kF32, {3}, {}, {"dp", "tp"}), Type::Tensor(kF32, {0}, {{"tp"}})}) {
    EXPECT_TRUE(ValidateLayout(t, &mesh).ok()) << t.ToString();
  }
  // Unsharded types need no mesh.
  EXPECT_TRUE(ValidateLayout(Type::Tensor(kF32, {3}), nullptr).ok());
  EXPECT_TRUE(ValidateLayout(Type(), nullptr).ok());
}

TEST(ValidateLayoutTest, UnknownAxis) {
  Mesh mesh = DpTp();
  absl::Status s = ValidateLayout(Type::Tensor(kF32, {8}, {{"pp"}}), &mesh);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "type f32[8@pp] names axis 'pp', which mesh @m does not have");
  EXPECT_EQ(ValidateLayout(Type::Tensor(kF32, {8}, {{"dp", "pp"}}), &mesh).message(),
            "type f32[8@(dp, pp)] names axis 'pp', which mesh @m does not have");
  EXPECT_EQ(ValidateLayout(Type::Tensor(kF32, {8}, {}, {"zz"}), &mesh).message(),
            "type f32[8] partial(zz) names axis 'zz', which mesh @m does not have");
}

TEST(ValidateLayoutTest, AxisTwice) {
  Mesh mesh = DpTp();
  EXPECT_EQ(ValidateLayout(Type::Tensor(kF32, {8, 8}, {{"tp"}, {"tp"}}), &mesh).message(),
            "type f32[8@tp, 8@tp] uses axis 'tp' more than once");
  EXPECT_EQ(ValidateLayout(Type::Tensor(kF32, {16}, {{"tp", "tp"}}), &mesh).message(),
            "type f32[16@(tp, tp)] uses axis 'tp' more than once");
  EXPECT_EQ(ValidateLayout(Type::Tensor(kF32, {8}, {{"tp"}}, {"tp"}), &mesh).message(),
            "type f32[8@tp] partial(tp) uses axis 'tp' more than once");
  EXPECT_EQ(ValidateLayout(Type::Tensor(kF32, {8}, {}, {"dp", "dp"}), &mesh).message(),
            "type f32[8] partial(dp, dp) uses axis 'dp' more than once");
}

TEST(ValidateLayoutTest, IndivisibleDimension) {
  Mesh mesh = DpTp();
  EXPECT_EQ(ValidateLayout(Type::Tensor(kF32, {6}, {{"tp"}}), &mesh).message(),
            "type f32[6@tp]: dimension 0 of size 6 is not divisible by 4, the number of devices "
            "along tp");
  EXPECT_EQ(ValidateLayout(Type::Tensor(kF32, {2, 12}, {{"dp"}, {"dp", "tp"}}), &mesh).message(),
            "type f32[2@dp, 12@(dp, tp)] uses axis 'dp' more than once");
  EXPECT_EQ(ValidateLayout(Type::Tensor(kF32, {4, 12}, {{}, {"dp", "tp"}}), &mesh).message(),
            "type f32[4, 12@(dp, tp)]: dimension 1 of size 12 is not divisible by 8, the number "
            "of devices along (dp, tp)");
  EXPECT_EQ(ValidateLayout(Type::Tensor(kF32, {3}, {{"dp"}}), &mesh).message(),
            "type f32[3@dp]: dimension 0 of size 3 is not divisible by 2, the number of devices "
            "along dp");
}

TEST(ValidateLayoutTest, NoMesh) {
  EXPECT_EQ(ValidateLayout(Type::Tensor(kF32, {8}, {{"tp"}}), nullptr).message(),
            "type f32[8@tp] names mesh axis 'tp' but the function has no mesh");
  EXPECT_EQ(ValidateLayout(Type::Tensor(kF32, {8}, {}, {"dp"}), nullptr).message(),
            "type f32[8] partial(dp) names mesh axis 'dp' but the function has no mesh");
}

TEST(ValidateLayoutTest, InvalidMeshIsAnErrorNotACrash) {
  Mesh zero("z", {{"tp", 0, {}}});
  EXPECT_EQ(ValidateLayout(Type::Tensor(kF32, {8}, {{"tp"}}), &zero).message(),
            "type f32[8@tp]: mesh @z has an axis of size < 1");
  EXPECT_EQ(LocalType(Type::Tensor(kF32, {8}, {{"tp"}}), &zero), Type::Tensor(kF32, {8}));
}

TEST(LocalTypeTest, DividesSplitDimensionsAndDropsLayout) {
  Mesh mesh = DpTp();
  EXPECT_EQ(LocalType(Type::Tensor(kF32, {8, 6}, {{"tp"}, {}}), &mesh), Type::Tensor(kF32, {2, 6}));
  EXPECT_EQ(LocalType(Type::Tensor(kF32, {16, 6}, {{"dp", "tp"}, {}}), &mesh),
            Type::Tensor(kF32, {2, 6}));
  EXPECT_EQ(LocalType(Type::Tensor(kF32, {4, 8}, {{"dp"}, {"tp"}}), &mesh),
            Type::Tensor(kF32, {2, 2}));
  EXPECT_EQ(LocalType(Type::Tensor(kF32, {4, 8}, {}, {"dp", "tp"}), &mesh),
            Type::Tensor(kF32, {4, 8}));
  EXPECT_EQ(LocalType(Type::Tensor(ElementType::kF16, {4, 8}, {{"dp"}, {}}, {"tp"}), &mesh),
            Type::Tensor(ElementType::kF16, {2, 8}));
  EXPECT_EQ(LocalType(Type::Tensor(kF32, {5}), &mesh), Type::Tensor(kF32, {5}));
  EXPECT_EQ(LocalType(Type::Index(), &mesh), Type::Index());
  EXPECT_EQ(LocalType(Type(), &mesh), Type());
}

TEST(TypeTest, ElementCountOverflow) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  Type huge = Type::Tensor(kF32, {kMax, 4});
  EXPECT_TRUE(ElementCountOverflows(huge));
  EXPECT_EQ(huge.num_elements(), kMax);  // saturated, never wrapped
  EXPECT_FALSE(ElementCountOverflows(Type::Tensor(kF32, {kMax})));
  EXPECT_FALSE(ElementCountOverflows(Type::Tensor(kF32, {int64_t{1} << 31, int64_t{1} << 31})));
  EXPECT_TRUE(ElementCountOverflows(Type::Tensor(kF32, {int64_t{1} << 32, int64_t{1} << 31})));
  EXPECT_FALSE(ElementCountOverflows(Type::Tensor(kF32, {0, kMax, kMax})));
  EXPECT_FALSE(ElementCountOverflows(Type::Index()));
}

TEST(TypeTest, ZigzagMark) {
  Type contiguous = Type::Tensor(ElementType::kF32, {16, 8}, {{"tp"}, {}});
  Type zigzag = contiguous.WithZigzag(0);
  EXPECT_EQ(contiguous.zigzag_dim(), -1);
  EXPECT_EQ(zigzag.zigzag_dim(), 0);
  EXPECT_NE(zigzag, contiguous);
  EXPECT_EQ(zigzag, Type::Tensor(ElementType::kF32, {16, 8}, {{"tp"}, {}}, {}, 0));
  EXPECT_EQ(zigzag.WithZigzag(-1), contiguous);
  EXPECT_EQ(zigzag.ToString(), "f32[16@tp zigzag, 8]");
  // Kept by an element type change, dropped with the sharding.
  EXPECT_EQ(zigzag.WithElementType(ElementType::kBF16).zigzag_dim(), 0);
  EXPECT_EQ(zigzag.WithoutSharding().zigzag_dim(), -1);
  EXPECT_EQ(Type::Index().zigzag_dim(), -1);
  Mesh mesh = DpTp();
  EXPECT_TRUE(ValidateLayout(zigzag, &mesh).ok());
  EXPECT_EQ(LocalType(zigzag, &mesh), Type::Tensor(ElementType::kF32, {4, 8}));
  // 2 * size(tp) = 8 must divide the dimension; the mark needs a split dimension.
  absl::Status s =
      ValidateLayout(Type::Tensor(ElementType::kF32, {12, 8}, {{"tp"}, {}}, {}, 0), &mesh);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("not divisible by 8"), std::string::npos) << s;
  s = ValidateLayout(Type::Tensor(ElementType::kF32, {16, 8}, {{"tp"}, {}}, {}, 1), &mesh);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("not split"), std::string::npos) << s;
}

}  // namespace
}  // namespace commir
