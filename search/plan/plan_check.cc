#include "search/plan/plan_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backend_cpu/cpu_backend.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "commir/op_def.h"
#include "commir/type.h"
#include "commir/verifier.h"
#include "runtime/global_run.h"
#include "runtime/random_inputs.h"
#include "runtime/tensor.h"
#include "search/plan/embedding_program.h"
#include "search/plan/layer_program.h"
#include "search/plan/megatron_layout.h"
#include "search/plan/model_program.h"
#include "search/plan/pipeline_schedule.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/inline.h"
#include "transforms/pipeline.h"
#include "transforms/sharding/spmd_pipeline.h"

namespace commir::search::plan {
namespace {

using runtime::Tensor;

constexpr char kStageFunction[] = "stage";

// ---- The programs --------------------------------------------------------------------

// The layer or head written for one device (the model file's own, or the generator's),
// in f32 whatever the model's dtype: the check compares in f32. Rewritten in memory, so
// the ops keep their places in the file.
void ToF32(Function& f) {
  auto f32 = [](Type t) {
    const bool half = t.is_tensor() && (t.element_type() == ElementType::kBF16 ||
                                        t.element_type() == ElementType::kF16);
    return half ? t.WithElementType(ElementType::kF32) : t;
  };
  for (int i = 0; i < static_cast<int>(f.arg_types().size()); ++i) {
    f.SetArgType(i, f32(f.arg_types()[i]));
  }
  for (int i = 0; i < static_cast<int>(f.result_types().size()); ++i) {
    f.SetResultType(i, f32(f.result_types()[i]));
  }
  f.RefreshArgumentTypes();
  WalkOps(f.body(), [&](Operation* op) {
    for (int i = 0; i < op->num_results(); ++i) op->result(i)->set_type(f32(op->result(i)->type()));
    // A number literal takes its op's type (the loss's 1 / tokens).
    for (int i = 0; i < op->num_operands(); ++i) {
      Value* operand = op->operand(i);
      if (operand->is_literal()) operand->set_type(f32(operand->type()));
    }
    for (int r = 0; r < op->num_regions(); ++r) {
      Block* block = op->region(r);
      for (int i = 0; i < block->num_arguments(); ++i) {
        block->argument(i)->set_type(f32(block->argument(i)->type()));
      }
    }
  });
}

// A model chunk as one module: @layer, @head (when the chunk ends the model) and
// @stage(x, layer weights..., head weights) calling them (model_program.h's
// AddLayerChain), inlined, differentiated and partitioned as layer_cost partitions a
// layer (kPartitionPipeline: the gradients' dp buckets are the plan's, not the
// program's); @stage and @stage_grad are what runs. `layer_program` and `head_program`
// are laid-out modules (megatron_layout.h), copied, not changed.
struct StageProgram {
  std::unique_ptr<Module> module;
  const Function* forward = nullptr;
  const Function* gradient = nullptr;
};

absl::StatusOr<StageProgram> BuildStage(const Module& layer_program, const Module& head_program,
                                        const Module& embed_program, int64_t first_layer,
                                        int64_t layers, bool head, bool embed, bool tied,
                                        Recompute recompute) {
  if (layers == 0 && !head) {
    return absl::InvalidArgumentError("a pipeline chunk has no layers and no head");
  }
  StageProgram stage;
  stage.module = layer_program.Clone();
  const Function* layer_fn = stage.module->FindFunction(kLayerFunction);
  if (layer_fn == nullptr) return absl::InternalError("no @layer in the laid-out program");
  const Function* head_fn = nullptr;
  if (head) {
    const Function* original = head_program.FindFunction(kHeadFunction);
    if (original == nullptr) return absl::InternalError("no @head in the laid-out program");
    // Onto the layer's mesh: the head's program declares the same one.
    head_fn = stage.module->AddFunction(original->Clone());
    if (!stage.module->ResolveMeshes()) {
      return absl::InternalError("the laid-out layer and head are on different meshes");
    }
  }
  const Function* embed_fn = nullptr;
  if (embed) {
    const Function* original = embed_program.FindFunction(kEmbedFunction);
    if (original == nullptr) return absl::InternalError("no @embed in the laid-out program");
    embed_fn = stage.module->AddFunction(original->Clone());
    if (!stage.module->ResolveMeshes()) {
      return absl::InternalError("the laid-out layer and embedding are on different meshes");
    }
  }
  // A tied head in a chunk that also looks the ids up reads the embedding's table
  // argument; in a chunk of its own it takes the table as an argument of its own.
  absl::StatusOr<Function*> chain =
      AddLayerChain(*stage.module, kStageFunction, *layer_fn, first_layer, layers, head_fn,
                    embed_fn, /*tied=*/tied && head_fn != nullptr && embed_fn != nullptr);
  if (!chain.ok()) return chain.status();

  // What parsing checked when the stage was text.
  if (absl::Status s = VerifyModule(*stage.module); !s.ok()) return s;
  DiagnosticEngine diagnostics;
  AutodiffPassOptions autodiff;
  autodiff.func = kStageFunction;
  autodiff.seed = AutodiffPassOptions::Seed::kCotangents;
  if (recompute == Recompute::kFull) autodiff.remat = RematPolicy::kBlocks;
  const Pipeline pipeline =
      Pipeline{{PassStep::Of<InlinePass>(), PassStep::Of<AutodiffPass>(autodiff)}}.Then(
          sharding::PartitionPipeline());
  if (absl::Status s = RunPipeline(*stage.module, pipeline, {.diagnostics = &diagnostics});
      !s.ok()) {
    return s;
  }
  stage.forward = stage.module->FindFunction(kStageFunction);
  stage.gradient = stage.module->FindFunction(absl::StrCat(kStageFunction, "_grad"));
  if (stage.forward == nullptr || stage.gradient == nullptr) {
    return absl::InternalError("the stage's forward or gradient function is missing");
  }
  return stage;
}

// ---- Tensors ---------------------------------------------------------------------------

// Every tensor's values come from runtime/random_inputs.h (the values commir-run draws):
// uniform in [-1, 1) from (seed, stream, index), so they depend only on where a tensor
// is, not on the order tensors are made. The streams: 1 the input, 2 the output's
// cotangent, 1000 on the weights in order.
double Uniform(uint64_t seed, uint64_t stream, int64_t index) {
  return runtime::RandomUniformValue(seed, static_cast<int>(stream), index);
}

// Small weights so that the softmax stays well-conditioned: norm gains near 1, biases
// near 0, matrices uniform with a 1/sqrt(fan-in) scale.
Tensor MakeWeight(const std::string& name, const std::vector<int64_t>& dims, uint64_t seed,
                  uint64_t stream) {
  Tensor t(ElementType::kF32, dims);
  float* data = t.data<float>();
  const double scale = dims.size() >= 2 ? 1.0 / std::sqrt(static_cast<double>(dims[0])) : 0.1;
  const double offset = dims.size() == 1 && !name.empty() && name[0] == 'g' ? 1.0 : 0.0;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    data[i] = static_cast<float>(offset + scale * Uniform(seed, stream, i));
  }
  return t;
}

int64_t RowElements(const Tensor& t) { return t.dim(0) == 0 ? 0 : t.num_elements() / t.dim(0); }

// Rows start .. start + count of `t` (f32, or the integer ids and labels).
Tensor SliceBatch(const Tensor& t, int64_t start, int64_t count) {
  std::vector<int64_t> dims = t.shape();
  dims[0] = count;
  Tensor out(t.element_type(), dims);
  const int64_t row = RowElements(t) * ElementTypeByteWidth(t.element_type());
  std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + start * row, count * row);
  return out;
}

