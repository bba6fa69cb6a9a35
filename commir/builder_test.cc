// OpBuilder: every op kind builds with the types its definition infers; invalid ops
// are refused with the definition's message.
#include "commir/builder.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "commir/ir.h"
#include "commir/op_def.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace commir {
namespace {

constexpr ElementType kF32 = ElementType::kF32;

Type T(std::vector<int64_t> dims, ElementType et = kF32) { return Type::Tensor(et, std::move(dims)); }

AttrDict Attrs(std::vector<std::pair<std::string, Attribute>> entries) {
  AttrDict d;
  for (auto& [k, v] : entries) d.Set(k, v);
  return d;
}

class BuilderTest : public ::testing::Test {
 protected:
  BuilderTest() {
    mesh_ = module_.AddMesh(
        std::make_unique<Mesh>("m", std::vector<MeshAxis>{{"dp", 2, {}}, {"tp", 4, {}}}));
    global_ = AddFunction(module_, "g", false, mesh_, {}, {});
    spmd_ = AddFunction(module_, "s", true, mesh_, {}, {});
  }

  // A value of type `type` in `fn`, made by `full`.
  Value* Make(Function* fn, Type type) {
    absl::StatusOr<Value*> v = OpBuilder(fn).Full(type, 1);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : nullptr;
  }

  // Builds `kind` and returns its result types as text, or the error message.
  std::string Build(Function* fn, OpKind kind, std::vector<OpBuilder::Operand> operands,
                    AttrDict attrs = {},
                    std::vector<Type> result_types = {}, int num_results = 1) {
    built_.insert(kind);
    absl::StatusOr<Operation*> op =
        OpBuilder(fn).Create(kind, operands, std::move(attrs), result_types, num_results);
    if (!op.ok()) return std::string(op.status().message());
    std::string out;
    for (int i = 0; i < (*op)->num_results(); ++i) {
      if (i > 0) out += ", ";
      out += (*op)->result(i)->type().ToString();
    }
    return out;
  }

