#include "commir/status_macros.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

// Halves twice; counts how far it got so that the test sees where it stopped.
absl::StatusOr<int> Quarter(int x, int* steps) {
  COMMIR_ASSIGN_OR_RETURN(int half, Half(x));
  ++*steps;
  COMMIR_ASSIGN_OR_RETURN(int quarter, Half(half));
  ++*steps;
  return quarter;
}

absl::Status AssignExisting(int x, int* out) {
  COMMIR_ASSIGN_OR_RETURN(*out, Half(x));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<std::string>> MakeString(bool ok) {
  if (!ok) return absl::NotFoundError("none");
  return std::make_unique<std::string>("moved");
}

absl::StatusOr<std::string> MoveOnly(bool ok) {
  COMMIR_ASSIGN_OR_RETURN(std::unique_ptr<std::string> s, MakeString(ok));
  return *s;
}

absl::Status FailIfOdd(int x) {
  COMMIR_RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusMacrosTest, AssignsOnSuccess) {
  int steps = 0;
  absl::StatusOr<int> q = Quarter(12, &steps);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q, 3);
  EXPECT_EQ(steps, 2);
}

TEST(StatusMacrosTest, ReturnsTheFirstFailure) {
  int steps = 0;
  absl::StatusOr<int> q = Quarter(6, &steps);  // 6 -> 3 -> odd
  EXPECT_EQ(q.status(), absl::InvalidArgumentError("odd"));
  EXPECT_EQ(steps, 1);
  steps = 0;
  EXPECT_FALSE(Quarter(5, &steps).ok());
  EXPECT_EQ(steps, 0);
}

TEST(StatusMacrosTest, AssignsToAnExistingVariable) {
  int out = -1;
  EXPECT_TRUE(AssignExisting(8, &out).ok());
  EXPECT_EQ(out, 4);
  out = -1;
  EXPECT_FALSE(AssignExisting(7, &out).ok());
  EXPECT_EQ(out, -1);
}

TEST(StatusMacrosTest, MovesMoveOnlyValues) {
  EXPECT_EQ(*MoveOnly(true), "moved");
  EXPECT_EQ(MoveOnly(false).status().code(), absl::StatusCode::kNotFound);
}

TEST(StatusMacrosTest, ReturnIfError) {
  EXPECT_TRUE(FailIfOdd(2).ok());
  EXPECT_EQ(FailIfOdd(3), absl::InvalidArgumentError("odd"));
}

}  // namespace