// Token ids (or labels) [rows, seq]: uniform over the model's own vocabulary.
Tensor MakeTokens(const std::vector<int64_t>& dims, int64_t vocabulary, uint64_t seed,
                  uint64_t stream) {
  Tensor t(kTokenIdType, dims);
  int32_t* data = t.data<int32_t>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const double u = (Uniform(seed, stream, i) + 1) / 2;  // [0, 1)
    data[i] = static_cast<int32_t>(std::min<int64_t>(vocabulary - 1, u * vocabulary));
  }
  return t;
}

Tensor Scalar(float value) {
  Tensor t(ElementType::kF32, {});
  t.data<float>()[0] = value;
  return t;
}

void AddInto(Tensor& acc, const Tensor& t) {
  float* a = acc.data<float>();
  const float* b = t.data<float>();
  for (int64_t i = 0; i < acc.num_elements(); ++i) a[i] += b[i];
}

Tensor ZerosLike(const Tensor& t) { return Tensor(ElementType::kF32, t.shape()); }

absl::Status CheckShape(const Tensor& actual, const Tensor& expected, absl::string_view what) {
  if (actual.element_type() != ElementType::kF32 || actual.shape() != expected.shape()) {
    return absl::InternalError(absl::StrCat(what, " has shape [",
                                            absl::StrJoin(actual.shape(), ", "), "], expected [",
                                            absl::StrJoin(expected.shape(), ", "), "]"));
  }
  return absl::OkStatus();
}

// ---- The model's weights and the reference ---------------------------------------------

struct Weights {
  std::vector<Tensor> embed;                // in @embed's argument order (after the ids)
  std::vector<std::vector<Tensor>> layers;  // per layer, in @layer's argument order
  std::vector<Tensor> head;                 // in @head's argument order, less the labels
  // Per head weight: the index of the embedding weight it is tied to (GPT's table; its
  // `head` entry is then empty), or -1.
  std::vector<int> head_tied;

  const Tensor& Head(size_t i) const { return head_tied[i] >= 0 ? embed[head_tied[i]] : head[i]; }
};

struct Gradients {
  // The loss over the global batch: each micro-batch's (a mean over its tokens) times
  // its share of the batch, summed; as the forward functions give it and as the gradient
  // functions re-run it.
  float forward_loss = 0;
  float loss = 0;
  std::vector<Tensor> embed;
  std::vector<std::vector<Tensor>> layers;
  std::vector<Tensor> head;
};

