// End-to-end tests of spmd execution on the cpu backend: small spmd programs are parsed and
// run with runtime::Interpreter + cpu::CpuBackend on meshes of 1 to 12 devices, and every
// device's results are compared with expectations computed here directly from the spec's
// definitions (docs/language.md: meshes, tensor types, spmd-only ops), not from commir::Mesh or the collectives
// library, so that a mistake in either shows up as a failure:
//  - devices are numbered row-major, the last mesh axis fastest;
//  - the group of a device over an axis or axis group is the devices that share all other
//    coordinates, ordered by linearized coordinate over the group's axes, the first listed
//    axis major; `rank` is the device's position in that order.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "backend_cpu/cpu_backend.h"
#include "commir/ir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "runtime/interpreter.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

using runtime::Tensor;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------------
// The spec's mesh arithmetic, written out independently.

struct TestMesh {
  std::vector<std::pair<std::string, int64_t>> axes;

  int64_t num_devices() const {
    int64_t n = 1;
    for (const auto& axis : axes) n *= axis.second;
    return n;
  }
  // "dp=2, tp=4"
  std::string Text() const {
    std::vector<std::string> parts;
    for (const auto& [name, size] : axes) parts.push_back(absl::StrCat(name, "=", size));
    return absl::StrJoin(parts, ", ");
  }
  int AxisIndex(absl::string_view name) const {
    for (size_t i = 0; i < axes.size(); ++i) {
      if (axes[i].first == name) return static_cast<int>(i);
    }
    ADD_FAILURE() << "no axis " << name;
    return 0;
  }
  // Row-major, last axis fastest.
  std::vector<int64_t> Coords(int64_t device) const {
    std::vector<int64_t> coords(axes.size());
    for (int i = static_cast<int>(axes.size()) - 1; i >= 0; --i) {
      coords[i] = device % axes[i].second;
      device /= axes[i].second;
    }
    return coords;
  }
  // The devices sharing every coordinate outside `group` with `device`, ordered by their
  // linearized coordinate over `group` (first listed axis major).
  std::vector<int64_t> Group(int64_t device, const std::vector<std::string>& group) const {
    std::vector<int64_t> mine = Coords(device);
    std::vector<std::pair<int64_t, int64_t>> found;  // (position, device)
    for (int64_t other = 0; other < num_devices(); ++other) {
      std::vector<int64_t> theirs = Coords(other);
      bool same = true;
      for (size_t a = 0; a < axes.size(); ++a) {
        bool in_group =
            std::find(group.begin(), group.end(), axes[a].first) != group.end();
        if (!in_group && theirs[a] != mine[a]) same = false;
      }
      if (!same) continue;
      int64_t position = 0;
      for (const std::string& name : group) {
        int a = AxisIndex(name);
        position = position * axes[a].second + theirs[a];
      }
      found.push_back({position, other});
    }
    std::sort(found.begin(), found.end());
    std::vector<int64_t> members;
    for (size_t i = 0; i < found.size(); ++i) {
      EXPECT_EQ(found[i].first, static_cast<int64_t>(i)) << "positions must be 0..n-1";
      members.push_back(found[i].second);
    }
    return members;
  }
  int64_t Position(int64_t device, const std::vector<std::string>& group) const {
    std::vector<int64_t> members = Group(device, group);
    return std::find(members.begin(), members.end(), device) - members.begin();
  }
};

// "tp" -> {"tp"}, "(dp, tp)" -> {"dp", "tp"}.
std::vector<std::string> ParseAxisSpec(absl::string_view spec) {
  absl::string_view inner = spec;
  if (!inner.empty() && inner.front() == '(') inner = inner.substr(1, inner.size() - 2);
  std::vector<std::string> axes;
  for (absl::string_view part : absl::StrSplit(inner, ',')) {
    part = absl::StripAsciiWhitespace(part);
    axes.emplace_back(part);
  }
  return axes;
}

// ---------------------------------------------------------------------------------------
// Running programs.

struct Outcome {
  absl::Status status = absl::OkStatus();
  std::vector<std::vector<Tensor>> outputs;  // [device][result]
  Location error_location;
  std::unique_ptr<Module> module;  // keeps the ops alive for location checks
};

std::unique_ptr<Module> Parse(const std::string& source) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(source, "test.commir");
  EXPECT_TRUE(module.ok()) << module.status() << "\n" << source;
  if (!module.ok()) return nullptr;
  return *std::move(module);
}

Outcome RunProgram(const std::string& source, const std::vector<std::vector<Tensor>>& inputs,
                   std::vector<runtime::OpEvent>* events = nullptr) {
  Outcome outcome;
  outcome.module = Parse(source);
  if (outcome.module == nullptr) {
    outcome.status = absl::InternalError("parse failed");
    return outcome;
  }
  std::vector<Function*> functions = outcome.module->functions();
  EXPECT_EQ(functions.size(), 1u);
  CpuBackend backend;
  runtime::Interpreter interpreter(*functions[0], backend);
  interpreter.set_event_sink(events);
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(inputs);
  outcome.error_location = interpreter.error_location();
  if (outputs.ok()) {
    outcome.outputs = *std::move(outputs);
  } else {
    outcome.status = outputs.status();
  }
  return outcome;
}

// A tensor whose element at multi-index idx is fn(idx).
Tensor Make(ElementType type, std::vector<int64_t> shape,
            const std::function<double(const std::vector<int64_t>&)>& fn) {
  Tensor t(type, shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t e = 0; e < t.num_elements(); ++e) {
    int64_t rest = e;
    for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
      idx[i] = rest % shape[i];
      rest /= shape[i];
    }
    t.SetFromDouble(e, fn(idx));
  }
  return t;
}

// Device d's distinct, exactly representable input: 1000 d + 10 i + j (rank 2).
double Distinct(int64_t d, const std::vector<int64_t>& idx) {
  double v = 1000.0 * static_cast<double>(d);
  double scale = 1;
  for (int i = static_cast<int>(idx.size()) - 1; i >= 0; --i) {
    v += scale * static_cast<double>(idx[i]);
    scale *= 10;
  }
  return v;
}

// Scrambled small integers with both signs, so max and min pick different devices.
double Scrambled(int64_t d, const std::vector<int64_t>& idx) {
  int64_t e = 0;
  for (int64_t i : idx) e = e * 7 + i;
  return static_cast<double>((d * 37 + e * 11 + 5) % 23) - 11.0;
}

std::vector<std::vector<Tensor>> PerDevice(int64_t n, const std::function<Tensor(int64_t)>& fn) {
  std::vector<std::vector<Tensor>> inputs(n);
  for (int64_t d = 0; d < n; ++d) inputs[d].push_back(fn(d));
  return inputs;
}

