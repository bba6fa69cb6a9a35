// dropout draws the same mask on every mesh: partitioned over 1, 2, 4 and 8 devices (the
// sequence, the hidden dimension, both), under the ring and Ulysses attention schedules,
// and recomputed by autodiff{remat=...}, each element is kept or dropped as on one device.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "commir/ir.h"
#include "commir/philox.h"
#include "commir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"
#include "testing/spmd_check.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

using runtime::Tensor;
using ::testing::HasSubstr;

std::vector<Tensor> RunOn(const Function& function, const std::vector<Tensor>& inputs) {
  absl::StatusOr<std::vector<Tensor>> results = testing::RunWithGlobalInputs(function, inputs);
  EXPECT_TRUE(results.ok()) << results.status();
  return results.ok() ? *std::move(results) : std::vector<Tensor>{};
}

// The module of `text` lowered with the default pipeline, then `pipeline`.
std::unique_ptr<Module> Lowered(const std::string& text, const std::string& pipeline = "") {
  std::unique_ptr<Module> module = testing::ParseForTest(text);
  if (module == nullptr) return nullptr;
  absl::Status status = testing::RunDefaultSpmdPipeline(*module);
  if (status.ok() && !pipeline.empty()) status = testing::ApplyPassPipeline(pipeline, *module);
  EXPECT_TRUE(status.ok()) << status;
  return status.ok() ? std::move(module) : nullptr;
}

void ExpectSameBits(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.element_type(), expected.element_type()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  EXPECT_EQ(std::memcmp(actual.raw_data(), expected.raw_data(), actual.byte_size()), 0) << what;
}

// Which elements are kept (nonzero): inputs are random reals, never exactly 0.
std::vector<bool> KeptOf(const Tensor& y) {
  std::vector<bool> kept;
  for (double v : y.ToDouble()) kept.push_back(v != 0);
  return kept;
}

// ---- Partitioned: 1, 2, 4 and 8 devices -------------------------------------------------

std::string DropoutProgram(const std::string& mesh, const std::string& type) {
  return absl::StrReplaceAll(R"(mesh @m(MESH)

func @f(%x: TYPE) -> TYPE {
  %y = dropout(%x) {rate = 0.25, seed = 7}
  return %y
}
)",
                             {{"MESH", mesh}, {"TYPE", type}});
}

// The one-device result is the closed form: x[i] / (1 - rate) where the Philox draw of
// (seed, i) is >= rate, 0 elsewhere.
TEST(DropoutLowerTest, OneDeviceIsTheClosedForm) {
  std::unique_ptr<Module> module = testing::ParseForTest(DropoutProgram("sp=1", "f32[64, 48]"));
  ASSERT_NE(module, nullptr);
  const Function& f = *module->FindFunction("f");
  const std::vector<Tensor> inputs = testing::RandomGlobalInputs(f, 3);
  const std::vector<Tensor> y = RunOn(f, inputs);
  ASSERT_EQ(y.size(), 1u);
  const std::vector<float> x = inputs[0].ToFloat();
  const std::vector<float> got = y[0].ToFloat();
  const uint64_t threshold = philox::DropoutThreshold(0.25);
  int64_t kept = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const bool keep = philox::DropoutKeeps(7, i, threshold);
    kept += keep;
    EXPECT_EQ(got[i], keep ? x[i] * (1.0f / 0.75f) : 0.0f) << "element " << i;
  }
  // Binomial(3072, 0.75): mean 2304, standard deviation 24; within 6 of them.
  EXPECT_NEAR(static_cast<double>(kept), 2304.0, 6 * 24.0);
}

TEST(DropoutLowerTest, MaskIsTheOneDevicesOnOneTwoFourAndEightDevices) {
  struct Case {
    std::string mesh;
    std::string type;
  };
  std::vector<Case> cases;
  for (int n : {1, 2, 4, 8}) {
    const std::string mesh = absl::StrCat("sp=", n);
    cases.push_back({mesh, "f32[64@sp, 48]"});        // the sequence
    cases.push_back({mesh, "f32[64, 48@sp]"});        // the hidden dimension
    cases.push_back({mesh, "bf16[2, 64@sp, 24]"});
    // A zigzag sequence (device r holds chunks r and 2n-1-r, not one block): dropout
    // treats it as the contiguous layout it is exchanged to, not as one block at rank r.
    if (n > 1) cases.push_back({mesh, "f32[64@sp zigzag, 48]"});
  }
  cases.push_back({"dp=2, tp=4", "f32[4@dp, 16, 32@tp]"});  // split twice
  cases.push_back({"dp=2, tp=4", "f32[16@(dp, tp), 8]"});   // over an axis group
  for (const Case& c : cases) {
    const std::string what = absl::StrCat(c.mesh, " ", c.type);
    const std::string text = DropoutProgram(c.mesh, c.type);
    std::unique_ptr<Module> global = testing::ParseForTest(text);
    std::unique_ptr<Module> lowered = Lowered(text);
    ASSERT_NE(global, nullptr) << what;
    ASSERT_NE(lowered, nullptr) << what;
    const Function& f = *global->FindFunction("f");
    const std::string ir = PrintModule(*lowered);
    if (c.mesh != "sp=1") {
      // The lowered op took its block's offsets and the whole tensor's shape.
      EXPECT_THAT(ir, HasSubstr("global_shape = [")) << ir;
    }
    const std::vector<Tensor> inputs = testing::RandomGlobalInputs(f, 5);
    const std::vector<Tensor> want = RunOn(f, inputs);
    const std::vector<Tensor> got = RunOn(*lowered->FindFunction("f"), inputs);
    ASSERT_EQ(got.size(), 1u) << what;
    ASSERT_EQ(want.size(), 1u) << what;
    ExpectSameBits(got[0], want[0], what + "\n" + ir);
  }
}

