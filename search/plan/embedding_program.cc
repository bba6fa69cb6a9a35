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
#include "transforms/sharding/megatron_layout.h"

namespace commir::search::plan {
namespace {

// The one definition of the embedding's ops. `mesh` null: one device, the model's own
// vocabulary, no layouts; else the Megatron-LM layout of `l` (see the header).
absl::StatusOr<std::unique_ptr<Module>> BuildEmbedding(const ModelSpec& m, const LayerLayout& l,
                                                       bool laid_out) {
  const bool gpt = m.architecture == Architecture::kGpt;
  auto module = std::make_unique<Module>();
  const Mesh* mesh = nullptr;
  AxisList cp, tp, residual;
  int64_t vocabulary = m.vocabulary;
  if (laid_out) {
    sharding::MegatronLayoutOptions o;
    o.tp = l.tp;
    o.cp = l.cp;
    mesh = sharding::AddMegatronMesh(*module, o);
    if (l.cp > 1) cp = {sharding::kMegatronCpAxis};
    if (l.tp > 1) tp = {sharding::kMegatronTpAxis};
    residual = cp;
    if (l.sequence_parallel) residual.insert(residual.end(), tp.begin(), tp.end());
    vocabulary = PaddedVocabulary(m.vocabulary, l.tp);
  }
  const int64_t B = l.micro_batch, S = m.sequence, H = m.hidden;
  const Type ids = Type::Tensor(kTokenIdType, {B, S}, {{}, cp});
  const Type table = Type::Tensor(m.dtype, {vocabulary, H}, {tp, {}});
  const Type stream = Type::Tensor(m.dtype, {B, S, H}, {{}, residual, {}});
  std::vector<Type> arg_types = {ids, table};
  std::vector<std::string> arg_names = {"ids", "wemb"};
  if (gpt) {
    arg_types.push_back(Type::Tensor(m.dtype, {S, H}));
    arg_names.push_back("wpos");
  }
  Function* f = AddFunction(*module, kEmbedFunction, /*spmd=*/false, mesh, arg_types, {stream},
                            arg_names);
  OpBuilder b(f);
  AttrDict rows;
  rows.Set("axis", Attribute::Int(0));
  // The lookup's result is written in the stream's layout: the partitioner sums each
  // rank's partial rows into it (all_reduce, or reduce_scatter with sp).
  Value* out = b.Op(OpKind::kGather, {f->body()->argument(1), f->body()->argument(0)},
                    std::move(rows), stream, "x");
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
  LayerLayout one;
  one.micro_batch = micro_batch;
  return BuildEmbedding(m, one, /*laid_out=*/false);
}

absl::StatusOr<std::unique_ptr<Module>> EmbeddingProgram(const ModelSpec& m,
                                                         const LayerLayout& l) {
  if (absl::Status s = CheckLayerLayout(m, l); !s.ok()) return s;
  return BuildEmbedding(m, l, /*laid_out=*/true);
}

}  // namespace commir::search::plan
