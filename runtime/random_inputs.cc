#include "runtime/random_inputs.h"

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "commir/element_type.h"
#include "runtime/tensor.h"

namespace commir::runtime {
namespace {

// SplitMix64's increment (2^64 / golden ratio) and finaliser (Steele, Lea and Flood,
// "Fast splittable pseudorandom number generators", 2014). The finaliser is a bijection
// with full avalanche, so distinct counters give independent-looking outputs.
constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15;

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  return z ^ (z >> 31);
}

uint64_t StreamKey(uint64_t seed, int arg_index) {
  return Mix64(Mix64(seed) + (static_cast<uint64_t>(arg_index) + 1) * kGoldenGamma);
}

double UniformFromKey(uint64_t key, int64_t element_index) {
  const uint64_t bits = Mix64(key + (static_cast<uint64_t>(element_index) + 1) * kGoldenGamma);
  // k * 2^-52 - 1 for k in [0, 2^53): exact, and in [-1, 1).
  return static_cast<double>(bits >> 11) * 0x1p-52 - 1.0;
}

}  // namespace

double RandomUniformValue(uint64_t seed, int arg_index, int64_t element_index) {
  return UniformFromKey(StreamKey(seed, arg_index), element_index);
}

Tensor RandomGlobalTensor(uint64_t seed, int arg_index, ElementType type,
                          absl::Span<const int64_t> shape) {
  return RandomGlobalTensor(seed, arg_index, type, shape, InitRule{});
}

Tensor RandomGlobalTensor(uint64_t seed, int arg_index, ElementType type,
                          absl::Span<const int64_t> shape, const InitRule& rule) {
  Tensor tensor(type, std::vector<int64_t>(shape.begin(), shape.end()));
  if (rule.kind == InitRule::Kind::kConstant) {
    for (int64_t i = 0; i < tensor.num_elements(); ++i) tensor.SetFromDouble(i, rule.value);
    return tensor;
  }
  const double scale =
      rule.kind == InitRule::Kind::kScaledUniform && IsFloatType(type) ? rule.value : 1.0;
  const uint64_t key = StreamKey(seed, arg_index);
  for (int64_t i = 0; i < tensor.num_elements(); ++i) {
    const double value = UniformFromKey(key, i);
    // SetFromDouble rounds to nearest even for floats and integers alike, but would map
    // every nonzero value to 1 for i1; a sign test gives a fair coin instead.
    tensor.SetFromDouble(i, type == ElementType::kI1 ? (value >= 0.0 ? 1.0 : 0.0) : value * scale);
  }
  return tensor;
}

}  // namespace commir::runtime
