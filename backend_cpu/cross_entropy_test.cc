// cross_entropy and cross_entropy_grad against PyTorch (F.cross_entropy and autograd, in
// f64: backend_cpu/testdata/cross_entropy_torch.txt, written by
// scripts/cross_entropy_reference.py) and against closed forms.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "backend_cpu/kernels.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::cpu {
namespace {

using runtime::Tensor;

struct TorchCase {
  std::string name;
  CrossEntropyOptions options;
  int64_t tokens = 0, classes = 0;
  std::vector<double> logits, loss, lse, dloss, dlogits;
  std::vector<int64_t> labels;
};

std::vector<double> Doubles(absl::Span<const std::string> words) {
  std::vector<double> values;
  for (const std::string& w : words) {
    double v = 0;
    EXPECT_TRUE(absl::SimpleAtod(w, &v)) << w;
    values.push_back(v);
  }
  return values;
}

std::vector<TorchCase> ReadTorchCases() {
  std::ifstream in("backend_cpu/testdata/cross_entropy_torch.txt");
  EXPECT_TRUE(in.good()) << "backend_cpu/testdata/cross_entropy_torch.txt is missing";
  std::vector<TorchCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> w = absl::StrSplit(line, ' ', absl::SkipEmpty());
    absl::Span<const std::string> rest = absl::MakeConstSpan(w).subspan(1);
    if (w[0] == "case") {
      TorchCase c;
      c.name = w[1];
      c.options.reduction = ParseLossReduction(w[2]);
      EXPECT_TRUE(absl::SimpleAtoi(w[3], &c.options.ignore_index));
      EXPECT_TRUE(absl::SimpleAtod(w[4], &c.options.label_smoothing));
      EXPECT_TRUE(absl::SimpleAtod(w[5], &c.options.z_loss));
      EXPECT_TRUE(absl::SimpleAtoi(w[6], &c.tokens));
      EXPECT_TRUE(absl::SimpleAtoi(w[7], &c.classes));
      cases.push_back(c);
      continue;
    }
    TorchCase& c = cases.back();
    if (w[0] == "logits") c.logits = Doubles(rest);
    if (w[0] == "loss") c.loss = Doubles(rest);
    if (w[0] == "lse") c.lse = Doubles(rest);
    if (w[0] == "dloss") c.dloss = Doubles(rest);
    if (w[0] == "dlogits") c.dlogits = Doubles(rest);
    if (w[0] == "labels") {
      for (double v : Doubles(rest)) c.labels.push_back(static_cast<int64_t>(v));
    }
  }
  return cases;
}

void ExpectNear(const Tensor& got, const std::vector<double>& want, double tolerance,
                const std::string& what) {
  std::vector<double> values = got.ToDouble();
  ASSERT_EQ(values.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(values[i], want[i], tolerance * (1 + std::abs(want[i]))) << what << " [" << i << "]";
  }
}

void CheckAgainstTorch(ElementType type, double tolerance) {
  std::vector<TorchCase> cases = ReadTorchCases();
  ASSERT_EQ(cases.size(), 6u);
  for (const TorchCase& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor logits = Tensor::FromDouble(type, {c.tokens, c.classes}, c.logits);
    Tensor labels = Tensor::FromInt64(ElementType::kI64, {c.tokens}, c.labels);
    absl::StatusOr<CrossEntropyResult> result = CrossEntropy(logits, labels, c.options);
    ASSERT_TRUE(result.ok()) << result.status();
    ExpectNear(result->loss, c.loss, tolerance, "loss");
    ExpectNear(result->lse, c.lse, tolerance, "lse");
    std::vector<int64_t> loss_shape = result->loss.shape();
    Tensor dloss = Tensor::FromDouble(type, loss_shape, c.dloss);
    absl::StatusOr<Tensor> dlogits =
        CrossEntropyGrad(logits, labels, result->lse, dloss, c.options);
    ASSERT_TRUE(dlogits.ok()) << dlogits.status();
    ExpectNear(*dlogits, c.dlogits, tolerance, "dlogits");
  }
}

TEST(CrossEntropyTest, MatchesTorchInF64) { CheckAgainstTorch(ElementType::kF64, 1e-12); }

TEST(CrossEntropyTest, MatchesTorchInF32) { CheckAgainstTorch(ElementType::kF32, 2e-5); }

