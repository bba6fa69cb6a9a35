// Meshes (docs/language.md, "Modules and meshes"): row-major device ids, coordinates and the device groups of
// collectives over one axis or an axis group (first listed axis major).
#include "commir/mesh.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace commir {
namespace {

using Ids = std::vector<int64_t>;
using Axes = std::vector<std::string>;

Mesh DpTp() { return Mesh("m", {{"dp", 2, {}}, {"tp", 4, {}}}); }

TEST(MeshTest, NameAxesAndDeviceCount) {
  Mesh mesh = DpTp();
  EXPECT_EQ(mesh.name(), "m");
  ASSERT_EQ(mesh.axes().size(), 2u);
  EXPECT_EQ(mesh.axes()[0].name, "dp");
  EXPECT_EQ(mesh.axes()[1].size, 4);
  EXPECT_EQ(mesh.num_devices(), 8);
  EXPECT_EQ(mesh.AxisIndex("dp"), 0);
  EXPECT_EQ(mesh.AxisIndex("tp"), 1);
  EXPECT_EQ(mesh.AxisIndex("pp"), std::nullopt);
  EXPECT_TRUE(mesh.IsWellFormed());
}

TEST(MeshTest, MeshWithoutAxesHasOneDevice) {
  Mesh mesh("one", {});
  EXPECT_EQ(mesh.num_devices(), 1);
  EXPECT_EQ(mesh.Coordinates(0), Ids{});
  EXPECT_EQ(mesh.DeviceId({}), 0);
  EXPECT_EQ(mesh.GroupMembers(0, {}), Ids{0});
  EXPECT_EQ(mesh.GroupCoordinate(0, {}), 0);
}

// The device with coordinates (dp=i, tp=j) has id 4*i + j: the last axis is fastest.
TEST(MeshTest, DeviceIdsAreRowMajorWithTheLastAxisFastest) {
  Mesh mesh = DpTp();
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      EXPECT_EQ(mesh.DeviceId({i, j}), 4 * i + j);
      EXPECT_EQ(mesh.Coordinates(4 * i + j), (Ids{i, j}));
    }
  }
}

TEST(MeshTest, CoordinatesOfThreeAxes) {
  Mesh mesh("m", {{"a", 2, {}}, {"b", 3, {}}, {"c", 2, {}}});
  EXPECT_EQ(mesh.num_devices(), 12);
  EXPECT_EQ(mesh.Coordinates(0), (Ids{0, 0, 0}));
  EXPECT_EQ(mesh.Coordinates(1), (Ids{0, 0, 1}));
  EXPECT_EQ(mesh.Coordinates(2), (Ids{0, 1, 0}));
  EXPECT_EQ(mesh.Coordinates(7), (Ids{1, 0, 1}));
  EXPECT_EQ(mesh.Coordinates(11), (Ids{1, 2, 1}));
  for (int64_t d = 0; d < 12; ++d) EXPECT_EQ(mesh.DeviceId(mesh.Coordinates(d)), d);
}

TEST(MeshTest, GroupSize) {
  Mesh mesh = DpTp();
  EXPECT_EQ(mesh.GroupSize(Axes{"tp"}), 4);
  EXPECT_EQ(mesh.GroupSize(Axes{"dp"}), 2);
  EXPECT_EQ(mesh.GroupSize(Axes{"dp", "tp"}), 8);
  EXPECT_EQ(mesh.GroupSize(Axes{"tp", "dp"}), 8);
  EXPECT_EQ(mesh.GroupSize(Axes{}), 1);
}

TEST(MeshTest, GroupOverTheLastAxis) {
  Mesh mesh = DpTp();
  // Devices sharing dp, ordered by tp.
  EXPECT_EQ(mesh.GroupMembers(0, Axes{"tp"}), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(mesh.GroupMembers(6, Axes{"tp"}), (Ids{4, 5, 6, 7}));
  EXPECT_EQ(mesh.GroupCoordinate(6, Axes{"tp"}), 2);
  EXPECT_EQ(mesh.GroupCoordinate(3, Axes{"tp"}), 3);
}

TEST(MeshTest, GroupOverTheFirstAxis) {
  Mesh mesh = DpTp();
  // Devices sharing tp, ordered by dp.
  EXPECT_EQ(mesh.GroupMembers(1, Axes{"dp"}), (Ids{1, 5}));
  EXPECT_EQ(mesh.GroupMembers(7, Axes{"dp"}), (Ids{3, 7}));
  EXPECT_EQ(mesh.GroupCoordinate(7, Axes{"dp"}), 1);
  EXPECT_EQ(mesh.GroupCoordinate(2, Axes{"dp"}), 0);
}

// `(dp, tp)`: position = c_dp * size(tp) + c_tp.
TEST(MeshTest, AxisGroupInMeshOrder) {
  Mesh mesh = DpTp();
  Ids all = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int64_t d = 0; d < 8; ++d) {
    EXPECT_EQ(mesh.GroupMembers(d, Axes{"dp", "tp"}), all);
    EXPECT_EQ(mesh.GroupCoordinate(d, Axes{"dp", "tp"}), d);
  }
}

