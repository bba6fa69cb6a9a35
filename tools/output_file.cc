#include "tools/output_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace commir {

namespace output_file_internal {
void (*before_rename_for_test)() = nullptr;
}  // namespace output_file_internal

namespace {

// The temporaries a signal handler removes. The handler may only touch memory that is
// complete whenever it runs: fixed slots whose path is written before `live` is set
// (release) and read only after `live` is seen (acquire), no allocation, no locks.
constexpr int kCleanupSlots = 16;
constexpr size_t kCleanupPathBytes = 4096;
struct CleanupSlot {
  std::atomic<bool> taken{false};
  std::atomic<bool> live{false};
  char path[kCleanupPathBytes];
};
CleanupSlot cleanup_slots[kCleanupSlots];

constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kSignalCount = sizeof(kCleanupSignals) / sizeof(kCleanupSignals[0]);
struct sigaction previous_actions[kSignalCount];

void RemoveTemporariesAndReraise(int signal) {
  const int saved_errno = errno;
  for (CleanupSlot& slot : cleanup_slots) {
    if (slot.live.load(std::memory_order_acquire)) unlink(slot.path);
  }
  // The previous disposition (usually the default: terminate) gets the signal once this
  // handler returns and unblocks it.
  for (int i = 0; i < kSignalCount; ++i) {
    if (kCleanupSignals[i] == signal) sigaction(signal, &previous_actions[i], nullptr);
  }
  raise(signal);
  errno = saved_errno;
}

// Installs the handler once, for the signals the process does not ignore (nohup's
// SIGHUP stays ignored).
void InstallCleanupHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int i = 0; i < kSignalCount; ++i) {
      struct sigaction old;
      if (sigaction(kCleanupSignals[i], nullptr, &old) != 0) continue;
      if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) continue;
      previous_actions[i] = old;
      struct sigaction action = {};
      action.sa_handler = RemoveTemporariesAndReraise;
      sigemptyset(&action.sa_mask);
      for (int other : kCleanupSignals) sigaddset(&action.sa_mask, other);
      action.sa_flags = 0;
      sigaction(kCleanupSignals[i], &action, nullptr);
    }
  });
}

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

// Writes `contents` over `path` in place (truncating it): for outputs that are not
// regular files (/dev/null, a FIFO), and for an existing file whose directory does not
// let us create the temporary.
absl::Status WriteInPlace(const std::string& path, std::string_view contents) {
  const int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return WriteError(path, errno);
  if (const int error = WriteAndClose(fd, contents); error != 0) return WriteError(path, error);
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteOutputFile(const std::string& path, std::string_view contents) {
  struct stat info;
  const bool exists = stat(path.c_str(), &info) == 0;
  if (exists && !S_ISREG(info.st_mode)) return WriteInPlace(path, contents);
  // An existing output that is a symlink is written through: the temporary goes beside
  // the file it points to, and the rename replaces that file, not the link.
  std::string target = path;
  if (exists) {
    std::error_code ec;
    std::filesystem::path resolved = std::filesystem::canonical(path, ec);
    if (!ec) target = resolved.string();
  }
  std::string temporary;
  int fd = -1;
  std::optional<TemporaryFileCleanup> cleanup;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    temporary = TemporaryNameFor(target);
    // Covered before it exists, so that no signal falls between creating and covering.
    cleanup.emplace(temporary);
    // 0666 less the umask, as a plain open(2) of a new output would give.
    fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    const int error = errno;
    cleanup.reset();
    // A writable file in a directory we may not create files in: write it in place, as
    // any editor would; a failure then may leave it partly written.
    if (exists && (error == EACCES || error == EPERM || error == EROFS)) {
      return WriteInPlace(path, contents);
    }
    return WriteError(path, error);
  }
  // Replacing an existing file keeps its permissions.
  if (exists) fchmod(fd, info.st_mode & 07777);
  if (const int error = WriteAndClose(fd, contents); error != 0) {
    unlink(temporary.c_str());
    return WriteError(path, error);
  }
  if (output_file_internal::before_rename_for_test != nullptr) {
    output_file_internal::before_rename_for_test();
  }
  if (rename(temporary.c_str(), target.c_str()) != 0) {
    const int error = errno;
    unlink(temporary.c_str());
    return WriteError(path, error);
  }
  return absl::OkStatus();
}

TemporaryFileCleanup::TemporaryFileCleanup(const std::string& path) : slot_(-1) {
  if (path.size() >= kCleanupPathBytes) return;
  InstallCleanupHandler();
  for (int i = 0; i < kCleanupSlots; ++i) {
    bool expected = false;
    if (!cleanup_slots[i].taken.compare_exchange_strong(expected, true)) continue;
    std::memcpy(cleanup_slots[i].path, path.c_str(), path.size() + 1);
    cleanup_slots[i].live.store(true, std::memory_order_release);
    slot_ = i;
    return;
  }
}

TemporaryFileCleanup::~TemporaryFileCleanup() {
  if (slot_ < 0) return;
  cleanup_slots[slot_].live.store(false, std::memory_order_release);
  cleanup_slots[slot_].taken.store(false, std::memory_order_release);
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