// ---- Attention schedules --------------------------------------------------------------

// Dropout on the queries before attention and on its output after it, sequence split.
std::string AttentionBlock(int devices) {
  return absl::StrReplaceAll(R"(mesh @m(sp=N)

func @attn(%q: f32[1, 8, 64@sp, 16], %k: f32[1, 8, 64@sp, 16], %v: f32[1, 8, 64@sp, 16]) -> (f32[1, 8, 64@sp, 16], f32[1, 8, 64@sp, 16]) {
  %qd = dropout(%q) {rate = 0.1, seed = 3}
  %o = attention(%qd, %k, %v) {causal}
  %y = dropout(%o) {rate = 0.2, seed = 5}
  return %o, %y
}
)",
                             {{"N", absl::StrCat(devices)}});
}

TEST(DropoutLowerTest, MaskIsTheOneDevicesUnderRingAndUlyssesSchedules) {
  const struct {
    const char* pipeline;
    const char* schedule_op;  // what shows the schedule was applied
  } schedules[] = {{"ring-attention", "shift("}, {"ulysses-attention", "all_to_all("}};
  for (int n : {2, 4, 8}) {
    for (const auto& s : schedules) {
      const std::string what = absl::StrCat(s.pipeline, " on ", n, " devices");
      const std::string text = AttentionBlock(n);
      std::unique_ptr<Module> global = testing::ParseForTest(text);
      std::unique_ptr<Module> lowered = Lowered(text, s.pipeline);
      ASSERT_NE(global, nullptr) << what;
      ASSERT_NE(lowered, nullptr) << what;
      const std::string ir = PrintModule(*lowered);
      EXPECT_THAT(ir, HasSubstr(s.schedule_op)) << what << "\n" << ir;
      const Function& f = *global->FindFunction("attn");
      const std::vector<Tensor> inputs = testing::RandomGlobalInputs(f, 9);
      const std::vector<Tensor> want = RunOn(f, inputs);
      const std::vector<Tensor> got = RunOn(*lowered->FindFunction("attn"), inputs);
      ASSERT_EQ(got.size(), 2u) << what;
      // The attention output within tolerance (the schedule sums in another order; the
      // queries were dropped alike, or it would be far off)...
      std::string report;
      EXPECT_TRUE(testing::CompareResults({got[0]}, {want[0]}, &report)) << what << report;
      // ...and the output's mask is the one device's, element for element, applied to
      // this run's own attention output.
      EXPECT_EQ(KeptOf(got[1]), KeptOf(want[1])) << what;
      const std::vector<float> o = got[0].ToFloat();
      const std::vector<float> y = got[1].ToFloat();
      const std::vector<bool> kept = KeptOf(want[1]);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_EQ(y[i], kept[i] ? o[i] * (1.0f / 0.8f) : 0.0f) << what << " element " << i;
      }
    }
  }
}

// ---- Recomputation ----------------------------------------------------------------------

// One pre-norm residual block with dropout on the normalized input of its matmul (whose
// weight gradient reads it: the backward needs the dropped activation), and a loss.
std::string ResidualBlock(int devices) {
  return absl::StrReplaceAll(R"(mesh @m(sp=N)

func @model(%x: f32[32@sp, 16], %g: f32[16], %w: f32[16, 16]) -> f32[] {
  %n = rmsnorm(%x, %g)
  %d = dropout(%n) {rate = 0.3, seed = 11}
  %h = matmul(%d, %w)
  %r = add(%x, %h)
  %sq = mul(%r, %r)
  %loss = reduce_mean(%sq) {dims = [0, 1]}
  return %loss
}
)",
                             {{"N", absl::StrCat(devices)}});
}

