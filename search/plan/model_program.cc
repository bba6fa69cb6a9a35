#include "search/plan/model_program.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "commir/attribute.h"
#include "commir/builder.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "absl/container/flat_hash_map.h"
#include "search/plan/embedding_program.h"
#include "search/plan/layer_program.h"

namespace commir::search::plan {

absl::StatusOr<Function*> AddLayerChain(Module& module, absl::string_view name,
                                        const Function& layer, int64_t first_layer, int64_t count,
                                        const Function* head, const Function* embed, bool tied) {
  // The arguments: the input (the embedding's token ids, or the layer's input), then each
  // callee's weights (its arguments after the first) under a prefix naming whose they
  // are. A tied head takes the embedding's table (its argument of the same name) instead
  // of an argument of its own.
  const Function& first = embed != nullptr ? *embed : layer;
  std::vector<Type> arg_types = {first.arg_types()[0]};
  std::vector<std::string> arg_names = {embed != nullptr ? "ids" : "x"};
  absl::flat_hash_map<std::string, int> embed_args;  // the embedding's weights by name
  auto weights = [&](const Function& f, const std::string& prefix, bool share) {
    for (int i = 1; i < static_cast<int>(f.arg_types().size()); ++i) {
      const std::string& arg = f.body()->argument(i)->name();
      if (share && embed_args.contains(arg)) continue;
      if (&f == embed) embed_args[arg] = static_cast<int>(arg_types.size());
      arg_types.push_back(f.arg_types()[i]);
      arg_names.push_back(absl::StrCat(prefix, "_", arg));
    }
  };
  if (embed != nullptr) weights(*embed, "embed", false);
  for (int64_t i = first_layer; i < first_layer + count; ++i) {
    weights(layer, absl::StrCat("l", i), false);
  }
  if (head != nullptr) weights(*head, "head", tied);
  const Type result_type = (head != nullptr ? head : &layer)->result_types()[0];
  Function* chain = AddFunction(module, std::string(name), /*spmd=*/false, layer.mesh(),
                                arg_types, {result_type}, arg_names);

  OpBuilder b(chain);
  auto call = [&](const Function& callee, int& next_arg, Value* input, std::string output,
                  bool share) {
    std::vector<OpBuilder::Operand> operands = {input};
    for (size_t i = 1; i < callee.arg_types().size(); ++i) {
      auto it = share ? embed_args.find(callee.body()->argument(i)->name()) : embed_args.end();
      operands.push_back(chain->body()->argument(it != embed_args.end() ? it->second : next_arg++));
    }
    AttrDict attrs;
    attrs.Set("callee", Attribute::Ident(callee.name()));
    // A call names its result type: the callee may be declared after its caller.
    return b.Op(OpKind::kCall, std::move(operands), std::move(attrs), callee.result_types()[0],
                std::move(output));
  };
  Value* input = chain->body()->argument(0);
  int next_arg = 1;
  if (embed != nullptr) input = call(*embed, next_arg, input, "x0", false);
  for (int64_t i = first_layer; i < first_layer + count; ++i) {
    input = call(layer, next_arg, input, absl::StrCat("x", i + 1), false);
  }
  if (head != nullptr) input = call(*head, next_arg, input, "loss", tied);
  if (!b.ok()) return b.status();
  b.Return({input});
  return chain;
}

absl::StatusOr<std::string> ModelProgram(const ModelSpec& model, int64_t micro_batch) {
  absl::StatusOr<std::unique_ptr<Module>> layer = SingleDeviceLayer(model, micro_batch);
  if (!layer.ok()) return layer.status();
  absl::StatusOr<std::unique_ptr<Module>> head = SingleDeviceHead(model, micro_batch);
  if (!head.ok()) return head.status();
  absl::StatusOr<std::unique_ptr<Module>> embed = SingleDeviceEmbedding(model, micro_batch);
  if (!embed.ok()) return embed.status();
  const Function& layer_fn = *(*layer)->FindFunction(kLayerFunction);
  const Function& head_fn = *(*head)->FindFunction(kHeadFunction);
  const Function& embed_fn = *(*embed)->FindFunction(kEmbedFunction);

  // @model first, then the functions it calls. GPT's head is tied to the embedding's
  // table (Radford et al.'s GPT-2, which GPT-3 and Megatron-LM's GPT keep).
  Module module;
  absl::StatusOr<Function*> top =
      AddLayerChain(module, kModelFunction, layer_fn, 0, model.layers, &head_fn, &embed_fn,
                    /*tied=*/model.architecture == Architecture::kGpt);
  if (!top.ok()) return top.status();
  module.AddFunction(embed_fn.Clone());
  module.AddFunction(layer_fn.Clone());
  module.AddFunction(head_fn.Clone());
  if (absl::Status s = VerifyModule(module); !s.ok()) {
    return absl::InternalError(
        absl::StrCat("the generated model does not verify: ", s.message()));
  }
  return PrintModule(module);
}

}  // namespace commir::search::plan