  Module module_;
  Mesh* mesh_;
  Function* global_;
  Function* spmd_;
  std::set<OpKind> built_;
};

TEST_F(BuilderTest, EveryOpKindBuildsWithInferredTypes) {
  Function* g = global_;
  Function* s = spmd_;
  Value* x = Make(g, T({4, 8}));
  Value* xs = Make(g, Type::Tensor(kF32, {4, 8}, {{}, {"tp"}}));
  Value* w = Make(g, T({8}));
  Value* b8 = Make(g, T({8, 3}));
  Value* half = Make(g, T({4, 8}, ElementType::kF16));
  Value* q = Make(g, T({2, 8, 16, 32}));
  Value* kv = Make(g, T({2, 2, 64, 32}));

  for (OpKind kind : {OpKind::kNeg, OpKind::kAbs, OpKind::kExp, OpKind::kLog, OpKind::kSqrt,
                      OpKind::kRsqrt, OpKind::kTanh, OpKind::kSigmoid, OpKind::kRelu,
                      OpKind::kSilu}) {
    EXPECT_EQ(Build(g, kind, {x}), "f32[4, 8]") << GetOpDef(kind).name;
    // Unary ops keep the operand's layout.
    EXPECT_EQ(Build(g, kind, {xs}), "f32[4, 8@tp]") << GetOpDef(kind).name;
  }
  EXPECT_EQ(Build(g, OpKind::kGelu, {x}, Attrs({{"approximate", Attribute::Ident("tanh")}})),
            "f32[4, 8]");
  EXPECT_EQ(Build(g, OpKind::kConvert, {x}, {}, {T({4, 8}, ElementType::kBF16)}), "bf16[4, 8]");
  for (OpKind kind : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv, OpKind::kMax,
                      OpKind::kMin, OpKind::kPow}) {
    EXPECT_EQ(Build(g, kind, {x, w}), "f32[4, 8]") << GetOpDef(kind).name;
  }
  EXPECT_EQ(Build(g, OpKind::kCompare, {x, w}, Attrs({{"cmp", Attribute::Ident("lt")}})),
            "i1[4, 8]");
  // A comparison keeps the operands' layout but not the element type.
  EXPECT_EQ(Build(g, OpKind::kCompare, {xs, xs}, Attrs({{"cmp", Attribute::Ident("eq")}})),
            "i1[4, 8@tp]");
  Value* mask = Make(g, T({4, 1}, ElementType::kI1));
  EXPECT_EQ(Build(g, OpKind::kSelect, {mask, w, x}), "f32[4, 8]");
  EXPECT_EQ(Build(g, OpKind::kSelect, {mask, xs, w}), "f32[4, 8@tp]");
  EXPECT_EQ(Build(g, OpKind::kFull, {}, Attrs({{"value", Attribute::Float(0.5)}}), {T({3})}),
            "f32[3]");
  EXPECT_EQ(Build(g, OpKind::kFull, {}, Attrs({{"value", Attribute::Int(3)}}), {Type::Index()}),
            "index");
  EXPECT_EQ(Build(g, OpKind::kMatmul, {x, b8}), "f32[4, 3]");
  EXPECT_EQ(Build(g, OpKind::kMatmul, {x, x}, Attrs({{"transpose_b", Attribute::Bool(true)}})),
            "f32[4, 4]");
  EXPECT_EQ(Build(g, OpKind::kMatmul, {half, half},
                  Attrs({{"transpose_a", Attribute::Bool(true)}}), {T({8, 8})}),
            "f32[8, 8]");  // the written element type wins for matmul
  EXPECT_EQ(Build(g, OpKind::kReduceSum, {x}, Attrs({{"dims", Attribute::IntList({1})}})),
            "f32[4]");
  EXPECT_EQ(Build(g, OpKind::kReduceMax, {x},
                  Attrs({{"dims", Attribute::IntList({0})}, {"keepdim", Attribute::Bool(true)}})),
            "f32[1, 8]");
  EXPECT_EQ(Build(g, OpKind::kReduceMean, {x}, Attrs({{"dims", Attribute::IntList({-1, 0})}})),
            "f32[]");
  EXPECT_EQ(Build(g, OpKind::kSoftmax, {xs}), "f32[4, 8]");
  EXPECT_EQ(Build(g, OpKind::kLayerNorm, {x, w, w}, Attrs({{"eps", Attribute::Float(1e-5)}})),
            "f32[4, 8]");
  EXPECT_EQ(Build(g, OpKind::kRmsNorm, {x, w}), "f32[4, 8]");
  EXPECT_EQ(Build(g, OpKind::kAttention, {q, kv, kv}, Attrs({{"causal", Attribute::Bool(true)}})),
            "f32[2, 8, 16, 32]");
  EXPECT_EQ(Build(g, OpKind::kAttention, {q, kv, kv}, {}, {}, 2), "f32[2, 8, 16, 32], f32[2, 8, 16]");
  {
    Value* lse = Make(g, T({2, 8, 16}));
    EXPECT_EQ(Build(g, OpKind::kAttentionGrad, {q, kv, kv, q, lse, q}, {}, {}, 3),
              "f32[2, 8, 16, 32], f32[2, 2, 64, 32], f32[2, 2, 64, 32]");
    // lse in the wrong type: the verifier's message.
    EXPECT_EQ(Build(g, OpKind::kAttentionGrad, {q, kv, kv, q, q, q}, {}, {}, 3),
              "attention_grad: lse must be f32[2, 8, 16] (attention's lse for these q, k and v), got f32[2, 8, 16, 32]");
  }
  {
    // cross_entropy: the loss and the per-token f32 lse; its backward from them.
    Value* logits = Make(g, T({6, 10}, ElementType::kBF16));
    Value* labels = Make(g, T({6}, ElementType::kI32));
    EXPECT_EQ(Build(g, OpKind::kCrossEntropy, {logits, labels}, {}, {}, 2), "bf16[], f32[6]");
    EXPECT_EQ(Build(g, OpKind::kCrossEntropy, {logits, labels},
                    Attrs({{"reduction", Attribute::Ident("none")}}), {}, 2),
              "bf16[6], f32[6]");
    Value* lse = Make(g, T({6}));
    Value* dloss = Make(g, T({}));
    EXPECT_EQ(Build(g, OpKind::kCrossEntropyGrad, {logits, labels, lse, dloss}), "f32[6, 10]");
    EXPECT_EQ(Build(g, OpKind::kCrossEntropy, {logits, logits}, {}, {}, 2),
              "cross_entropy: the labels must be i32 or i64, got bf16[6, 10]");
    Value* merge_lse = Make(g, T({2, 8, 16}));
    Value* o_bf16 = Make(g, Type::Tensor(ElementType::kBF16, {2, 8, 16, 32}));
    EXPECT_EQ(Build(g, OpKind::kAttentionMerge, {q, merge_lse, o_bf16, merge_lse}, {}, {}, 2),
              "f32[2, 8, 16, 32], f32[2, 8, 16]");
    EXPECT_EQ(Build(g, OpKind::kAttentionMerge, {o_bf16, merge_lse, q, merge_lse}, {}, {}, 2),
              "attention_merge: o_acc must be f32 or f64 (the merge computes in the accumulator's "
              "type), got bf16[2, 8, 16, 32]");
  }
  EXPECT_EQ(Build(g, OpKind::kReshape, {x}, {}, {T({2, 16})}), "f32[2, 16]");
  EXPECT_EQ(Build(g, OpKind::kTranspose, {x}, Attrs({{"perm", Attribute::IntList({1, 0})}})),
            "f32[8, 4]");
  EXPECT_EQ(Build(g, OpKind::kSlice, {x},
                  Attrs({{"start", Attribute::IntList({1, 2})}, {"size", Attribute::IntList({3, 4})}})),
            "f32[3, 4]");
  EXPECT_EQ(Build(g, OpKind::kConcat, {x, x, x}, Attrs({{"dim", Attribute::Int(-1)}})),
            "f32[4, 24]");
  EXPECT_EQ(Build(g, OpKind::kBroadcast, {w}, {}, {T({3, 8})}), "f32[3, 8]");
  EXPECT_EQ(Build(g, OpKind::kReshard, {x}, {}, {Type::Tensor(kF32, {4, 8}, {{"dp"}, {"tp"}})}),
            "f32[4@dp, 8@tp]");
  {
    Value* ids = Make(g, T({2, 3}, ElementType::kI32));
    AttrDict axis0 = Attrs({{"axis", Attribute::Int(0)}});
    EXPECT_EQ(Build(g, OpKind::kGather, {x, ids}, axis0), "f32[2, 3, 8]");
    EXPECT_EQ(Build(g, OpKind::kGather, {x, ids}, Attrs({{"axis", Attribute::Int(-1)}})),
              "f32[4, 2, 3]");
    Value* rows = Make(g, T({2, 3, 8}));
    EXPECT_EQ(Build(g, OpKind::kScatterAdd, {x, ids, rows}, axis0), "f32[4, 8]");
    EXPECT_EQ(Build(g, OpKind::kScatterAdd, {x, ids, x}, axis0),
              "scatter_add: the updates must have shape [2, 3, 8] (the gather of f32[4, 8] by "
              "i32[2, 3]), got f32[4, 8]");
  }
  EXPECT_EQ(Build(g, OpKind::kTopK, {x}, Attrs({{"k", Attribute::Int(3)}}), {}, 2),
            "f32[4, 3], i64[4, 3]");
  {
    // x as 4 tokens of hidden 8, routed top-2 over 3 experts.
    Value* route = Make(g, T({4, 2}, ElementType::kI64));
    AttrDict three = Attrs(
        {{"experts", Attribute::Int(3)}, {"capacity_factor", Attribute::Float(1.0)}});
    EXPECT_EQ(Build(g, OpKind::kMoeDispatch, {x, route}, three), "f32[3, 3, 8]");  // ceil(8 / 3)
    Value* buffer = Make(g, T({3, 2, 8}));
    EXPECT_EQ(Build(g, OpKind::kMoeCollect, {buffer, route}), "f32[4, 2, 8]");
  }
  EXPECT_EQ(Build(g, OpKind::kReturn, {x}, {}, {}, 0), "");