// The weights from the reference module's @embed, @layer and @head signatures (global
// shapes). With `tie`, a head weight with the name and type of an embedding weight is
// that weight (GPT's table, as model_program.h ties them).
absl::StatusOr<Weights> MakeWeights(const Module& reference, int64_t layers, uint64_t seed,
                                    bool tie) {
  const Function* layer = reference.FindFunction(kLayerFunction);
  const Function* head = reference.FindFunction(kHeadFunction);
  const Function* embed = reference.FindFunction(kEmbedFunction);
  if (layer == nullptr || head == nullptr || embed == nullptr) {
    return absl::InternalError("@embed, @layer or @head missing");
  }
  Weights w;
  uint64_t stream = 1000;
  for (int i = 1; i < static_cast<int>(embed->arg_types().size()); ++i) {
    w.embed.push_back(
        MakeWeight(embed->body()->argument(i)->name(), embed->arg_types()[i].dims(), seed, stream++));
  }
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<Tensor> tensors;
    for (int i = 1; i < static_cast<int>(layer->arg_types().size()); ++i) {
      tensors.push_back(MakeWeight(layer->body()->argument(i)->name(), layer->arg_types()[i].dims(),
                                   seed, stream++));
    }
    w.layers.push_back(std::move(tensors));
  }
  for (int i = 1; i + 1 < static_cast<int>(head->arg_types().size()); ++i) {  // not the labels
    const std::string& name = head->body()->argument(i)->name();
    int tied = -1;
    for (int e = 1; tie && e < static_cast<int>(embed->arg_types().size()); ++e) {
      if (embed->body()->argument(e)->name() == name &&
          embed->arg_types()[e].dims() == head->arg_types()[i].dims()) {
        tied = e - 1;
      }
    }
    w.head_tied.push_back(tied);
    w.head.push_back(tied >= 0 ? Tensor()
                               : MakeWeight(name, head->arg_types()[i].dims(), seed, stream++));
  }
  return w;
}

// A chunk's head weight i is an argument of its own unless it is tied to the embedding's
// weight and the chunk looks the ids up too (then it reads that argument).
bool HeadArgument(const Weights& w, size_t i, bool embed, bool tied) {
  return !(tied && embed && w.head_tied[i] >= 0);
}

// The arguments of a chunk's functions: its input (the ids on the first), the
// embedding's weights on the first, its layers' weights, then on the last the head's and
// the labels.
std::vector<Tensor> StageInputs(const Tensor& x, const Weights& w, int64_t first_layer,
                                int64_t layers, bool head, bool embed, bool tied,
                                const Tensor* labels) {
  std::vector<Tensor> in = {x};
  if (embed) {
    for (const Tensor& t : w.embed) in.push_back(t);
  }
  for (int64_t l = first_layer; l < first_layer + layers; ++l) {
    for (const Tensor& t : w.layers[l]) in.push_back(t);
  }
  if (head) {
    for (size_t i = 0; i < w.head.size(); ++i) {
      if (HeadArgument(w, i, embed, tied)) in.push_back(w.Head(i));
    }
    in.push_back(*labels);
  }
  return in;
}

absl::StatusOr<std::vector<Tensor>> Run(const Function& f, const std::vector<Tensor>& inputs,
                                        absl::string_view what) {
  cpu::CpuBackend backend;
  absl::StatusOr<std::vector<Tensor>> out = runtime::RunWithGlobalTensors(f, backend, inputs);
  if (!out.ok()) {
    return absl::Status(out.status().code(), absl::StrCat(what, ": ", out.status().message()));
  }
  return out;
}

