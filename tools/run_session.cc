#include "tools/run_session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <new>
#include <sstream>
#include <stdexcept>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backend_cpu/cpu_backend.h"
#if COMMIR_HAS_CUDA
#include "backend_cuda/plugin_api.h"
#include "tools/cuda_plugin_loader.h"
#endif
#include "commir/diagnostics.h"
#include "parser/parser.h"
#include "runtime/compare.h"
#include "runtime/global_run.h"
#include "runtime/interpreter.h"
#include "runtime/memory_estimate.h"
#include "runtime/npy.h"
#include "runtime/random_inputs.h"
#include "tools/exit_codes.h"
#include "tools/input_file.h"
#include "tools/output_file.h"
#include "tools/program_loader.h"
#include "tools/sim_session.h"
#include "tools/step_loop.h"
#include "transforms/pass_manager.h"
#include "transforms/registry/pass_registry.h"
#include "transforms/pipeline.h"
#include "transforms/sharding/lower.h"

namespace commir {
namespace {

using runtime::Tensor;

// The global inputs: loaded from --input files or random from the seed.
std::optional<Failure> MakeInputs(const RunRequest& request, const Function& function,
                                  std::vector<Tensor>& inputs) {
  const Block& body = *function.body();
  absl::flat_hash_set<std::string> known;
  for (Value* arg : body.arguments()) known.insert(arg->name());
  absl::flat_hash_set<std::string> given;
  for (const auto& [name, path] : request.inputs) {
    if (!known.contains(name)) {
      std::vector<std::string> names;
      for (Value* arg : body.arguments()) names.push_back(absl::StrCat("%", arg->name()));
      return Failure{kExitInvalidInput,
                     absl::StrFormat("error: --input %s=%s: @%s has no argument %%%s (its "
                                     "arguments: %s)",
                                     name, path, function.name(), name,
                                     absl::StrJoin(names, ", "))};
    }
    if (!given.insert(name).second) {
      return Failure{kExitInvalidInput,
                     absl::StrFormat("error: --input %s is given more than once", name)};
    }
  }
  const std::vector<runtime::InitRule> rules = InitRulesFor(function, request.init);
  for (int i = 0; i < body.num_arguments(); ++i) {
    Type type = function.arg_types()[i];
    const std::string& name = body.argument(i)->name();
    auto it = std::find_if(request.inputs.begin(), request.inputs.end(),
                           [&](const auto& entry) { return entry.first == name; });
    if (type.is_index()) {
      return Failure{kExitInvalidInput,
                     absl::StrFormat("error: argument %%%s is an index; commir-run feeds tensors only",
                                     name)};
    }
    if (it == request.inputs.end()) {
      inputs.push_back(
          runtime::RandomGlobalTensor(request.seed, i, type.element_type(), type.dims(), rules[i]));
      continue;
    }
    absl::StatusOr<Tensor> loaded = runtime::ReadNpy(it->second);
    if (loaded.ok()) {
      loaded = runtime::ConvertLoadedToArgumentType(*loaded, type.element_type(), type.dims(),
                                                    absl::StrCat("%", name));
    }
    if (!loaded.ok()) {
      return Failure{kExitInvalidInput, absl::StrCat("error: ", loaded.status().message())};
    }
    inputs.push_back(*std::move(loaded));
  }
  return std::nullopt;
}

// Where a program runs: a backend, the mesh devices this process drives, and for a run
// spread over processes how the other processes' result parts arrive.
struct Target {
  runtime::Backend* backend = nullptr;
  std::vector<int64_t> local;  // empty: every device
  // Non-null when some devices are driven by other processes: all parts of one result
  // from this process's parts (in the order of `local`).
  std::function<absl::StatusOr<std::vector<Tensor>>(absl::Span<const Tensor* const>)> gather;
};

// The exit status of a run-time error: a device or communication failure of a device
// backend is 3; an error the program causes (bad index, out of range) is 1.
int ExitCodeFor(const absl::Status& status, const Target& target) {
  if (!target.backend->uses_device_memory()) return kExitInvalidInput;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return kExitInvalidInput;
    default:
      return kExitBackendFailure;
  }
}

// Runs `function` on the target: a spmd function on the devices of its mesh with the
// inputs split by the signature's layouts, a global function on one device.
std::optional<Failure> RunOn(const Target& target, const LoadedModule& loaded,
                             const Function& function, const std::vector<Tensor>& global_inputs,
                             std::vector<Tensor>& results, std::vector<runtime::OpEvent>* events) {
  runtime::GlobalRunOptions options;
  options.local_devices = target.local;
  options.gather = target.gather;
  options.events = events;
  runtime::GlobalRunFailure failure;
  absl::StatusOr<std::vector<Tensor>> outputs =
      runtime::RunWithGlobalTensors(function, *target.backend, global_inputs, options, &failure);
  if (outputs.ok()) {
    results = *std::move(outputs);
    return std::nullopt;
  }
  const absl::Status& status = outputs.status();
  using Stage = runtime::GlobalRunFailure::Stage;
  switch (failure.stage) {
    case Stage::kLocalDevices:
      return Failure{kExitBackendFailure, absl::StrCat("error: ", status.message())};
    case Stage::kSplit:
      return Failure{kExitInvalidInput, absl::StrCat("error: ", status.message())};
    case Stage::kRun: {
      std::string text;
      if (failure.location.line > 0) {
        Diagnostic diagnostic{failure.location, std::string(status.message())};
        text = RenderDiagnostic(loaded.path, loaded.source, diagnostic);
        if (!text.empty() && text.back() == '\n') text.pop_back();
      } else {
        text = absl::StrFormat("%s: error: %s", loaded.path, status.message());
      }
      return Failure{ExitCodeFor(status, target), text};
    }
    case Stage::kGather:
      return Failure{ExitCodeFor(status, target),
                     absl::StrFormat("%s: error: gathering result %d: %s", loaded.path,
                                     failure.result, status.message())};
    case Stage::kAssemble:
      return Failure{kExitInvalidInput,
                     absl::StrFormat("%s: error: result %d of @%s: %s", loaded.path,
                                     failure.result, function.name(), status.message())};
  }
  return Failure{kExitInvalidInput, absl::StrCat("error: ", status.message())};
}

std::optional<Failure> RunOnCpu(const LoadedModule& loaded, const Function& function,
                                const std::vector<Tensor>& global_inputs,
                                std::vector<Tensor>& results,
                                std::vector<runtime::OpEvent>* events) {
  cpu::CpuBackend backend;
  Target target;
  target.backend = &backend;
  return RunOn(target, loaded, function, global_inputs, results, events);
}

#if COMMIR_HAS_CUDA
// The cuda backend for `function`'s mesh, from libcommir_cuda.so (loaded only now, so a
// cpu run never loads the CUDA libraries), in the launch mode the environment implies.
std::optional<Failure> MakeCudaBackend(const RunRequest& request, const Function& function,
                                       std::unique_ptr<cuda::CudaBackendPlugin>& backend) {
  cuda::PluginOptions options;
  options.mesh_shape.clear();
  if (function.is_spmd() && function.mesh() != nullptr) {
    for (const MeshAxis& axis : function.mesh()->axes()) options.mesh_shape.push_back(axis.size);
  }
  if (options.mesh_shape.empty()) options.mesh_shape = {1};
  options.timeout = request.timeout_seconds > 0 ? absl::Seconds(request.timeout_seconds)
                                                : absl::ZeroDuration();
  options.allow_tf32 = request.allow_tf32;
  options.p2p_nccl = request.p2p_nccl.value_or(false);
  options.nccl_min_ctas = request.nccl_min_ctas;
  options.nccl_max_ctas = request.nccl_max_ctas;
  if (const char* file = std::getenv("COMMIR_RENDEZVOUS_FILE")) options.rendezvous_file = file;
  absl::StatusOr<std::unique_ptr<cuda::CudaBackendPlugin>> loaded = LoadCudaBackend(options);
  if (!loaded.ok()) {
    return Failure{kExitBackendFailure, absl::StrCat("error: ", loaded.status().message())};
  }
  backend = *std::move(loaded);
  return std::nullopt;
}
#endif

// "%name" of each returned value, or "result<i>" where a name is missing or repeated.
std::vector<std::string> ResultNames(const Function& function) {
  std::vector<std::string> names;
  absl::flat_hash_set<std::string> seen;
  const Operation* ret = function.body()->terminator();
  for (int i = 0; ret != nullptr && i < ret->num_operands(); ++i) {
    std::string name = ret->operand(i)->name().empty() ? "" : absl::StrCat("%", ret->operand(i)->name());
    if (name.empty() || !seen.insert(name).second) name = absl::StrCat("result", i);
    names.push_back(name);
  }
  return names;
}

// min, max and mean over the finite elements, and how many are not finite (only with
// --allow-nonfinite can a result hold any).
std::string Summarize(const Tensor& t) {
  std::vector<double> values = t.ToDouble();
  if (values.empty()) return "(empty)";
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
  int64_t finite = 0;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
    ++finite;
  }
  std::string text = finite == 0 ? "(no finite values)"
                                 : absl::StrFormat("min=%.6g  max=%.6g  mean=%.6g", lo, hi,
                                                   sum / static_cast<double>(finite));
  if (finite < static_cast<int64_t>(values.size())) {
    absl::StrAppend(&text, absl::StrFormat("  nonfinite=%d", values.size() - finite));
  }
  return text;
}

