#include "search/plan/embedding_program.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "commir/attribute.h"
#include "commir/builder.h"
#include "commir/ir.h"
#include "commir/type.h"
#include "search/plan/megatron_layout.h"

namespace commir::search::plan {
namespace {

// The one definition of the embedding's ops, on one device over the model's own
// vocabulary; EmbeddingProgram lays it out (megatron_layout.h).
absl::StatusOr<std::unique_ptr<Module>> BuildEmbedding(const ModelSpec& m, int64_t micro_batch) {
  const bool gpt = m.architecture == Architecture::kGpt;
  auto module = std::make_unique<Module>();
  const int64_t B = micro_batch, S = m.sequence, H = m.hidden;
  const Type stream = Type::Tensor(m.dtype, {B, S, H});
  std::vector<Type> arg_types = {Type::Tensor(kTokenIdType, {B, S}),
                                 Type::Tensor(m.dtype, {m.vocabulary, H})};
  std::vector<std::string> arg_names = {"ids", "wemb"};
  if (gpt) {
    arg_types.push_back(Type::Tensor(m.dtype, {S, H}));
    arg_names.push_back("wpos");
  }
  Function* f = AddFunction(*module, kEmbedFunction, /*spmd=*/false, /*mesh=*/nullptr,
                            arg_types, {stream}, arg_names);
  OpBuilder b(f);
  AttrDict rows;
  rows.Set("axis", Attribute::Int(0));
  Value* out = b.Op(OpKind::kGather, {f->body()->argument(1), f->body()->argument(0)},
                    std::move(rows), std::nullopt, "x");
  if (gpt) {
    Value* pos = b.Op(OpKind::kBroadcast, {f->body()->argument(2)}, {}, stream, "pos");
    out = b.Op(OpKind::kAdd, {out, pos}, {}, std::nullopt, "xp");
  }
  if (!b.ok()) {
    return absl::InternalError(absl::StrCat("building @", kEmbedFunction, ": ", b.status().message()));
  }
  b.Return({out});
  return module;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Module>> SingleDeviceEmbedding(const ModelSpec& m,
                                                              int64_t micro_batch) {
  if (absl::Status s = CheckMicroBatch(m, micro_batch); !s.ok()) return s;
  return BuildEmbedding(m, micro_batch);
}

absl::StatusOr<std::unique_ptr<Module>> EmbeddingProgram(const ModelSpec& m,
                                                         const LayerLayout& l) {
  if (absl::Status s = CheckLayerLayout(m, l); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<Module>> embed = BuildEmbedding(m, l.micro_batch);
  if (!embed.ok()) return embed.status();
  MegatronLayoutOptions o;
  o.layout = l;
  o.vocabulary = m.vocabulary;
  return MegatronLayoutModule(*(*embed)->FindFunction(kEmbedFunction), o);
}

}  // namespace commir::search::plan