  // Spmd ops.
  Value* l = Make(s, T({8, 12}));
  Value* r = Make(s, Type::Index());
  AttrDict tp = Attrs({{"axis", Attribute::Ident("tp")}});
  AttrDict dptp = Attrs({{"axis", Attribute::Axes({"dp", "tp"})}});
  EXPECT_EQ(Build(s, OpKind::kRank, {}, dptp), "index");
  EXPECT_EQ(Build(s, OpKind::kAllGather, {l},
                  Attrs({{"axis", Attribute::Ident("tp")}, {"dim", Attribute::Int(1)}})),
            "f32[8, 48]");
  EXPECT_EQ(Build(s, OpKind::kReduceScatter, {l},
                  Attrs({{"axis", Attribute::Axes({"dp", "tp"})}, {"dim", Attribute::Int(0)}})),
            "f32[1, 12]");
  EXPECT_EQ(Build(s, OpKind::kAllReduce, {l}, dptp), "f32[8, 12]");
  EXPECT_EQ(Build(s, OpKind::kAllToAll, {l},
                  Attrs({{"axis", Attribute::Ident("tp")},
                         {"split_dim", Attribute::Int(1)},
                         {"concat_dim", Attribute::Int(0)}})),
            "f32[32, 3]");
  EXPECT_EQ(Build(s, OpKind::kShift, {l}, tp), "f32[8, 12]");
  EXPECT_EQ(Build(s, OpKind::kDynamicSlice, {l, r},
                  Attrs({{"dim", Attribute::Int(0)}, {"size", Attribute::Int(2)}})),
            "f32[2, 12]");
  Value* update = Make(s, T({2, 12}));
  EXPECT_EQ(Build(s, OpKind::kDynamicUpdateSlice, {l, update, r},
                  Attrs({{"dim", Attribute::Int(0)}})),
            "f32[8, 12]");
  // dropout: alone in a global function; with offsets and the global shape in spmd.
  AttrDict drop = Attrs({{"rate", Attribute::Float(0.1)}, {"seed", Attribute::Int(7)}});
  EXPECT_EQ(Build(g, OpKind::kDropout, {xs}, drop), "f32[4, 8]");
  AttrDict block = drop;
  block.Set("global_shape", Attribute::IntList({8, 48}));
  EXPECT_EQ(Build(s, OpKind::kDropout, {l, r, r}, block), "f32[8, 12]");
  // The step (an integer scalar tensor) comes before the offsets.
  Value* step = Make(g, T({}, ElementType::kI64));
  EXPECT_EQ(Build(g, OpKind::kDropout, {xs, step}, drop), "f32[4, 8]");
  EXPECT_EQ(Build(s, OpKind::kDropout, {l, Make(s, T({}, ElementType::kI32)), r, r}, block),
            "f32[8, 12]");
  EXPECT_TRUE(absl::StrContains(Build(g, OpKind::kDropout, {xs, Make(g, T({}))}, drop),
                                "dropout's step must be an i32[] or i64[] scalar, got f32[]"));
  EXPECT_TRUE(absl::StrContains(
      Build(g, OpKind::kDropout, {xs, Make(g, T({2}, ElementType::kI64))}, drop), "got i64[2]"));
  EXPECT_EQ(Build(s, OpKind::kRem, {r, r}), "index");
  EXPECT_EQ(Build(s, OpKind::kAdd, {r, r}), "index");
  EXPECT_EQ(Build(s, OpKind::kFor, {l, r},
                  Attrs({{"lower", Attribute::Int(0)}, {"upper", Attribute::Int(4)}}), {}, 2),
            "f32[8, 12], index");
  EXPECT_EQ(Build(s, OpKind::kYield, {l}, {}, {}, 0), "");
  // A call's result types are the written ones (the verifier checks them against the
  // callee, which the op's definition does not see).
  AttrDict callee = Attrs({{"callee", Attribute::Ident("layer")}});
  EXPECT_EQ(Build(g, OpKind::kCall, {x}, callee, {T({4, 8}), T({2})}, 2), "f32[4, 8], f32[2]");
  EXPECT_EQ(Build(g, OpKind::kCall, {x}, callee, {}, 0), "");
  EXPECT_TRUE(absl::StrContains(Build(g, OpKind::kCall, {x}, callee),
                                "'call' needs its result types written"));