std::optional<Failure> WriteTrace(const std::string& path, const Function& function,
                                  const std::vector<runtime::OpEvent>& events) {
  std::ostringstream out;
  out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  absl::flat_hash_set<int64_t> devices;
  for (const runtime::OpEvent& e : events) devices.insert(e.device);
  std::vector<int64_t> sorted(devices.begin(), devices.end());
  std::sort(sorted.begin(), sorted.end());
  for (int64_t d : sorted) {
    out << (first ? "" : ",\n")
        << absl::StrFormat("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
                           "\"args\": {\"name\": \"device %d\"}}",
                           d, d);
    first = false;
  }
  for (const runtime::OpEvent& e : events) {
    out << ",\n"
        << absl::StrFormat("{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, "
                           "\"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"loc\": "
                           "\"%d:%d\", \"func\": \"@%s\"}}",
                           e.op->name(), e.op->def().Has(kCollective) ? "comm" : "compute",
                           e.device, e.stream, e.start_us, e.end_us - e.start_us,
                           e.op->loc().line, e.op->loc().col, function.name());
  }
  out << "\n]}\n";
  if (absl::Status s = WriteOutputFile(path, out.str()); !s.ok()) {
    return Failure{kExitInvalidInput, absl::StrCat("error: --trace: ", s.message())};
  }
  return std::nullopt;
}

