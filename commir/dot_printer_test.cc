#include "commir/dot_printer.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "commir/builder.h"
#include "commir/mesh.h"
#include "gtest/gtest.h"

namespace commir {
namespace {

// spmd func @f(%x: f32[4]) -> f32[4] on @m {
//   %r = rank() {axis = tp} : index
//   %a = neg(%x) {stream = %r} : f32[4]
//   %l = for %i = 0 to 2 step 1 iter(%c = %a) {
//     %c1 = mul(%c, 0.5) : f32[4]
//     yield %c1
//   } : f32[4]
//   return %l
// }
// func @g(%q: f32[1, 2, 4, 8]) -> f32[1, 2, 4] on @m {
//   %o, %lse = attention(%q, %q, %q) {causal} : (f32[1, 2, 4, 8], f32[1, 2, 4])
//   return %lse
// }
std::unique_ptr<Module> BuildModule() {
  auto module = std::make_unique<Module>();
  Mesh* mesh = module->AddMesh(std::make_unique<Mesh>("m", std::vector<MeshAxis>{{"tp", 2, {}}}));
  Type f4 = Type::Tensor(ElementType::kF32, {4});
  Function* f = AddFunction(*module, "f", /*spmd=*/true, mesh, {f4}, {f4}, {"x"});
  OpBuilder b(f);
  AttrDict rank_attrs;
  rank_attrs.Set("axis", Attribute::Ident("tp"));
  Operation* rank = *b.Create(OpKind::kRank, {}, rank_attrs);
  rank->result(0)->set_name("r");
  Value* x = f->body()->argument(0);
  Value* a = *b.Unary(OpKind::kNeg, x);
  a->set_name("a");
  a->defining_op()->SetStreamOperand(rank->result(0));
  AttrDict bounds;
  bounds.Set("lower", Attribute::Int(0));
  bounds.Set("upper", Attribute::Int(2));
  bounds.Set("step", Attribute::Int(1));
  Operation* loop = *b.Create(OpKind::kFor, {a}, bounds);
  loop->result(0)->set_name("l");
  Block* body = loop->region(0);
  body->AddArgument(Type::Index(), "i");
  Value* c = body->AddArgument(f4, "c");
  OpBuilder inner(f);
  inner.SetInsertionPointToEnd(body);
  Operation* mul = *inner.CreateWithLiteral(OpKind::kMul, c, 0.5, 1);
  mul->result(0)->set_name("c1");
  inner.CreateUnchecked(OpKind::kYield, {mul->result(0)}, {});
  b.Return({loop->result(0)});

  Type q = Type::Tensor(ElementType::kF32, {1, 2, 4, 8});
  Type lse = Type::Tensor(ElementType::kF32, {1, 2, 4});
  Function* g = AddFunction(*module, "g", /*spmd=*/false, mesh, {q}, {lse}, {"q"});
  OpBuilder gb(g);
  AttrDict causal;
  causal.Set("causal", Attribute::Bool(true));
  Value* qv = g->body()->argument(0);
  Operation* attention = *gb.Create(OpKind::kAttention, {qv, qv, qv}, causal, {}, 2);
  attention->result(0)->set_name("o");
  attention->result(1)->set_name("lse");
  gb.Return({attention->result(1)});
  return module;
}

TEST(DotPrinterTest, PrintsClustersNodesAndEdges) {
  std::unique_ptr<Module> module = BuildModule();
  EXPECT_EQ(PrintDot(*module), R"dot(digraph commir {
  node [shape=box, fontname="monospace"];
  subgraph cluster_f0 {
    label="spmd func @f(%x: f32[4]) -> f32[4] on @m";
    f0_n0 [shape=ellipse, label="%x: f32[4]"];
    f0_n1 [label="%r = rank()\n{axis = tp}\n: index"];
    f0_n2 [label="%a = neg(%x)\n{stream = %r}\n: f32[4]"];
    f0_n3 [label="%l = for %i = 0 to 2 step 1 iter(%a)\n: f32[4]"];
    subgraph cluster_f0_n3 {
      label="body of for";
      style=dashed;
      f0_n4 [shape=ellipse, label="%i: index"];
      f0_n5 [shape=ellipse, label="%c: f32[4]"];
      f0_n6 [label="%c1 = mul(%c, 0.5)\n: f32[4]"];
      f0_n7 [label="yield %c1", style=rounded];
    }
    f0_n8 [label="return %l", style=rounded];
  }
  f0_n0 -> f0_n2;
  f0_n1 -> f0_n2 [style=dashed, label="stream"];
  f0_n2 -> f0_n3;
  f0_n3 -> f0_n4 [style=dashed, label="index"];
  f0_n3 -> f0_n5 [style=dashed, label="iter"];
  f0_n5 -> f0_n6;
  f0_n6 -> f0_n7;
  f0_n7 -> f0_n3 [style=dashed, label="next", constraint=false];
  f0_n3 -> f0_n8;
  subgraph cluster_f1 {
    label="func @g(%q: f32[1, 2, 4, 8]) -> f32[1, 2, 4] on @m";
    f1_n0 [shape=ellipse, label="%q: f32[1, 2, 4, 8]"];
    f1_n1 [label="%o, %lse = attention(%q, %q, %q)\n{causal}\n: (f32[1, 2, 4, 8], f32[1, 2, 4])"];
    f1_n2 [label="return %lse", style=rounded];
  }
  f1_n0 -> f1_n1;
  f1_n0 -> f1_n1;
  f1_n0 -> f1_n1;
  f1_n1 -> f1_n2 [label="#1"];
}
)dot");
}

TEST(DotPrinterTest, EscapesQuotesAndBackslashes) {
  std::unique_ptr<Module> module = BuildModule();
  // Not a valid attribute for neg, but the printer must cope with any text.
  Operation* neg = module->functions()[0]->body()->front()->next();
  neg->mutable_attrs().Set("note", Attribute::String("say \"hi\" \\ bye"));
  std::string dot = PrintDot(*module);
  EXPECT_NE(dot.find(R"({note = \"say \\\"hi\\\" \\\\ bye\", stream = %r})"), std::string::npos)
      << dot;
}

TEST(DotPrinterTest, IsDeterministic) {
  EXPECT_EQ(PrintDot(*BuildModule()), PrintDot(*BuildModule()));
}

TEST(DotPrinterTest, GraphvizAcceptsTheOutput) {
  const char* dot = "/usr/bin/dot";
  if (std::FILE* probe = std::fopen(dot, "r")) {
    std::fclose(probe);
  } else {
    GTEST_SKIP() << "graphviz is not installed";
  }
  std::unique_ptr<Module> module = BuildModule();
  Operation* neg = module->functions()[0]->body()->front()->next();
  neg->mutable_attrs().Set("note", Attribute::String("quote \" and backslash \\"));
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = tmp != nullptr ? tmp : "/tmp";
  std::string input = absl::StrCat(dir, "/graph.dot");
  std::string output = absl::StrCat(dir, "/graph.png");
  std::ofstream(input) << PrintDot(*module);
  std::string command = absl::StrCat(dot, " -Tpng -o ", output, " ", input, " 2>&1");
  int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::ifstream png(output, std::ios::binary);
  char magic[4] = {};
  png.read(magic, 4);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
}

}  // namespace
}  // namespace commir
