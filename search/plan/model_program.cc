#include "search/plan/model_program.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "parser/parser.h"
#include "search/plan/layer_program.h"

namespace commir::search::plan {

std::string LayerChainFunction(absl::string_view name, const FunctionText& layer,
                               int64_t first_layer, int64_t count, const FunctionText* head) {
  // The arguments: the input, then each callee's weights (its arguments after the first)
  // under a prefix naming whose they are.
  std::vector<std::string> args = {absl::StrCat("%x: ", layer.args[0].second)};
  auto weights = [&](const FunctionText& f, const std::string& prefix) {
    std::vector<std::string> names;
    for (size_t i = 1; i < f.args.size(); ++i) {
      const std::string arg = absl::StrCat("%", prefix, "_", f.args[i].first);
      args.push_back(absl::StrCat(arg, ": ", f.args[i].second));
      names.push_back(arg);
    }
    return names;
  };
  std::string body;
  std::string input = "%x";
  std::string result_type = layer.result_type;
  for (int64_t i = first_layer; i < first_layer + count; ++i) {
    std::vector<std::string> operands = weights(layer, absl::StrCat("l", i));
    operands.insert(operands.begin(), input);
    const std::string output = absl::StrCat("%x", i + 1);
    // A call names its result type: the callee may be declared after its caller.
    absl::StrAppend(&body, "  ", output, " = call @", layer.name, "(",
                    absl::StrJoin(operands, ", "), ") : ", layer.result_type, "\n");
    input = output;
  }
  if (head != nullptr) {
    std::vector<std::string> operands = weights(*head, "head");
    operands.insert(operands.begin(), input);
    absl::StrAppend(&body, "  %logits = call @", head->name, "(", absl::StrJoin(operands, ", "),
                    ") : ", head->result_type, "\n");
    input = "%logits";
    result_type = head->result_type;
  }
  return absl::StrCat("func @", name, "(", absl::StrJoin(args, ", "), ") -> ", result_type,
                      " {\n", body, "  return ", input, "\n}\n");
}

FunctionText SignatureOf(const Function& function) {
  FunctionText out;
  out.name = function.name();
  for (int i = 0; i < function.body()->num_arguments(); ++i) {
    out.args.emplace_back(function.body()->argument(i)->name(),
                          function.arg_types()[i].ToString());
  }
  if (!function.result_types().empty()) out.result_type = function.result_types()[0].ToString();
  return out;
}

absl::StatusOr<std::string> ModelProgram(const ModelSpec& model, int64_t micro_batch) {
  absl::StatusOr<FunctionText> layer = SingleDeviceLayer(model, micro_batch);
  if (!layer.ok()) return layer.status();
  absl::StatusOr<FunctionText> head = SingleDeviceHead(model, micro_batch);
  if (!head.ok()) return head.status();

  const std::string text = absl::StrCat(LayerChainFunction(kModelFunction, *layer, 0, model.layers,
                                                          &*head),
                                       "\n", layer->Print(), "\n", head->Print());
  // Parsed and printed back: the text verifies, and it is commir-opt's canonical form
  // (a fixed point of commir-opt; comments would not survive it).
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "model.commir");
  if (!module.ok()) {
    return absl::InternalError(
        absl::StrCat("the generated model does not verify: ", module.status().message()));
  }
  return PrintModule(**module);
}

}  // namespace commir::search::plan
