#include "testing/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace commir::testing {
namespace {

std::string ScratchDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The child's side: redirect, limit, exec. Never returns.
[[noreturn]] void ExecChild(const std::string& binary, const std::vector<std::string>& args,
                            const SubprocessOptions& options, const std::string& out_path,
                            const std::string& err_path) {
  const int in = open(options.stdin_path.empty() ? "/dev/null" : options.stdin_path.c_str(),
                      O_RDONLY);
  const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (in < 0 || out < 0 || err < 0) _exit(126);
  if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
  for (const auto& [name, value] : options.env) setenv(name.c_str(), value.c_str(), 1);
  if (options.address_space_bytes) {
    struct rlimit limit = {*options.address_space_bytes, *options.address_space_bytes};
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(125);
  }
  if (options.in_child && !options.in_child()) _exit(125);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(binary.c_str(), argv.data());
  _exit(127);
}

// Waits for `pid`, killing it once `timeout_seconds` (> 0) have passed.
absl::Status WaitFor(pid_t pid, double timeout_seconds, int& status, struct rusage& usage,
                     bool& timed_out) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(timeout_seconds);
  while (true) {
    const int options = timeout_seconds > 0 ? WNOHANG : 0;
    const pid_t done = wait4(pid, &status, options, &usage);
    if (done == pid) return absl::OkStatus();
    if (done < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("waiting for the child: ", std::strerror(errno)));
    }
    if (done == 0 && std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      timed_out = true;
      if (wait4(pid, &status, 0, &usage) != pid) {
        return absl::InternalError("waiting for the killed child failed");
      }
      return absl::OkStatus();
    }
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const SubprocessResult& result) {
  os << "exit " << result.exit_code << (result.timed_out ? " (timed out)" : "")
     << ", peak RSS " << result.max_rss_kib << " KiB";
  return os << "\n--- stdout:\n" << result.out << "--- stderr:\n" << result.err;
}

absl::StatusOr<SubprocessResult> RunSubprocess(const std::string& binary,
                                               const std::vector<std::string>& args,
                                               const SubprocessOptions& options) {
  // Files rather than pipes: the child may write any amount without the parent reading
  // while it runs.
  static std::atomic<int> counter{0};
  const std::string base =
      absl::StrCat(ScratchDir(), "/subprocess_", getpid(), "_", counter++);
  const std::string out_path = base + ".out", err_path = base + ".err";
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) ExecChild(binary, args, options, out_path, err_path);

  SubprocessResult result;
  int status = 0;
  struct rusage usage = {};
  if (absl::Status waited = WaitFor(pid, options.timeout_seconds, status, usage, result.timed_out);
      !waited.ok()) {
    return waited;
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.max_rss_kib = usage.ru_maxrss;
  result.out = ReadWholeFile(out_path);
  result.err = ReadWholeFile(err_path);
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  return result;
}

}  // namespace commir::testing
