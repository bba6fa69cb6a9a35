// Tests of the host-side layout helpers (global tensor <-> per-device parts,
// docs/language.md "Tensor types"). Expected parts are computed here from those definitions: device ids row-major
// (last axis fastest); a dimension split over (a, b) gives block c_a * size(b) + c_b to the
// device with those coordinates; axes a type does not mention are replicated.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "commir/mesh.h"
#include "commir/type.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/host_layout.h"
#include "runtime/host_ops.h"
#include "runtime/tensor.h"

namespace commir::runtime {
namespace {

using ::testing::HasSubstr;

Mesh MakeMesh(std::vector<std::pair<std::string, int64_t>> axes) {
  std::vector<MeshAxis> list;
  for (auto& [name, size] : axes) list.push_back({name, size, {}});
  return Mesh("m", std::move(list));
}

std::vector<int64_t> Coords(const Mesh& mesh, int64_t device) {
  std::vector<int64_t> coords(mesh.axes().size());
  for (int i = static_cast<int>(coords.size()) - 1; i >= 0; --i) {
    coords[i] = device % mesh.axes()[i].size;
    device /= mesh.axes()[i].size;
  }
  return coords;
}

int64_t CoordOf(const Mesh& mesh, int64_t device, const std::string& axis) {
  std::vector<int64_t> coords = Coords(mesh, device);
  for (size_t i = 0; i < coords.size(); ++i) {
    if (mesh.axes()[i].name == axis) return coords[i];
  }
  ADD_FAILURE() << "no axis " << axis;
  return 0;
}

int64_t SizeOf(const Mesh& mesh, const std::string& axis) {
  for (const MeshAxis& a : mesh.axes()) {
    if (a.name == axis) return a.size;
  }
  return 1;
}

// Linearized coordinate over `axes`, first axis major.
int64_t Linear(const Mesh& mesh, int64_t device, const AxisList& axes) {
  int64_t position = 0;
  for (const std::string& axis : axes) position = position * SizeOf(mesh, axis) + CoordOf(mesh, device, axis);
  return position;
}

// A global tensor whose flat element e holds e + 1 (distinct, exact).
Tensor Iota(ElementType type, std::vector<int64_t> shape) {
  Tensor t(type, std::move(shape));
  for (int64_t e = 0; e < t.num_elements(); ++e) t.SetFromDouble(e, static_cast<double>(e + 1));
  return t;
}

std::vector<int64_t> Unravel(int64_t e, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    idx[i] = e % shape[i];
    e /= shape[i];
  }
  return idx;
}

int64_t Ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  int64_t e = 0;
  for (size_t i = 0; i < shape.size(); ++i) e = e * shape[i] + idx[i];
  return e;
}

// Device `device`'s part of `global` as the spec defines it (partial axes aside).
Tensor ExpectedPart(const Tensor& global, Type type, const Mesh& mesh, int64_t device) {
  std::vector<int64_t> local_shape = type.dims();
  std::vector<int64_t> start(type.rank(), 0);
  for (int64_t d = 0; d < type.rank(); ++d) {
    const AxisList& axes = type.dim_axes()[d];
    int64_t blocks = 1;
    for (const std::string& axis : axes) blocks *= SizeOf(mesh, axis);
    local_shape[d] /= blocks;
    start[d] = Linear(mesh, device, axes) * local_shape[d];
  }
  Tensor part(global.element_type(), local_shape);
  for (int64_t e = 0; e < part.num_elements(); ++e) {
    std::vector<int64_t> idx = Unravel(e, local_shape);
    for (size_t i = 0; i < idx.size(); ++i) idx[i] += start[i];
    part.SetFromDouble(e, global.GetAsDouble(Ravel(idx, global.shape())));
  }
  return part;
}

struct LayoutCase {
  std::vector<std::pair<std::string, int64_t>> mesh;
  std::vector<int64_t> dims;
  std::vector<AxisList> dim_axes;
};

void PrintTo(const LayoutCase& c, std::ostream* os) {
  *os << "mesh (";
  for (const auto& [name, size] : c.mesh) *os << name << "=" << size << " ";
  *os << ") type " << Type::Tensor(ElementType::kF32, c.dims, c.dim_axes).ToString();
}

