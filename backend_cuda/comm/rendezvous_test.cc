#include "backend_cuda/comm/rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace commir::cuda::comm {
namespace {

using ::testing::HasSubstr;

// A port that was free a moment ago (bind to 0, read it back, close).
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string TempPath(absl::string_view name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrFormat("%s/%s.%d", dir ? dir : "/tmp", name, ::getpid());
}

// A blob with every byte value, including NUL and newlines.
std::string BinaryBlob(size_t size) {
  std::string blob(size, '\0');
  for (size_t i = 0; i < size; ++i) blob[i] = static_cast<char>((i * 37 + 11) & 0xff);
  return blob;
}

RendezvousOptions Options(int rank, int world, int port, absl::Duration timeout) {
  RendezvousOptions options;
  options.rank = rank;
  options.world_size = world;
  options.master_addr = "localhost";
  options.master_port = port;
  options.timeout = timeout;
  return options;
}

// Runs every rank of a rendezvous on its own thread; returns each rank's result.
std::vector<absl::StatusOr<std::string>> RunRanks(std::vector<RendezvousOptions> options,
                                                  const std::string& blob,
                                                  absl::Duration rank0_delay) {
  std::vector<absl::StatusOr<std::string>> results(options.size(),
                                                   absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t r = 0; r < options.size(); ++r) {
    threads.emplace_back([&, r] {
      // Peers start first and must retry until rank 0 is there.
      if (r == 0) absl::SleepFor(rank0_delay);
      results[r] = BroadcastFromRankZero(options[r], r == 0 ? blob : "ignored");
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

TEST(TcpRendezvousTest, EveryRankGetsRankZerosBlob) {
  const int port = FreePort();
  const std::string blob = BinaryBlob(128);  // the size of an ncclUniqueId
  std::vector<RendezvousOptions> options;
  for (int r = 0; r < 5; ++r) options.push_back(Options(r, 5, port, absl::Seconds(20)));
  std::vector<absl::StatusOr<std::string>> results =
      RunRanks(options, blob, absl::Milliseconds(300));
  for (int r = 0; r < 5; ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
    EXPECT_EQ(*results[r], blob) << "rank " << r;
  }
}

TEST(TcpRendezvousTest, LargeBlobCrossesManyReadsAndWrites) {
  const int port = FreePort();
  const std::string blob = BinaryBlob(1 << 20);
  std::vector<RendezvousOptions> options = {Options(0, 3, port, absl::Seconds(20)),
                                            Options(1, 3, port, absl::Seconds(20)),
                                            Options(2, 3, port, absl::Seconds(20))};
  options[1].master_addr = "127.0.0.1";  // numeric IPv4 as well as a host name
  for (const absl::StatusOr<std::string>& result : RunRanks(options, blob, absl::ZeroDuration())) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(*result, blob);
  }
}

TEST(TcpRendezvousTest, WorksAcrossProcesses) {
  const int port = FreePort();
  const std::string blob = BinaryBlob(64);
  std::vector<pid_t> children;
  for (int r = 1; r < 3; ++r) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      absl::StatusOr<std::string> got =
          BroadcastFromRankZero(Options(r, 3, port, absl::Seconds(20)), "");
      std::_Exit(got.ok() && *got == blob ? 0 : 1);
    }
    children.push_back(pid);
  }
  absl::StatusOr<std::string> mine =
      BroadcastFromRankZero(Options(0, 3, port, absl::Seconds(20)), blob);
  ASSERT_TRUE(mine.ok()) << mine.status();
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
}

TEST(TcpRendezvousTest, PeerTimesOutWithoutRankZero) {
  absl::Time start = absl::Now();
  absl::StatusOr<std::string> result =
      BroadcastFromRankZero(Options(1, 2, FreePort(), absl::Milliseconds(400)), "");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(result.status().message(), HasSubstr("could not reach rank 0"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(TcpRendezvousTest, RankZeroTimesOutWhenPeersAreMissing) {
  absl::StatusOr<std::string> result =
      BroadcastFromRankZero(Options(0, 3, FreePort(), absl::Milliseconds(300)), "id");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(result.status().message(), HasSubstr("only 0 of 2 peers"));
}

// Connects to localhost:port (retrying until rank 0 listens) and sends raw bytes.
int RawConnect(int port) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
    ::close(fd);
    absl::SleepFor(absl::Milliseconds(10));
  }
  return -1;
}

TEST(TcpRendezvousTest, MalformedAndSilentPeersDoNotCountOrBlock) {
  const int port = FreePort();
  const std::string blob = BinaryBlob(100);
  absl::StatusOr<std::string> rank0 = absl::UnknownError("not run");
  std::thread server([&] {
    rank0 = BroadcastFromRankZero(Options(0, 2, port, absl::Seconds(20)), blob);
  });
  // A silent peer (never sends) and a garbage peer arrive before the real rank 1.
  int silent = RawConnect(port);
  ASSERT_GE(silent, 0);
  int garbage = RawConnect(port);
  ASSERT_GE(garbage, 0);
  ASSERT_EQ(::send(garbage, "GET / HTTP/1.0\r\n", 16, MSG_NOSIGNAL), 16);
  char byte;
  // Rank 0 closed it without a reply: EOF, or a reset because it left bytes unread.
  EXPECT_LE(::recv(garbage, &byte, 1, 0), 0);
  ::close(garbage);
  absl::StatusOr<std::string> rank1 =
      BroadcastFromRankZero(Options(1, 2, port, absl::Seconds(20)), "");
  server.join();
  ::close(silent);
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  EXPECT_EQ(*rank1, blob);
}

TEST(TcpRendezvousTest, RankZeroRejectsOutOfRangeRank) {
  const int port = FreePort();
  absl::StatusOr<std::string> rank0 = absl::UnknownError("not run");
  std::thread server([&] {
    rank0 = BroadcastFromRankZero(Options(0, 2, port, absl::Milliseconds(1500)), "id");
  });
  // Rank 5 of a 3-process job talks to a 2-process rank 0: rejected, and told so.
  absl::StatusOr<std::string> stray =
      BroadcastFromRankZero(Options(5, 6, port, absl::Seconds(5)), "");
  server.join();
  EXPECT_EQ(stray.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(rank0.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(rank0.status().message(), HasSubstr("1 malformed"));
}

TEST(TcpRendezvousTest, PeerRejectsAServerThatIsNotRankZero) {
  // Something else listens on MASTER_PORT and answers with garbage.
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::thread fake([&] {
    int fd = ::accept(listener, nullptr, nullptr);
    char hello[8];
    ::recv(fd, hello, 8, MSG_WAITALL);
    ::send(fd, "HTTP/1.1 400 Bad\r\n", 18, MSG_NOSIGNAL);
    ::close(fd);
  });
  RendezvousOptions options = Options(1, 2, ntohs(addr.sin_port), absl::Seconds(5));
  options.master_addr = "127.0.0.1";
  absl::StatusOr<std::string> result = BroadcastFromRankZero(options, "");
  fake.join();
  ::close(listener);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(result.status().message(), HasSubstr("malformed reply"));
}

TEST(TcpRendezvousTest, RankZeroReportsAPortInUse) {
  int taken = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  ASSERT_EQ(::bind(taken, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(taken, 4), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(taken, reinterpret_cast<sockaddr*>(&addr), &len);
  absl::StatusOr<std::string> result =
      BroadcastFromRankZero(Options(0, 2, ntohs(addr.sin_port), absl::Seconds(1)), "id");
  ::close(taken);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(result.status().message(), HasSubstr("COMMIR_RENDEZVOUS_PORT"));
}

TEST(TcpRendezvousTest, UnknownMasterAddressIsAnError) {
  RendezvousOptions options = Options(1, 2, 1234, absl::Seconds(1));
  options.master_addr = "";
  EXPECT_EQ(BroadcastFromRankZero(options, "").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FileRendezvousTest, ReadersWaitForTheAtomicWrite) {
  const std::string path = TempPath("rdv_ok");
  std::remove(path.c_str());
  const std::string blob = BinaryBlob(128);
  std::vector<RendezvousOptions> options;
  for (int r = 0; r < 4; ++r) {
    options.push_back(Options(r, 4, 0, absl::Seconds(20)));
    options.back().file_path = path;
  }
  for (const absl::StatusOr<std::string>& result :
       RunRanks(options, blob, absl::Milliseconds(200))) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(*result, blob);
  }
  std::remove(path.c_str());
}

TEST(FileRendezvousTest, ReaderTimesOut) {
  RendezvousOptions options = Options(2, 3, 0, absl::Milliseconds(200));
  options.file_path = TempPath("rdv_missing");
  std::remove(options.file_path.c_str());
  absl::StatusOr<std::string> result = BroadcastFromRankZero(options, "");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(result.status().message(), HasSubstr("rank 0 to write"));
}

TEST(FileRendezvousTest, MalformedOrStaleFilesAreRejected) {
  RendezvousOptions options = Options(1, 2, 0, absl::Seconds(2));
  options.file_path = TempPath("rdv_bad");
  {
    std::ofstream out(options.file_path, std::ios::binary);
    out << "hello world\n";
  }
  EXPECT_EQ(BroadcastFromRankZero(options, "").status().code(), absl::StatusCode::kDataLoss);
  {
    std::ofstream out(options.file_path, std::ios::binary);
    out << "COMMIR-RENDEZVOUS-1\n2 10\nshort";  // truncated blob
  }
  EXPECT_THAT(BroadcastFromRankZero(options, "").status().message(), HasSubstr("length"));
  // Written for another world size: a stale file of an earlier job.
  RendezvousOptions writer = Options(0, 4, 0, absl::Seconds(2));
  writer.file_path = options.file_path;
  ASSERT_TRUE(BroadcastFromRankZero(writer, "abc").ok());
  EXPECT_THAT(BroadcastFromRankZero(options, "").status().message(), HasSubstr("stale"));
  std::remove(options.file_path.c_str());
}

TEST(RendezvousTest, SingleProcessAndBadOptions) {
  EXPECT_EQ(*BroadcastFromRankZero(Options(0, 1, 0, absl::Seconds(1)), "x"), "x");
  EXPECT_EQ(BroadcastFromRankZero(Options(2, 2, 1, absl::Seconds(1)), "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BroadcastFromRankZero(Options(1, 2, 0, absl::Seconds(1)), "").status().code(),
            absl::StatusCode::kInvalidArgument);  // port 0
}

}  // namespace
}  // namespace commir::cuda::comm

namespace commir::cuda::comm {
namespace {

// Every rank of AllGatherOnOneNode on its own thread, each with its own blob.
std::vector<absl::StatusOr<std::vector<std::string>>> GatherRanks(
    const std::vector<RendezvousOptions>& options, absl::string_view tag) {
  std::vector<absl::StatusOr<std::vector<std::string>>> results(
      options.size(), absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t r = 0; r < options.size(); ++r) {
    threads.emplace_back([&, r] {
      results[r] = AllGatherOnOneNode(options[r], absl::StrFormat("blob of rank %d", r), tag);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

TEST(AllGatherOnOneNodeTest, EveryRankGetsEveryBlobInRankOrderOverTcp) {
  const int port = FreePort();
  std::vector<RendezvousOptions> options;
  for (int r = 0; r < 4; ++r) options.push_back(Options(r, 4, port, absl::Seconds(30)));
  for (const auto& result : GatherRanks(options, "ipc-1")) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_THAT(*result, ::testing::ElementsAre("blob of rank 0", "blob of rank 1",
                                                "blob of rank 2", "blob of rank 3"));
  }
}

TEST(AllGatherOnOneNodeTest, OverFilesWithTwoExchangesInOneJob) {
  const std::string path = TempPath("gather");
  std::vector<RendezvousOptions> options;
  for (int r = 0; r < 3; ++r) {
    options.push_back(Options(r, 3, 0, absl::Seconds(30)));
    options.back().file_path = path;
  }
  for (absl::string_view tag : {"ipc-1", "ipc-2"}) {
    for (const auto& result : GatherRanks(options, tag)) {
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_THAT(*result, ::testing::ElementsAre("blob of rank 0", "blob of rank 1",
                                                  "blob of rank 2"));
    }
    EXPECT_TRUE(std::ifstream(absl::StrFormat("%s.%s.r2", path, tag)).good());
  }
}

TEST(AllGatherOnOneNodeTest, AMissingRankTimesOutNamingTheRound) {
  const int port = FreePort();
  // Rank 1 of 2 never comes: rank 0 roots round 0 and waits there.
  absl::StatusOr<std::vector<std::string>> got =
      AllGatherOnOneNode(Options(0, 2, port, absl::Milliseconds(300)), "x", "ipc-1");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got.status().message(), HasSubstr("ipc-1, rank 0's round"));
}

TEST(AllGatherOnOneNodeTest, BadOptions) {
  EXPECT_EQ(AllGatherOnOneNode(Options(0, 2, 1000, absl::Seconds(1)), "x", "a/b").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AllGatherOnOneNode(Options(2, 2, 1000, absl::Seconds(1)), "x", "t").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Round ports past 65535.
  EXPECT_EQ(AllGatherOnOneNode(Options(0, 4, 65533, absl::Seconds(1)), "x", "t").status().code(),
            absl::StatusCode::kInvalidArgument);
  // One process: its own blob, no sockets.
  absl::StatusOr<std::vector<std::string>> alone =
      AllGatherOnOneNode(Options(0, 1, 0, absl::Seconds(1)), "mine", "t");
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_THAT(*alone, ::testing::ElementsAre("mine"));
}

}  // namespace
}  // namespace commir::cuda::comm
