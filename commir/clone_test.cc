// Module::Clone and ModuleFingerprint. Clones are checked against the printer (the text
// of the original) and against mutation; fingerprints against programs written by hand
// that differ in one known way.
#include <memory>
#include <string>

#include "absl/strings/str_replace.h"
#include "commir/clone.h"
#include "commir/fingerprint.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "gtest/gtest.h"
#include "parser/parser.h"

namespace commir {
namespace {

std::unique_ptr<Module> Parse(const std::string& text) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "clone_test.commir");
  EXPECT_TRUE(module.ok()) << module.status();
  return module.ok() ? *std::move(module) : nullptr;
}

// Two meshes, a global and a spmd function on different meshes, a call, a loop with
// iteration arguments and a stream operand, literals, attributes and a partial layout.
constexpr char kProgram[] = R"(mesh @m(tp=4)
mesh @n(dp=2, tp=2)

func @helper(%x: f32[8, 16]) -> f32[8, 16] on @m {
  %y = mul(%x, 0.5)
  return %y
}

func @f(%x: f32[8, 16@tp], %w: f32[16@tp, 32]) -> f32[8, 32] on @m {
  %h = call @helper(%x) : f32[8, 16@tp]
  %p = matmul(%h, %w) : f32[8, 32] partial(tp)
  %s = reduce_sum(%p) {dims = [1]}
  %r = reshard(%p) : f32[8, 32]
  return %r
}

spmd func @g(%a: f32[4, 8@dp], %b: f32[4, 8@dp]) -> f32[4, 8@dp] on @n {
  %z = for %i = 0 to 3 iter(%acc = %a) {
    %st = rem(%i, 2)
    %c = add(%acc, %b) {stream = %st}
    yield %c
  } : f32[4, 4]
  %d = all_reduce(%z) {axis = (dp, tp)}
  return %d
}
)";

TEST(Clone, PrintsAsTheOriginalDoes) {
  std::unique_ptr<Module> module = Parse(kProgram);
  ASSERT_NE(module, nullptr);
  std::unique_ptr<Module> copy = module->Clone();
  EXPECT_EQ(PrintModule(*copy), PrintModule(*module));
  EXPECT_TRUE(VerifyModule(*copy).ok());
  // Each function is on the copy's own mesh, not the original's.
  for (Function* f : copy->functions()) {
    ASSERT_NE(f->mesh(), nullptr) << f->name();
    EXPECT_EQ(f->mesh(), copy->FindMesh(f->mesh()->name())) << f->name();
    EXPECT_EQ(f->module(), copy.get());
  }
}

TEST(Clone, KeepsLocationsAndNames) {
  std::unique_ptr<Module> module = Parse(kProgram);
  ASSERT_NE(module, nullptr);
  std::unique_ptr<Module> copy = module->Clone();
  const Operation* matmul = module->FindFunction("f")->body()->front()->next();
  const Operation* copied = copy->FindFunction("f")->body()->front()->next();
  ASSERT_EQ(copied->name(), "matmul");
  // `  %p = matmul(...)` is line 11 of kProgram.
  EXPECT_EQ(copied->loc().line, 11);
  EXPECT_EQ(copied->loc().line, matmul->loc().line);
  EXPECT_EQ(copied->loc().col, matmul->loc().col);
  EXPECT_EQ(copied->result(0)->name(), "p");
}

TEST(Clone, MutatingTheCopyLeavesTheOriginal) {
  std::unique_ptr<Module> module = Parse(kProgram);
  ASSERT_NE(module, nullptr);
  const std::string before = PrintModule(*module);
  std::unique_ptr<Module> copy = module->Clone();
  Function* f = copy->FindFunction("f");
  f->set_name("renamed");
  f->SetArgType(0, f->arg_types()[0].WithoutSharding());
  Operation* sum = f->body()->front()->next()->next();
  ASSERT_EQ(sum->name(), "reduce_sum");
  sum->mutable_attrs().Set("dims", Attribute::IntList({0}));
  sum->SetOperand(0, f->body()->argument(1));
  Operation* scaled = copy->FindFunction("helper")->body()->front();
  scaled->operand(1)->set_name("unused");
  f->body()->argument(0)->set_name("x2");
  // Erase a whole loop (regions included) from the copy.
  Function* g = copy->FindFunction("g");
  Operation* loop = g->body()->front();
  ASSERT_EQ(loop->name(), "for");
  Operation* reduce = loop->next();
  reduce->SetOperand(0, g->body()->argument(0));
  loop->Erase();
  EXPECT_EQ(PrintModule(*module), before);
  EXPECT_NE(PrintModule(*copy), before);
  // Uses in the original are the original's only.
  Value* x = module->FindFunction("f")->body()->argument(0);
  ASSERT_EQ(x->users().size(), 1u);
  EXPECT_EQ(x->users()[0]->parent_function(), module->FindFunction("f"));
}