std::string Bytes(uint64_t bytes) {
  return absl::StrFormat("%d bytes (%.1f GiB)", bytes, static_cast<double>(bytes) / (1 << 30));
}

// Refuses up front (exit 3) a run that cannot fit on this machine: a mesh with absurdly
// many devices, or tensors whose live peak (runtime/memory_estimate.h) exceeds physical
// memory. `run` is what the backend runs, `reference` what --check runs on the cpu (may
// be null); `on_host`: the backend keeps its tensors in host memory (cpu).
std::optional<Failure> CheckFitsOnThisMachine(const LoadedModule& loaded, const Function& run,
                                              const Function* reference, bool on_host) {
  const Mesh* mesh = run.mesh();
  constexpr int64_t kMaxDevices = runtime::Interpreter::kMaxDevices;
  if (mesh != nullptr && mesh->num_devices() > kMaxDevices) {
    Diagnostic diagnostic{mesh->loc(),
                          absl::StrFormat("mesh @%s has %d devices; commir-run drives at most %d",
                                          mesh->name(), mesh->num_devices(), kMaxDevices)};
    std::string text = RenderDiagnostic(loaded.path, loaded.source, diagnostic);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    return Failure{kExitBackendFailure, text};
  }
  const uint64_t devices = run.is_spmd() && mesh != nullptr ? mesh->num_devices() : 1;
  const uint64_t per_device = runtime::PeakLiveBytesPerDevice(run);
  uint64_t needed = runtime::SaturatingAdd(runtime::TotalBytes(run.arg_types()),
                                           runtime::TotalBytes(run.result_types()));
  uint64_t running = on_host ? runtime::SaturatingMul(devices, per_device) : 0;
  if (reference != nullptr) {
    running = std::max(running, runtime::PeakLiveBytesPerDevice(*reference));
  }
  needed = runtime::SaturatingAdd(needed, running);
  const uint64_t available = runtime::PhysicalMemoryBytes();
  if (available == 0 || needed <= available) return std::nullopt;
  return Failure{kExitBackendFailure,
                 absl::StrFormat("%s: error: @%s needs at least %s of memory for its tensors "
                                 "(%s per device at the peak of its live values on %d "
                                 "device%s, plus inputs and results), but this machine has %s",
                                 loaded.path, run.name(), Bytes(needed), Bytes(per_device),
                                 devices, devices == 1 ? "" : "s", Bytes(available))};
}

