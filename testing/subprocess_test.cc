#include "testing/subprocess.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace commir::testing {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<SubprocessResult> Shell(const std::string& script,
                                       const SubprocessOptions& options = {}) {
  return RunSubprocess("/bin/sh", {"-c", script}, options);
}

TEST(RunSubprocess, CapturesOutputErrorAndExitCode) {
  absl::StatusOr<SubprocessResult> r = Shell("echo out; echo err >&2; exit 3");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_FALSE(r->timed_out);
  EXPECT_GT(r->max_rss_kib, 0);
}

TEST(RunSubprocess, FeedsStdinFromAFileAndNothingOtherwise) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/stdin.txt";
  std::ofstream(path) << "hello\n";
  SubprocessOptions options;
  options.stdin_path = path;
  absl::StatusOr<SubprocessResult> r = Shell("cat", options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, "hello\n");
  r = Shell("cat");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, "");
}

TEST(RunSubprocess, SetsEnvironmentAndRunsTheChildHook) {
  SubprocessOptions options;
  options.env = {{"COMMIR_SUBPROCESS_TEST", "set"}};
  absl::StatusOr<SubprocessResult> r = Shell("echo $COMMIR_SUBPROCESS_TEST", options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, "set\n");
  options.in_child = [] { return false; };
  r = Shell("exit 0", options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 125);
}

TEST(RunSubprocess, KillsAChildThatOutlivesItsTimeout) {
  SubprocessOptions options;
  options.timeout_seconds = 0.2;
  absl::StatusOr<SubprocessResult> r = Shell("sleep 30", options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, 128 + 9);
}

TEST(RunSubprocess, AMissingBinaryExits127) {
  absl::StatusOr<SubprocessResult> r = RunSubprocess("/nonexistent/binary", {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 127);
}

TEST(RunSubprocess, PrintsEverythingForFailureMessages) {
  SubprocessResult result;
  result.exit_code = 2;
  result.err = "bad\n";
  std::ostringstream text;
  text << result;
  EXPECT_THAT(text.str(), HasSubstr("exit 2"));
  EXPECT_THAT(text.str(), HasSubstr("bad"));
}

}  // namespace
}  // namespace commir::testing
