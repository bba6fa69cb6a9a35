#include "backend_cuda/comm/rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace commir::cuda::comm {
namespace {

constexpr size_t kMaxBlob = 1 << 20;
constexpr absl::string_view kFileMagic = "COMMIR-RENDEZVOUS-1";
constexpr char kHelloMagic[4] = {'C', 'R', 'D', 'H'};  // peer -> rank 0
constexpr char kBlobMagic[4] = {'C', 'R', 'D', 'B'};   // rank 0 -> peer

std::string ErrnoText() { return std::strerror(errno); }

// Milliseconds left until `deadline`, clamped to [0, cap_ms].
int MillisLeft(absl::Time deadline, int cap_ms = 1 << 30) {
  int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
  return static_cast<int>(std::clamp<int64_t>(ms, 0, cap_ms));
}

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = other.fd_;
      other.fd_ = -1;
    }
    return *this;
  }
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

void PutU32(uint32_t value, char* out) {
  uint32_t be = htonl(value);
  std::memcpy(out, &be, 4);
}
uint32_t GetU32(const char* in) {
  uint32_t be;
  std::memcpy(&be, in, 4);
  return ntohl(be);
}

// Waits until fd is ready for `events` or the deadline passes; retries on EINTR.
absl::Status WaitFd(int fd, short events, absl::Time deadline, absl::string_view what) {
  while (true) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, MillisLeft(deadline));
    if (n > 0) return absl::OkStatus();
    if (n == 0) {
      return absl::DeadlineExceededError(absl::StrFormat("rendezvous: timed out %s", what));
    }
    if (errno != EINTR) {
      return absl::UnavailableError(absl::StrFormat("rendezvous: poll: %s", ErrnoText()));
    }
  }
}

// Writes all of `data` to a nonblocking socket, handling partial writes and EINTR.
absl::Status WriteAll(int fd, absl::string_view data, absl::Time deadline) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (absl::Status s = WaitFd(fd, POLLOUT, deadline, "sending"); !s.ok()) return s;
      continue;
    }
    return absl::UnavailableError(absl::StrFormat("rendezvous: send: %s", ErrnoText()));
  }
  return absl::OkStatus();
}

// Reads exactly `size` bytes; the peer closing early is DataLoss.
absl::Status ReadAll(int fd, char* out, size_t size, absl::Time deadline) {
  while (size > 0) {
    ssize_t n = ::recv(fd, out, size, 0);
    if (n > 0) {
      out += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return absl::DataLossError("rendezvous: connection closed mid-message");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (absl::Status s = WaitFd(fd, POLLIN, deadline, "receiving"); !s.ok()) return s;
      continue;
    }
    return absl::UnavailableError(absl::StrFormat("rendezvous: recv: %s", ErrnoText()));
  }
  return absl::OkStatus();
}

bool SetNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

// ---- File rendezvous ----------------------------------------------------------------

std::string FileContents(absl::string_view blob, int world_size) {
  return absl::StrFormat("%s\n%d %d\n", kFileMagic, world_size, blob.size()) + std::string(blob);
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  std::string tmp = absl::StrFormat("%s.tmp.%d", path, ::getpid());
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    return absl::UnavailableError(
        absl::StrFormat("rendezvous: cannot create %s: %s", tmp, ErrnoText()));
  }
  absl::string_view rest = contents;
  while (!rest.empty()) {
    ssize_t n = ::write(fd.get(), rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string error = ErrnoText();
      ::unlink(tmp.c_str());
      return absl::UnavailableError(
          absl::StrFormat("rendezvous: cannot write %s: %s", tmp, error));
    }
    rest.remove_prefix(static_cast<size_t>(n));
  }
  // Flush before the rename so that readers on other nodes never see an empty file.
  ::fsync(fd.get());
  fd.Reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string error = ErrnoText();
    ::unlink(tmp.c_str());
    return absl::UnavailableError(
        absl::StrFormat("rendezvous: cannot rename %s to %s: %s", tmp, path, error));
  }
  return absl::OkStatus();
}