class RoundTripTest : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(RoundTripTest, LocalPartMatchesSpecAndAssemblesBack) {
  const LayoutCase& c = GetParam();
  Mesh mesh = MakeMesh(c.mesh);
  Type type = Type::Tensor(ElementType::kF32, c.dims, c.dim_axes);
  ASSERT_TRUE(ValidateLayout(type, &mesh).ok()) << type.ToString();
  Tensor global = Iota(ElementType::kF32, c.dims);
  std::vector<Tensor> parts;
  for (int64_t d = 0; d < mesh.num_devices(); ++d) {
    absl::StatusOr<Tensor> part = LocalPart(global, type, &mesh, d);
    ASSERT_TRUE(part.ok()) << part.status();
    Tensor expected = ExpectedPart(global, type, mesh, d);
    EXPECT_TRUE(part->BitwiseEqual(expected))
        << type.ToString() << " device " << d << ": got " << part->DebugTypeString();
    EXPECT_EQ(part->shape(), LocalType(type, &mesh).dims());
    parts.push_back(*std::move(part));
  }
  std::vector<const Tensor*> pointers;
  for (const Tensor& p : parts) pointers.push_back(&p);
  absl::StatusOr<Tensor> assembled = AssembleGlobal(pointers, type, &mesh);
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_TRUE(assembled->BitwiseEqual(global)) << type.ToString();
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, RoundTripTest,
    ::testing::Values(
        // One device, and 1-D meshes.
        LayoutCase{{{"tp", 1}}, {4, 3}, {{"tp"}, {}}},
        LayoutCase{{{"tp", 4}}, {8, 3}, {{"tp"}, {}}},
        LayoutCase{{{"tp", 4}}, {3, 8}, {{}, {"tp"}}},
        LayoutCase{{{"tp", 4}}, {3, 8}, {{}, {}}},
        LayoutCase{{{"tp", 8}}, {16}, {{"tp"}}},
        LayoutCase{{{"tp", 2}}, {2, 3, 4}, {{}, {}, {"tp"}}},
        // 2-D meshes: each axis on its own dimension, both orders, groups, replication.
        LayoutCase{{{"dp", 2}, {"tp", 4}}, {4, 8}, {{"dp"}, {"tp"}}},
        LayoutCase{{{"dp", 2}, {"tp", 4}}, {8, 4}, {{"tp"}, {"dp"}}},
        LayoutCase{{{"dp", 2}, {"tp", 4}}, {16, 3}, {{"dp", "tp"}, {}}},
        LayoutCase{{{"dp", 2}, {"tp", 4}}, {16, 3}, {{"tp", "dp"}, {}}},
        LayoutCase{{{"dp", 2}, {"tp", 4}}, {3, 16}, {{}, {"tp", "dp"}}},
        LayoutCase{{{"dp", 2}, {"tp", 4}}, {8, 3}, {{"tp"}, {}}},
        LayoutCase{{{"dp", 2}, {"tp", 4}}, {2, 3}, {{}, {}}},
        LayoutCase{{{"dp", 4}, {"tp", 2}}, {8, 6}, {{"dp"}, {"tp"}}},
        LayoutCase{{{"dp", 4}, {"tp", 2}}, {8, 6}, {{"tp", "dp"}, {}}},
        LayoutCase{{{"dp", 3}, {"tp", 2}}, {4, 6}, {{}, {"dp", "tp"}}},
        // 3-D mesh: groups of non-adjacent axes and replication over the middle one.
        LayoutCase{{{"x", 2}, {"y", 3}, {"z", 2}}, {4, 6}, {{"z", "x"}, {"y"}}},
        LayoutCase{{{"x", 2}, {"y", 3}, {"z", 2}}, {4, 6}, {{"x", "z"}, {}}},
        LayoutCase{{{"x", 2}, {"y", 3}, {"z", 2}}, {12, 2}, {{"z", "y", "x"}, {}}},
        LayoutCase{{{"x", 2}, {"y", 3}, {"z", 2}}, {2, 2, 3}, {{"z"}, {"x"}, {"y"}}}));

