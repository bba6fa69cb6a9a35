// Running a function with global tensors in and out, on any backend: a spmd function's
// inputs are split across its mesh by their layouts (host_layout.h), the interpreter
// runs every local device, and each result is assembled again; a global function runs
// on one device with whole tensors. commir-run (tools/run_session.cc) and the Python
// package (python/ext) run programs this way.
#ifndef COMMIR_RUNTIME_GLOBAL_RUN_H_
#define COMMIR_RUNTIME_GLOBAL_RUN_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "commir/ir.h"
#include "runtime/backend.h"
#include "runtime/interpreter.h"
#include "runtime/tensor.h"

namespace commir::runtime {

struct GlobalRunOptions {
  // The mesh devices this process drives (ascending); empty: every device.
  std::vector<int64_t> local_devices;
  // Set when other processes drive the remaining devices: every part of one result
  // from this process's parts (in local_devices order).
  std::function<absl::StatusOr<std::vector<Tensor>>(absl::Span<const Tensor* const>)> gather;
  // Per-op timings, when not null.
  std::vector<OpEvent>* events = nullptr;
};

// Where a run failed, so that callers can word the error and choose an exit status.
struct GlobalRunFailure {
  enum class Stage {
    kLocalDevices,  // the local device list was refused
    kSplit,         // an input could not be split by its layout
    kRun,           // the interpreter failed (at `location` when known)
    kGather,        // collecting result `result` from other processes failed
    kAssemble,      // result `result`'s parts do not form its global layout
  };
  Stage stage = Stage::kRun;
  int result = -1;
  Location location;
};

// Runs `function` on `backend` with one global tensor per argument; returns the global
// results. On failure the status is the cause and `failure` (if not null) says where.
absl::StatusOr<std::vector<Tensor>> RunWithGlobalTensors(const Function& function,
                                                         Backend& backend,
                                                         const std::vector<Tensor>& global_inputs,
                                                         const GlobalRunOptions& options = {},
                                                         GlobalRunFailure* failure = nullptr);

}  // namespace commir::runtime

#endif  // COMMIR_RUNTIME_GLOBAL_RUN_H_