// Parses a rendezvous file; DataLoss names what is wrong with it.
absl::StatusOr<std::string> ParseFile(const std::string& path, const std::string& contents,
                                      int world_size) {
  auto bad = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrFormat("rendezvous file %s is not a CommIR rendezvous file: %s", path, why));
  };
  size_t line1 = contents.find('\n');
  if (line1 == std::string::npos || absl::string_view(contents).substr(0, line1) != kFileMagic) {
    return bad("bad magic line");
  }
  size_t line2 = contents.find('\n', line1 + 1);
  if (line2 == std::string::npos) return bad("missing header");
  absl::string_view header = absl::string_view(contents).substr(line1 + 1, line2 - line1 - 1);
  size_t space = header.find(' ');
  int file_world = 0;
  uint64_t size = 0;
  if (space == absl::string_view::npos || !absl::SimpleAtoi(header.substr(0, space), &file_world) ||
      !absl::SimpleAtoi(header.substr(space + 1), &size) || size > kMaxBlob) {
    return bad("bad header");
  }
  if (file_world != world_size) {
    return absl::DataLossError(absl::StrFormat(
        "rendezvous file %s was written for %d processes, this job has %d (stale file from "
        "another job? use a fresh path per job)",
        path, file_world, world_size));
  }
  if (contents.size() - line2 - 1 != size) return bad("blob length does not match");
  return contents.substr(line2 + 1);
}

absl::StatusOr<std::string> FileRendezvous(const RendezvousOptions& options,
                                           absl::string_view blob, absl::Time deadline) {
  if (options.rank == 0) {
    if (absl::Status s = WriteFileAtomically(options.file_path,
                                             FileContents(blob, options.world_size));
        !s.ok()) {
      return s;
    }
    return std::string(blob);
  }
  absl::Duration backoff = absl::Milliseconds(5);
  while (true) {
    std::ifstream in(options.file_path, std::ios::binary);
    if (in) {
      std::stringstream buffer;
      buffer << in.rdbuf();
      return ParseFile(options.file_path, buffer.str(), options.world_size);
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "rendezvous: rank %d waited %s for rank 0 to write %s", options.rank,
          absl::FormatDuration(options.timeout), options.file_path));
    }
    absl::SleepFor(std::min(backoff, std::max(deadline - absl::Now(), absl::ZeroDuration())));
    backoff = std::min(backoff * 2, absl::Milliseconds(200));
  }
}

// ---- TCP rendezvous -----------------------------------------------------------------

absl::StatusOr<Fd> Listen(int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  std::string service = absl::StrFormat("%d", port);
  if (int rc = ::getaddrinfo(nullptr, service.c_str(), &hints, &result); rc != 0) {
    return absl::UnavailableError(
        absl::StrFormat("rendezvous: getaddrinfo(port %d): %s", port, ::gai_strerror(rc)));
  }
  // Prefer an IPv6 socket that also accepts IPv4 (dual stack), else the first that works.
  std::vector<addrinfo*> candidates;
  for (addrinfo* a = result; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET6) candidates.insert(candidates.begin(), a);
    else candidates.push_back(a);
  }
  std::string last_error = "no address";
  for (addrinfo* a : candidates) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (fd.get() < 0) {
      last_error = ErrnoText();
      continue;
    }
    int one = 1, zero = 0;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (a->ai_family == AF_INET6) {
      ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 1024) != 0 ||
        !SetNonBlocking(fd.get())) {
      last_error = ErrnoText();
      continue;
    }
    ::freeaddrinfo(result);
    return fd;
  }
  ::freeaddrinfo(result);
  return absl::UnavailableError(absl::StrFormat(
      "rendezvous: rank 0 cannot listen on port %d: %s (if the port is taken, choose another "
      "with COMMIR_RENDEZVOUS_PORT or use a rendezvous file)",
      port, last_error));
}