  for (const OpDef* def : AllOpDefs()) {
    EXPECT_TRUE(built_.count(def->kind)) << "no builder test for '" << def->name << "'";
  }
}

TEST_F(BuilderTest, ForGetsARegion) {
  Value* l = Make(spmd_, T({4}));
  absl::StatusOr<Operation*> loop = OpBuilder(spmd_).Create(
      OpKind::kFor, {l}, Attrs({{"lower", Attribute::Int(0)}, {"upper", Attribute::Int(2)}}));
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_EQ((*loop)->num_regions(), 1);
  EXPECT_EQ((*loop)->region(0)->parent_op(), *loop);
  EXPECT_EQ((*loop)->result(0)->type(), T({4}));
}

TEST_F(BuilderTest, InvalidOpsGiveTheDefinitionsMessage) {
  Function* g = global_;
  Value* x = Make(g, T({2, 3}));
  Value* y = Make(g, T({4, 5}));
  Value* h = Make(g, T({2, 3}, ElementType::kF16));
  Value* i = Make(g, T({2, 3}, ElementType::kI32));
  EXPECT_EQ(Build(g, OpKind::kMatmul, {x, y}),
            "matmul: matmul contracting dimensions differ: 3 (of f32[2, 3]) vs 4 (of f32[4, 5])");
  EXPECT_EQ(Build(g, OpKind::kAdd, {x, y}), "add: shapes [2, 3] and [4, 5] do not broadcast");
  EXPECT_EQ(Build(g, OpKind::kAdd, {x, h}),
            "add: both operands must have the same element type, got f32 and f16");
  EXPECT_EQ(Build(g, OpKind::kExp, {i}),
            "exp: the operand must have a floating-point element type, got i32[2, 3]");
  EXPECT_EQ(Build(g, OpKind::kAdd, {x}), "add: 'add' takes 2 operands, got 1");
  EXPECT_EQ(Build(g, OpKind::kNeg, {x, x}), "neg: 'neg' takes 1 operand, got 2");
  EXPECT_EQ(Build(g, OpKind::kReshape, {x}), "reshape: 'reshape' needs its result type written (': TYPE')");
  EXPECT_EQ(Build(g, OpKind::kReshape, {x}, {}, {T({7})}),
            "reshape: reshape keeps the element type and count: f32[2, 3] cannot become f32[7]");
  EXPECT_EQ(Build(g, OpKind::kNeg, {x}, {}, {T({3, 2})}),
            "neg: result type f32[3, 2] does not match the inferred type f32[2, 3]");
  EXPECT_EQ(Build(g, OpKind::kNeg, {x}, {}, {}, 2), "neg: 'neg' produces 1 result, not 2");
  EXPECT_EQ(Build(g, OpKind::kTranspose, {x}, Attrs({{"perm", Attribute::IntList({0, 0})}})),
            "transpose: perm = [0, 0] is not a permutation of the 2 dims of f32[2, 3]");
  EXPECT_EQ(Build(g, OpKind::kRem, {x, x}), "rem: 'rem' takes index operands");
  // Attribute schema errors come straight from ValidateAttributes.
  EXPECT_EQ(Build(g, OpKind::kNeg, {x}, Attrs({{"bogus", Attribute::Int(1)}})),
            "'neg' has no attribute 'bogus' (it takes none)");
  EXPECT_EQ(Build(g, OpKind::kSoftmax, {x}, Attrs({{"dim", Attribute::Float(1)}})),
            "attribute 'dim' must be an integer, got 1.0");
  EXPECT_EQ(Build(g, OpKind::kTranspose, {x}), "'transpose' needs attribute 'perm'");
  EXPECT_EQ(Build(g, OpKind::kGelu, {x}, Attrs({{"approximate", Attribute::Ident("fast")}})),
            "attribute 'approximate' must be one of none, tanh, got fast");
  EXPECT_EQ(Build(g, OpKind::kNeg, {x}, Attrs({{"stream", Attribute::Int(1)}})),
            "'stream' is only valid in spmd functions");
  // Index arithmetic needs a spmd function.
  Value* idx = Make(g, Type::Index());
  EXPECT_EQ(Build(g, OpKind::kAdd, {idx, idx}),
            "add: index arithmetic is only valid in spmd functions");
  EXPECT_EQ(Build(g, OpKind::kAdd, {idx, x}),
            "add: cannot mix index and tensor operands (index, f32[2, 3])");
  // Nothing was inserted for the failures.
  for (Operation* op : *g->body()) EXPECT_TRUE(op->Is(OpKind::kFull)) << op->name();
}