// ---- Phase 1: load and verify -------------------------------------------------------

// A backend this build can run, or the failure that says why not.
std::optional<Failure> CheckBackendAvailable(const std::string& backend) {
  const char* const kAvailable = COMMIR_HAS_CUDA ? "cpu, cuda, sim" : "cpu, sim";
  if (backend == "cuda" && !COMMIR_HAS_CUDA) {
    return Failure{kExitBackendFailure,
                   "error: this build has no cuda backend (CUDA not found at build time); "
                   "rebuild on a machine with the CUDA toolkit, or use --backend=cpu"};
  }
  if (backend != "cpu" && backend != "cuda" && backend != "sim") {
    return Failure{kExitUsage, absl::StrFormat("error: unknown or unavailable backend '%s' "
                                               "(available: %s)",
                                               backend, kAvailable)};
  }
  return std::nullopt;
}

// What a session runs and checks against. Not movable: run_module may point at members.
struct SessionProgram {
  LoadedModule loaded;
  Function* function = nullptr;  // the function the user chose
  // The reference for --check (the function itself) or --check-against (a global function
  // of the same name in reference_module); null without either.
  LoadedModule reference_module;
  const Function* reference = nullptr;
  // What runs: the function itself, or for a global function on several devices its
  // partitioned (spmd) copy in `partitioned`.
  LoadedModule partitioned;
  const LoadedModule* run_module = nullptr;
  const Function* run_function = nullptr;
};

// A --check-against reference must be a global function with the same signature.
std::optional<Failure> CheckReferenceMatches(const SessionProgram& program) {
  const Function& function = *program.function;
  const Function& reference = *program.reference;
  const std::string& path = program.reference_module.path;
  if (reference.is_spmd()) {
    return Failure{kExitInvalidInput,
                   absl::StrFormat("%s: error: the reference @%s must be a global "
                                   "function",
                                   path, function.name())};
  }
  if (reference.arg_types().size() != function.arg_types().size() ||
      reference.result_types().size() != function.result_types().size()) {
    return Failure{kExitInvalidInput,
                   absl::StrFormat("error: @%s takes %d arguments and returns %d results "
                                   "in the reference, but %d and %d here",
                                   function.name(), reference.arg_types().size(),
                                   reference.result_types().size(), function.arg_types().size(),
                                   function.result_types().size())};
  }
  for (size_t i = 0; i < reference.arg_types().size(); ++i) {
    if (!reference.arg_types()[i].SameShapeAndElementType(function.arg_types()[i])) {
      return Failure{kExitInvalidInput,
                     absl::StrFormat("error: argument %d is %s in the reference but %s "
                                     "here",
                                     i, reference.arg_types()[i].ToString(),
                                     function.arg_types()[i].ToString())};
    }
  }
  return std::nullopt;
}