// Rank 0: serves the blob to world_size - 1 distinct peers. Connections are handled
// concurrently with poll() so that a silent or slow peer cannot stall the others.
absl::StatusOr<std::string> ServeBlob(const RendezvousOptions& options, absl::string_view blob,
                                      absl::Time deadline) {
  absl::StatusOr<Fd> listener = Listen(options.master_port);
  if (!listener.ok()) return listener.status();
  std::string reply(kBlobMagic, 4);
  reply.resize(8);
  PutU32(static_cast<uint32_t>(blob.size()), reply.data() + 4);
  reply.append(blob.data(), blob.size());

  struct Peer {
    Fd fd;
    std::string hello;  // bytes received so far (8 expected)
  };
  std::vector<Peer> peers;
  std::vector<bool> served(options.world_size, false);
  int num_served = 0;
  int num_rejected = 0;
  while (num_served < options.world_size - 1) {
    std::vector<pollfd> fds;
    fds.push_back({listener->get(), POLLIN, 0});
    for (const Peer& peer : peers) fds.push_back({peer.fd.get(), POLLIN, 0});
    int n = ::poll(fds.data(), fds.size(), MillisLeft(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(absl::StrFormat("rendezvous: poll: %s", ErrnoText()));
    if (n == 0) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "rendezvous: rank 0 waited %s on port %d but only %d of %d peers connected "
          "(%d malformed connections rejected)",
          absl::FormatDuration(options.timeout), options.master_port, num_served,
          options.world_size - 1, num_rejected));
    }
    // Existing peers first (indices shift as finished peers are erased).
    std::vector<Peer> still_open;
    for (size_t i = 0; i < peers.size(); ++i) {
      Peer& peer = peers[i];
      if (fds[i + 1].revents == 0) {
        still_open.push_back(std::move(peer));
        continue;
      }
      char buffer[8];
      ssize_t got = ::recv(peer.fd.get(), buffer, 8 - peer.hello.size(), 0);
      if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
        still_open.push_back(std::move(peer));
        continue;
      }
      if (got <= 0) {  // closed or failed before a full hello
        ++num_rejected;
        continue;
      }
      peer.hello.append(buffer, static_cast<size_t>(got));
      if (peer.hello.size() < 8) {
        still_open.push_back(std::move(peer));
        continue;
      }
      uint32_t rank = GetU32(peer.hello.data() + 4);
      if (std::memcmp(peer.hello.data(), kHelloMagic, 4) != 0 || rank == 0 ||
          rank >= static_cast<uint32_t>(options.world_size)) {
        ++num_rejected;  // not one of ours: drop it, it does not count
        continue;
      }
      // A short per-peer bound: the reply fits in socket buffers unless the peer is stuck.
      absl::Time send_deadline = std::min(deadline, absl::Now() + absl::Seconds(10));
      if (!WriteAll(peer.fd.get(), reply, send_deadline).ok()) {
        ++num_rejected;
        continue;
      }
      ::shutdown(peer.fd.get(), SHUT_WR);
      // A rank that reconnects (e.g. after its own retry) is served again but counted once.
      if (!served[rank]) {
        served[rank] = true;
        ++num_served;
      }
    }
    peers = std::move(still_open);
    if (fds[0].revents & POLLIN) {
      while (true) {
        int fd = ::accept4(listener->get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;  // EAGAIN: no more pending; other errors: the peer went away
        peers.push_back(Peer{Fd(fd), ""});
      }
    }
  }
  return std::string(blob);
}

// Non-rank-0: one connection attempt to any address of master_addr, bounded by
// `attempt_deadline`. Returns the connected socket, or the last error.
absl::StatusOr<Fd> ConnectOnce(const RendezvousOptions& options, absl::Time attempt_deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  std::string service = absl::StrFormat("%d", options.master_port);
  if (int rc = ::getaddrinfo(options.master_addr.c_str(), service.c_str(), &hints, &result);
      rc != 0) {
    // EAI_AGAIN and friends can be transient (DNS): the caller retries.
    return absl::UnavailableError(absl::StrFormat("cannot resolve MASTER_ADDR \"%s\": %s",
                                                  options.master_addr, ::gai_strerror(rc)));
  }
  std::string last_error = "no address";
  for (addrinfo* a = result; a != nullptr; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (fd.get() < 0) {
      last_error = ErrnoText();
      continue;
    }
    int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      if (!WaitFd(fd.get(), POLLOUT, attempt_deadline, "connecting").ok()) {
        last_error = "connect timed out";
        continue;
      }
      int error = 0;
      socklen_t len = sizeof(error);
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len);
      if (error != 0) {
        last_error = std::strerror(error);
        continue;
      }
      rc = 0;
    }
    if (rc != 0) {
      last_error = ErrnoText();
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::freeaddrinfo(result);
    return fd;
  }
  ::freeaddrinfo(result);
  return absl::UnavailableError(last_error);
}