TEST(Clone, FunctionCloneFillsTheValueMap) {
  std::unique_ptr<Module> module = Parse(kProgram);
  ASSERT_NE(module, nullptr);
  const Function& g = *module->FindFunction("g");
  ValueMap map;
  std::unique_ptr<Function> copy = g.Clone(&map);
  EXPECT_EQ(copy->module(), nullptr);
  // Every argument and result, those of the loop body included: 2 arguments, the loop's
  // result and its two block arguments, the rem, the add, the all_reduce.
  EXPECT_EQ(map.size(), 8u);
  for (const auto& [from, to] : map) {
    EXPECT_NE(from, to);
    EXPECT_EQ(from->name(), to->name());
    EXPECT_EQ(from->type(), to->type());
  }
  Module holder;
  holder.AddMesh(std::make_unique<Mesh>(*module->FindMesh("n")));
  holder.AddFunction(std::move(copy));
  ASSERT_TRUE(holder.ResolveMeshes());
  EXPECT_EQ(PrintModule(holder), "mesh @n(dp=2, tp=2)\n\n" + PrintFunction(g));
}

TEST(Clone, CloneOpMapsOperandsAndTakesOptions) {
  std::unique_ptr<Module> module = Parse(kProgram);
  ASSERT_NE(module, nullptr);
  Function& f = *module->FindFunction("f");
  Operation* matmul = f.body()->front()->next();
  // A second matmul reading the arguments swapped, before the return.
  ValueMap map = {{matmul->operand(0), f.body()->argument(0)}};
  ValueMap fallback = {{matmul->operand(1), f.body()->argument(1)}};
  AttrDict attrs;
  attrs.Set("note", Attribute::Int(1));
  Type extra = Type::Scalar(ElementType::kF32);
  CloneOpOptions options;
  options.attrs = &attrs;
  options.extra_result_types = {&extra, 1};
  options.fallback = &fallback;
  Operation* copy = CloneOp(*matmul, *f.body(), f.body()->terminator(), map, options);
  EXPECT_EQ(copy->operand(0), f.body()->argument(0));
  EXPECT_EQ(copy->operand(1), f.body()->argument(1));
  ASSERT_EQ(copy->num_results(), 2);
  EXPECT_EQ(copy->result(1)->type(), extra);
  EXPECT_EQ(copy->attrs(), attrs);
  EXPECT_EQ(map.at(matmul->result(0)), copy->result(0));
  EXPECT_EQ(copy->next(), f.body()->terminator());
}

TEST(Clone, NamedAsPrintedItHasTheNamesOfItsParse) {
  // Clashing names (as inlining makes) and unnamed values (as passes make).
  std::unique_ptr<Module> module = Parse(R"(func @f(%x: f32[4]) -> f32[4] {
  %y = neg(%x)
  %z = neg(%y)
  return %z
}
)");
  ASSERT_NE(module, nullptr);
  Function& f = *module->FindFunction("f");
  f.body()->front()->result(0)->set_name("x");
  f.body()->front()->next()->result(0)->set_name("");
  const std::string printed = PrintModule(*module);
  EXPECT_EQ(printed, R"(func @f(%x: f32[4]) -> f32[4] {
  %x_1 = neg(%x) : f32[4]
  %0 = neg(%x_1) : f32[4]
  return %0
}
)");
  NameValuesAsPrinted(f);
  EXPECT_EQ(PrintModule(*module), printed);
  EXPECT_EQ(f.body()->front()->result(0)->name(), "x_1");
  EXPECT_EQ(f.body()->front()->next()->result(0)->name(), "0");
}

// ---- fingerprint ------------------------------------------------------------------

constexpr char kMlp[] = R"(mesh @m(tp=4)

func @mlp(%x: f32[8, 16], %w1: f32[16, 64@tp], %w2: f32[64@tp, 16]) -> f32[8, 16] {
  %u = matmul(%x, %w1) : f32[8, 64@tp]
  %a = gelu(%u)
  %s = mul(%a, 0.5)
  %y = matmul(%s, %w2) : f32[8, 16]
  return %y
}
)";