// A few parts spelled out by hand, so the expectation helper itself is checked.
TEST(LocalPart, HandWrittenBlocksOnDp2Tp4) {
  Mesh mesh = MakeMesh({{"dp", 2}, {"tp", 4}});
  Tensor global = Iota(ElementType::kF32, {8});
  // Split over (tp, dp): device 6 (dp=1, tp=2) holds block 2*2 + 1 = 5.
  absl::StatusOr<Tensor> part =
      LocalPart(global, Type::Tensor(ElementType::kF32, {8}, {{"tp", "dp"}}), &mesh, 6);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part->ToDouble(), (std::vector<double>{6}));
  // Split over (dp, tp): device 6 holds block 6.
  part = LocalPart(global, Type::Tensor(ElementType::kF32, {8}, {{"dp", "tp"}}), &mesh, 6);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part->ToDouble(), (std::vector<double>{7}));
  // Split over dp only: device 6 holds the second half.
  part = LocalPart(global, Type::Tensor(ElementType::kF32, {8}, {{"dp"}}), &mesh, 6);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part->ToDouble(), (std::vector<double>{5, 6, 7, 8}));
}

TEST(LocalPart, PartialInputsSumToTheValue) {
  Mesh mesh = MakeMesh({{"dp", 2}, {"tp", 4}});
  Tensor global = Iota(ElementType::kF32, {8, 3});
  // Split over dp, partial over tp.
  Type type = Type::Tensor(ElementType::kF32, {8, 3}, {{"dp"}, {}}, {"tp"});
  std::vector<Tensor> parts;
  for (int64_t d = 0; d < 8; ++d) {
    absl::StatusOr<Tensor> part = LocalPart(global, type, &mesh, d);
    ASSERT_TRUE(part.ok()) << part.status();
    Tensor block = ExpectedPart(global, Type::Tensor(ElementType::kF32, {8, 3}, {{"dp"}, {}}), mesh, d);
    if (CoordOf(mesh, d, "tp") == 0) {
      EXPECT_TRUE(part->BitwiseEqual(block)) << d;
    } else {
      EXPECT_TRUE(part->BitwiseEqual(Tensor(ElementType::kF32, {4, 3}))) << d;
    }
    parts.push_back(*std::move(part));
  }
  std::vector<const Tensor*> pointers;
  for (const Tensor& p : parts) pointers.push_back(&p);
  absl::StatusOr<Tensor> assembled = AssembleGlobal(pointers, type, &mesh);
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_TRUE(assembled->BitwiseEqual(global));
}

// Partial results: the addends of every group are summed; replicas over the axes the type
// does not mention must agree.
TEST(AssembleGlobal, SumsPartialAddends) {
  Mesh mesh = MakeMesh({{"x", 2}, {"y", 3}, {"z", 2}});
  // Split over x, partial over z, replicated over y.
  Type type = Type::Tensor(ElementType::kF32, {4, 2}, {{"x"}, {}}, {"z"});
  std::vector<Tensor> parts;
  for (int64_t d = 0; d < 12; ++d) {
    int64_t x = CoordOf(mesh, d, "x"), z = CoordOf(mesh, d, "z");
    Tensor part(ElementType::kF32, {2, 2});
    for (int64_t e = 0; e < 4; ++e) part.SetFromDouble(e, 100.0 * x + 10.0 * (z + 1) + e);
    parts.push_back(part);
  }
  std::vector<const Tensor*> pointers;
  for (const Tensor& p : parts) pointers.push_back(&p);
  absl::StatusOr<Tensor> assembled = AssembleGlobal(pointers, type, &mesh);
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  std::vector<double> want;
  for (int64_t x = 0; x < 2; ++x) {
    for (int64_t e = 0; e < 4; ++e) want.push_back((100.0 * x + 10 + e) + (100.0 * x + 20 + e));
  }
  EXPECT_EQ(assembled->ToDouble(), want);

  // One y replica disagrees in one element.
  parts[8].SetFromDouble(3, -1);  // device 8: x=1, y=1, z=0 replicates device 6
  absl::StatusOr<Tensor> bad = AssembleGlobal(pointers, type, &mesh);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("devices 6 and 8"));
}