void ExpectSame(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.element_type(), expected.element_type()) << what;
  ASSERT_EQ(actual.shape(), expected.shape())
      << what << ": got " << actual.DebugTypeString() << ", want " << expected.DebugTypeString();
  for (int64_t e = 0; e < expected.num_elements(); ++e) {
    if (actual.GetAsDouble(e) != expected.GetAsDouble(e)) {
      ADD_FAILURE() << what << ": element " << e << " is " << actual.GetAsDouble(e)
                    << ", want " << expected.GetAsDouble(e);
      return;
    }
  }
}

std::string Subst(std::string text, const std::vector<std::pair<std::string, std::string>>& vars) {
  for (const auto& [key, value] : vars) text = absl::StrReplaceAll(text, {{key, value}});
  return text;
}

// ---------------------------------------------------------------------------------------
// Collectives and rank over every (mesh, axis group) combination.

struct GroupCase {
  TestMesh mesh;
  std::string axis;  // as written in the program: "tp" or "(dp, tp)"
};

void PrintTo(const GroupCase& c, std::ostream* os) {
  *os << "mesh (" << c.mesh.Text() << ") over " << c.axis;
}

std::string CaseName(const ::testing::TestParamInfo<GroupCase>& info) {
  std::string name = absl::StrCat(info.param.mesh.Text(), "_over_", info.param.axis);
  std::string out;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) out.push_back(c);
    else if (c == '=' || c == '_') out.push_back('_');
  }
  return out;
}

std::vector<GroupCase> AllGroupCases() {
  std::vector<GroupCase> cases;
  for (int64_t n : {1, 2, 4, 8}) cases.push_back({TestMesh{{{"tp", n}}}, "tp"});
  for (auto [dp, tp] : std::vector<std::pair<int64_t, int64_t>>{{2, 4}, {4, 2}, {3, 2}}) {
    TestMesh mesh{{{"dp", dp}, {"tp", tp}}};
    for (const char* axis : {"dp", "tp", "(dp, tp)", "(tp, dp)"}) cases.push_back({mesh, axis});
  }
  TestMesh mesh3{{{"x", 2}, {"y", 3}, {"z", 2}}};
  for (const char* axis : {"y", "(x, z)", "(z, x)", "(z, y)", "(x, y, z)", "(z, x, y)"}) {
    cases.push_back({mesh3, axis});
  }
  return cases;
}

class GroupTest : public ::testing::TestWithParam<GroupCase> {
 protected:
  const TestMesh& mesh() const { return GetParam().mesh; }
  int64_t num_devices() const { return mesh().num_devices(); }
  std::vector<std::string> group_axes() const { return ParseAxisSpec(GetParam().axis); }
  int64_t group_size() const { return static_cast<int64_t>(Group(0).size()); }
  std::vector<int64_t> Group(int64_t d) const { return mesh().Group(d, group_axes()); }
  int64_t Pos(int64_t d) const { return mesh().Position(d, group_axes()); }

  // Substitutes $MESH, $AX, $N (group size) and $N2/$N3 (2n, 3n) in a program.
  std::string Program(const std::string& text) const {
    int64_t n = group_size();
    return Subst(text, {{"$MESH", mesh().Text()},
                        {"$AX", GetParam().axis},
                        {"$N2", absl::StrCat(2 * n)},
                        {"$N3", absl::StrCat(3 * n)},
                        {"$N", absl::StrCat(n)}});
  }

  Outcome Run(const std::string& text, const std::vector<std::vector<Tensor>>& inputs) const {
    return RunProgram(Program(text), inputs);
  }
};

TEST_P(GroupTest, GroupSizeMatchesAxes) {
  int64_t product = 1;
  for (const std::string& axis : group_axes()) {
    product *= mesh().axes[mesh().AxisIndex(axis)].second;
  }
  EXPECT_EQ(group_size(), product);
}

TEST_P(GroupTest, Rank) {
  const char* text = R"(mesh @m($MESH)
spmd func @f(%iota: f32[64]) -> f32[1] {
  %r = rank() {axis = $AX} : index
  %y = dynamic_slice(%iota, %r) {dim = 0, size = 1} : f32[1]
  return %y
}
)";
  Tensor iota = Make(ElementType::kF32, {64}, [](auto& i) { return i[0]; });
  Outcome out = Run(text, PerDevice(num_devices(), [&](int64_t) { return iota; }));
  ASSERT_TRUE(out.status.ok()) << out.status;
  for (int64_t d = 0; d < num_devices(); ++d) {
    EXPECT_EQ(out.outputs[d][0].GetAsDouble(0), static_cast<double>(Pos(d))) << "device " << d;
  }
}

TEST_P(GroupTest, AllGather) {
  for (int dim : {0, 1, -1}) {
    SCOPED_TRACE(absl::StrCat("dim ", dim));
    std::string text = absl::StrReplaceAll(R"(mesh @m($MESH)
spmd func @f(%x: f32[2, 3]) -> RESULT {
  %y = all_gather(%x) {axis = $AX, dim = DIM} : RESULT
  return %y
}
)", {{"DIM", absl::StrCat(dim)}, {"RESULT", dim == 0 ? "f32[$N2, 3]" : "f32[2, $N3]"}});
    Outcome out = Run(text, PerDevice(num_devices(), [&](int64_t d) {
      return Make(ElementType::kF32, {2, 3}, [&](auto& i) { return Distinct(d, i); });
    }));
    ASSERT_TRUE(out.status.ok()) << out.status;
    int64_t n = group_size();
    for (int64_t d = 0; d < num_devices(); ++d) {
      std::vector<int64_t> members = Group(d);
      std::vector<int64_t> shape = dim == 0 ? std::vector<int64_t>{2 * n, 3}
                                            : std::vector<int64_t>{2, 3 * n};
      Tensor expected = Make(ElementType::kF32, shape, [&](auto& i) {
        if (dim == 0) return Distinct(members[i[0] / 2], {i[0] % 2, i[1]});
        return Distinct(members[i[1] / 3], {i[0], i[1] % 3});
      });
      ExpectSame(out.outputs[d][0], expected, absl::StrCat("device ", d));
    }
  }
}

