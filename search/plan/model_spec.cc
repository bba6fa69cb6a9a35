#include "search/plan/model_spec.h"

#include <functional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace commir::search::plan {
namespace {

ModelSpec Gpt3(std::string name, int64_t layers, int64_t hidden, int64_t heads,
               int64_t global_batch) {
  ModelSpec m;
  m.name = std::move(name);
  m.architecture = Architecture::kGpt;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn = 4 * hidden;
  m.sequence = 2048;
  m.vocabulary = 50257;  // the GPT-2 BPE vocabulary GPT-3 reuses
  m.global_batch = global_batch;
  return m;
}

ModelSpec Llama3(std::string name, int64_t layers, int64_t hidden, int64_t heads, int64_t ffn,
                 int64_t global_batch) {
  ModelSpec m;
  m.name = std::move(name);
  m.architecture = Architecture::kLlama;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = 8;  // every Llama 3 size uses 8 key/value heads
  m.ffn = ffn;
  m.sequence = 8192;
  m.vocabulary = 128256;
  m.global_batch = global_batch;
  return m;
}

// GPT-3: Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1 (layers,
// d_model; batch sizes 1M, 2M and 3.2M tokens of 2048). Table 2.1 lists 24 heads of 128
// for 1.3B, which does not divide 2048; like Megatron-LM's GPT examples we use 16 heads
// of 128 (the parameter count does not depend on the head count). 13B's d_model is
// printed 5140 there; 40 heads of 128 make 5120, what Megatron-LM and others train.
// Llama 3: Dubey et al. 2024, "The Llama 3 Herd of Models", Table 3 (layers, model
// dimension, FFN dimension, 8 key/value heads, vocabulary 128K = 128,256 in the released
// configs, sequence 8,192; 4M-token batches = 512 sequences of 8,192 for 8B and 70B,
// 16M tokens = 2,048 sequences for 405B's main phase).
const std::vector<ModelSpec>& Presets() {
  static const auto* presets = new std::vector<ModelSpec>{
      Gpt3("gpt3-1.3b", 24, 2048, 16, 512),
      Gpt3("gpt3-13b", 40, 5120, 40, 1024),
      Gpt3("gpt3-175b", 96, 12288, 96, 1536),
      Llama3("llama3-8b", 32, 4096, 32, 14336, 512),
      Llama3("llama3-70b", 80, 8192, 64, 28672, 512),
      Llama3("llama3-405b", 126, 16384, 128, 53248, 2048),
  };
  return *presets;
}

absl::Status SetField(ModelSpec& m, absl::string_view key, absl::string_view value) {
  if (key == "name") {
    m.name = std::string(value);
    return absl::OkStatus();
  }
  if (key == "arch") {
    if (value == "gpt") {
      m.architecture = Architecture::kGpt;
    } else if (value == "llama") {
      m.architecture = Architecture::kLlama;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("arch=", value, ": expected gpt or llama"));
    }
    return absl::OkStatus();
  }
  if (key == "attention") {
    if (value == "flash") {
      m.attention = AttentionKind::kFlash;
    } else if (value == "unfused") {
      m.attention = AttentionKind::kUnfused;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("attention=", value, ": expected flash or unfused"));
    }
    return absl::OkStatus();
  }
  if (key == "dtype") {
    std::optional<ElementType> type = ParseElementType(value);
    if (!type.has_value() || !IsFloatType(*type) || *type == ElementType::kF64) {
      return absl::InvalidArgumentError(
          absl::StrCat("dtype=", value, ": expected bf16, f16 or f32"));
    }
    m.dtype = *type;
    return absl::OkStatus();
  }
  struct Size {
    int64_t ModelSpec::*field;
    int64_t max;
  };
  const absl::flat_hash_map<absl::string_view, Size> sizes = {
      {"layers", {&ModelSpec::layers, kMaxLayers}},
      {"hidden", {&ModelSpec::hidden, kMaxHidden}},
      {"heads", {&ModelSpec::heads, kMaxHeads}},
      {"kv_heads", {&ModelSpec::kv_heads, kMaxHeads}},
      {"ffn", {&ModelSpec::ffn, kMaxFfn}},
      {"seq", {&ModelSpec::sequence, kMaxSequence}},
      {"vocab", {&ModelSpec::vocabulary, kMaxVocabulary}},
      {"global_batch", {&ModelSpec::global_batch, kMaxGlobalBatch}},
  };
  auto it = sizes.find(key);
  if (it == sizes.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown key '", key,
                     "' (expected name, arch, layers, hidden, heads, kv_heads, ffn, seq, vocab, "
                     "global_batch, dtype, attention)"));
  }
  int64_t number = 0;
  if (!absl::SimpleAtoi(value, &number) || number <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(key, "=", value,
                                                   ": expected a positive integer (at most ",
                                                   it->second.max, ")"));
  }
  if (number > it->second.max) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, "=", value, ": too large (at most ", it->second.max, ")"));
  }
  m.*(it->second.field) = number;
  return absl::OkStatus();
}

}  // namespace