// The reference: a global function of the same name (--check-against) or the function
// itself when it is global (--check).
std::optional<Failure> ChooseReference(const RunRequest& request, SessionProgram& program) {
  const Function& function = *program.function;
  if (!request.check_against.empty()) {
    if (auto f = LoadModule(request.check_against, program.reference_module)) return f;
    program.reference = program.reference_module.module->FindFunction(function.name());
    if (program.reference == nullptr) {
      return Failure{kExitInvalidInput,
                     absl::StrFormat("%s: error: no function @%s to check against",
                                     program.reference_module.path, function.name())};
    }
    return CheckReferenceMatches(program);
  }
  if (request.check) {
    if (function.is_spmd()) {
      return Failure{kExitUsage,
                     absl::StrFormat("error: @%s is a spmd function; --check needs a global "
                                     "function, or give the reference with "
                                     "--check-against=REF.commir",
                                     function.name())};
    }
    program.reference = &function;
  }
  return std::nullopt;
}

// Loads and verifies the program and its reference, and checks that they fit here.
std::optional<Failure> LoadAndVerify(const RunRequest& request, SessionProgram& program) {
  if (auto f = CheckBackendAvailable(request.backend)) return f;
  if (auto f = LoadModule(request.file, program.loaded)) return f;
  if (auto f = ChooseFunction(program.loaded, request.func, program.function)) return f;
  if (auto f = ChooseReference(request, program)) return f;
  return CheckFitsOnThisMachine(program.loaded, *program.function, program.reference,
                                /*tensors_on_host=*/request.backend == "cpu");
}

// ---- Phase 2: prepare ----------------------------------------------------------------

// Chooses what runs: a global function on several devices runs as its partitioned copy
// (which must fit too); the global function stays the --check reference.
std::optional<Failure> ChooseWhatRuns(const RunRequest& request, SessionProgram& program) {
  program.run_module = &program.loaded;
  program.run_function = program.function;
  const Mesh* mesh = program.function->mesh();
  if (program.function->is_spmd() || mesh == nullptr || mesh->num_devices() <= 1) {
    return std::nullopt;
  }
  if (auto f = Partition(program.loaded, program.partitioned)) return f;
  program.run_module = &program.partitioned;
  program.run_function = program.partitioned.module->FindFunction(program.function->name());
  return CheckFitsOnThisMachine(program.partitioned, *program.run_function, program.reference,
                                /*tensors_on_host=*/request.backend == "cpu");
}

// The backend that runs the program, and where this process reports. Not movable: the
// target points at the backends it owns.
struct SessionTarget {
  cpu::CpuBackend cpu_backend;  // --check references always run on the cpu
  Target target;
  // Only rank 0 of a multi-process run reports; the others run and exchange parts.
  std::ostringstream discarded;
  std::ostream* report = nullptr;
#if COMMIR_HAS_CUDA
  std::unique_ptr<cuda::CudaBackendPlugin> cuda_backend;
#endif
  bool reporter() const { return report != &discarded; }
};

std::optional<Failure> SetUpTarget(const RunRequest& request, const Function& run_function,
                                   std::ostream& out, SessionTarget& session) {
  session.target.backend = &session.cpu_backend;
  session.report = &out;
#if COMMIR_HAS_CUDA
  if (request.backend == "cuda") {
    if (auto f = MakeCudaBackend(request, run_function, session.cuda_backend)) return f;
    session.target.backend = session.cuda_backend->backend();
    session.target.local = session.cuda_backend->local_devices();
    if (session.cuda_backend->world_size() > 1) {
      cuda::CudaBackendPlugin* backend = session.cuda_backend.get();
      session.target.gather = [backend](absl::Span<const Tensor* const> parts) {
        return backend->GatherParts(parts);
      };
      if (session.cuda_backend->rank() != 0) session.report = &session.discarded;
    }
  }
#else
  (void)request;
  (void)run_function;
#endif
  return std::nullopt;
}

// ---- Phase 3: execute ----------------------------------------------------------------

// Runs the program once, writing the --trace file from the reporting process.
std::optional<Failure> Execute(const RunRequest& request, const SessionProgram& program,
                               const SessionTarget& session, const std::vector<Tensor>& inputs,
                               std::vector<Tensor>& results) {
  std::vector<runtime::OpEvent> events;
  if (auto f = RunOn(session.target, *program.run_module, *program.run_function, inputs, results,
                     request.trace.empty() ? nullptr : &events)) {
    return f;
  }
  if (!request.trace.empty() && session.reporter()) {
    if (auto f = WriteTrace(request.trace, *program.run_function, events)) return f;
  }
  return std::nullopt;
}