TEST_P(GroupTest, AllReduce) {
  for (const char* reduce : {"sum", "max", "min"}) {
    SCOPED_TRACE(reduce);
    std::string text = absl::StrReplaceAll(R"(mesh @m($MESH)
spmd func @f(%x: f32[2, 3]) -> f32[2, 3] {
  %y = all_reduce(%x) {axis = $AX, reduce = RED}
  return %y
}
)", {{"RED", reduce}});
    Outcome out = Run(text, PerDevice(num_devices(), [&](int64_t d) {
      return Make(ElementType::kF32, {2, 3}, [&](auto& i) { return Scrambled(d, i); });
    }));
    ASSERT_TRUE(out.status.ok()) << out.status;
    for (int64_t d = 0; d < num_devices(); ++d) {
      std::vector<int64_t> members = Group(d);
      Tensor expected = Make(ElementType::kF32, {2, 3}, [&](auto& i) {
        double acc = Scrambled(members[0], i);
        for (size_t m = 1; m < members.size(); ++m) {
          double v = Scrambled(members[m], i);
          acc = reduce[1] == 'u' ? acc + v : reduce[1] == 'a' ? std::max(acc, v) : std::min(acc, v);
        }
        return acc;
      });
      ExpectSame(out.outputs[d][0], expected, absl::StrCat("device ", d));
    }
  }
}

TEST_P(GroupTest, AllReduceIntegers) {
  const char* text = R"(mesh @m($MESH)
spmd func @f(%x: i32[4]) -> i32[4] {
  %y = all_reduce(%x) {axis = $AX}
  return %y
}
)";
  Outcome out = Run(text, PerDevice(num_devices(), [&](int64_t d) {
    return Make(ElementType::kI32, {4}, [&](auto& i) { return Scrambled(d, i) * 100001; });
  }));
  ASSERT_TRUE(out.status.ok()) << out.status;
  for (int64_t d = 0; d < num_devices(); ++d) {
    Tensor expected = Make(ElementType::kI32, {4}, [&](auto& i) {
      double acc = 0;
      for (int64_t m : Group(d)) acc += Scrambled(m, i) * 100001;
      return acc;
    });
    ExpectSame(out.outputs[d][0], expected, absl::StrCat("device ", d));
  }
}

TEST_P(GroupTest, ReduceScatter) {
  for (const char* reduce : {"sum", "max", "min"}) {
    for (int dim : {0, 1}) {
      SCOPED_TRACE(absl::StrCat(reduce, " dim ", dim));
      std::string text = absl::StrReplaceAll(R"(mesh @m($MESH)
spmd func @f(%x: INPUT) -> f32[2, 3] {
  %y = reduce_scatter(%x) {axis = $AX, dim = DIM, reduce = RED} : f32[2, 3]
  return %y
}
)", {{"RED", reduce}, {"DIM", absl::StrCat(dim)}, {"INPUT", dim == 0 ? "f32[$N2, 3]" : "f32[2, $N3]"}});
      int64_t n = group_size();
      std::vector<int64_t> in_shape = dim == 0 ? std::vector<int64_t>{2 * n, 3}
                                               : std::vector<int64_t>{2, 3 * n};
      Outcome out = Run(text, PerDevice(num_devices(), [&](int64_t d) {
        return Make(ElementType::kF32, in_shape, [&](auto& i) { return Scrambled(d, i); });
      }));
      ASSERT_TRUE(out.status.ok()) << out.status;
      for (int64_t d = 0; d < num_devices(); ++d) {
        std::vector<int64_t> members = Group(d);
        int64_t c = Pos(d);
        Tensor expected = Make(ElementType::kF32, {2, 3}, [&](auto& i) {
          std::vector<int64_t> src = dim == 0 ? std::vector<int64_t>{c * 2 + i[0], i[1]}
                                              : std::vector<int64_t>{i[0], c * 3 + i[1]};
          double acc = Scrambled(members[0], src);
          for (size_t m = 1; m < members.size(); ++m) {
            double v = Scrambled(members[m], src);
            acc = reduce[1] == 'u' ? acc + v
                  : reduce[1] == 'a' ? std::max(acc, v)
                                     : std::min(acc, v);
          }
          return acc;
        });
        ExpectSame(out.outputs[d][0], expected, absl::StrCat("device ", d));
      }
    }
  }
}

TEST_P(GroupTest, AllToAll) {
  struct Dims {
    int split, concat;
  };
  for (Dims dims : {Dims{0, 1}, Dims{1, 0}, Dims{0, 0}, Dims{1, 1}}) {
    SCOPED_TRACE(absl::StrCat("split ", dims.split, " concat ", dims.concat));
    int64_t n = group_size();
    // Input: the split dimension holds n blocks of 2 rows or 3 columns.
    std::vector<int64_t> in_shape = dims.split == 0 ? std::vector<int64_t>{2 * n, 3}
                                                    : std::vector<int64_t>{2, 3 * n};
    std::vector<int64_t> block = {2, 3};
    std::vector<int64_t> out_shape = block;
    out_shape[dims.concat] *= n;
    auto type = [](const std::vector<int64_t>& s) {
      return absl::StrFormat("f32[%d, %d]", s[0], s[1]);
    };
    std::string text = absl::StrReplaceAll(R"(mesh @m($MESH)
spmd func @f(%x: INPUT) -> OUTPUT {
  %y = all_to_all(%x) {axis = $AX, split_dim = @SPLIT, concat_dim = @CONCAT} : OUTPUT
  return %y
}
)", {{"INPUT", type(in_shape)}, {"OUTPUT", type(out_shape)},
     {"@SPLIT", absl::StrCat(dims.split)}, {"@CONCAT", absl::StrCat(dims.concat)}});
    Outcome out = Run(text, PerDevice(num_devices(), [&](int64_t d) {
      return Make(ElementType::kF32, in_shape, [&](auto& i) { return Distinct(d, i); });
    }));
    ASSERT_TRUE(out.status.ok()) << out.status;
    for (int64_t d = 0; d < num_devices(); ++d) {
      std::vector<int64_t> members = Group(d);
      int64_t j = Pos(d);
      Tensor expected = Make(ElementType::kF32, out_shape, [&](auto& i) {
        // Output index i: which source block, and where in it.
        int64_t source = i[dims.concat] / block[dims.concat];
        std::vector<int64_t> within = {i[0], i[1]};
        within[dims.concat] %= block[dims.concat];
        // Block j of the source's split dimension.
        std::vector<int64_t> src = within;
        src[dims.split] += j * block[dims.split];
        return Distinct(members[source], src);
      });
      ExpectSame(out.outputs[d][0], expected, absl::StrCat("device ", d));
    }
  }
}

