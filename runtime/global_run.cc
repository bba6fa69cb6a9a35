#include "runtime/global_run.h"

#include <utility>

#include "runtime/host_layout.h"

namespace commir::runtime {

absl::StatusOr<std::vector<Tensor>> RunWithGlobalTensors(const Function& function,
                                                         Backend& backend,
                                                         const std::vector<Tensor>& global_inputs,
                                                         const GlobalRunOptions& options,
                                                         GlobalRunFailure* failure) {
  GlobalRunFailure ignored;
  GlobalRunFailure& where = failure != nullptr ? *failure : ignored;
  where = GlobalRunFailure{};
  Interpreter interpreter(function, backend);
  interpreter.set_event_sink(options.events);
  if (!options.local_devices.empty()) {
    if (absl::Status s = interpreter.set_local_devices(options.local_devices); !s.ok()) {
      where.stage = GlobalRunFailure::Stage::kLocalDevices;
      return s;
    }
  }
  const Mesh* mesh = function.is_spmd() ? function.mesh() : nullptr;
  const int64_t devices = interpreter.num_devices();
  std::vector<std::vector<Tensor>> local_inputs(devices);
  for (int64_t d : interpreter.local_devices()) {
    for (size_t i = 0; i < global_inputs.size(); ++i) {
      absl::StatusOr<Tensor> part = LocalPart(global_inputs[i], function.arg_types()[i], mesh, d);
      if (!part.ok()) {
        where.stage = GlobalRunFailure::Stage::kSplit;
        return part.status();
      }
      local_inputs[d].push_back(*std::move(part));
    }
  }
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(local_inputs);
  if (!outputs.ok()) {
    where.stage = GlobalRunFailure::Stage::kRun;
    where.location = interpreter.error_location();
    return outputs.status();
  }
  std::vector<Tensor> results;
  for (size_t r = 0; r < function.result_types().size(); ++r) {
    std::vector<const Tensor*> parts;
    std::vector<Tensor> gathered;
    if (options.gather) {
      std::vector<const Tensor*> mine;
      for (int64_t d : interpreter.local_devices()) mine.push_back(&(*outputs)[d][r]);
      absl::StatusOr<std::vector<Tensor>> all = options.gather(mine);
      if (!all.ok()) {
        where.stage = GlobalRunFailure::Stage::kGather;
        where.result = static_cast<int>(r);
        return all.status();
      }
      gathered = *std::move(all);
      for (const Tensor& part : gathered) parts.push_back(&part);
    } else {
      for (int64_t d = 0; d < devices; ++d) parts.push_back(&(*outputs)[d][r]);
    }
    absl::StatusOr<Tensor> global = AssembleGlobal(parts, function.result_types()[r], mesh);
    if (!global.ok()) {
      where.stage = GlobalRunFailure::Stage::kAssemble;
      where.result = static_cast<int>(r);
      return global.status();
    }
    results.push_back(*std::move(global));
  }
  return results;
}

}  // namespace commir::runtime
