#include "tools/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace commir {
namespace {

std::string HumanSize(size_t bytes) {
  if (bytes % (size_t{1} << 30) == 0) return absl::StrFormat("%d GiB", bytes >> 30);
  if (bytes % (size_t{1} << 20) == 0) return absl::StrFormat("%d MiB", bytes >> 20);
  return absl::StrFormat("%d bytes", bytes);
}

}  // namespace

absl::StatusOr<std::string> ReadAllFromFd(int fd, size_t max_bytes) {
  struct stat info;
  if (fstat(fd, &info) != 0) {
    const int error = errno;
    return absl::Status(absl::ErrnoToStatusCode(error),
                        absl::StrFormat("cannot read file: %s", std::strerror(error)));
  }
  if (S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError("cannot read file: it is a directory");
  }
  std::string text;
  // A regular file's size is known: reserve it once (capped, since it may still grow).
  if (S_ISREG(info.st_mode) && info.st_size > 0) {
    text.reserve(std::min(static_cast<size_t>(info.st_size), max_bytes) + 1);
  }
  char buffer[1 << 16];
  while (true) {
    const ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      // Linux reports a directory on read, not open (stdin redirected from one).
      if (error == EISDIR) {
        return absl::FailedPreconditionError("cannot read file: it is a directory");
      }
      return absl::Status(absl::ErrnoToStatusCode(error),
                          absl::StrFormat("cannot read file: %s", std::strerror(error)));
    }
    if (text.size() + static_cast<size_t>(got) > max_bytes) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "the input is larger than the %s limit for this file", HumanSize(max_bytes)));
    }
    text.append(buffer, static_cast<size_t>(got));
  }
  return text;
}

absl::StatusOr<std::string> ReadInputFile(const std::string& path, size_t max_bytes) {
  if (path == "-") return ReadAllFromFd(STDIN_FILENO, max_bytes);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    return absl::Status(absl::ErrnoToStatusCode(error),
                        absl::StrFormat("cannot open file: %s", std::strerror(error)));
  }
  absl::Cleanup closer = [fd] { close(fd); };
  return ReadAllFromFd(fd, max_bytes);
}

}  // namespace commir
