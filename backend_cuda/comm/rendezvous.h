// Rendezvous: rank 0 hands an opaque byte blob (the NCCL unique id) to every other
// process, either through a file on a shared file system or over TCP. Plain C++/POSIX,
// no CUDA dependency.
//
// File: rank 0 writes PATH.tmp.<pid> and rename()s it to PATH, so readers never see a
// partial file; the others poll until PATH exists and is complete, or the deadline
// passes. The file starts with a magic line and the blob length, so a stale or foreign
// file is rejected. Use a fresh path per job (rank 0 replaces an existing one).
//
// TCP: rank 0 listens on MASTER_PORT (all interfaces) and serves world_size - 1
// connections; each sends a hello (magic, its rank) and receives (magic, length, blob).
// The others resolve MASTER_ADDR with getaddrinfo (IPv4/IPv6, host names) and retry the
// connection until the deadline. A peer that sends garbage is dropped and does not count;
// rank 0 fails with DeadlineExceeded if fewer than world_size - 1 valid peers arrive.
#ifndef COMMIR_BACKEND_CUDA_COMM_RENDEZVOUS_H_
#define COMMIR_BACKEND_CUDA_COMM_RENDEZVOUS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace commir::cuda::comm {

struct RendezvousOptions {
  // Non-empty: use this shared file; empty: TCP on master_addr:master_port.
  std::string file_path;
  std::string master_addr = "localhost";
  int master_port = 0;
  int rank = 0;
  int world_size = 1;
  absl::Duration timeout = absl::Seconds(300);
};

// Rank 0 passes the blob and gets it back; other ranks pass anything (ignored) and get
// rank 0's blob. Errors: DeadlineExceeded (peers missing at the deadline), Unavailable
// (socket/file errors), DataLoss (a malformed file or message), InvalidArgument (bad
// options). Blobs up to 1 MiB.
absl::StatusOr<std::string> BroadcastFromRankZero(const RendezvousOptions& options,
                                                  absl::string_view blob);

// Every rank's blob, indexed by rank (the copy-engine path's IPC handles). Only for a job
// whose processes all run on one node: world_size rounds of BroadcastFromRankZero, round
// r rooted at rank r, over TCP on localhost port master_port + 1 + r (one port per round,
// so that a peer still in one round never meets the root of another), or, with a
// file_path, on the files FILE.TAG.r<r>. `tag` tells apart the exchanges of one job
// (letters, digits, '-' and '_'). Errors as BroadcastFromRankZero's, naming the round.
absl::StatusOr<std::vector<std::string>> AllGatherOnOneNode(const RendezvousOptions& options,
                                                            absl::string_view blob,
                                                            absl::string_view tag);

}  // namespace commir::cuda::comm

#endif  // COMMIR_BACKEND_CUDA_COMM_RENDEZVOUS_H_