TEST_P(GroupTest, Shift) {
  for (int offset : {1, -1, 2, -2, 3}) {
    SCOPED_TRACE(absl::StrCat("offset ", offset));
    std::string text = absl::StrReplaceAll(R"(mesh @m($MESH)
spmd func @f(%x: f32[2, 3]) -> f32[2, 3] {
  %y = shift(%x) {axis = $AX, offset = OFF}
  return %y
}
)", {{"OFF", absl::StrCat(offset)}});
    Outcome out = Run(text, PerDevice(num_devices(), [&](int64_t d) {
      return Make(ElementType::kF32, {2, 3}, [&](auto& i) { return Distinct(d, i); });
    }));
    ASSERT_TRUE(out.status.ok()) << out.status;
    int64_t n = group_size();
    for (int64_t d = 0; d < num_devices(); ++d) {
      int64_t c = Pos(d);
      int64_t from = Group(d)[((c - offset) % n + n) % n];
      Tensor expected = Make(ElementType::kF32, {2, 3}, [&](auto& i) { return Distinct(from, i); });
      ExpectSame(out.outputs[d][0], expected, absl::StrCat("device ", d));
    }
  }
}

TEST_P(GroupTest, DefaultShiftOffsetIsOne) {
  const char* text = R"(mesh @m($MESH)
spmd func @f(%x: f32[3]) -> f32[3] {
  %y = shift(%x) {axis = $AX}
  return %y
}
)";
  Outcome out = Run(text, PerDevice(num_devices(), [&](int64_t d) {
    return Make(ElementType::kF32, {3}, [&](auto& i) { return Distinct(d, i); });
  }));
  ASSERT_TRUE(out.status.ok()) << out.status;
  int64_t n = group_size();
  for (int64_t d = 0; d < num_devices(); ++d) {
    int64_t from = Group(d)[(Pos(d) - 1 + n) % n];
    EXPECT_EQ(out.outputs[d][0].GetAsDouble(0), Distinct(from, {0})) << "device " << d;
  }
}

// A ring all-gather written with shift in a loop with two carried values, one shift on
// stream 1, equals all_gather; the block carried n times around the ring is back home.
TEST_P(GroupTest, RingAllGatherLoopMatchesAllGather) {
  for (const char* stream : {"", ", stream = 1", ", stream = %st"}) {
    SCOPED_TRACE(absl::StrCat("stream attribute '", stream, "'"));
    std::string text = absl::StrReplaceAll(R"(mesh @m($MESH)
spmd func @f(%x: f32[2, 3]) -> (f32[$N2, 3], f32[2, 3], f32[$N2, 3]) {
  %r = rank() {axis = $AX}
  %z = full() {value = 0.0} : f32[$N2, 3]
  %out, %home = for %i = 0 to $N step 1 iter(%acc = %z, %blk = %x) {
    %st = rem(%i, 2)
    %src = sub(%r, %i)
    %srcn = rem(%src, $N)
    %off = mul(%srcn, 2)
    %next = shift(%blk) {axis = $AX, offset = 1STREAM} : f32[2, 3]
    %acc1 = dynamic_update_slice(%acc, %blk, %off) {dim = 0STREAM} : f32[$N2, 3]
    yield %acc1, %next
  } : (f32[$N2, 3], f32[2, 3])
  %g = all_gather(%x) {axis = $AX, dim = 0} : f32[$N2, 3]
  return %out, %home, %g
}
)", {{"STREAM", stream}});
    Outcome out = Run(text, PerDevice(num_devices(), [&](int64_t d) {
      return Make(ElementType::kF32, {2, 3}, [&](auto& i) { return Distinct(d, i); });
    }));
    ASSERT_TRUE(out.status.ok()) << out.status;
    for (int64_t d = 0; d < num_devices(); ++d) {
      ASSERT_EQ(out.outputs[d].size(), 3u);
      ExpectSame(out.outputs[d][0], out.outputs[d][2], absl::StrCat("ring vs all_gather, device ", d));
      ExpectSame(out.outputs[d][1],
                 Make(ElementType::kF32, {2, 3}, [&](auto& i) { return Distinct(d, i); }),
                 absl::StrCat("block home after n shifts, device ", d));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, GroupTest, ::testing::ValuesIn(AllGroupCases()), CaseName);

// ---------------------------------------------------------------------------------------
// Group membership on a 2-D mesh, spelled out by hand for dp=2, tp=4 (ids 4*dp + tp).

TEST(SpmdExecution, HandWrittenGroupsOnDp2Tp4) {
  TestMesh mesh{{{"dp", 2}, {"tp", 4}}};
  EXPECT_EQ(mesh.Group(6, {"tp"}), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(mesh.Group(6, {"dp"}), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(mesh.Group(6, {"dp", "tp"}), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(mesh.Group(6, {"tp", "dp"}), (std::vector<int64_t>{0, 4, 1, 5, 2, 6, 3, 7}));
  // And the interpreter agrees: all_gather over (tp, dp) of each device's id.
  const char* text = R"(mesh @m(dp=2, tp=4)
spmd func @f(%x: f32[1]) -> f32[8] {
  %y = all_gather(%x) {axis = (tp, dp), dim = 0} : f32[8]
  return %y
}
)";
  Outcome out = RunProgram(text, PerDevice(8, [](int64_t d) {
    return Make(ElementType::kF32, {1}, [&](auto&) { return static_cast<double>(d); });
  }));
  ASSERT_TRUE(out.status.ok()) << out.status;
  for (int64_t d = 0; d < 8; ++d) {
    EXPECT_EQ(out.outputs[d][0].ToDouble(), (std::vector<double>{0, 4, 1, 5, 2, 6, 3, 7}));
  }
}

// ---------------------------------------------------------------------------------------
// Loops.

TEST(SpmdExecution, ForLoopBoundsStepAndCarriedValues) {
  // i = 1, 4, 7: acc accumulates iota[i] (= i), cnt counts the trips, and the index value
  // %j carried along adds i each trip starting from the rank.
  const char* text = R"(mesh @m(tp=4)
spmd func @f(%iota: f32[64], %zero: f32[1]) -> (f32[1], f32[1], f32[1]) {
  %r = rank() {axis = tp}
  %one = full() {value = 1.0} : f32[1]
  %acc, %cnt, %j = for %i = 1 to 8 step 3 iter(%a = %zero, %c = %zero, %k = %r) {
    %s = dynamic_slice(%iota, %i) {dim = 0, size = 1}
    %a1 = add(%a, %s)
    %c1 = add(%c, %one)
    %k1 = add(%k, %i)
    yield %a1, %c1, %k1
  } : (f32[1], f32[1], index)
  %jv = dynamic_slice(%iota, %j) {dim = 0, size = 1}
  return %acc, %cnt, %jv
}
)";
  Tensor iota = Make(ElementType::kF32, {64}, [](auto& i) { return i[0]; });
  Tensor zero(ElementType::kF32, {1});
  std::vector<std::vector<Tensor>> inputs(4, std::vector<Tensor>{iota, zero});
  Outcome out = RunProgram(text, inputs);
  ASSERT_TRUE(out.status.ok()) << out.status;
  for (int64_t d = 0; d < 4; ++d) {
    EXPECT_EQ(out.outputs[d][0].GetAsDouble(0), 12.0);
    EXPECT_EQ(out.outputs[d][1].GetAsDouble(0), 3.0);
    EXPECT_EQ(out.outputs[d][2].GetAsDouble(0), static_cast<double>(d + 12));
  }
}

TEST(SpmdExecution, ZeroTripLoopReturnsInitialValues) {
  const char* text = R"(mesh @m(tp=2)
spmd func @f(%x: f32[2]) -> f32[2] {
  %y = for %i = 3 to 3 step 1 iter(%a = %x) {
    %b = neg(%a)
    yield %b
  } : f32[2]
  return %y
}
)";
  Outcome out = RunProgram(text, PerDevice(2, [](int64_t d) {
    return Make(ElementType::kF32, {2}, [&](auto& i) { return Distinct(d, i); });
  }));
  ASSERT_TRUE(out.status.ok()) << out.status;
  for (int64_t d = 0; d < 2; ++d) {
    ExpectSame(out.outputs[d][0],
               Make(ElementType::kF32, {2}, [&](auto& i) { return Distinct(d, i); }), "device");
  }
}

TEST(SpmdExecution, NestedLoopsWithCollectivesInside) {
  // acc = x; 3 times: 2 times acc = shift(acc) + x. Computed here directly.
  const char* text = R"(mesh @m(dp=2, tp=3)
spmd func @f(%x: f32[2]) -> f32[2] {
  %y = for %i = 0 to 3 iter(%a = %x) {
    %b = for %j = 0 to 2 iter(%c = %a) {
      %s = shift(%c) {axis = tp, offset = -1}
      %t = add(%s, %x)
      yield %t
    } : f32[2]
    %u = all_reduce(%b) {axis = dp, reduce = max}
    yield %u
  } : f32[2]
  return %y
}
)";
  TestMesh mesh{{{"dp", 2}, {"tp", 3}}};
  auto x = [](int64_t d) { return static_cast<double>((d * 5) % 7); };
  Outcome out = RunProgram(text, PerDevice(6, [&](int64_t d) {
    return Make(ElementType::kF32, {2}, [&](auto& i) { return x(d) + 10 * i[0]; });
  }));
  ASSERT_TRUE(out.status.ok()) << out.status;
  std::vector<double> a(6);
  for (int64_t d = 0; d < 6; ++d) a[d] = x(d);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 2; ++j) {
      std::vector<double> next(6);
      for (int64_t d = 0; d < 6; ++d) {
        std::vector<int64_t> g = mesh.Group(d, {"tp"});
        int64_t c = mesh.Position(d, {"tp"});
        next[d] = a[g[(c + 1) % 3]] + x(d);  // offset -1: receive from c + 1
      }
      a = next;
    }
    std::vector<double> next(6);
    for (int64_t d = 0; d < 6; ++d) {
      next[d] = -1e30;
      for (int64_t m : mesh.Group(d, {"dp"})) next[d] = std::max(next[d], a[m]);
    }
    a = next;
  }
  for (int64_t d = 0; d < 6; ++d) {
    // Element 1 is element 0 + 10 in x, and every value computed from it carries one 10
    // per x it adds up: the initial x and 2 * 3 adds.
    EXPECT_EQ(out.outputs[d][0].ToDouble(), (std::vector<double>{a[d], a[d] + 70})) << d;
  }
}