int64_t LayerParameters(const ModelSpec& m) {
  const int64_t h = m.hidden;
  const int64_t q = m.heads * m.head_dim();
  const int64_t kv = m.kv_heads * m.head_dim();
  const int64_t attention = h * q + 2 * h * kv + q * h;
  if (m.architecture == Architecture::kGpt) {
    // Biases on q, k, v, the output projection and both MLP matrices; two LayerNorms
    // with scale and bias.
    return attention + (q + 2 * kv + h) + 2 * h * m.ffn + (m.ffn + h) + 4 * h;
  }
  return attention + 3 * h * m.ffn + 2 * h;  // two RMSNorm scales
}

int64_t EmbeddingParameters(const ModelSpec& m) {
  const int64_t table = m.vocabulary * m.hidden;
  if (m.architecture == Architecture::kGpt) {
    return table + m.sequence * m.hidden + 2 * m.hidden;  // positions, final LayerNorm
  }
  return 2 * table + m.hidden;  // input and output tables, final RMSNorm
}

int64_t TotalParameters(const ModelSpec& m) {
  // Validate's bounds keep this below 2^51.
  return m.layers * LayerParameters(m) + EmbeddingParameters(m);
}

double ModelFlopsPerIteration(const ModelSpec& m) {
  const double tokens = static_cast<double>(m.global_batch) * m.sequence;
  const double h = m.hidden;
  const double q = m.heads * m.head_dim();
  const double kv = m.kv_heads * m.head_dim();
  const double mlp_matrices = m.architecture == Architecture::kGpt ? 2 : 3;
  const double layer_matmul_params = h * q + 2 * h * kv + q * h + mlp_matrices * h * m.ffn;
  // Per token and layer, forward: 2 FLOPs per matmul weight, and QK^T plus AV over the
  // whole sequence (2 x 2 x seq x q). The backward costs twice the forward.
  const double layer_forward = 2 * layer_matmul_params + 4.0 * m.sequence * q;
  const double head_forward = 2 * h * m.vocabulary;
  return 3 * tokens * (m.layers * layer_forward + head_forward);
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const ModelSpec& m : Presets()) names.push_back(m.name);
  return names;
}

absl::StatusOr<ModelSpec> Preset(absl::string_view name) {
  for (const ModelSpec& m : Presets()) {
    if (m.name == name) return m;
  }
  return absl::NotFoundError(absl::StrCat("no model preset '", name,
                                          "' (presets: ", absl::StrJoin(PresetNames(), ", "), ")"));
}