// The vocabulary-parallel form (commir/cross_entropy_op.h) on the classes split into
// uneven blocks: the blocks' shares of the loss, given PyTorch's lse, sum to PyTorch's
// loss, and each block's dlogits are PyTorch's columns of them.
TEST(CrossEntropyTest, VocabularyBlocksMatchTorch) {
  for (const TorchCase& c : ReadTorchCases()) {
    SCOPED_TRACE(c.name);
    // Up to three blocks: [0, a), [a, b), [b, V), each of at least one class.
    std::vector<int64_t> starts = {0};
    if (c.classes >= 2) starts.push_back(c.classes / 3 + 1);
    if (c.classes >= 3 && starts.back() + 1 < c.classes) starts.push_back(starts.back() + 1);
    starts.push_back(c.classes);
    Tensor labels = Tensor::FromInt64(ElementType::kI64, {c.tokens}, c.labels);
    Tensor lse = Tensor::FromDouble(ElementType::kF64, {c.tokens}, c.lse);
    std::vector<double> total(c.loss.size(), 0.0);
    for (size_t b = 0; b + 1 < starts.size(); ++b) {
      const int64_t offset = starts[b], width = starts[b + 1] - starts[b];
      std::vector<double> block, want_dx;
      for (int64_t i = 0; i < c.tokens; ++i) {
        for (int64_t j = offset; j < offset + width; ++j) {
          block.push_back(c.logits[i * c.classes + j]);
          want_dx.push_back(c.dlogits[i * c.classes + j]);
        }
      }
      Tensor logits = Tensor::FromDouble(ElementType::kF64, {c.tokens, width}, block);
      const VocabShard shard{offset, c.classes};
      absl::StatusOr<CrossEntropyResult> share = CrossEntropy(logits, labels, c.options, &lse, shard);
      ASSERT_TRUE(share.ok()) << share.status();
      std::vector<double> values = share->loss.ToDouble();
      ASSERT_EQ(values.size(), total.size());
      for (size_t i = 0; i < values.size(); ++i) total[i] += values[i];
      ExpectNear(share->lse, c.lse, 0, "lse passed through");
      Tensor dloss = Tensor::FromDouble(ElementType::kF64, share->loss.shape(), c.dloss);
      absl::StatusOr<Tensor> dx = CrossEntropyGrad(logits, labels, lse, dloss, c.options, shard);
      ASSERT_TRUE(dx.ok()) << dx.status();
      ExpectNear(*dx, want_dx, 1e-12, "dlogits block");
    }
    ExpectNear(Tensor::FromDouble(ElementType::kF64, {static_cast<int64_t>(total.size())}, total),
               c.loss, 1e-12, "summed shares");
  }
}

// A block that does not fit in the vocabulary, or a label outside the whole vocabulary,
// is an error, not a read past the block.
TEST(CrossEntropyTest, VocabularyBlockOutOfRangeIsAnError) {
  Tensor logits = Tensor::FromDouble(ElementType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor labels = Tensor::FromInt64(ElementType::kI64, {2}, {1, 7});
  Tensor lse = Tensor::FromDouble(ElementType::kF32, {2}, {3, 6});
  Tensor one = Tensor::FromDouble(ElementType::kF32, {}, {1.0});
  EXPECT_FALSE(CrossEntropy(logits, labels, {}, &lse, VocabShard{6, 8}).ok());
  EXPECT_FALSE(CrossEntropyGrad(logits, labels, lse, one, {}, VocabShard{-1, 8}).ok());
  absl::StatusOr<CrossEntropyResult> outside =
      CrossEntropy(logits, labels, {}, &lse, VocabShard{3, 6});
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("label 7 of token 1 is not a class in [0, 6)"),
            std::string::npos)
      << outside.status();
  EXPECT_TRUE(CrossEntropy(logits, labels, {}, &lse, VocabShard{3, 8}).ok());
}

// bf16 logits are widened and reduced in f32: the loss is the f32 loss of the same
// (bf16-rounded) logits, rounded once to bf16, not a bf16 accumulation.
TEST(CrossEntropyTest, Bf16AccumulatesInF32) {
  const int64_t tokens = 4, classes = 4096;
  std::vector<double> x(tokens * classes);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * static_cast<double>(i)) * 4;
  Tensor bf16 = Tensor::FromDouble(ElementType::kBF16, {tokens, classes}, x);
  Tensor f32 = Tensor::FromDouble(ElementType::kF32, {tokens, classes}, bf16.ToDouble());
  Tensor labels = Tensor::FromInt64(ElementType::kI32, {tokens}, {0, 17, 4095, 1000});
  absl::StatusOr<CrossEntropyResult> low = CrossEntropy(bf16, labels, {});
  absl::StatusOr<CrossEntropyResult> high = CrossEntropy(f32, labels, {});
  ASSERT_TRUE(low.ok() && high.ok());
  Tensor rounded = Tensor::FromDouble(ElementType::kBF16, {}, high->loss.ToDouble());
  EXPECT_TRUE(low->loss.BitwiseEqual(rounded));
  EXPECT_TRUE(low->lse.BitwiseEqual(high->lse));
  EXPECT_EQ(low->lse.element_type(), ElementType::kF32);
}