// ---------------------------------------------------------------------------------------
// Index arithmetic.

int64_t SpecFloorDiv(int64_t a, int64_t b) {
  return static_cast<int64_t>(std::floor(static_cast<double>(a) / static_cast<double>(b)));
}
int64_t SpecFloorRem(int64_t a, int64_t b) { return a - b * SpecFloorDiv(a, b); }

TEST(SpmdExecution, IndexArithmeticFloorsOnNegatives) {
  // a = rank - 5 is in [-5, 2] on 8 devices; each value v is read back as x[v + 20] = v.
  const char* text = R"(mesh @m(tp=8)
spmd func @f(%iota: f32[64]) -> f32[8] {
  %r = rank() {axis = tp}
  %a = sub(%r, 5)
  %r1 = add(%r, 1)
  %v0 = div(%a, 3)
  %v1 = rem(%a, 3)
  %v2 = div(%a, -3)
  %v3 = rem(%a, -3)
  %v4 = div(-7, %r1)
  %v5 = rem(-7, %r1)
  %v6 = mul(%a, -2)
  %v7 = add(%a, %v6)
  %o0 = add(%v0, 20)
  %o1 = add(%v1, 20)
  %o2 = add(%v2, 20)
  %o3 = add(%v3, 20)
  %o4 = add(%v4, 20)
  %o5 = add(%v5, 20)
  %o6 = add(%v6, 20)
  %o7 = add(%v7, 20)
  %s0 = dynamic_slice(%iota, %o0) {dim = 0, size = 1}
  %s1 = dynamic_slice(%iota, %o1) {dim = 0, size = 1}
  %s2 = dynamic_slice(%iota, %o2) {dim = 0, size = 1}
  %s3 = dynamic_slice(%iota, %o3) {dim = 0, size = 1}
  %s4 = dynamic_slice(%iota, %o4) {dim = 0, size = 1}
  %s5 = dynamic_slice(%iota, %o5) {dim = 0, size = 1}
  %s6 = dynamic_slice(%iota, %o6) {dim = 0, size = 1}
  %s7 = dynamic_slice(%iota, %o7) {dim = 0, size = 1}
  %y = concat(%s0, %s1, %s2, %s3, %s4, %s5, %s6, %s7) {dim = 0}
  return %y
}
)";
  Tensor iota = Make(ElementType::kF32, {64}, [](auto& i) { return i[0] - 20.0; });
  Outcome out = RunProgram(text, PerDevice(8, [&](int64_t) { return iota; }));
  ASSERT_TRUE(out.status.ok()) << out.status;
  for (int64_t d = 0; d < 8; ++d) {
    int64_t a = d - 5, r1 = d + 1;
    std::vector<double> want = {
        static_cast<double>(SpecFloorDiv(a, 3)),  static_cast<double>(SpecFloorRem(a, 3)),
        static_cast<double>(SpecFloorDiv(a, -3)), static_cast<double>(SpecFloorRem(a, -3)),
        static_cast<double>(SpecFloorDiv(-7, r1)), static_cast<double>(SpecFloorRem(-7, r1)),
        static_cast<double>(-2 * a),              static_cast<double>(-a)};
    EXPECT_EQ(out.outputs[d][0].ToDouble(), want) << "device " << d;
  }
  // Spot checks of the definition itself.
  EXPECT_EQ(SpecFloorDiv(-5, 3), -2);
  EXPECT_EQ(SpecFloorRem(-5, 3), 1);
  EXPECT_EQ(SpecFloorDiv(-5, -3), 1);
  EXPECT_EQ(SpecFloorRem(-5, -3), -2);
  EXPECT_EQ(SpecFloorRem(2, -3), -1);
}