absl::Status Validate(const ModelSpec& m) {
  struct Size {
    const char* key;
    int64_t value;
    int64_t max;
  };
  for (const Size& size : {Size{"layers", m.layers, kMaxLayers},
                           Size{"hidden", m.hidden, kMaxHidden},
                           Size{"heads", m.heads, kMaxHeads},
                           Size{"kv_heads", m.kv_heads, kMaxHeads},
                           Size{"ffn", m.ffn, kMaxFfn},
                           Size{"seq", m.sequence, kMaxSequence},
                           Size{"vocab", m.vocabulary, kMaxVocabulary},
                           Size{"global_batch", m.global_batch, kMaxGlobalBatch}}) {
    if (size.value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model: ", size.key, " must be set and positive"));
    }
    if (size.value > size.max) {
      return absl::InvalidArgumentError(absl::StrCat("model: ", size.key, "=", size.value,
                                                     " is too large (at most ", size.max, ")"));
    }
  }
  // Both at most 2^20: the product cannot overflow.
  if (m.global_batch * m.sequence > kMaxTokensPerIteration) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: global_batch x seq = ", m.global_batch * m.sequence,
                     " tokens per iteration is too many (at most ", kMaxTokensPerIteration, ")"));
  }
  if (m.hidden % m.heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: heads (", m.heads, ") must divide hidden (", m.hidden, ")"));
  }
  if (m.heads % m.kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: kv_heads (", m.kv_heads, ") must divide heads (", m.heads, ")"));
  }
  if (m.attention == AttentionKind::kUnfused && m.kv_heads != m.heads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: attention=unfused needs kv_heads = heads (got ", m.kv_heads, " and ", m.heads,
        "): the unfused attention models pre-FlashAttention Megatron-LM, which had no "
        "grouped-query attention"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelSpec> ParseModelSpec(absl::string_view text) {
  ModelSpec m;
  std::vector<absl::string_view> parts = absl::StrSplit(text, ',', absl::SkipWhitespace());
  if (parts.empty()) return absl::InvalidArgumentError("model: empty description");
  size_t first = 0;
  std::string preset_name;
  absl::string_view head = absl::StripAsciiWhitespace(parts[0]);
  if (!absl::StrContains(head, '=')) {
    absl::StatusOr<ModelSpec> preset = Preset(head);
    if (!preset.ok()) return preset.status();
    m = *std::move(preset);
    preset_name = m.name;
    first = 1;
  }
  absl::flat_hash_set<std::string> given;
  // A multi-head preset (kv_heads == heads, as GPT-3's) stays multi-head when only its
  // heads are changed; a grouped-query preset keeps its kv_heads.
  const bool multi_head_preset = !preset_name.empty() && m.kv_heads == m.heads;
  for (size_t i = first; i < parts.size(); ++i) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(absl::StripAsciiWhitespace(parts[i]), absl::MaxSplits('=', 1));
    if (!absl::StrContains(parts[i], '=')) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model: '", parts[i], "' is not key=value (only the first item may name a preset)"));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    // The last of two values would silently win: a typo's duplicate is refused instead.
    if (!given.insert(std::string(key)).second) {
      return absl::InvalidArgumentError(absl::StrCat("model: key '", key, "' is given twice"));
    }
    if (absl::Status s = SetField(m, key, absl::StripAsciiWhitespace(kv.second)); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("model: ", s.message()));
    }
  }
  if (m.kv_heads == 0) m.kv_heads = m.heads;  // unspecified: multi-head attention
  if (multi_head_preset && !given.contains("kv_heads")) m.kv_heads = m.heads;
  if (m.name.empty()) m.name = "custom";
  if (!preset_name.empty() && !given.contains("kv_heads") && m.heads > 0 && m.kv_heads > 0 &&
      m.hidden > 0 && m.hidden % m.heads == 0 && m.heads % m.kv_heads != 0) {
    // The user wrote heads but not kv_heads: say where the kv_heads came from.
    return absl::InvalidArgumentError(absl::StrCat(
        "model: kv_heads (", m.kv_heads, ", ", preset_name, "'s default) must divide heads (",
        m.heads, "): give kv_heads too"));
  }
  if (absl::Status s = Validate(m); !s.ok()) return s;
  return m;
}

std::string FormatModelSpec(const ModelSpec& m) {
  return absl::StrCat(
      "name=", m.name, ",arch=", m.architecture == Architecture::kGpt ? "gpt" : "llama",
      ",layers=", m.layers, ",hidden=", m.hidden, ",heads=", m.heads, ",kv_heads=", m.kv_heads,
      ",ffn=", m.ffn, ",seq=", m.sequence, ",vocab=", m.vocabulary,
      ",global_batch=", m.global_batch, ",dtype=", ElementTypeName(m.dtype),
      m.attention == AttentionKind::kUnfused ? ",attention=unfused" : "");
}

}  // namespace commir::search::plan
