#include "search/plan/megatron_layout.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "transforms/sharding/megatron_layout.h"

namespace commir::search::plan {

absl::StatusOr<std::unique_ptr<Module>> MegatronLayoutModule(const Function& function,
                                                             const MegatronLayoutOptions& options) {
  const LayerLayout& l = options.layout;
  if (l.tp < 1 || l.cp < 1) return absl::InvalidArgumentError("tp and cp must be at least 1");
  auto error = [&](Location loc, absl::string_view message) {
    const std::string at =
        options.file.empty() ? "" : absl::StrCat(options.file, ":", loc.line, ":", loc.col, ": ");
    return absl::InvalidArgumentError(
        absl::StrCat(at, "@", function.name(), ": the Megatron layout: ", message));
  };
  if (!function.arg_types().empty() && function.arg_types()[0].is_tensor() &&
      (function.arg_types()[0].rank() == 3 || function.arg_types()[0].rank() == 2) &&
      function.arg_types()[0].dims()[0] != l.micro_batch) {
    return error(function.loc(), absl::StrCat("written for micro-batch ",
                                              function.arg_types()[0].dims()[0], ", not ",
                                              l.micro_batch));
  }
  sharding::MegatronLayoutOptions o;
  o.tp = l.tp;
  o.cp = l.cp;
  o.sequence_parallel = l.sequence_parallel;
  if (options.vocabulary > 0) {
    o.vocabulary = options.vocabulary;
    o.padded_vocabulary = options.padded_vocabulary > 0
                              ? options.padded_vocabulary
                              : PaddedVocabulary(options.vocabulary, l.tp);
  }
  auto module = std::make_unique<Module>();
  const Mesh* mesh = sharding::AddMegatronMesh(*module, o);
  Function* f = module->AddFunction(function.Clone());
  Location where;
  if (absl::Status s = sharding::LayOutMegatron(*f, mesh, o, &where); !s.ok()) {
    return error(where, s.message());
  }
  if (!options.name.empty()) f->set_name(options.name);
  return module;
}

}  // namespace commir::search::plan