TEST(SpmdExecution, IndexDivisionByZeroNamesDeviceAndOp) {
  const char* text = R"(mesh @m(tp=4)
spmd func @f(%x: f32[4]) -> f32[1] {
  %r = rank() {axis = tp}
  %q = div(8, %r)
  %y = dynamic_slice(%x, %q) {dim = 0, size = 1}
  return %y
}
)";
  Outcome out = RunProgram(text, PerDevice(4, [](int64_t) { return Tensor(ElementType::kF32, {4}); }));
  ASSERT_FALSE(out.status.ok());
  EXPECT_THAT(out.status.message(), HasSubstr("device 0"));
  EXPECT_THAT(out.status.message(), HasSubstr("div"));
  EXPECT_EQ(out.error_location.line, 4);
}

TEST(SpmdExecution, IndexArithmeticAtTheInt64Limits) {
  // m = the smallest int64: floor rem stays exact there.
  const char* text = R"(mesh @m(tp=2)
spmd func @f(%iota: f32[8]) -> f32[4] {
  %n = full() {value = -9223372036854775807} : index
  %m = sub(%n, 1)
  %a = rem(%m, 3)
  %b = rem(%m, -1)
  %c = rem(%m, 7)
  %d0 = rem(%m, -7)
  %d = add(%d0, 1)
  %sa = dynamic_slice(%iota, %a) {dim = 0, size = 1}
  %sb = dynamic_slice(%iota, %b) {dim = 0, size = 1}
  %sc = dynamic_slice(%iota, %c) {dim = 0, size = 1}
  %sd = dynamic_slice(%iota, %d) {dim = 0, size = 1}
  %y = concat(%sa, %sb, %sc, %sd) {dim = 0}
  return %y
}
)";
  Tensor iota = Make(ElementType::kF32, {8}, [](auto& i) { return i[0]; });
  Outcome out = RunProgram(text, PerDevice(2, [&](int64_t) { return iota; }));
  ASSERT_TRUE(out.status.ok()) << out.status;
  // -2^63 = 3 * (-3074457345618258603) + 1; 2^63 = 8^21 = 1 (mod 7), so -2^63 = 6 (mod 7)
  // and -1 with a divisor of -7.
  EXPECT_EQ(out.outputs[0][0].ToDouble(), (std::vector<double>{1, 0, 6, 0}));

  // Results that do not fit in an int64 are errors, not wraparound.
  for (const char* op : {"%o = mul(%big, 2)", "%o = add(%big, %big)", "%o = sub(%neg, %big)",
                         "%o = div(%min, -1)"}) {
    SCOPED_TRACE(op);
    std::string program = absl::StrCat(R"(mesh @m(tp=2)
spmd func @f(%x: f32[4]) -> f32[1] {
  %big = full() {value = 4611686018427387904} : index
  %neg = full() {value = -4611686018427387905} : index
  %n = full() {value = -9223372036854775807} : index
  %min = sub(%n, 1)
  )", op, R"(
  %y = dynamic_slice(%x, %o) {dim = 0, size = 1}
  return %y
}
)");
    Outcome bad = RunProgram(program, PerDevice(2, [](int64_t) { return Tensor(ElementType::kF32, {4}); }));
    ASSERT_FALSE(bad.status.ok());
    EXPECT_THAT(bad.status.message(), HasSubstr("device 0"));
    EXPECT_THAT(bad.status.message(), HasSubstr("overflow"));
    EXPECT_EQ(bad.error_location.line, 7);
  }
}

// ---------------------------------------------------------------------------------------
// dynamic_slice and dynamic_update_slice.

TEST(SpmdExecution, DynamicSliceAndUpdateByRank) {
  // Device c reads rows [2c, 2c + 3) and columns [c, c + 2) of its own x, and writes its
  // own u at rows 2c of a zero buffer.
  const char* text = R"(mesh @m(dp=2, tp=2)
spmd func @f(%x: f32[9, 6], %u: f32[2, 6]) -> (f32[3, 6], f32[9, 2], f32[9, 6]) {
  %r = rank() {axis = (dp, tp)}
  %off = mul(%r, 2)
  %a = dynamic_slice(%x, %off) {dim = 0, size = 3}
  %b = dynamic_slice(%x, %r) {dim = -1, size = 2}
  %z = full() {value = 0.0} : f32[9, 6]
  %c = dynamic_update_slice(%z, %u, %off) {dim = 0}
  return %a, %b, %c
}
)";
  std::vector<std::vector<Tensor>> inputs(4);
  for (int64_t d = 0; d < 4; ++d) {
    inputs[d].push_back(Make(ElementType::kF32, {9, 6}, [&](auto& i) { return Distinct(d, i); }));
    inputs[d].push_back(Make(ElementType::kF32, {2, 6}, [&](auto& i) { return -Distinct(d, i) - 1; }));
  }
  Outcome out = RunProgram(text, inputs);
  ASSERT_TRUE(out.status.ok()) << out.status;
  for (int64_t d = 0; d < 4; ++d) {
    int64_t c = d;  // (dp, tp) on dp=2, tp=2 is the device id
    ExpectSame(out.outputs[d][0], Make(ElementType::kF32, {3, 6}, [&](auto& i) {
                 return Distinct(d, {2 * c + i[0], i[1]});
               }), "dynamic_slice dim 0");
    ExpectSame(out.outputs[d][1], Make(ElementType::kF32, {9, 2}, [&](auto& i) {
                 return Distinct(d, {i[0], c + i[1]});
               }), "dynamic_slice dim -1");
    ExpectSame(out.outputs[d][2], Make(ElementType::kF32, {9, 6}, [&](auto& i) {
                 int64_t row = i[0] - 2 * c;
                 return row >= 0 && row < 2 ? -Distinct(d, {row, i[1]}) - 1 : 0.0;
               }), "dynamic_update_slice");
  }
}