std::unique_ptr<Module> WithGradient(const std::string& text, RematPolicy remat) {
  std::unique_ptr<Module> module = testing::ParseForTest(text);
  if (module == nullptr) return nullptr;
  AutodiffOptions options;
  options.remat = remat;
  absl::StatusOr<Function*> grad = Differentiate(*module, *module->FindFunction("model"), options);
  EXPECT_TRUE(grad.ok()) << grad.status();
  return grad.ok() ? std::move(module) : nullptr;
}

// The gradient that recomputes the dropout in the backward (autodiff{remat=blocks}) is
// bit for bit the one that keeps the activations, on one device and partitioned over 2,
// 4 and 8 devices; and its x gradient is the closed form through the forward's mask.
TEST(DropoutLowerTest, RecomputationDrawsTheForwardsMask) {
  for (int n : {1, 2, 4, 8}) {
    const std::string what = absl::StrCat(n, " devices");
    std::unique_ptr<Module> kept = WithGradient(ResidualBlock(n), RematPolicy::kNone);
    std::unique_ptr<Module> remat = WithGradient(ResidualBlock(n), RematPolicy::kBlocks);
    ASSERT_NE(kept, nullptr);
    ASSERT_NE(remat, nullptr);
    // The forward's dropout runs again in the backward, marked as recomputed (the other
    // dropout of the backward is the derivative's, on the cotangent).
    int recomputed_dropouts = 0;
    for (const Operation* op : *remat->FindFunction("model_grad")->body()) {
      recomputed_dropouts += op->Is(OpKind::kDropout) && op->attrs().Find(kRematAttr) != nullptr;
    }
    EXPECT_EQ(recomputed_dropouts, 1) << PrintModule(*remat);

    const Function& reference = *kept->FindFunction("model_grad");
    const std::vector<Tensor> inputs = testing::RandomGlobalInputs(reference, 21);
    const std::vector<Tensor> want = RunOn(reference, inputs);
    ASSERT_EQ(want.size(), 4u);  // the loss, dx, dg, dw
    const std::vector<Tensor> one_device = RunOn(*remat->FindFunction("model_grad"), inputs);
    ASSERT_EQ(one_device.size(), want.size());
    for (size_t r = 0; r < want.size(); ++r) ExpectSameBits(one_device[r], want[r], what);

    // Partitioned, the recomputed gradient is the one device's (within tolerance: the
    // matmul's partial sums add in another order).
    if (n > 1) {
      std::unique_ptr<Module> lowered = std::move(remat);
      ASSERT_TRUE(testing::RunDefaultSpmdPipeline(*lowered).ok());
      const std::vector<Tensor> got = RunOn(*lowered->FindFunction("model_grad"), inputs);
      ASSERT_EQ(got.size(), want.size());
      std::string report;
      EXPECT_TRUE(testing::CompareResults(got, want, &report)) << what << "\n" << report;
    }
  }
}

// The backward of dropout alone is the closed form: dL/dx = c where the forward kept
// x, scaled by 1 / (1 - rate), 0 where it dropped it, for L = sum(dropout(x) * c).
TEST(DropoutLowerTest, GradientIsTheClosedFormThroughTheSameMask) {
  for (int n : {1, 4}) {
    std::unique_ptr<Module> module = testing::ParseForTest(absl::StrReplaceAll(R"(mesh @m(sp=N)

func @model(%x: f32[16@sp, 8], %c: f32[16@sp, 8]) -> f32[] {
  %d = dropout(%x) {rate = 0.5, seed = 1234}
  %p = mul(%d, %c)
  %loss = reduce_sum(%p) {dims = [0, 1]}
  return %loss
}
)",
                                                                      {{"N", absl::StrCat(n)}}));
    ASSERT_NE(module, nullptr);
    AutodiffOptions options;
    options.wrt = {"x"};
    absl::StatusOr<Function*> grad = Differentiate(*module, *module->FindFunction("model"), options);
    ASSERT_TRUE(grad.ok()) << grad.status();
    const std::vector<Tensor> inputs = testing::RandomGlobalInputs(**grad, 4);
    if (n > 1) {
      ASSERT_TRUE(testing::RunDefaultSpmdPipeline(*module).ok());
    }
    const std::vector<Tensor> got = RunOn(*module->FindFunction("model_grad"), inputs);
    ASSERT_EQ(got.size(), 2u);
    const std::vector<float> c = inputs[1].ToFloat();
    const std::vector<float> dx = got[1].ToFloat();
    const uint64_t threshold = philox::DropoutThreshold(0.5);
    for (size_t i = 0; i < c.size(); ++i) {
      EXPECT_EQ(dx[i], philox::DropoutKeeps(1234, i, threshold) ? c[i] * 2.0f : 0.0f)
          << n << " devices, element " << i;
    }
  }
}

}  // namespace
}  // namespace commir