// Equal logits: every class has probability 1/V, so the loss is log V whatever the
// label and the smoothing, lse = c + log V, and dlogits = (1/V - onehot) / tokens.
TEST(CrossEntropyTest, UniformLogitsClosedForm) {
  const int64_t tokens = 3, classes = 8;
  Tensor logits = Tensor::FromDouble(ElementType::kF64, {tokens, classes},
                                     std::vector<double>(tokens * classes, 2.5));
  Tensor labels = Tensor::FromInt64(ElementType::kI64, {tokens}, {0, 5, 7});
  CrossEntropyOptions options;
  options.label_smoothing = 0.25;
  absl::StatusOr<CrossEntropyResult> result = CrossEntropy(logits, labels, options);
  ASSERT_TRUE(result.ok());
  EXPECT_NEAR(result->loss.ToDouble()[0], std::log(8.0), 1e-14);
  for (double l : result->lse.ToDouble()) EXPECT_NEAR(l, 2.5 + std::log(8.0), 1e-14);
  Tensor one = Tensor::FromDouble(ElementType::kF64, {}, {1.0});
  absl::StatusOr<Tensor> dx = CrossEntropyGrad(logits, labels, result->lse, one, options);
  ASSERT_TRUE(dx.ok());
  std::vector<double> d = dx->ToDouble();
  const int64_t target[] = {0, 5, 7};
  for (int64_t i = 0; i < tokens; ++i) {
    for (int64_t j = 0; j < classes; ++j) {
      double smoothed = 0.75 * (j == target[i]) + 0.25 / classes;
      EXPECT_NEAR(d[i * classes + j], (1.0 / classes - smoothed) / tokens, 1e-15);
    }
  }
}

// Only ignored tokens: the mean is 0 / 0 (NaN, as PyTorch), the sum 0, the gradient 0.
TEST(CrossEntropyTest, AllIgnored) {
  Tensor logits = Tensor::FromDouble(ElementType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor labels = Tensor::FromInt64(ElementType::kI64, {2}, {-100, -100});
  absl::StatusOr<CrossEntropyResult> mean = CrossEntropy(logits, labels, {});
  ASSERT_TRUE(mean.ok());
  EXPECT_TRUE(std::isnan(mean->loss.ToDouble()[0]));
  CrossEntropyOptions sum;
  sum.reduction = LossReduction::kSum;
  absl::StatusOr<CrossEntropyResult> summed = CrossEntropy(logits, labels, sum);
  ASSERT_TRUE(summed.ok());
  EXPECT_EQ(summed->loss.ToDouble()[0], 0.0);
  Tensor one = Tensor::FromDouble(ElementType::kF32, {}, {1.0});
  absl::StatusOr<Tensor> dx = CrossEntropyGrad(logits, labels, mean->lse, one, {});
  ASSERT_TRUE(dx.ok());
  for (double v : dx->ToDouble()) EXPECT_EQ(v, 0.0);
}

// Logits of 1e4 overflow exp in f32 unless the maximum is subtracted first.
TEST(CrossEntropyTest, LargeLogitsStayFinite) {
  Tensor logits = Tensor::FromDouble(ElementType::kF32, {1, 3}, {1e4, 1e4 - 1, -1e4});
  Tensor labels = Tensor::FromInt64(ElementType::kI64, {1}, {1});
  absl::StatusOr<CrossEntropyResult> result = CrossEntropy(logits, labels, {});
  ASSERT_TRUE(result.ok());
  EXPECT_NEAR(result->loss.ToDouble()[0], 1 + std::log1p(std::exp(-1.0)), 1e-6);
}

TEST(CrossEntropyTest, LabelOutOfRangeIsAnError) {
  Tensor logits = Tensor::FromDouble(ElementType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor labels = Tensor::FromInt64(ElementType::kI64, {2}, {1, 3});
  absl::StatusOr<CrossEntropyResult> result = CrossEntropy(logits, labels, {});
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("label 3 of token 1 is not a class in [0, 3)"),
            std::string::npos)
      << result.status();
  Tensor negative = Tensor::FromInt64(ElementType::kI64, {2}, {-1, 0});
  EXPECT_FALSE(CrossEntropy(logits, negative, {}).ok());
  Tensor wrong_shape = Tensor::FromInt64(ElementType::kI64, {3}, {0, 0, 0});
  EXPECT_FALSE(CrossEntropy(logits, wrong_shape, {}).ok());
}

}  // namespace
}  // namespace commir::cpu