// Finds the first op of `kind` in the function (nested loops included).
const Operation* FindOp(const Module& module, OpKind kind) {
  const Operation* found = nullptr;
  WalkOps(module.functions()[0]->body(), [&](Operation* op) {
    if (found == nullptr && op->Is(kind)) found = op;
  });
  return found;
}

TEST(SpmdExecution, DynamicSliceOutOfRangeOnOneDevice) {
  // Offsets 0, 3, ..., 21 with size 3 in 23 rows: only device 7 (offset 21) is out of range.
  const char* text = R"(mesh @m(tp=8)
spmd func @f(%x: f32[23, 2]) -> f32[3, 2] {
  %r = rank() {axis = tp}
  %off = mul(%r, 3)
  %y = dynamic_slice(%x, %off) {dim = 0, size = 3}
  return %y
}
)";
  Outcome out = RunProgram(text, PerDevice(8, [](int64_t) { return Tensor(ElementType::kF32, {23, 2}); }));
  ASSERT_FALSE(out.status.ok());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status.message(), HasSubstr("device 7"));
  EXPECT_THAT(out.status.message(), HasSubstr("dynamic_slice"));
  EXPECT_THAT(out.status.message(), HasSubstr("21"));
  EXPECT_THAT(out.status.message(), ::testing::Not(HasSubstr("device 6")));
  const Operation* op = FindOp(*out.module, OpKind::kDynamicSlice);
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(out.error_location, op->loc());
  EXPECT_EQ(out.error_location.line, 5);
}

TEST(SpmdExecution, NegativeOffsetAndUpdateOutOfRangeInsideLoop) {
  {
    const char* text = R"(mesh @m(dp=2, tp=2)
spmd func @f(%x: f32[4]) -> f32[1] {
  %r = rank() {axis = (tp, dp)}
  %off = sub(%r, 1)
  %y = dynamic_slice(%x, %off) {dim = 0, size = 1}
  return %y
}
)";
    Outcome out = RunProgram(text, PerDevice(4, [](int64_t) { return Tensor(ElementType::kF32, {4}); }));
    ASSERT_FALSE(out.status.ok());
    EXPECT_THAT(out.status.message(), HasSubstr("device 0"));
    EXPECT_THAT(out.status.message(), HasSubstr("-1"));
    EXPECT_EQ(out.error_location, FindOp(*out.module, OpKind::kDynamicSlice)->loc());
  }
  {
    // The update goes out of range on the third trip (offset 2 * 2 + 1 = 5 > 6 - 2) on the
    // device with tp = 1 and dp = 1 only, which is device 3.
    const char* text = R"(mesh @m(dp=2, tp=2)
spmd func @f(%x: f32[6], %u: f32[2]) -> f32[6] {
  %t = rank() {axis = tp}
  %d = rank() {axis = dp}
  %y = for %i = 0 to 3 iter(%a = %x) {
    %o = mul(%i, 2)
    %td = mul(%t, %d)
    %o2 = add(%o, %td)
    %b = dynamic_update_slice(%a, %u, %o2) {dim = 0}
    yield %b
  } : f32[6]
  return %y
}
)";
    std::vector<std::vector<Tensor>> inputs(
        4, std::vector<Tensor>{Tensor(ElementType::kF32, {6}), Tensor(ElementType::kF32, {2})});
    Outcome out = RunProgram(text, inputs);
    ASSERT_FALSE(out.status.ok());
    EXPECT_THAT(out.status.message(), HasSubstr("device 3:"));
    EXPECT_THAT(out.status.message(), HasSubstr("5"));
    EXPECT_THAT(out.status.message(), HasSubstr("dynamic_update_slice"));
    EXPECT_EQ(out.error_location, FindOp(*out.module, OpKind::kDynamicUpdateSlice)->loc());
    EXPECT_EQ(out.error_location.line, 9);
  }
}

// ---------------------------------------------------------------------------------------
// Streams: accepted as integers and index values, and change no result.

TEST(SpmdExecution, StreamsDoNotChangeResults) {
  // The same program without streams and with integer streams and index-valued streams
  // (a loop-varying one and one defined outside the loop) on ops of every kind.
  const char* plain = R"(mesh @m(dp=2, tp=4)
spmd func @f(%a: f32[16, 8], %b: f32[8, 8]) -> (f32[16, 8], f32[64, 8]) {
  %z = full() {value = 0.0} : f32[16, 8]
  %out = for %i = 0 to 4 iter(%acc = %z) {
    %off = mul(%i, 4)
    %chunk = dynamic_slice(%a, %off) {dim = 0, size = 4}
    %g = all_gather(%chunk) {axis = tp, dim = 0} : f32[16, 8]
    %p = matmul(%g, %b)
    %q = reduce_scatter(%p) {axis = tp, dim = 0} : f32[4, 8]
    %acc1 = dynamic_update_slice(%acc, %q, %off) {dim = 0}
    yield %acc1
  } : f32[16, 8]
  %e = exp(%out)
  %all = all_gather(%e) {axis = (dp, tp), dim = 0} : f32[128, 8]
  %h = slice(%all) {start = [0, 0], size = [64, 8]}
  return %out, %h
}
)";
  const char* streamed = R"(mesh @m(dp=2, tp=4)