TEST_F(BuilderTest, CollectivesCheckTheMesh) {
  Value* l = Make(spmd_, T({6, 4}));
  EXPECT_EQ(Build(spmd_, OpKind::kAllGather, {l},
                  Attrs({{"axis", Attribute::Ident("pp")}, {"dim", Attribute::Int(0)}})),
            "all_gather: mesh @m has no axis 'pp'");
  EXPECT_EQ(Build(spmd_, OpKind::kReduceScatter, {l},
                  Attrs({{"axis", Attribute::Ident("tp")}, {"dim", Attribute::Int(0)}})),
            "reduce_scatter: dimension 0 of size 6 is not divisible by the group size 4");
  Function* meshless = AddFunction(module_, "n", true, nullptr, {}, {});
  Value* n = Make(meshless, T({4}));
  EXPECT_EQ(Build(meshless, OpKind::kShift, {n}, Attrs({{"axis", Attribute::Ident("tp")}})),
            "shift: a collective needs a mesh, and the function has none");
}

TEST_F(BuilderTest, ShorthandsAndLiterals) {
  OpBuilder b(global_);
  absl::StatusOr<Value*> x = b.Full(T({4}), 2.5);
  ASSERT_TRUE(x.ok());
  const Attribute* value = (*x)->defining_op()->attrs().Find("value");
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(*value, Attribute::Float(2.5));
  // Integer and index constants get integer values.
  absl::StatusOr<Value*> k = b.Full(T({4}, ElementType::kI32), 3);
  EXPECT_EQ(*(*k)->defining_op()->attrs().Find("value"), Attribute::Int(3));
  absl::StatusOr<Value*> idx = b.Full(Type::Index(), 7);
  EXPECT_EQ((*idx)->type(), Type::Index());
  EXPECT_EQ(*(*idx)->defining_op()->attrs().Find("value"), Attribute::Int(7));

  absl::StatusOr<Value*> e = b.Unary(OpKind::kExp, *x);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->type(), T({4}));
  absl::StatusOr<Value*> sum = b.Binary(OpKind::kAdd, *x, *e);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(b.Unary(OpKind::kExp, *k).status().message(),
            "exp: the operand must have a floating-point element type, got i32[4]");

  absl::StatusOr<Operation*> scaled = b.CreateWithLiteral(OpKind::kMul, *sum, 0.5, 1);
  ASSERT_TRUE(scaled.ok());
  EXPECT_EQ((*scaled)->operand(1)->type(), Type::Scalar(kF32));
  absl::StatusOr<Operation*> bad = b.CreateWithLiteral(OpKind::kAdd, *idx, 1, 1);
  EXPECT_EQ(bad.status().message(), "index arithmetic is only valid in spmd functions");

  b.Return({*sum});
  Operation* ret = global_->body()->back();
  EXPECT_TRUE(ret->Is(OpKind::kReturn));
  EXPECT_EQ(ret->operand(0), *sum);
  EXPECT_EQ(global_->body()->terminator(), ret);
}

