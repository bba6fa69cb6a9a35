#include "transforms/sharding/loss_test_util.h"

#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "gtest/gtest.h"

namespace commir::sharding::loss_test {

std::string Labels(const std::string& tokens) {
  return absl::Substitute(R"(  %a = abs(%r)
  %s = mul(%a, $0)
  %big = compare(%s, $1) {cmp = ge}
  %none = full() {value = -1} : f32[$2]
  %picked = select(%big, %none, %s)
  %labels = convert(%picked) : i64[$2]
)",
                          1.25 * kClasses, kClasses - 1.0, tokens);
}

int Count(const std::string& text, const std::string& op) {
  int n = 0;
  const std::string needle = absl::StrCat(" ", op, "(");
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

testing::SpmdCheck Check(const std::string& text, const std::string& function, int seed) {
  absl::StatusOr<testing::SpmdCheck> check = testing::CheckPartitionOnly(text, function, seed);
  EXPECT_TRUE(check.ok()) << check.status();
  if (!check.ok()) return {};
  EXPECT_TRUE(check->pass) << check->report << check->lowered;
  return std::move(*check);
}

}  // namespace commir::sharding::loss_test
