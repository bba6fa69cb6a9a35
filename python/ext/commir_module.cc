// The extension module `_commir`: the C++ parser, printer, verifier, op type inference,
// pass pipelines and the cpu backend, for the Python package `commir`
// (python/commir/__init__.py wraps it; users import `commir`, not this). Errors in the
// input are raised as the package's exception classes (commir.errors) with file, line,
// column and message.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commir/diagnostics.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "backend_cpu/cpu_backend.h"
#include "parser/parser.h"
#include "python/ext/numpy_tensor.h"
#include "python/ext/op_types.h"
#include "runtime/global_run.h"
#include "sim/hardware.h"
#include "sim/predict.h"
#include "sim/prediction_format.h"
#include "transforms/registry/pass_registry.h"
#include "transforms/pipeline.h"
#include "transforms/sharding/comm_report.h"

namespace py = pybind11;

namespace commir::python {
namespace {

// A parsed module with the text it came from, so that later errors (a pass, a run)
// can point into that text.
struct ModuleHandle {
  std::unique_ptr<Module> module;
  std::string source;
  std::string file;
};

// Raises commir.errors.<kind>(file, line, column, message, rendered).
[[noreturn]] void RaiseDiagnostic(const char* kind, const std::string& file,
                                  const Diagnostic& first,
                                  const std::string& rendered) {
  py::object cls = py::module_::import("commir.errors").attr(kind);
  py::object error = cls(file, first.loc.line, first.loc.col, first.message, rendered);
  PyErr_SetObject(cls.ptr(), error.ptr());
  throw py::error_already_set();
}

[[noreturn]] void RaiseFromEngine(const char* kind, const DiagnosticEngine& diagnostics,
                                  const std::string& file, const std::string& source) {
  std::vector<Diagnostic> sorted = diagnostics.Sorted();
  if (sorted.empty()) sorted.push_back({Location{}, "failed without a diagnostic"});
  RaiseDiagnostic(kind, file, sorted.front(), diagnostics.Render(file, source));
}

[[noreturn]] void RaisePlain(const char* kind, const std::string& message) {
  py::object cls = py::module_::import("commir.errors").attr(kind);
  PyErr_SetObject(cls.ptr(), cls(message).ptr());
  throw py::error_already_set();
}

std::shared_ptr<ModuleHandle> Parse(const std::string& text, const std::string& file) {
  auto handle = std::make_shared<ModuleHandle>();
  handle->source = text;
  handle->file = file;
  DiagnosticEngine diagnostics;
  ParseOptions options;
  options.verify = false;
  handle->module = ParseModule(text, diagnostics, options);
  if (handle->module == nullptr || diagnostics.has_errors()) {
    RaiseFromEngine("ParseError", diagnostics, file, text);
  }
  VerifyModule(*handle->module, diagnostics);
  if (diagnostics.has_errors()) RaiseFromEngine("VerifyError", diagnostics, file, text);
  return handle;
}

void Verify(const ModuleHandle& handle) {
  DiagnosticEngine diagnostics;
  VerifyModule(*handle.module, diagnostics);
  // Modules are not edited from Python, so their source still matches them.
  if (diagnostics.has_errors()) RaiseFromEngine("VerifyError", diagnostics, handle.file, handle.source);
}

// Runs the pipeline on a fresh copy of `handle`'s module; the result is reparsed from
// its printed text so that it carries the text later errors point into.
std::shared_ptr<ModuleHandle> Opt(const ModuleHandle& handle, const std::string& pipeline) {
  absl::StatusOr<Pipeline> passes = ParsePipeline(pipeline, RegisteredPasses());
  if (!passes.ok()) RaisePlain("PipelineError", std::string(passes.status().message()));
  // Every handle's module is parse(handle.source) (opt results are reparsed from their
  // printed text), so a fresh copy comes from the source and errors point into it.
  const std::string& input = handle.source;
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(input, diagnostics);
  if (module == nullptr) RaiseFromEngine("VerifyError", diagnostics, handle.file, input);
  // Passes that report (comm-report, schedule-report) write to stderr; keep the
  // Python process's stderr quiet and offer the report through comm_report() instead.
  absl::Status status =
      RunPipeline(*module, *passes, {.verify_each = true, .diagnostics = &diagnostics});
  if (!status.ok()) {
    if (diagnostics.has_errors()) RaiseFromEngine("PassError", diagnostics, handle.file, input);
    RaisePlain("PassError", absl::StrCat(handle.file, ": error: ", status.message()));
  }
  return Parse(PrintModule(*module), absl::StrCat(handle.file, " after ", pipeline));
}

const Function& ChooseFunction(const ModuleHandle& handle, const std::string& name) {
  std::vector<Function*> functions = handle.module->functions();
  if (!name.empty()) {
    if (const Function* f = handle.module->FindFunction(name)) return *f;
    std::vector<std::string> names;
    for (Function* f : functions) names.push_back(absl::StrCat("@", f->name()));
    RaisePlain("RunError", absl::StrFormat("no function @%s (the module has %s)", name,
                                           names.empty() ? "none" : absl::StrJoin(names, ", ")));
  }
  if (functions.size() != 1) {
    RaisePlain("RunError",
               absl::StrFormat("the module has %d functions; choose one with func=", functions.size()));
  }
  return *functions[0];
}

py::list Signature(const ModuleHandle& handle, const std::string& name) {
  const Function& function = ChooseFunction(handle, name);
  py::list args;
  for (int i = 0; i < function.body()->num_arguments(); ++i) {
    args.append(py::make_tuple(function.body()->argument(i)->name(),
                               function.arg_types()[i].ToString()));
  }
  return args;
}

// Runs a function on the cpu backend. `arrays` maps argument names to NumPy arrays of
// the argument's global shape; the results come back as NumPy arrays.
py::list Run(const ModuleHandle& handle, const std::string& name, const py::dict& arrays) {
  const Function& function = ChooseFunction(handle, name);
  const Block& body = *function.body();
  std::vector<std::string> names;
  for (int i = 0; i < body.num_arguments(); ++i) names.push_back(body.argument(i)->name());
  for (const auto& item : arrays) {
    std::string given = py::cast<std::string>(item.first);
    if (std::find(names.begin(), names.end(), given) == names.end()) {
      RaisePlain("RunError", absl::StrFormat("@%s has no argument %%%s (its arguments: %%%s)",
                                             function.name(), given,
                                             absl::StrJoin(names, ", %")));
    }
  }
  std::vector<runtime::Tensor> inputs;
  for (int i = 0; i < body.num_arguments(); ++i) {
    Type type = function.arg_types()[i];
    if (!arrays.contains(names[i])) {
      RaisePlain("RunError", absl::StrFormat("missing argument %%%s: %s of @%s", names[i],
                                             type.ToString(), function.name()));
    }
    if (type.is_index()) {
      RaisePlain("RunError", absl::StrFormat("argument %%%s is an index; run takes tensors only",
                                             names[i]));
    }
    absl::StatusOr<runtime::Tensor> tensor =
        TensorFromArray(py::reinterpret_borrow<py::object>(arrays[names[i].c_str()]), type,
                        absl::StrCat("%", names[i]));
    if (!tensor.ok()) RaisePlain("RunError", std::string(tensor.status().message()));
    inputs.push_back(*std::move(tensor));
  }
  runtime::GlobalRunFailure failure;
  absl::StatusOr<std::vector<runtime::Tensor>> results;
  {
    py::gil_scoped_release release;
    cpu::CpuBackend backend;
    results = runtime::RunWithGlobalTensors(function, backend, inputs, {}, &failure);
  }
  if (!results.ok()) {
    const Location where = failure.location;
    if (failure.stage == runtime::GlobalRunFailure::Stage::kRun && where.known()) {
      Diagnostic diagnostic{where, std::string(results.status().message())};
      RaiseDiagnostic("RunError", handle.file, diagnostic,
                      RenderDiagnostic(handle.file, handle.source, diagnostic));
    }
    RaisePlain("RunError", absl::StrCat(handle.file, ": error: ", results.status().message()));
  }
  py::list out;
  for (const runtime::Tensor& t : *results) out.append(ArrayFromTensor(t));
  return out;
}

// The sim backend's prediction of one run of a function (no tensor is computed):
// a dict with the summary, one dict per device, and the text report commir-run prints.
py::dict Predict(const ModuleHandle& handle, const std::string& name, const std::string& hardware,
                 int64_t gpus_per_node) {
  const Function& function = ChooseFunction(handle, name);
  absl::StatusOr<sim::HardwareSpec> spec = sim::LoadHardware(hardware);
  if (!spec.ok()) RaisePlain("RunError", std::string(spec.status().message()));
  if (gpus_per_node < 1) RaisePlain("RunError", absl::StrFormat("gpus_per_node must be >= 1, not %d", gpus_per_node));
  sim::PredictOptions options;
  options.hardware = *spec;
  options.gpus_per_node = gpus_per_node;
  absl::StatusOr<sim::Prediction> prediction;
  {
    py::gil_scoped_release release;
    prediction = sim::Predict(function, options);
  }
  if (!prediction.ok()) {
    RaisePlain("RunError", absl::StrCat(handle.file, ": error: ", prediction.status().message()));
  }
  py::list devices;
  for (const sim::DevicePrediction& d : prediction->devices) {
    py::dict device;
    device["time_s"] = d.time_s;
    device["compute_s"] = d.compute_s;
    device["communication_s"] = d.communication_s;
    device["exposed_communication_s"] = d.exposed_communication_s;
    device["peak_memory_bytes"] = d.peak_memory_bytes;
    devices.append(device);
  }
  py::dict out;
  out["hardware"] = spec->name;
  out["time_s"] = prediction->time_s;
  out["overlap_fraction"] = prediction->overlap_fraction;
  out["total_flops"] = prediction->total_flops;
  out["achieved_tflops_per_gpu"] = prediction->achieved_tflops_per_gpu;
  out["fraction_of_peak"] = prediction->fraction_of_peak;
  out["devices"] = devices;
  out["report"] = sim::FormatPredictionText(*prediction, spec->name);
  return out;
}

std::vector<std::string> PassNames() {
  std::vector<std::string> names;
  for (const PassInfo& info : RegisteredPasses()) names.push_back(info.name);
  return names;
}

PYBIND11_MODULE(_commir, m) {
  m.doc() = "C++ core of the commir package (use `import commir`).";
  py::class_<ModuleHandle, std::shared_ptr<ModuleHandle>>(m, "ModuleHandle")
      .def_readonly("source", &ModuleHandle::source)
      .def_readonly("file", &ModuleHandle::file)
      .def("text", [](const ModuleHandle& h) { return PrintModule(*h.module); })
      .def("function_names",
           [](const ModuleHandle& h) {
             std::vector<std::string> names;
             for (Function* f : h.module->functions()) names.push_back(f->name());
             return names;
           })
      .def("signature", &Signature)
      .def("comm_report", [](const ModuleHandle& h) { return sharding::FormatCommReport(*h.module); });
  m.def("parse", &Parse, py::arg("text"), py::arg("file"));
  m.def("verify", &Verify);
  m.def("opt", &Opt);
  m.def("run", &Run);
  m.def("pass_names", &PassNames);
  m.def("predict", &Predict);
  m.def("infer_result_types", &InferOpResultTypes, py::arg("op"), py::arg("operand_types"),
        py::arg("attrs") = py::list(), py::arg("result_types") = py::list(),
        py::arg("mesh") = py::none(), py::arg("spmd") = false, py::arg("num_results") = 1);
  m.def("local_type", &LocalTensorType, py::arg("type"), py::arg("mesh"));
}

}  // namespace
}  // namespace commir::python