// A partial result assembles to exactly what an all_reduce over the partial axes gives
// (sum in coordinate order, first listed axis major, rounded once), whatever the element
// type and however the partial axes are listed.
TEST(AssembleGlobal, PartialSumEqualsAllReduce) {
  Mesh mesh = MakeMesh({{"dp", 2}, {"tp", 4}});
  for (ElementType et : {ElementType::kF32, ElementType::kBF16, ElementType::kF16}) {
    for (AxisList partial : {AxisList{"tp"}, AxisList{"dp", "tp"}, AxisList{"tp", "dp"}}) {
      SCOPED_TRACE(absl::StrCat(ElementTypeName(et), " partial ", FormatAxes(partial)));
      Type type = Type::Tensor(et, {64}, {{}}, partial);
      std::vector<Tensor> parts;
      for (int64_t d = 0; d < 8; ++d) {
        Tensor part(et, {64});
        for (int64_t e = 0; e < 64; ++e) {
          // Values of very different magnitudes, so the order and the rounding matter.
          // Replicas (devices equal on the partial axes) must agree: only the partial
          // coordinate feeds the value.
          int64_t key = Linear(mesh, d, partial);
          double v = ((key * 131 + e * 71) % 97 - 48) * (1.0 + 1.0 / (3 + e)) *
              (key % 3 == 0 ? 1000.0 : 0.01 * (e + 1));
          part.SetFromDouble(e, v);
        }
        parts.push_back(part);
      }
      std::vector<const Tensor*> pointers;
      for (const Tensor& p : parts) pointers.push_back(&p);
      absl::StatusOr<Tensor> assembled = AssembleGlobal(pointers, type, &mesh);
      ASSERT_TRUE(assembled.ok()) << assembled.status();
      // The group of device 0 over the partial axes, in coordinate order.
      std::vector<const Tensor*> group(mesh.GroupSize(partial));
      for (int64_t d = 0; d < 8; ++d) {
        bool in_group = true;
        for (const MeshAxis& axis : mesh.axes()) {
          bool is_partial = std::find(partial.begin(), partial.end(), axis.name) != partial.end();
          if (!is_partial && CoordOf(mesh, d, axis.name) != 0) in_group = false;
        }
        if (in_group) group[Linear(mesh, d, partial)] = &parts[d];
      }
      // The fold all_reduce performs (backend_cpu's AllReduce calls it too).
      Tensor reduced = CombineInOrder(group, ReductionFn::kSum);
      EXPECT_TRUE(assembled->BitwiseEqual(reduced));
    }
  }
}

TEST(AssembleGlobal, DisagreeingReplicaIsAnError) {
  Mesh mesh = MakeMesh({{"dp", 2}, {"tp", 4}});
  Type type = Type::Tensor(ElementType::kF32, {8, 3}, {{"tp"}, {}});
  Tensor global = Iota(ElementType::kF32, {8, 3});
  std::vector<Tensor> parts;
  for (int64_t d = 0; d < 8; ++d) parts.push_back(*LocalPart(global, type, &mesh, d));
  std::vector<const Tensor*> pointers;
  for (const Tensor& p : parts) pointers.push_back(&p);
  ASSERT_TRUE(AssembleGlobal(pointers, type, &mesh).ok());
  // Device 6 (dp=1, tp=2) replicates device 2's block; make it differ by one ulp.
  std::vector<float> values = parts[6].ToFloat();
  values[4] = std::nextafter(values[4], 1e9f);
  parts[6] = Tensor::FromFloat(ElementType::kF32, {2, 3}, values);
  absl::StatusOr<Tensor> bad = AssembleGlobal(pointers, type, &mesh);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("devices 2 and 6"));

  // Fully replicated: any device differing from device 0.
  Type replicated = Type::Tensor(ElementType::kF32, {2, 3});
  std::vector<Tensor> same(8, Iota(ElementType::kF32, {2, 3}));
  std::vector<const Tensor*> same_pointers;
  for (const Tensor& p : same) same_pointers.push_back(&p);
  ASSERT_TRUE(AssembleGlobal(same_pointers, replicated, &mesh).ok());
  same[7].SetFromDouble(0, 42);
  bad = AssembleGlobal(same_pointers, replicated, &mesh);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("devices 0 and 7"));

  // NaN replicas that are bit-identical agree.
  for (Tensor& t : same) t.SetFromDouble(0, std::nan(""));
  EXPECT_TRUE(AssembleGlobal(same_pointers, replicated, &mesh).ok());
}

