#include "tools/sim_session.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commir/diagnostics.h"
#include "sim/hardware.h"
#include "sim/nccl_ctas.h"
#include "sim/predict.h"
#include "sim/prediction_format.h"
#include "tools/exit_codes.h"
#include "tools/hardware_file.h"
#include "tools/output_file.h"
#include "tools/program_loader.h"

namespace commir {
namespace {

// The flags that need real tensors, which the sim backend never has.
std::optional<Failure> RefuseDataFlags(const RunRequest& request) {
  std::vector<std::string> given;
  if (request.check) given.push_back("--check");
  if (!request.check_against.empty()) given.push_back("--check-against");
  if (!request.inputs.empty()) given.push_back("--input");
  if (!request.output_dir.empty()) given.push_back("--output-dir");
  if (request.bench > 0) given.push_back("--bench");
  if (given.empty()) return std::nullopt;
  return Failure{kExitUsage,
                 absl::StrFormat("error: %s need%s tensor data, which --backend=sim does not "
                                 "compute; run with --backend=cpu or --backend=cuda",
                                 absl::StrJoin(given, ", "), given.size() == 1 ? "s" : "")};
}

std::string Bytes(double bytes) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  return absl::StrFormat("%.2f GiB", bytes / kGiB);
}

// The hardware with --gpus-per-node, --p2p and --nccl-ctas applied, or the failure that says why not.
std::optional<Failure> LoadCluster(const RunRequest& request, sim::HardwareSpec& hardware) {
  absl::StatusOr<sim::HardwareSpec> loaded = LoadHardwareArgument(request.hardware);
  if (!loaded.ok()) {
    return Failure{kExitInvalidInput, absl::StrCat("error: --hardware: ", loaded.status().message())};
  }
  hardware = *std::move(loaded);
  if (request.gpus_per_node < 0) {
    return Failure{kExitUsage, "error: --gpus-per-node needs a positive number of GPUs"};
  }
  if (request.gpus_per_node > 0) hardware.gpus_per_node = static_cast<int>(request.gpus_per_node);
  if (request.p2p_nccl.has_value()) {
    hardware.p2p_transport = *request.p2p_nccl ? sim::P2pTransport::kNccl
                                               : sim::P2pTransport::kCopyEngine;
  }
  // The SMs the cuda backend's communicators would take (ncclConfig minCTAs/maxCTAs), so
  // that a GEMM beside an NCCL kernel runs on the SMs it really has.
  if (request.nccl_min_ctas > 0) {
    absl::Status s = sim::ApplyNcclCtas(hardware, request.nccl_min_ctas, request.nccl_max_ctas);
    if (!s.ok()) return Failure{kExitUsage, absl::StrCat("error: --nccl-ctas: ", s.message())};
  }
  return std::nullopt;
}

// The memory one device may use: --max-memory's bytes, the hardware's HBM for `hbm`.
std::optional<Failure> MemoryLimit(const RunRequest& request, const sim::HardwareSpec& hardware,
                                   std::optional<int64_t>& limit) {
  if (request.max_memory.empty()) return std::nullopt;
  absl::StatusOr<std::optional<int64_t>> parsed = ParseMemorySize(request.max_memory);
  if (!parsed.ok()) {
    return Failure{kExitUsage, absl::StrCat("error: --max-memory: ", parsed.status().message())};
  }
  limit = parsed->has_value() ? **parsed : static_cast<int64_t>(hardware.hbm_capacity);
  return std::nullopt;
}

// Devices whose predicted peak exceeds `limit`, worst first ("device 3 (81.20 GiB)").
std::vector<std::string> DevicesOver(const sim::Prediction& prediction, double limit) {
  std::vector<std::pair<int64_t, size_t>> over;
  for (size_t d = 0; d < prediction.devices.size(); ++d) {
    if (static_cast<double>(prediction.devices[d].peak_memory_bytes) > limit) {
      over.push_back({prediction.devices[d].peak_memory_bytes, d});
    }
  }
  std::stable_sort(over.begin(), over.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> named;
  for (const auto& [bytes, device] : over) {
    named.push_back(absl::StrFormat("device %d (%s)", device, Bytes(static_cast<double>(bytes))));
    if (named.size() == 4 && over.size() > 4) {
      named.push_back(absl::StrFormat("%d more", over.size() - 4));
      break;
    }
  }
  return named;
}

// --trace's file, written as the kernels are simulated so that a long run's trace is
// never held in memory: into a temporary beside it, renamed into place only once whole
// (a failed run leaves no partial trace); a target that is not a regular file
// (/dev/null, a FIFO) is written in place.
class StreamedTrace {
 public:
  explicit StreamedTrace(std::string path) : path_(path), target_(std::move(path)) {}
  ~StreamedTrace() {
    if (file_ != nullptr) std::fclose(file_);
    if (!temporary_.empty()) std::remove(temporary_.c_str());
  }

  absl::Status Open() {
    struct stat info;
    if (stat(path_.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
      file_ = std::fopen(path_.c_str(), "w");
      return file_ != nullptr ? absl::OkStatus() : Error(errno);
    }
    // An existing trace that is a symlink is written through (the link stays), and the
    // file keeps its permissions, as the other output files do (tools/output_file.h).
    struct stat existing;
    const bool exists = stat(path_.c_str(), &existing) == 0;
    if (exists) {
      std::error_code ec;
      std::filesystem::path resolved = std::filesystem::canonical(path_, ec);
      if (!ec) target_ = resolved.string();
    }
    std::filesystem::path target(target_);
    temporary_ = (target.parent_path() /
                  absl::StrFormat(".%s.tmp-%d", target.filename().string(), getpid()))
                     .string();
    // Registered before it exists: an interrupt during a long simulation removes it.
    cleanup_.emplace(temporary_);
    file_ = std::fopen(temporary_.c_str(), "w");
    if (file_ == nullptr) {
      const int error = errno;
      temporary_.clear();
      return Error(error);
    }
    if (exists) fchmod(fileno(file_), existing.st_mode & 07777);
    return absl::OkStatus();
  }

  void Write(std::string_view piece) {
    if (error_ == 0 && std::fwrite(piece.data(), 1, piece.size(), file_) != piece.size()) {
      error_ = errno != 0 ? errno : EIO;
    }
  }

  absl::Status Close() {
    const int closed = std::fclose(file_);
    file_ = nullptr;
    if (error_ == 0 && closed != 0) error_ = errno;
    if (error_ == 0 && !temporary_.empty() &&
        std::rename(temporary_.c_str(), target_.c_str()) != 0) {
      error_ = errno;
    }
    if (error_ != 0) return Error(error_);
    temporary_.clear();
    return absl::OkStatus();
  }

 private:
  absl::Status Error(int error) const {
    return absl::Status(absl::ErrnoToStatusCode(error),
                        absl::StrFormat("cannot write '%s': %s", path_, std::strerror(error)));
  }
  std::string path_;
  std::string target_;  // the file a symlink points to, else path_
  std::string temporary_;
  std::optional<TemporaryFileCleanup> cleanup_;  // removes temporary_ on SIGINT/SIGTERM
  std::FILE* file_ = nullptr;
  int error_ = 0;
};

}  // namespace

absl::StatusOr<std::optional<int64_t>> ParseMemorySize(absl::string_view text) {
  std::string lowered = absl::AsciiStrToLower(text);
  if (lowered == "hbm") return std::optional<int64_t>();
  struct Unit {
    absl::string_view suffix;
    double scale;
  };
  // Longest suffixes first, so that "gib" is not read as "b" after a number "...gi".
  static constexpr Unit kUnits[] = {{"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0},
                                    {"tib", 1099511627776.0}, {"kb", 1e3}, {"mb", 1e6},
                                    {"gb", 1e9}, {"tb", 1e12}, {"b", 1}};
  double scale = 1;
  absl::string_view number = lowered;
  for (const Unit& unit : kUnits) {
    if (absl::EndsWith(number, unit.suffix)) {
      number.remove_suffix(unit.suffix.size());
      scale = unit.scale;
      break;
    }
  }
  double value = 0;
  if (!absl::SimpleAtod(number, &value) || !(value > 0) ||
      value * scale >= static_cast<double>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "expected a positive size such as 80GiB, 8e10 or hbm, got '%s'", text));
  }
  return std::optional<int64_t>(static_cast<int64_t>(value * scale));
}

int RunSimSession(const RunRequest& request, std::ostream& out, std::ostream& err) {
  if (auto f = RefuseDataFlags(request)) return Report(err, *f);
  if (request.format != "text" && request.format != "json") {
    return Report(err, {kExitUsage, absl::StrFormat("error: --format must be text or json, "
                                                    "got '%s'",
                                                    request.format)});
  }
  sim::HardwareSpec hardware;
  if (auto f = LoadCluster(request, hardware)) return Report(err, *f);
  std::optional<int64_t> limit;
  if (auto f = MemoryLimit(request, hardware, limit)) return Report(err, *f);

  LoadedModule loaded;
  if (auto f = LoadModule(request.file, loaded)) return Report(err, *f);
  Function* function = nullptr;
  if (auto f = ChooseFunction(loaded, request.func, function)) return Report(err, *f);
  // A global function on a mesh runs partitioned, exactly as on the executing backends.
  LoadedModule partitioned;
  const Function* run = function;
  if (!function->is_spmd() && function->mesh() != nullptr && function->mesh()->num_devices() > 1) {
    if (auto f = Partition(loaded, partitioned)) return Report(err, *f);
    run = partitioned.module->FindFunction(function->name());
  }

  sim::PredictOptions options;
  options.hardware = hardware;
  options.gpus_per_node = hardware.gpus_per_node;
  std::optional<StreamedTrace> trace_file;
  std::optional<sim::TimelineTraceWriter> trace;
  if (!request.trace.empty()) {
    trace_file.emplace(request.trace);
    if (absl::Status s = trace_file->Open(); !s.ok()) {
      return Report(err, {kExitInvalidInput, absl::StrCat("error: --trace: ", s.message())});
    }
    trace.emplace([&](std::string_view piece) { trace_file->Write(piece); });
    options.timeline_sink = [&](const sim::TimelineEvent& e) { trace->Add(e); };
  }
  Location where;
  absl::StatusOr<sim::Prediction> prediction = sim::Predict(*run, options, &where);
  if (!prediction.ok()) {
    const std::string at =
        where.known() ? absl::StrFormat("%s:%d:%d", loaded.path, where.line, where.col)
                      : loaded.path;
    return Report(err, {kExitInvalidInput, absl::StrFormat("%s: error: @%s: %s", at,
                                                           function->name(),
                                                           prediction.status().message())});
  }
  if (trace.has_value()) {
    trace->Finish();
    if (absl::Status s = trace_file->Close(); !s.ok()) {
      return Report(err, {kExitInvalidInput, absl::StrCat("error: --trace: ", s.message())});
    }
  }
  out << (request.format == "json" ? sim::FormatPredictionJson(*prediction, hardware.name)
                                   : sim::FormatPredictionText(*prediction, hardware.name));

  // Memory: past the limit asked for is a failure; past the GPU's HBM without one, a
  // warning (the time is still a fair prediction of a program that would not start).
  const double capacity = limit.has_value() ? static_cast<double>(*limit) : hardware.hbm_capacity;
  std::vector<std::string> over = DevicesOver(*prediction, capacity);
  if (over.empty()) return kExitSuccess;
  if (limit.has_value()) {
    return Report(err, {kExitInvalidInput,
                        absl::StrFormat("%s: error: @%s does not fit in --max-memory=%s (%s): "
                                        "%s",
                                        loaded.path, function->name(), request.max_memory,
                                        Bytes(capacity), absl::StrJoin(over, ", "))});
  }
  err << absl::StrFormat("%s: warning: @%s does not fit on a %s (%s of HBM): %s\n", loaded.path,
                         function->name(), hardware.name, Bytes(capacity),
                         absl::StrJoin(over, ", "));
  return kExitSuccess;
}

}  // namespace commir
