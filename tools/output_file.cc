#include "tools/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace commir {
namespace {

absl::Status WriteError(std::string_view path, int error) {
  return absl::Status(absl::ErrnoToStatusCode(error),
                      absl::StrFormat("cannot write '%s': %s", path, std::strerror(error)));
}

// Writes all of `contents` to `fd`; the errno of the first failure, or 0.
int WriteAll(int fd, std::string_view contents) {
  while (!contents.empty()) {
    const ssize_t wrote = write(fd, contents.data(), contents.size());
    if (wrote < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    contents.remove_prefix(static_cast<size_t>(wrote));
  }
  return 0;
}

// Writes and closes `fd`; the errno of the first failure, or 0. close can fail too
// (delayed write errors on NFS, quota).
int WriteAndClose(int fd, std::string_view contents) {
  const int write_error = WriteAll(fd, contents);
  const int close_error = close(fd) != 0 ? errno : 0;
  return write_error != 0 ? write_error : close_error;
}

// A name in the same directory as `path`, so that rename(2) is atomic.
std::string TemporaryNameFor(const std::string& path) {
  static std::atomic<int> counter{0};
  std::filesystem::path target(path);
  return (target.parent_path() /
          absl::StrFormat(".%s.tmp-%d-%d", target.filename().string(), getpid(), counter++))
      .string();
}

}  // namespace

absl::Status WriteOutputFile(const std::string& path, std::string_view contents) {
  struct stat info;
  if (stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return WriteError(path, errno);
    if (const int error = WriteAndClose(fd, contents); error != 0) return WriteError(path, error);
    return absl::OkStatus();
  }
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    temporary = TemporaryNameFor(path);
    // 0666 less the umask, as a plain open(2) of the output would give.
    fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return WriteError(path, errno);
  if (const int error = WriteAndClose(fd, contents); error != 0) {
    unlink(temporary.c_str());
    return WriteError(path, error);
  }
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(temporary.c_str());
    return WriteError(path, error);
  }
  return absl::OkStatus();
}

absl::Status WriteStandardOutput(std::string_view contents) {
  if (absl::Status s = FinishStandardOutput(); !s.ok()) return s;
  if (const int error = WriteAll(STDOUT_FILENO, contents); error != 0) {
    return WriteError("<stdout>", error);
  }
  return absl::OkStatus();
}

absl::Status FinishStandardOutput() {
  std::cout.flush();
  // std::cout goes through C's stdout (sync_with_stdio), whose buffer fflush empties.
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno;
  if (flushed && !std::ferror(stdout) && std::cout.good()) return absl::OkStatus();
  if (!flushed && error != 0) return WriteError("<stdout>", error);
  // An earlier write failed and its errno is gone; the loss is reported all the same.
  return absl::DataLossError("cannot write '<stdout>': an earlier write to it failed");
}

}  // namespace commir