// The replica check compares each device with its group's first member, found from the
// coordinates, so it is linear in the device count: building each device's whole group
// made 65,536 fully replicated devices take minutes (quadratic), past this small test's
// timeout.
TEST(AssembleGlobal, ReplicaCheckIsLinearInTheDeviceCount) {
  Mesh mesh = MakeMesh({{"dp", 256}, {"tp", 256}});
  const int64_t n = mesh.num_devices();
  std::vector<Tensor> same(n, Iota(ElementType::kF32, {2}));
  std::vector<const Tensor*> pointers;
  for (const Tensor& p : same) pointers.push_back(&p);
  Type replicated = Type::Tensor(ElementType::kF32, {2});
  ASSERT_TRUE(AssembleGlobal(pointers, replicated, &mesh).ok());
  same[n - 1].SetFromDouble(1, 42);
  absl::StatusOr<Tensor> bad = AssembleGlobal(pointers, replicated, &mesh);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("devices 0 and 65535"));

  // Split over tp, replicated over dp: device (dp=255, tp=255) replicates (0, 255).
  Type split = Type::Tensor(ElementType::kF32, {512}, {{"tp"}});
  bad = AssembleGlobal(pointers, split, &mesh);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("devices 255 and 65535"));
  // Replicated over a minor axis (tp) only: device 65535's group leader is 65280.
  Type split_dp = Type::Tensor(ElementType::kF32, {512}, {{"dp"}});
  bad = AssembleGlobal(pointers, split_dp, &mesh);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("devices 65280 and 65535"));
}

TEST(AssembleGlobal, RejectsPartsOfTheWrongShapeOrCount) {
  Mesh mesh = MakeMesh({{"tp", 4}});
  Type type = Type::Tensor(ElementType::kF32, {8}, {{"tp"}});
  // Each device returns the whole tensor instead of its quarter: concatenating them would
  // give 32 elements, which is not f32[8].
  std::vector<Tensor> whole(4, Iota(ElementType::kF32, {8}));
  std::vector<const Tensor*> pointers;
  for (const Tensor& p : whole) pointers.push_back(&p);
  absl::StatusOr<Tensor> bad = AssembleGlobal(pointers, type, &mesh);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("f32[2]"));

  // Wrong element type.
  std::vector<Tensor> f64(4, Tensor(ElementType::kF64, {2}));
  pointers.clear();
  for (const Tensor& p : f64) pointers.push_back(&p);
  EXPECT_FALSE(AssembleGlobal(pointers, type, &mesh).ok());

  // Too few parts.
  std::vector<Tensor> three(3, Tensor(ElementType::kF32, {2}));
  pointers.clear();
  for (const Tensor& p : three) pointers.push_back(&p);
  EXPECT_FALSE(AssembleGlobal(pointers, type, &mesh).ok());

  // One device: the part is the value, and it must still have the declared shape.
  Mesh one = MakeMesh({{"tp", 1}});
  Tensor wrong(ElementType::kF32, {4});
  const Tensor* single[] = {&wrong};
  EXPECT_FALSE(AssembleGlobal(single, type, &one).ok());
  Tensor right = Iota(ElementType::kF32, {8});
  single[0] = &right;
  absl::StatusOr<Tensor> ok = AssembleGlobal(single, type, &one);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->BitwiseEqual(right));
}