Fingerprint Of(const std::string& text) {
  std::unique_ptr<Module> module = Parse(text);
  return module == nullptr ? Fingerprint{} : ModuleFingerprint(*module);
}

std::string Edit(const std::string& text, absl::string_view from, absl::string_view to) {
  std::string edited = absl::StrReplaceAll(text, {{from, to}});
  EXPECT_NE(edited, text) << from;
  return edited;
}

TEST(Fingerprint, SameUnderRenamingAndLayout) {
  // Every value renamed, whitespace and comments changed: the same program.
  const std::string renamed = R"(mesh @m(tp=4)
// renamed
func @mlp(%input: f32[8, 16], %a1: f32[16, 64@tp], %a2: f32[64@tp, 16]) -> f32[8, 16] {
  %0 = matmul(%input, %a1) : f32[8, 64@tp]
  %1 = gelu(%0)
  %half = mul(%1,   0.5)
  %out = matmul(%half, %a2) : f32[8, 16]
  return %out
}
)";
  EXPECT_EQ(Of(kMlp), Of(renamed));
  // Unnamed values (as passes make them) are the same program too.
  std::unique_ptr<Module> module = Parse(kMlp);
  ASSERT_NE(module, nullptr);
  Fingerprint before = ModuleFingerprint(*module);
  WalkOps(module->FindFunction("mlp")->body(), [](Operation* op) {
    for (Value* r : op->results()) r->set_name("");
  });
  EXPECT_EQ(ModuleFingerprint(*module), before);
}

TEST(Fingerprint, EveryOtherDifferenceChangesIt) {
  const Fingerprint original = Of(kMlp);
  const std::string edits[] = {
      // an attribute (a literal operand) and a type
      Edit(kMlp, "mul(%a, 0.5)", "mul(%a, 0.25)"),
      Edit(kMlp, "%a = gelu(%u)", "%a = gelu(%u) : f32[8, 64]"),
      // operand order
      Edit(kMlp, "%s = mul(%a, 0.5)", "%s = mul(0.5, %a)"),
      // which value an operand is
      Edit(kMlp, "%a = gelu(%u)\n  %s = mul(%a, 0.5)", "%a = gelu(%u)\n  %s = mul(%u, 0.5)"),
      // an op's kind
      Edit(kMlp, "gelu(%u)", "relu(%u)"),
      // a signature type, a result layout, a mesh, names of the function and the mesh
      Edit(kMlp, "%w1: f32[16, 64@tp]", "%w1: f32[16@tp, 64]"),
      Edit(kMlp, "-> f32[8, 16] {", "-> f32[8@tp, 16] {"),
      Edit(kMlp, "mesh @m(tp=4)", "mesh @m(tp=2)"),
      Edit(kMlp, "func @mlp(", "func @mlp2("),
      Edit(kMlp, "mesh @m(tp=4)", "mesh @k(tp=4)"),
  };
  for (const std::string& edited : edits) EXPECT_NE(Of(edited), original) << edited;

  // A float attribute.
  constexpr char kNorm[] = R"(func @f(%x: f32[4, 8], %g: f32[8], %b: f32[8]) -> f32[4, 8] {
  %h = layernorm(%x, %g, %b) {eps = 1e-5}
  return %h
}
)";
  EXPECT_NE(Of(kNorm), Of(Edit(kNorm, "eps = 1e-5", "eps = 1e-6")));
  EXPECT_EQ(Of(kNorm), Of(Edit(kNorm, "%h = layernorm(%x, %g, %b)", "%y = layernorm(%x, %g, %b)")
                              .replace(std::string(kNorm).find("return %h"), 9, "return %y")));
}

TEST(Fingerprint, ModuleAndItsCloneAgreeAndDivergeWhenEdited) {
  std::unique_ptr<Module> module = Parse(kProgram);
  ASSERT_NE(module, nullptr);
  std::unique_ptr<Module> copy = module->Clone();
  EXPECT_EQ(ModuleFingerprint(*copy), ModuleFingerprint(*module));
  Operation* sum = copy->FindFunction("f")->body()->front()->next()->next();
  sum->mutable_attrs().Set("dims", Attribute::IntList({0}));
  EXPECT_NE(ModuleFingerprint(*copy), ModuleFingerprint(*module));
}

}  // namespace
}  // namespace commir