absl::StatusOr<std::string> FetchBlob(const RendezvousOptions& options, absl::Time deadline) {
  if (options.master_addr.empty()) {
    return absl::InvalidArgumentError(
        "rendezvous: MASTER_ADDR is unknown; set MASTER_ADDR (and MASTER_PORT) or use a "
        "shared rendezvous file");
  }
  absl::Duration backoff = absl::Milliseconds(20);
  std::string last_error;
  while (true) {
    absl::Time attempt_deadline = std::min(deadline, absl::Now() + absl::Seconds(5));
    absl::StatusOr<Fd> fd = ConnectOnce(options, attempt_deadline);
    if (fd.ok()) {
      char hello[8];
      std::memcpy(hello, kHelloMagic, 4);
      PutU32(static_cast<uint32_t>(options.rank), hello + 4);
      if (absl::Status s = WriteAll(fd->get(), absl::string_view(hello, 8), deadline); !s.ok()) {
        return s;
      }
      char header[8];
      if (absl::Status s = ReadAll(fd->get(), header, 8, deadline); !s.ok()) {
        if (absl::IsDataLoss(s)) {
          return absl::DataLossError(absl::StrFormat(
              "rendezvous: %s:%d closed the connection before sending the id (not a CommIR "
              "rank 0, or it rejected rank %d)",
              options.master_addr, options.master_port, options.rank));
        }
        return s;
      }
      uint32_t size = GetU32(header + 4);
      if (std::memcmp(header, kBlobMagic, 4) != 0 || size > kMaxBlob) {
        return absl::DataLossError(absl::StrFormat(
            "rendezvous: %s:%d sent a malformed reply (is something else listening on "
            "MASTER_PORT?)",
            options.master_addr, options.master_port));
      }
      std::string blob(size, '\0');
      if (absl::Status s = ReadAll(fd->get(), blob.data(), size, deadline); !s.ok()) return s;
      return blob;
    }
    last_error = std::string(fd.status().message());
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "rendezvous: rank %d could not reach rank 0 at %s:%d within %s (last error: %s)",
          options.rank, options.master_addr, options.master_port,
          absl::FormatDuration(options.timeout), last_error));
    }
    absl::SleepFor(std::min(backoff, std::max(deadline - absl::Now(), absl::ZeroDuration())));
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
}

}  // namespace

absl::StatusOr<std::string> BroadcastFromRankZero(const RendezvousOptions& options,
                                                  absl::string_view blob) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rendezvous: rank %d and world size %d are inconsistent", options.rank,
        options.world_size));
  }
  if (options.rank == 0 && blob.size() > kMaxBlob) {
    return absl::InvalidArgumentError("rendezvous: blob larger than 1 MiB");
  }
  if (options.world_size == 1) return std::string(blob);
  const absl::Time deadline = absl::Now() + options.timeout;
  if (!options.file_path.empty()) return FileRendezvous(options, blob, deadline);
  if (options.master_port < 1 || options.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rendezvous: port %d is not in [1, 65535]", options.master_port));
  }
  if (options.rank == 0) return ServeBlob(options, blob, deadline);
  return FetchBlob(options, deadline);
}

absl::StatusOr<std::vector<std::string>> AllGatherOnOneNode(const RendezvousOptions& options,
                                                            absl::string_view blob,
                                                            absl::string_view tag) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rendezvous: rank %d and world size %d are inconsistent", options.rank,
        options.world_size));
  }
  if (tag.empty() || !std::all_of(tag.begin(), tag.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
      })) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rendezvous: tag '%s' must be letters, digits, '-' or '_'", tag));
  }
  if (options.world_size == 1) return std::vector<std::string>{std::string(blob)};
  const int64_t last_port = static_cast<int64_t>(options.master_port) + options.world_size;
  if (options.file_path.empty() && (options.master_port < 1 || last_port > 65535)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rendezvous: ports %d..%d (one per process) are not all in [1, 65535]",
        options.master_port + 1, last_port));
  }
  std::vector<std::string> blobs(options.world_size);
  blobs[options.rank] = std::string(blob);
  // One shared deadline: the rounds run one after the other.
  const absl::Time deadline = absl::Now() + options.timeout;
  for (int root = 0; root < options.world_size; ++root) {
    RendezvousOptions round = options;
    round.rank = (options.rank - root + options.world_size) % options.world_size;
    round.master_addr = "localhost";
    round.master_port = options.master_port + 1 + root;
    if (!options.file_path.empty()) {
      round.file_path = absl::StrFormat("%s.%s.r%d", options.file_path, tag, root);
    }
    round.timeout = std::max(deadline - absl::Now(), absl::Milliseconds(1));
    absl::StatusOr<std::string> got =
        BroadcastFromRankZero(round, root == options.rank ? blob : absl::string_view());
    if (!got.ok()) {
      return absl::Status(got.status().code(),
                          absl::StrFormat("rendezvous (%s, rank %d's round): %s", tag, root,
                                          got.status().message()));
    }
    blobs[root] = *std::move(got);
  }
  return blobs;
}

}  // namespace commir::cuda::comm