// ---- Phase 4: report -----------------------------------------------------------------

// One rule with and without --check (docs/format-decisions.md, "Non-finite results"):
// non-finite values need --allow-nonfinite, since a reference that computes the same
// NaNs vouches for nothing; given it, --check compares them position by position.
std::optional<Failure> CheckNonFinite(const RunRequest& request,
                                      const std::vector<std::string>& names,
                                      const std::vector<Tensor>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    if (absl::Status s = runtime::CheckNonFiniteAllowed(names[r], results[r],
                                                        request.allow_nonfinite);
        !s.ok()) {
      return Failure{kExitInvalidInput,
                     absl::StrCat("error: ", s.message(),
                                  " (pass --allow-nonfinite if that is expected)")};
    }
  }
  return std::nullopt;
}

std::optional<Failure> WriteOutputDir(const std::string& output_dir,
                                      const std::vector<Tensor>& results) {
  std::error_code ec;
  std::filesystem::create_directories(output_dir, ec);
  for (size_t r = 0; r < results.size(); ++r) {
    std::string path = (std::filesystem::path(output_dir) / absl::StrCat("result", r, ".npy")).string();
    if (absl::Status s = WriteOutputFile(path, runtime::SerializeNpy(results[r])); !s.ok()) {
      return Failure{kExitInvalidInput, absl::StrCat("error: --output-dir: ", s.message())};
    }
  }
  return std::nullopt;
}