// Splits @stage_grad's results (y, dx unless the chunk starts with the embedding, whose
// ids have none, d weights...) into `into` (accumulating the weight gradients of the
// embedding, of layers first_layer.. and of the head; a tied head weight's gradient into
// the embedding weight's, unless `untie` keeps it apart).
absl::Status TakeGradients(std::vector<Tensor>& results, const Weights& w, int64_t first_layer,
                           int64_t layers, bool head, bool embed, bool tied, bool untie,
                           bool accumulate, Gradients& into, Tensor& input_grad) {
  size_t expected = embed ? 1 + w.embed.size() : 2;
  for (int64_t l = first_layer; l < first_layer + layers; ++l) expected += w.layers[l].size();
  for (size_t i = 0; head && i < w.head.size(); ++i) expected += HeadArgument(w, i, embed, tied);
  if (results.size() != expected) {
    return absl::InternalError(absl::StrCat("the gradient function returned ", results.size(),
                                            " results, not ", expected));
  }
  size_t next = 1;
  if (!embed) input_grad = std::move(results[next++]);
  auto take = [&](const Tensor& weight, Tensor& acc) -> absl::Status {
    Tensor& g = results[next++];
    if (absl::Status s = CheckShape(g, weight, "a weight gradient"); !s.ok()) return s;
    if (accumulate) AddInto(acc, g);
    return absl::OkStatus();
  };
  if (embed) {
    for (size_t i = 0; i < w.embed.size(); ++i) {
      if (absl::Status s = take(w.embed[i], into.embed[i]); !s.ok()) return s;
    }
  }
  for (int64_t l = first_layer; l < first_layer + layers; ++l) {
    for (size_t i = 0; i < w.layers[l].size(); ++i) {
      if (absl::Status s = take(w.layers[l][i], into.layers[l][i]); !s.ok()) return s;
    }
  }
  if (head) {
    for (size_t i = 0; i < w.head.size(); ++i) {
      if (!HeadArgument(w, i, embed, tied)) continue;
      const int table = w.head_tied[i];
      Tensor& acc = table >= 0 && !untie ? into.embed[table] : into.head[i];
      if (table >= 0 && untie && acc.shape() != w.Head(i).shape()) acc = ZerosLike(w.Head(i));
      if (absl::Status s = take(w.Head(i), acc); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

Gradients ZeroGradients(const Weights& w) {
  Gradients g;
  for (const Tensor& t : w.embed) g.embed.push_back(ZerosLike(t));
  for (const std::vector<Tensor>& layer : w.layers) {
    std::vector<Tensor> zeros;
    for (const Tensor& t : layer) zeros.push_back(ZerosLike(t));
    g.layers.push_back(std::move(zeros));
  }
  for (const Tensor& t : w.head) g.head.push_back(ZerosLike(t));
  return g;
}

// ---- The pipelined run -------------------------------------------------------------------

struct Chunk {
  int64_t first_layer = 0;
  int64_t layers = 0;
  bool head = false;
  bool embed = false;  // the first chunk looks the ids up
  bool tied = false;   // GPT's head reads the embedding's table
  bool untie = false;  // PlanCheckFault::kUntieHead
  Recompute recompute = Recompute::kNone;  // its rank's
  const StageProgram* program = nullptr;
};

// Per (chunk, micro-batch): what the 1F1B steps hand each other.
struct Slot {
  Tensor input;      // the chunk's input, kept from its forward for its backward
  Tensor output;     // its forward output, until the next chunk takes it
  Tensor cotangent;  // its output's cotangent, from the next chunk's backward
  bool forward_done = false;
  bool has_cotangent = false;
};

// One data-parallel replica's iteration: micro-batches of the ids' and labels' rows, mb
// at a time, in each rank's 1F1B order; adds the replica's share of the loss and
// accumulates its weight gradients. Each micro-batch's loss (a mean over its tokens) is
// seeded with `loss_share`, its share of the global batch (mb / global batch), so that
// the gradients summed over micro-batches and replicas are the global mean's, as
// Megatron-LM divides each micro-batch's loss by the micro-batches and averages over dp.
absl::Status RunReplica(const std::vector<Chunk>& chunks, int64_t pp, int64_t v,
                        PipelineOrder order, const Tensor& ids, const Tensor& labels,
                        float loss_share, int64_t micro_batch, const Weights& w,
                        bool drop_last_gradient, Gradients& grads,
                        std::vector<std::string>* schedules) {
  const int64_t c_count = static_cast<int64_t>(chunks.size());
  const int64_t m = ids.dim(0) / micro_batch;
  std::vector<std::vector<Slot>> slots(c_count, std::vector<Slot>(m));
  std::vector<Tensor> micro_labels;
  for (int64_t j = 0; j < m; ++j) {
    slots.back()[j].cotangent = Scalar(loss_share);
    slots.back()[j].has_cotangent = true;
    micro_labels.push_back(SliceBatch(labels, j * micro_batch, micro_batch));
  }
  std::vector<std::vector<PipelineStep>> steps(pp);
  for (int64_t r = 0; r < pp; ++r) {
    steps[r] = order == PipelineOrder::kOneFOneB ? OneFOneBSchedule(pp, v, m, r)
                                                 : AllForwardAllBackwardSchedule(pp, v, m, r);
    if (schedules != nullptr) schedules->push_back(DescribeSchedule(steps[r], v));
  }
  std::vector<size_t> position(pp, 0);
  auto ready = [&](const PipelineStep& s) {
    if (s.forward) return s.chunk == 0 || slots[s.chunk - 1][s.microbatch].forward_done;
    return slots[s.chunk][s.microbatch].forward_done && slots[s.chunk][s.microbatch].has_cotangent;
  };
  auto execute = [&](const PipelineStep& s) -> absl::Status {
    const Chunk& chunk = chunks[s.chunk];
    Slot& slot = slots[s.chunk][s.microbatch];
    const std::string what = absl::StrCat(s.forward ? "forward" : "backward", " of chunk ", s.chunk,
                                          ", micro-batch ", s.microbatch);
    if (s.forward) {
      slot.input = s.chunk == 0 ? SliceBatch(ids, s.microbatch * micro_batch, micro_batch)
                                : std::move(slots[s.chunk - 1][s.microbatch].output);
      absl::StatusOr<std::vector<Tensor>> out =
          Run(*chunk.program->forward,
              StageInputs(slot.input, w, chunk.first_layer, chunk.layers, chunk.head, chunk.embed,
                          chunk.tied,
                          &micro_labels[s.microbatch]),
              what);
      if (!out.ok()) return out.status();
      if (out->size() != 1) return absl::InternalError(absl::StrCat(what, ": not one result"));
      slot.output = std::move((*out)[0]);
      if (s.chunk == c_count - 1) grads.forward_loss += loss_share * slot.output.data<float>()[0];
      slot.forward_done = true;
      return absl::OkStatus();
    }
    std::vector<Tensor> inputs =
        StageInputs(slot.input, w, chunk.first_layer, chunk.layers, chunk.head, chunk.embed,
                    chunk.tied, &micro_labels[s.microbatch]);
    inputs.push_back(std::move(slot.cotangent));
    absl::StatusOr<std::vector<Tensor>> out = Run(*chunk.program->gradient, inputs, what);
    if (!out.ok()) return out.status();
    const bool accumulate = !(drop_last_gradient && s.microbatch == m - 1);
    Tensor input_grad;
    if (absl::Status st =
            TakeGradients(*out, w, chunk.first_layer, chunk.layers, chunk.head, chunk.embed,
                          chunk.tied, chunk.untie, accumulate, grads, input_grad);
        !st.ok()) {
      return absl::Status(st.code(), absl::StrCat(what, ": ", st.message()));
    }
    if (s.chunk == c_count - 1) grads.loss += loss_share * (*out)[0].data<float>()[0];
    if (s.chunk > 0) {
      Slot& previous = slots[s.chunk - 1][s.microbatch];
      previous.cotangent = std::move(input_grad);
      previous.has_cotangent = true;
    }
    slot.input = Tensor();
    return absl::OkStatus();
  };
  // Round-robin over the ranks, one step each per round when its inputs have arrived
  // (as blocking receives would have it); a round without progress is a schedule that
  // could never finish.
  for (;;) {
    bool done = true, progressed = false;
    for (int64_t r = 0; r < pp; ++r) {
      if (position[r] >= steps[r].size()) continue;
      done = false;
      const PipelineStep& s = steps[r][position[r]];
      if (!ready(s)) continue;
      if (absl::Status st = execute(s); !st.ok()) return st;
      ++position[r];
      progressed = true;
    }
    if (done) return absl::OkStatus();
    if (!progressed) return absl::InternalError("the pipeline schedule stalls");
  }
}

// In double: a preset's count (or a typo's) must not overflow on the way to the refusal.
double CheckElements(const ModelSpec& m) {
  const double tokens = static_cast<double>(m.global_batch) * m.sequence;
  return static_cast<double>(m.layers) * LayerParameters(m) +
         static_cast<double>(m.hidden) * (2 + m.vocabulary) +
         tokens * (static_cast<double>(m.hidden) * (m.layers + 2) + m.ffn + m.vocabulary) +
         tokens * m.heads * m.sequence;
}

}  // namespace

absl::StatusOr<PlanCheckResult> CheckPlanOnCpuMesh(const ModelSpec& given, const ParallelPlan& plan,
                                                   const PlanCheckOptions& options) {
  if (absl::Status s = CheckPlan(given, plan); !s.ok()) return s;
  const bool own_functions = options.functions != nullptr;
  if (own_functions && (options.functions->FindFunction(options.layer_name) == nullptr ||
                        options.functions->FindFunction(options.head_name) == nullptr)) {
    return absl::InvalidArgumentError("the check takes a model file's layer and head together");
  }
  if (own_functions) {
    // The loss seeds the backward: a head that ends in logits (a file written before the
    // head had its loss) has no seed to give.
    const Function& head = *options.functions->FindFunction(options.head_name);
    const bool has_loss = !head.arg_types().empty() && head.result_types().size() == 1 &&
                          head.result_types()[0].is_tensor() &&
                          head.result_types()[0].dims().empty() &&
                          head.arg_types().back().is_tensor() &&
                          !IsFloatType(head.arg_types().back().element_type());
    if (!has_loss) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.file.empty() ? "" : absl::StrCat(options.file, ":", head.loc().line, ":",
                                                   head.loc().col, ": "),
          "the check runs the loss: the head @", head.name(),
          " must take the labels last and return the loss (a scalar), as --emit-model writes it"));
    }
  }
  if (own_functions && plan.micro_batch != options.micro_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model file is written for micro-batch ", options.micro_batch,
                     ": the plan's mb=", plan.micro_batch, " cannot run it"));
  }
  ModelSpec model = given;
  model.dtype = ElementType::kF32;
  // Padded for the plan's tp, so that the reference (tp = 1) pads to the same width.
  model.vocabulary = PaddedVocabulary(given.vocabulary, plan.tp);
  if (plan.gpus() > options.max_devices) {
    return absl::InvalidArgumentError(absl::StrCat("the cpu check runs at most ",
                                                   options.max_devices, " devices; the plan uses ",
                                                   plan.gpus()));
  }
  if (const double elements = CheckElements(model); elements > options.max_elements) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is too big for the cpu check: %.0f elements (weights and activations over the "
        "global batch) exceed the limit of %d",
        given.name.empty() ? "the model" : given.name, elements, options.max_elements));
  }

  const int64_t pp = plan.pp, v = plan.virtual_stages, chunk_count = pp * v;
  // GPT's head is the embedding's table transposed (model_program.h ties them); a head
  // weight is tied where its name and shape are the table's (MakeWeights).
  const bool tie = model.architecture == Architecture::kGpt;
  const std::vector<int64_t> chunk_layers = ChunkLayers(model, plan);
  if (std::find(chunk_layers.begin(), chunk_layers.end(), 0) != chunk_layers.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the cpu check runs a layer in every pipeline chunk; plan ", DescribePlan(plan),
        " leaves an end chunk with none"));
  }
  std::vector<Chunk> chunks(chunk_count);
  for (int64_t c = 0, first = 0; c < chunk_count; ++c) {
    chunks[c].first_layer = first;
    chunks[c].layers = chunk_layers[c];
    chunks[c].head = c == chunk_count - 1;
    chunks[c].embed = c == 0;
    chunks[c].recompute = plan.RecomputeOf(c % pp);  // chunk c lives on rank c % pp
    chunks[c].tied = tie && options.fault != PlanCheckFault::kUntieHead;
    chunks[c].untie = tie && options.fault == PlanCheckFault::kUntieHead;
    first += chunk_layers[c];
  }
  if (options.fault == PlanCheckFault::kSwapFirstStages) {
    if (chunk_count < 2 || chunks[0].layers != chunks[1].layers) {
      return absl::FailedPreconditionError(
          "swapping the first stages needs two chunks of the same layer count");
    }
    std::swap(chunks[0].first_layer, chunks[1].first_layer);
  }

  // The model file's layer and head, copied in f32 (rewritten in memory: their ops keep
  // the file's positions, so errors point into the file).
  std::unique_ptr<Function> own_layer, own_head;
  if (own_functions) {
    own_layer = options.functions->FindFunction(options.layer_name)->Clone();
    own_head = options.functions->FindFunction(options.head_name)->Clone();
    ToF32(*own_layer);
    ToF32(*own_head);
  }
  // The single-device embedding, layer and head laid out for a layout: the model file's
  // own layer and head (written for the plan's micro-batch), or the generator's for
  // `batch`; the embedding always the generator's (a model file's is not read).
  enum class Part { kEmbed, kLayer, kHead };
  auto laid_out = [&](Part part, const LayerLayout& layout,
                      int64_t padded_vocabulary) -> absl::StatusOr<std::unique_ptr<Module>> {
    std::unique_ptr<Module> generated;
    const Function* source = nullptr;
    const bool own = own_functions && part != Part::kEmbed;
    if (own) {
      source = (part == Part::kHead ? own_head : own_layer).get();
    } else {
      ModelSpec unpadded = model;
      unpadded.vocabulary = given.vocabulary;
      absl::StatusOr<std::unique_ptr<Module>> f =
          part == Part::kHead    ? SingleDeviceHead(unpadded, layout.micro_batch)
          : part == Part::kEmbed ? SingleDeviceEmbedding(unpadded, layout.micro_batch)
                                 : SingleDeviceLayer(unpadded, layout.micro_batch);
      if (!f.ok()) return f.status();
      generated = *std::move(f);
      source = generated->functions()[0];  // f32 already: `model` is
    }
    MegatronLayoutOptions o;
    o.layout = layout;
    o.vocabulary = part == Part::kLayer ? 0 : given.vocabulary;
    o.padded_vocabulary = padded_vocabulary;
    o.name = part == Part::kHead ? kHeadFunction : part == Part::kEmbed ? kEmbedFunction
                                                                        : kLayerFunction;
    if (own) o.file = options.file;
    return MegatronLayoutModule(*source, o);
  };

  // The reference: every layer, then the head, on one device; over the whole global batch
  // in one call, or (a model file's functions are written for one micro-batch) over it
  // a micro-batch at a time with the weight gradients summed.
  const int64_t reference_batch = own_functions ? plan.micro_batch : model.global_batch;
  const LayerLayout reference_layout{1, 1, false, reference_batch};
  absl::StatusOr<StageProgram> reference = [&]() -> absl::StatusOr<StageProgram> {
    absl::StatusOr<std::unique_ptr<Module>> layer =
        laid_out(Part::kLayer, reference_layout, model.vocabulary);
    if (!layer.ok()) return layer.status();
    absl::StatusOr<std::unique_ptr<Module>> head =
        laid_out(Part::kHead, reference_layout, model.vocabulary);
    if (!head.ok()) return head.status();
    absl::StatusOr<std::unique_ptr<Module>> embed =
        laid_out(Part::kEmbed, reference_layout, model.vocabulary);
    if (!embed.ok()) return embed.status();
    return BuildStage(**layer, **head, **embed, 0, model.layers, true, true, tie,
                      Recompute::kNone);
  }();
  if (!reference.ok()) {
    return absl::Status(reference.status().code(),
                        absl::StrCat("the reference program: ", reference.status().message()));
  }
  absl::StatusOr<Weights> weights =
      MakeWeights(*reference->module, model.layers, options.seed, tie);
  if (!weights.ok()) return weights.status();
  // Random token ids and labels over the model's own vocabulary (never a padded row).
  const Tensor ids = MakeTokens({model.global_batch, model.sequence}, given.vocabulary,
                                options.seed, 1);
  const Tensor labels = MakeTokens({model.global_batch, model.sequence}, given.vocabulary,
                                   options.seed, 2);

  // The loss is the seed of the backward: each reference call's mean loss weighted by
  // its share of the global batch (1 when it takes the whole batch at once).
  const float reference_share =
      static_cast<float>(reference_batch) / static_cast<float>(model.global_batch);
  Gradients expected = ZeroGradients(*weights);
  for (int64_t start = 0; start < model.global_batch; start += reference_batch) {
    const Tensor batch_labels = SliceBatch(labels, start, reference_batch);
    std::vector<Tensor> inputs = StageInputs(SliceBatch(ids, start, reference_batch), *weights,
                                             0, model.layers, true, true, tie, &batch_labels);
    absl::StatusOr<std::vector<Tensor>> forward =
        Run(*reference->forward, inputs, "the reference's forward");
    if (!forward.ok()) return forward.status();
    expected.forward_loss += reference_share * (*forward)[0].data<float>()[0];
    inputs.push_back(Scalar(reference_share));
    absl::StatusOr<std::vector<Tensor>> out = Run(*reference->gradient, inputs, "the reference");
    if (!out.ok()) return out.status();
    expected.loss += reference_share * (*out)[0].data<float>()[0];
    Tensor no_input_grad;
    if (absl::Status s = TakeGradients(*out, *weights, 0, model.layers, true, true, tie,
                                       /*untie=*/false, true, expected, no_input_grad);
        !s.ok()) {
      return s;
    }
  }

  // The plan's chunk programs, one per distinct (layers, head, recomputation).
  const LayerLayout layout{plan.tp, plan.cp, plan.sequence_parallel, plan.micro_batch};
  absl::StatusOr<std::unique_ptr<Module>> layer_program = laid_out(Part::kLayer, layout, 0);
  if (!layer_program.ok()) return layer_program.status();
  absl::StatusOr<std::unique_ptr<Module>> head_program = laid_out(Part::kHead, layout, 0);
  if (!head_program.ok()) return head_program.status();
  absl::StatusOr<std::unique_ptr<Module>> embed_program = laid_out(Part::kEmbed, layout, 0);
  if (!embed_program.ok()) return embed_program.status();
  std::vector<std::unique_ptr<StageProgram>> programs;
  for (size_t c = 0; c < chunks.size(); ++c) {
    for (size_t earlier = 0; earlier < c; ++earlier) {
      if (chunks[earlier].layers == chunks[c].layers && chunks[earlier].head == chunks[c].head &&
          chunks[earlier].embed == chunks[c].embed && chunks[earlier].tied == chunks[c].tied &&
          chunks[earlier].recompute == chunks[c].recompute) {
        chunks[c].program = chunks[earlier].program;
        break;
      }
    }
    if (chunks[c].program != nullptr) continue;
    absl::StatusOr<StageProgram> built =
        BuildStage(**layer_program, **head_program, **embed_program, chunks[c].first_layer,
                   chunks[c].layers, chunks[c].head, chunks[c].embed, chunks[c].tied,
                   chunks[c].recompute);
    if (!built.ok()) {
      return absl::Status(built.status().code(),
                          absl::StrCat("the program of a stage with ", chunks[c].layers,
                                       " layers: ", built.status().message()));
    }
    programs.push_back(std::make_unique<StageProgram>(*std::move(built)));
    chunks[c].program = programs.back().get();
  }
  PlanCheckResult result;
  for (const std::unique_ptr<StageProgram>& p : programs) {
    WalkOps(p->gradient->body(), [&](Operation* op) {
      if (op->attrs().Has(kRematAttr)) ++result.recomputed_ops;
    });
  }

  // Each data-parallel replica on its rows; gradients summed over replicas in order.
  const int64_t rows = model.global_batch / plan.dp;
  const float micro_share =
      static_cast<float>(plan.micro_batch) / static_cast<float>(model.global_batch);
  Gradients actual = ZeroGradients(*weights);
  for (int64_t r = 0; r < plan.dp; ++r) {
    Gradients replica = ZeroGradients(*weights);
    absl::Status s = RunReplica(chunks, pp, v, options.order, SliceBatch(ids, r * rows, rows),
                                SliceBatch(labels, r * rows, rows), micro_share, plan.micro_batch,
                                *weights,
                                options.fault == PlanCheckFault::kDropMicrobatchGradient && r == 0,
                                replica, r == 0 ? &result.rank_schedules : nullptr);
    if (!s.ok()) return s;
    actual.forward_loss += replica.forward_loss;
    actual.loss += replica.loss;
    for (size_t i = 0; i < actual.embed.size(); ++i) AddInto(actual.embed[i], replica.embed[i]);
    for (size_t l = 0; l < actual.layers.size(); ++l) {
      for (size_t i = 0; i < actual.layers[l].size(); ++i) {
        AddInto(actual.layers[l][i], replica.layers[l][i]);
      }
    }
    for (size_t i = 0; i < actual.head.size(); ++i) {
      // A tied weight's gradient is in the embedding's (or, untied by the fault, kept
      // apart and not compared).
      if (weights->head_tied[i] < 0) AddInto(actual.head[i], replica.head[i]);
    }
  }

  result.tolerance = options.tolerance;
  result.devices = plan.gpus();
  result.microbatches = Microbatches(model, plan);
  result.chunks = chunk_count;
  auto group = [&](const std::string& name, const std::vector<Tensor>& a,
                   const std::vector<Tensor>& e) {
    std::vector<const Tensor*> pa, pe;
    for (const Tensor& t : a) pa.push_back(&t);
    for (const Tensor& t : e) pe.push_back(&t);
    result.groups.push_back(CompareTensorGroup(name, pa, pe, options.tolerance));
    if (options.keep_actual) {
      for (const Tensor& t : a) {
        result.actual.emplace_back(t.data<float>(), t.data<float>() + t.num_elements());
      }
    }
  };
  group("loss", {Scalar(actual.forward_loss)}, {Scalar(expected.forward_loss)});
  group("loss (backward's re-run)", {Scalar(actual.loss)}, {Scalar(expected.loss)});
  group("embedding weight gradients", actual.embed, expected.embed);
  for (size_t l = 0; l < actual.layers.size(); ++l) {
    group(absl::StrCat("layer ", l, " weight gradients"), actual.layers[l], expected.layers[l]);
  }
  std::vector<Tensor> actual_head, expected_head;  // the head's own weights
  for (size_t i = 0; i < actual.head.size(); ++i) {
    if (weights->head_tied[i] >= 0) continue;
    actual_head.push_back(std::move(actual.head[i]));
    expected_head.push_back(std::move(expected.head[i]));
  }
  group("head weight gradients", actual_head, expected_head);
  result.pass = std::all_of(result.groups.begin(), result.groups.end(),
                            [](const TensorGroupCheck& g) { return g.pass; });
  return result;
}

