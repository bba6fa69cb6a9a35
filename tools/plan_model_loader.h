// The model that `commir-search --plan MODEL` (and --emit-model) names: a preset or the
// text form (model_spec.h), a file holding the text form, or a model written as CommIR,
// `FILE.commir,global_batch=N` (model_reader.h: the sizes read from its functions, the
// global batch from the suffix, the search kept to the file's micro-batch).
#ifndef COMMIR_TOOLS_PLAN_MODEL_LOADER_H_
#define COMMIR_TOOLS_PLAN_MODEL_LOADER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "search/plan/model_spec.h"

namespace commir::search {

struct LoadedModel {
  plan::ModelSpec spec;
  // From a CommIR file only: the micro-batch it is written for (0 otherwise) and its
  // unannotated layer and head functions (model_reader.h: copies that keep the file's
  // positions; null otherwise).
  int64_t micro_batch = 0;
  std::string file;  // the path as given: layout errors found later name it
  std::shared_ptr<const Module> functions;
  std::string layer_name;
  std::string head_name;
};

// Whether `arg` names a CommIR model file: FILE.commir,KEY=VALUE..., or FILE.commir whose
// first declaration is CommIR (a file of the text form may be named .commir too).
bool IsCommirModel(const std::string& arg);

// The N of FILE.commir[,global_batch=N] (0 when not given). Errors: an option other
// than global_batch (named), global_batch given twice, N not a count >= 1.
absl::StatusOr<int64_t> CommirModelGlobalBatch(const std::string& arg);

// Errors name the file (parse and verifier errors and missing parts with line:col).
// A CommIR file without `,global_batch=N` is an InvalidArgument naming the form.
absl::StatusOr<LoadedModel> LoadPlanModel(const std::string& arg);

}  // namespace commir::search

#endif  // COMMIR_TOOLS_PLAN_MODEL_LOADER_H_