spmd func @f(%a: f32[16, 8], %b: f32[8, 8]) -> (f32[16, 8], f32[64, 8]) {
  %st2 = full() {value = 1} : index
  %z = full() {value = 0.0, stream = 3} : f32[16, 8]
  %out = for %i = 0 to 4 iter(%acc = %z) {
    %st = rem(%i, 2) {stream = 1}
    %off = mul(%i, 4) {stream = 2}
    %chunk = dynamic_slice(%a, %off) {dim = 0, size = 4, stream = %st}
    %g = all_gather(%chunk) {axis = tp, dim = 0, stream = %st} : f32[16, 8]
    %p = matmul(%g, %b) {stream = %st}
    %q = reduce_scatter(%p) {axis = tp, dim = 0, stream = 1} : f32[4, 8]
    %acc1 = dynamic_update_slice(%acc, %q, %off) {dim = 0, stream = %st}
    yield %acc1
  } : f32[16, 8]
  %e = exp(%out) {stream = %st2}
  %all = all_gather(%e) {axis = (dp, tp), dim = 0, stream = 0} : f32[128, 8]
  %h = slice(%all) {start = [0, 0], size = [64, 8], stream = %st2}
  return %out, %h
}
)";
  // Parse both first, so a typo in the substitutions shows up clearly.
  ASSERT_NE(Parse(plain), nullptr);
  ASSERT_NE(Parse(streamed), nullptr);
  std::vector<std::vector<Tensor>> inputs(8);
  for (int64_t d = 0; d < 8; ++d) {
    inputs[d].push_back(Make(ElementType::kF32, {16, 8}, [&](auto& i) { return Scrambled(d, i) / 16; }));
    inputs[d].push_back(Make(ElementType::kF32, {8, 8}, [&](auto& i) { return Scrambled(d + 3, i) / 8; }));
  }
  Outcome a = RunProgram(plain, inputs);
  Outcome b = RunProgram(streamed, inputs);
  ASSERT_TRUE(a.status.ok()) << a.status;
  ASSERT_TRUE(b.status.ok()) << b.status;
  for (int64_t d = 0; d < 8; ++d) {
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE(a.outputs[d][r].BitwiseEqual(b.outputs[d][r])) << "device " << d << " result " << r;
    }
  }
  // And the streamed program really carries both kinds of stream.
  std::unique_ptr<Module> module = Parse(streamed);
  int integer_streams = 0, value_streams = 0;
  WalkOps(module->functions()[0]->body(), [&](Operation* op) {
    if (op->stream_operand() != nullptr) ++value_streams;
    if (op->attrs().Find("stream") != nullptr) ++integer_streams;
  });
  EXPECT_GE(integer_streams, 3);
  EXPECT_GE(value_streams, 5);
}

// ---------------------------------------------------------------------------------------
// The interpreter's own contract.

TEST(SpmdExecution, GlobalFunctionRunsOnOneDevice) {
  const char* text = R"(mesh @m(tp=4)
func @f(%x: f32[8@tp]) -> f32[8@tp] {
  %y = mul(%x, 2.0)
  return %y
}
)";
  std::unique_ptr<Module> module = Parse(text);
  ASSERT_NE(module, nullptr);
  CpuBackend backend;
  runtime::Interpreter interpreter(*module->functions()[0], backend);
  EXPECT_EQ(interpreter.num_devices(), 1);
  Tensor x = Make(ElementType::kF32, {8}, [](auto& i) { return i[0]; });
  auto out = interpreter.Run({{x}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0][0].ToDouble(), (std::vector<double>{0, 2, 4, 6, 8, 10, 12, 14}));
}

TEST(SpmdExecution, RejectsInputsOfTheWrongCountOrShape) {
  const char* text = R"(mesh @m(tp=2)
spmd func @f(%x: f32[8@tp]) -> f32[8@tp] {
  return %x
}
)";
  std::unique_ptr<Module> module = Parse(text);
  ASSERT_NE(module, nullptr);
  CpuBackend backend;
  runtime::Interpreter interpreter(*module->functions()[0], backend);
  EXPECT_EQ(interpreter.num_devices(), 2);
  Tensor local(ElementType::kF32, {4});
  EXPECT_TRUE(interpreter.Run({{local}, {local}}).ok());
  EXPECT_FALSE(interpreter.Run({{local}}).ok());
  EXPECT_FALSE(interpreter.Run({{local}, {}}).ok());
  auto global = interpreter.Run({{local}, {Tensor(ElementType::kF32, {8})}});
  ASSERT_FALSE(global.ok());
  EXPECT_THAT(global.status().message(), HasSubstr("device 1"));
  EXPECT_FALSE(interpreter.Run({{local}, {Tensor(ElementType::kF64, {4})}}).ok());
}

TEST(SpmdExecution, IndexArgumentsAndResultsAreRefused) {
  // Both are valid CommIR, but the interpreter passes tensors in and out.
  {
    const char* text = R"(mesh @m(tp=2)
spmd func @f(%x: f32[4]) -> index {
  %r = rank() {axis = tp}
  return %r
}
)";
    Outcome out = RunProgram(text, PerDevice(2, [](int64_t) { return Tensor(ElementType::kF32, {4}); }));
    ASSERT_FALSE(out.status.ok());
    EXPECT_THAT(out.status.message(), HasSubstr("result 0 of @f is an index"));
    EXPECT_EQ(out.error_location.line, 4);
  }
  {
    const char* text = R"(mesh @m(tp=2)
spmd func @f(%x: f32[4], %i: index) -> f32[1] {
  %y = dynamic_slice(%x, %i) {dim = 0, size = 1}
  return %y
}
)";
    std::vector<std::vector<Tensor>> inputs(
        2, std::vector<Tensor>{Tensor(ElementType::kF32, {4}), Tensor(ElementType::kF32, {})});
    Outcome out = RunProgram(text, inputs);
    ASSERT_FALSE(out.status.ok());
    EXPECT_THAT(out.status.message(), HasSubstr("argument %i of @f is an index"));
  }
}

TEST(SpmdExecution, EventsCoverEveryOpOnEveryDeviceWithItsStream) {
  const char* text = R"(mesh @m(dp=2, tp=2)
spmd func @f(%x: f32[4]) -> f32[4] {
  %r = rank() {axis = (dp, tp)}
  %y = for %i = 0 to 3 iter(%a = %x) {
    %b = shift(%a) {axis = tp, stream = 1}
    yield %b
  } : f32[4]
  %z = neg(%y) {stream = %r}
  return %z
}
)";
  std::vector<runtime::OpEvent> events;
  Outcome out = RunProgram(text, PerDevice(4, [](int64_t) { return Tensor(ElementType::kF32, {4}); }),
                           &events);
  ASSERT_TRUE(out.status.ok()) << out.status;
  // rank, 3 shifts and neg per device; the loop itself, yield and return are not events.
  ASSERT_EQ(events.size(), 20u);
  std::vector<int> per_device(4, 0);
  for (const runtime::OpEvent& e : events) {
    ASSERT_GE(e.device, 0);
    ASSERT_LT(e.device, 4);
    ++per_device[e.device];
    EXPECT_LE(e.start_us, e.end_us);
    EXPECT_GE(e.start_us, 0);
    ASSERT_NE(e.op, nullptr);
    if (e.op->Is(OpKind::kShift)) {
      EXPECT_EQ(e.stream, 1);
    } else if (e.op->Is(OpKind::kNeg)) {
      EXPECT_EQ(e.stream, e.device) << "stream = %r, the device's rank over (dp, tp)";
    } else {
      EXPECT_TRUE(e.op->Is(OpKind::kRank)) << e.op->name();
      EXPECT_EQ(e.stream, 0);
    }
  }
  EXPECT_EQ(per_device, (std::vector<int>{5, 5, 5, 5}));
}

}  // namespace
}  // namespace commir::cpu