std::string FormatPlanCheck(const PlanCheckResult& result, const ParallelPlan& plan) {
  std::string out;
  for (const TensorGroupCheck& g : result.groups) {
    absl::StrAppendFormat(&out, "%-26s %2d tensors  max|ref|=%.2e  max_abs=%.2e  max_rel=%.2e  %s%s\n",
                          g.name, g.tensors, g.max_reference, g.max_abs_error, g.max_rel_error,
                          g.pass ? "PASS" : "FAIL", g.problem.empty() ? "" : ": " + g.problem);
  }
  auto count = [](int64_t n, absl::string_view one, absl::string_view many) {
    return absl::StrCat(n, " ", n == 1 ? one : many);
  };
  // One device runs the reference's own program (micro-batched): matching it shows
  // little, and the verdict says so.
  const bool trivial = result.devices == 1;
  absl::StrAppendFormat(&out,
                        "%s: %s on the cpu mesh (%s, %s, %s per replica) %s one device%s "
                        "(f32, tolerance %.0e)\n",
                        result.pass ? "PASS" : "FAIL", DescribePlan(plan),
                        count(result.devices, "device", "devices"),
                        count(result.chunks, "model chunk", "model chunks"),
                        count(result.microbatches, "micro-batch", "micro-batches"),
                        result.pass ? "matches" : "does not match",
                        !trivial      ? ""
                        : result.pass ? " trivially (the plan is 1 device: the reference program)"
                                      : " (the plan is 1 device: the reference program)",
                        result.tolerance);
  return out;
}