TEST(LocalPart, RejectsAGlobalValueOfTheWrongShape) {
  Mesh mesh = MakeMesh({{"tp", 4}});
  Type type = Type::Tensor(ElementType::kF32, {8}, {{"tp"}});
  absl::StatusOr<Tensor> part = LocalPart(Tensor(ElementType::kF32, {4}), type, &mesh, 0);
  ASSERT_FALSE(part.ok());
  EXPECT_THAT(part.status().message(), HasSubstr("f32[8@tp]"));
  // Without a mesh (a global function) the value itself is the part.
  part = LocalPart(Iota(ElementType::kF32, {8}), type, nullptr, 0);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part->num_elements(), 8);
}

// Zigzag: sp=4 cuts the 16 values into 8 chunks of 2; the device at sp coordinate c holds
// chunks c and 7-c (values start at 1), on every dp replica.
TEST(LocalPart, ZigzagDevicesHoldChunksCAndMirror) {
  Mesh mesh = MakeMesh({{"dp", 2}, {"sp", 4}});
  Tensor global = Iota(ElementType::kF32, {16});
  Type type = Type::Tensor(ElementType::kF32, {16}, {{"sp"}}, {}, /*zigzag_dim=*/0);
  const std::vector<std::vector<double>> expected = {
      {1, 2, 15, 16}, {3, 4, 13, 14}, {5, 6, 11, 12}, {7, 8, 9, 10}};
  std::vector<Tensor> parts;
  for (int64_t d = 0; d < 8; ++d) {
    absl::StatusOr<Tensor> part = LocalPart(global, type, &mesh, d);
    ASSERT_TRUE(part.ok()) << part.status();
    EXPECT_EQ(part->ToDouble(), expected[d % 4]) << d;
    parts.push_back(*std::move(part));
  }
  std::vector<const Tensor*> pointers;
  for (const Tensor& p : parts) pointers.push_back(&p);
  absl::StatusOr<Tensor> assembled = AssembleGlobal(pointers, type, &mesh);
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_TRUE(assembled->BitwiseEqual(global));
}

// A zigzag inner dimension next to a split outer one: the rows follow the contiguous
// layout, the columns the zigzag one, and assembly inverts both.
TEST(AssembleGlobal, ZigzagDimensionBesideAContiguousOne) {
  Mesh mesh = MakeMesh({{"dp", 2}, {"sp", 2}});
  Tensor global = Iota(ElementType::kF32, {2, 8});
  Type type = Type::Tensor(ElementType::kF32, {2, 8}, {{"dp"}, {"sp"}}, {}, /*zigzag_dim=*/1);
  // Device 1 (dp=0, sp=1): row 0, chunks 1 and 2 of four 2-column chunks.
  absl::StatusOr<Tensor> part = LocalPart(global, type, &mesh, 1);
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->ToDouble(), (std::vector<double>{3, 4, 5, 6}));
  // Device 2 (dp=1, sp=0): row 1, chunks 0 and 3.
  part = LocalPart(global, type, &mesh, 2);
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->ToDouble(), (std::vector<double>{9, 10, 15, 16}));
  std::vector<Tensor> parts;
  for (int64_t d = 0; d < 4; ++d) parts.push_back(*LocalPart(global, type, &mesh, d));
  std::vector<const Tensor*> pointers;
  for (const Tensor& p : parts) pointers.push_back(&p);
  absl::StatusOr<Tensor> assembled = AssembleGlobal(pointers, type, &mesh);
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_TRUE(assembled->BitwiseEqual(global));
}

TEST(ZigzagOrder, InverseRestoresAndBadChunkingIsAnError) {
  Tensor x = Iota(ElementType::kF32, {12, 2});
  absl::StatusOr<Tensor> there = ZigzagOrder(x, 0, 3, /*to_zigzag=*/true);
  ASSERT_TRUE(there.ok()) << there.status();
  EXPECT_FALSE(there->BitwiseEqual(x));
  absl::StatusOr<Tensor> back = ZigzagOrder(*there, 0, 3, /*to_zigzag=*/false);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->BitwiseEqual(x));
  absl::StatusOr<Tensor> bad = ZigzagOrder(x, 0, 4, /*to_zigzag=*/true);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("8 zigzag chunks"));
}

}  // namespace
}  // namespace commir::runtime