// `(tp, dp)`: the first listed axis is major, so position = c_tp * size(dp) + c_dp.
TEST(MeshTest, AxisGroupInReverseOrder) {
  Mesh mesh = DpTp();
  Ids expected = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int64_t d = 0; d < 8; ++d) {
    EXPECT_EQ(mesh.GroupMembers(d, Axes{"tp", "dp"}), expected);
    std::vector<int64_t> c = mesh.Coordinates(d);
    EXPECT_EQ(mesh.GroupCoordinate(d, Axes{"tp", "dp"}), c[1] * 2 + c[0]) << "device " << d;
    // A device is the member at its own group coordinate.
    EXPECT_EQ(expected[mesh.GroupCoordinate(d, Axes{"tp", "dp"})], d);
  }
}

TEST(MeshTest, AxisGroupLeavesOtherAxesFixed) {
  Mesh mesh("m", {{"a", 2, {}}, {"b", 3, {}}, {"c", 2, {}}});
  // Device (a=1, b=2, c=0) = (1*3 + 2)*2 + 0 = 10. Group over (c, a) keeps b = 2.
  ASSERT_EQ(mesh.DeviceId({1, 2, 0}), 10);
  // Positions: c major, a minor: (c0,a0) (c0,a1) (c1,a0) (c1,a1).
  EXPECT_EQ(mesh.GroupMembers(10, Axes{"c", "a"}),
            (Ids{mesh.DeviceId({0, 2, 0}), mesh.DeviceId({1, 2, 0}), mesh.DeviceId({0, 2, 1}),
                 mesh.DeviceId({1, 2, 1})}));
  EXPECT_EQ(mesh.GroupCoordinate(10, Axes{"c", "a"}), 1);
  EXPECT_EQ(mesh.GroupCoordinate(10, Axes{"a", "c"}), 2);
  EXPECT_EQ(mesh.GroupMembers(10, Axes{"b"}), (Ids{6, 8, 10}));
  EXPECT_EQ(mesh.GroupCoordinate(10, Axes{"b"}), 2);
}

TEST(MeshTest, EveryDeviceIsInExactlyOneGroupPosition) {
  Mesh mesh("m", {{"a", 2, {}}, {"b", 3, {}}, {"c", 2, {}}});
  for (const Axes& axes : {Axes{"a"}, Axes{"b", "a"}, Axes{"c", "a", "b"}, Axes{"b", "c"}}) {
    for (int64_t d = 0; d < mesh.num_devices(); ++d) {
      Ids members = mesh.GroupMembers(d, axes);
      ASSERT_EQ(static_cast<int64_t>(members.size()), mesh.GroupSize(axes));
      EXPECT_EQ(members[mesh.GroupCoordinate(d, axes)], d);
      // Every member has the same group.
      for (int64_t other : members) EXPECT_EQ(mesh.GroupMembers(other, axes), members);
    }
  }
}

TEST(MeshTest, WellFormedness) {
  EXPECT_FALSE(Mesh("m", {{"tp", 0, {}}}).IsWellFormed());
  EXPECT_FALSE(Mesh("m", {{"tp", -3, {}}}).IsWellFormed());
  EXPECT_FALSE(Mesh("m", {{"tp", 2, {}}, {"tp", 2, {}}}).IsWellFormed());
  EXPECT_FALSE(Mesh("m", {{"a", int64_t{1} << 32, {}}, {"b", int64_t{1} << 32, {}}}).IsWellFormed());
  EXPECT_TRUE(Mesh("m", {{"a", int64_t{1} << 31, {}}, {"b", int64_t{1} << 31, {}}}).IsWellFormed());
  EXPECT_TRUE(Mesh("m", {{"a", 1, {}}}).IsWellFormed());
}

TEST(MeshTest, HugeMeshesSaturateInsteadOfOverflowing) {
  Mesh mesh("m", {{"a", int64_t{1} << 32, {}}, {"b", int64_t{1} << 32, {}}});
  EXPECT_EQ(mesh.num_devices(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(mesh.GroupSize(Axes{"a", "b"}), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(mesh.GroupSize(Axes{"a"}), int64_t{1} << 32);
}

TEST(MeshTest, UnknownAxesCountAsOneInGroupSize) {
  EXPECT_EQ(DpTp().GroupSize(Axes{"pp", "tp"}), 4);
}

}  // namespace
}  // namespace commir