// --bench: runs the program `request.bench` more times and reports min and median.
std::optional<Failure> Bench(const RunRequest& request, const SessionProgram& program,
                             const SessionTarget& session, const std::vector<Tensor>& inputs) {
  std::vector<double> times;
  for (int i = 0; i < request.bench; ++i) {
    auto start = std::chrono::steady_clock::now();
    std::vector<Tensor> ignored;
    if (auto f = RunOn(session.target, *program.run_module, *program.run_function, inputs,
                       ignored, nullptr)) {
      return f;
    }
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  *session.report << absl::StrFormat("bench: %d runs on %s: min %.3f ms, median %.3f ms\n",
                                     request.bench, request.backend, times.front(),
                                     times[times.size() / 2]);
  return std::nullopt;
}

// The results' summaries, or with a reference their comparisons with it; the exit status.
int SummarizeOrCompare(const RunRequest& request, const SessionProgram& program,
                       const std::vector<std::string>& names, const std::vector<Tensor>& inputs,
                       const std::vector<Tensor>& results, std::ostream& report,
                       std::ostream& err) {
  if (program.reference == nullptr) {
    for (size_t r = 0; r < results.size(); ++r) {
      report << absl::StrFormat("%s  %s  %s\n", names[r], results[r].DebugTypeString(),
                                Summarize(results[r]));
    }
    return kExitSuccess;
  }
  std::vector<Tensor> expected;
  const LoadedModule& reference_module =
      program.reference == program.function ? program.loaded : program.reference_module;
  if (auto f = RunOnCpu(reference_module, *program.reference, inputs, expected, nullptr)) {
    return Report(err, *f);
  }
  bool all_pass = results.size() == expected.size();
  for (size_t r = 0; r < results.size() && r < expected.size(); ++r) {
    double tolerance = request.rtol.value_or(runtime::DefaultTolerance(expected[r].element_type()));
    runtime::Comparison comparison =
        runtime::CompareWithReference(names[r], results[r], expected[r], tolerance);
    report << runtime::FormatComparison(comparison) << "\n";
    all_pass &= comparison.pass;
  }
  return all_pass ? kExitSuccess : kExitInvalidInput;
}

int ReportResults(const RunRequest& request, const SessionProgram& program,
                  const SessionTarget& session, const std::vector<Tensor>& inputs,
                  const std::vector<Tensor>& results, std::ostream& err) {
  const std::vector<std::string> names = ResultNames(*program.function);
  if (auto f = CheckNonFinite(request, names, results)) return Report(err, *f);
  if (!request.output_dir.empty() && session.reporter()) {
    if (auto f = WriteOutputDir(request.output_dir, results)) return Report(err, *f);
  }
  if (request.bench > 0) {
    if (auto f = Bench(request, program, session, inputs)) return Report(err, *f);
  }
  // Every process took part in the runs; the results and checks are rank 0's to report.
  if (!session.reporter()) return kExitSuccess;
  return SummarizeOrCompare(request, program, names, inputs, results, *session.report, err);
}

// ---- --steps ------------------------------------------------------------------------

// The optimizer state's first values (tools/step_loop.h): @<step>_init run on the cpu
// backend from the params, except for the state arguments given by --input (a run that
// resumes from saved state).
std::optional<Failure> InitializeOptimizerState(const RunRequest& request,
                                                const SessionProgram& program, int num_fed,
                                                std::vector<Tensor>& inputs) {
  absl::StatusOr<const Function*> init =
      FindStateInit(*program.loaded.module, *program.function, num_fed);
  if (!init.ok()) {
    return Failure{kExitInvalidInput,
                   absl::StrCat(program.loaded.path, ": error: ", init.status().message())};
  }
  if (*init == nullptr) return std::nullopt;
  const int num_params = static_cast<int>((*init)->arg_types().size());
  std::vector<Tensor> params(inputs.begin(), inputs.begin() + num_params);
  std::vector<Tensor> state;
  if (auto f = RunOnCpu(program.loaded, **init, params, state, nullptr)) return f;
  const Block& body = *program.function->body();
  for (size_t k = 0; k < state.size(); ++k) {
    const int arg = num_params + static_cast<int>(k);
    const std::string& name = body.argument(arg)->name();
    const bool given = std::any_of(request.inputs.begin(), request.inputs.end(),
                                   [&](const auto& entry) { return entry.first == name; });
    if (!given) inputs[arg] = std::move(state[k]);
  }
  return std::nullopt;
}

// --steps=N: runs the step function N times on the target (tools/step_loop.h). Each step's
// line is printed (and flushed) as soon as the step ends, so an interrupted or failing
// run keeps the lines of the steps before; only the current step's tensors are held.
// With a reference, the reference steps in lockstep with the target, each line showing
// both losses; then the final results, or their comparison with the reference's.
int RunTrainingSteps(const RunRequest& request, const SessionProgram& program,
                     const SessionTarget& session, const std::vector<Tensor>& inputs,
                     std::ostream& err) {
  absl::StatusOr<int> num_params = SteppedParamCount(*program.function);
  if (!num_params.ok()) {
    return Report(err, {kExitInvalidInput, absl::StrCat(program.loaded.path, ": error: ",
                                                        num_params.status().message())});
  }
  std::vector<Tensor> first_inputs = inputs;
  if (auto f = InitializeOptimizerState(request, program, *num_params, first_inputs)) {
    return Report(err, *f);
  }
  StepRunner on_target = [&](const std::vector<Tensor>& in, std::vector<Tensor>& out) {
    return RunOn(session.target, *program.run_module, *program.run_function, in, out, nullptr);
  };
  StepLoop target(*num_params, first_inputs, on_target, request.allow_nonfinite);
  // The reference is rank 0's to run, like every report.
  const bool compare = program.reference != nullptr && session.reporter();
  const LoadedModule& reference_module =
      program.reference == program.function ? program.loaded : program.reference_module;
  std::optional<StepLoop> reference;
  double loss_tolerance = 0;
  if (compare) {
    absl::StatusOr<int> reference_params = SteppedParamCount(*program.reference);
    if (!reference_params.ok() || *reference_params != *num_params) {
      const std::string why =
          reference_params.ok() ? "" : absl::StrCat(": ", reference_params.status().message());
      return Report(err, {kExitInvalidInput,
                          absl::StrFormat("%s: error: the reference @%s is not a step function "
                                          "updating the same %d params%s",
                                          reference_module.path, program.reference->name(),
                                          *num_params, why)});
    }
    StepRunner on_one_device = [&](const std::vector<Tensor>& in, std::vector<Tensor>& out) {
      return RunOnCpu(reference_module, *program.reference, in, out, nullptr);
    };
    reference.emplace(*num_params, first_inputs, on_one_device, request.allow_nonfinite);
    loss_tolerance = request.rtol.value_or(
        runtime::DefaultTolerance(program.reference->result_types()[0].element_type()));
  }
  std::ostream& report = *session.report;
  bool all_pass = true;
  for (int step = 1; step <= request.steps; ++step) {
    double loss = 0;
    if (auto f = target.Step(loss)) return Report(err, *f);
    std::optional<double> expected;
    if (reference.has_value()) {
      double reference_loss = 0;
      if (auto f = reference->Step(reference_loss)) return Report(err, *f);
      expected = reference_loss;
      all_pass &= LossesAgree(loss, reference_loss, loss_tolerance);
    }
    report << FormatStepLine(step, loss, expected, loss_tolerance) << "\n" << std::flush;
  }
  const std::vector<std::string> names = ResultNames(*program.function);
  const std::vector<Tensor> final_results = target.LastResults();
  if (auto f = CheckNonFinite(request, names, final_results)) return Report(err, *f);
  if (!request.output_dir.empty() && session.reporter()) {
    if (auto f = WriteOutputDir(request.output_dir, final_results)) return Report(err, *f);
  }
  if (!session.reporter()) return kExitSuccess;
  if (!reference.has_value()) {
    for (size_t r = 0; r < final_results.size(); ++r) {
      report << absl::StrFormat("%s  %s  %s\n", names[r], final_results[r].DebugTypeString(),
                                Summarize(final_results[r]));
    }
    return kExitSuccess;
  }
  const std::vector<Tensor> expected_results = reference->LastResults();
  for (size_t r = 1; r < final_results.size(); ++r) {
    const Tensor& want = expected_results[r];
    double tolerance = request.rtol.value_or(runtime::DefaultTolerance(want.element_type()));
    runtime::Comparison comparison =
        runtime::CompareWithReference(names[r], final_results[r], want, tolerance);
    report << runtime::FormatComparison(comparison) << "\n";
    all_pass &= comparison.pass;
  }
  return all_pass ? kExitSuccess : kExitInvalidInput;
}

}  // namespace