TEST_F(BuilderTest, InsertionPoints) {
  OpBuilder b(global_);
  Value* a = *b.Full(T({2}), 1);
  Value* c = *b.Full(T({2}), 3);
  b.SetInsertionPoint(c->defining_op());
  Value* mid = *b.Full(T({2}), 2);
  EXPECT_EQ(a->defining_op()->next(), mid->defining_op());
  EXPECT_EQ(mid->defining_op()->next(), c->defining_op());
  EXPECT_EQ(b.block(), global_->body());
  b.SetInsertionPointToEnd(global_->body());
  Value* last = *b.Full(T({2}), 4);
  EXPECT_EQ(global_->body()->back(), last->defining_op());
}

TEST_F(BuilderTest, AddFunctionSetsTheSignature) {
  Type global = Type::Tensor(kF32, {8, 4}, {{"tp"}, {}});
  Function* f = AddFunction(module_, "sig", true, mesh_, {global, Type::Index()},
                            {global}, {"a"});
  EXPECT_EQ(f->name(), "sig");
  EXPECT_TRUE(f->is_spmd());
  EXPECT_EQ(f->mesh(), mesh_);
  EXPECT_EQ(f->mesh_name(), "m");
  EXPECT_EQ(f->arg_types(), (std::vector<Type>{global, Type::Index()}));
  EXPECT_EQ(f->result_types(), std::vector<Type>{global});
  EXPECT_EQ(f->body()->argument(0)->name(), "a");
  EXPECT_EQ(f->body()->argument(1)->name(), "");
  EXPECT_EQ(f->body()->argument(0)->type(), T({2, 4}));
  EXPECT_EQ(module_.FindFunction("sig"), f);
}