// ---- Comparison ---------------------------------------------------------------------------

TensorGroupCheck CompareTensorGroup(const std::string& name,
                                    const std::vector<const runtime::Tensor*>& actual,
                                    const std::vector<const runtime::Tensor*>& expected,
                                    double tolerance) {
  TensorGroupCheck g;
  g.name = name;
  g.tensors = static_cast<int64_t>(actual.size());
  bool finite = true;
  for (size_t t = 0; t < actual.size(); ++t) {
    const float* a = actual[t]->data<float>();
    const float* e = expected[t]->data<float>();
    g.elements += actual[t]->num_elements();
    double abs_error = 0, reference = 0;
    for (int64_t i = 0; i < actual[t]->num_elements(); ++i) {
      if (!std::isfinite(a[i]) || !std::isfinite(e[i])) finite = false;
      abs_error = std::max(abs_error, std::fabs(static_cast<double>(a[i]) - e[i]));
      reference = std::max(reference, std::fabs(static_cast<double>(e[i])));
    }
    g.max_abs_error = std::max(g.max_abs_error, abs_error);
    g.max_reference = std::max(g.max_reference, reference);
    if (reference == 0) {
      // An exactly zero gradient (a one-token sequence's query weights get none) matches
      // a plan's exactly zero one; any nonzero value against it is a mismatch of no
      // relative size.
      if (abs_error > 0 && g.problem.empty()) {
        g.problem = absl::StrFormat(
            "tensor %d's reference is all zero, the plan's is not (max |x| %.2e)", t, abs_error);
      }
      continue;
    }
    g.max_rel_error = std::max(g.max_rel_error, abs_error / reference);
  }
  if (!finite && g.problem.empty()) g.problem = "a value is not finite";
  g.pass = g.problem.empty() && g.max_rel_error <= tolerance;
  return g;
}

}  // namespace commir::search::plan