static int RunSessionUnguarded(const RunRequest& request, std::ostream& out, std::ostream& err) {
  // The sim backend predicts rather than runs: no inputs, no results, no host tensors.
  if (request.backend == "sim") return RunSimSession(request, out, err);
  SessionProgram program;
  if (auto f = LoadAndVerify(request, program)) return Report(err, *f);
  std::vector<Tensor> inputs;
  if (auto f = MakeInputs(request, *program.function, inputs)) return Report(err, *f);
  if (auto f = ChooseWhatRuns(request, program)) return Report(err, *f);
  SessionTarget session;
  if (auto f = SetUpTarget(request, *program.run_function, out, session)) return Report(err, *f);
  if (request.steps > 0) return RunTrainingSteps(request, program, session, inputs, err);
  std::vector<Tensor> results;
  if (auto f = Execute(request, program, session, inputs, results)) return Report(err, *f);
  return ReportResults(request, program, session, inputs, results, err);
}

// Running out of memory mid-run (past the up-front estimate: other processes, address
// space limits) is a failure of this machine: exit 3 with a message, not an abort.
int RunSession(const RunRequest& request, std::ostream& out, std::ostream& err) {
  try {
    return RunSessionUnguarded(request, out, err);
  } catch (const std::bad_alloc&) {
    return Report(err, {kExitBackendFailure,
                        absl::StrFormat("%s: error: out of memory: a tensor could not be "
                                        "allocated (this machine has %s of physical memory)",
                                        request.file == "-" ? "<stdin>" : request.file,
                                        Bytes(runtime::PhysicalMemoryBytes()))});
  } catch (const std::length_error&) {
    return Report(err, {kExitBackendFailure,
                        absl::StrFormat("%s: error: out of memory: a tensor is too large to "
                                        "allocate",
                                        request.file == "-" ? "<stdin>" : request.file)});
  }
}

}  // namespace commir