// Literal operands through Create: a number of the given type, in the given position.
TEST_F(BuilderTest, CreateTakesNumberLiterals) {
  OpBuilder b(spmd_);
  Value* x = Make(spmd_, T({4}));
  absl::StatusOr<Operation*> op = b.Create(
      OpKind::kSub, {OpBuilder::Operand::Literal(1.5, Type::Scalar(kF32)), x});
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_TRUE((*op)->operand(0)->is_literal());
  EXPECT_EQ((*op)->operand(0)->literal_value(), 1.5);
  EXPECT_EQ((*op)->operand(1), x);
  EXPECT_EQ((*op)->result(0)->type(), T({4}));
}

// The sticky calls keep the first failure; later calls build nothing and return null.
TEST_F(BuilderTest, StickyCallsKeepTheFirstFailure) {
  OpBuilder b(spmd_, spmd_->body(), nullptr, Location{7, 3});
  Value* x = Make(spmd_, T({4}));
  Value* rank = b.Op(OpKind::kRank, {}, Attrs({{"axis", Attribute::Ident("tp")}}), std::nullopt,
                     "r");
  ASSERT_NE(rank, nullptr) << b.status();
  EXPECT_EQ(rank->name(), "r");
  EXPECT_EQ(rank->defining_op()->loc().line, 7);
  EXPECT_EQ(b.IndexConstant(3, "three")->type(), Type::Index());
  EXPECT_TRUE(b.ok());

  int ops_before = 0;
  for (Operation* op : *spmd_->body()) ops_before += op != nullptr ? 1 : 0;
  Value* i32 = Make(spmd_, T({4}, ElementType::kI32));
  ++ops_before;
  EXPECT_EQ(b.Op(OpKind::kExp, {i32}), nullptr);
  EXPECT_FALSE(b.ok());
  std::string first(b.status().message());
  EXPECT_EQ(first, "exp: the operand must have a floating-point element type, got i32[4]");
  // Valid calls after the failure are no-ops.
  EXPECT_EQ(b.Op(OpKind::kNeg, {x}), nullptr);
  EXPECT_EQ(b.Convert(x, ElementType::kF16), nullptr);
  EXPECT_EQ(b.Ops(OpKind::kNeg, {x}, {}, 1, {"n"}), std::vector<Value*>{nullptr});
  b.Fail(absl::InternalError("later"));
  EXPECT_EQ(b.status().message(), first);
  int ops_after = 0;
  for (Operation* op : *spmd_->body()) ops_after += op != nullptr ? 1 : 0;
  EXPECT_EQ(ops_after, ops_before);
}

}  // namespace
}  // namespace commir
