// Every derivative rule of the op definitions against central finite differences in f64:
// each case computes `%r` from its arguments, and the loss is sum(%r * %c) for a random
// %c, so every element of the op's cotangent is exercised with a different weight.
#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "transforms/autodiff/autodiff.h"
#include "testing/gradient_check.h"
#include "transforms/test_util.h"

namespace commir {
namespace {

struct RuleCase {
  std::string name;
  std::string args;         // "%x: f64[3, 4], %y: f64[4]"
  std::string body;         // ops ending in `%r = ...`
  std::string result_type;  // %r's type
  std::string wrt;          // "x,y"
  double lo = -2, hi = 2;   // the inputs' range (positive for log, sqrt, ...)
  double h = 1e-5;          // the finite-difference step
  double tolerance = 1e-6;
};

void PrintTo(const RuleCase& c, std::ostream* os) { *os << c.name; }

std::string Program(const RuleCase& c) {
  const int rank =
      c.result_type.find("[]") != std::string::npos
          ? 0
          : static_cast<int>(std::count(c.result_type.begin(), c.result_type.end(), ',')) + 1;
  std::vector<int> dims;
  for (int d = 0; d < rank; ++d) dims.push_back(d);
  return absl::StrCat("func @f(", c.args, ", %c: ", c.result_type, ") -> f64[] {\n", c.body,
                      "\n  %p = mul(%r, %c)\n",
                      rank == 0 ? "  %loss = add(%p, 0.0)\n"
                                : absl::StrCat("  %loss = reduce_sum(%p) {dims = [",
                                               absl::StrJoin(dims, ", "), "]}\n"),
                      "  return %loss\n}\n");
}

class DerivativeRuleTest : public ::testing::TestWithParam<RuleCase> {};

TEST_P(DerivativeRuleTest, MatchesFiniteDifferences) {
  const RuleCase& c = GetParam();
  std::unique_ptr<Module> module = testing::ParseForTest(Program(c));
  ASSERT_NE(module, nullptr);
  const Function& f = *module->FindFunction("f");
  AutodiffOptions options;
  options.wrt = absl::StrSplit(c.wrt, ',');
  absl::StatusOr<Function*> grad = Differentiate(*module, f, options);
  ASSERT_TRUE(grad.ok()) << grad.status();
  std::vector<int> wrt;
  for (const std::string& name : options.wrt) {
    for (int i = 0; i < f.body()->num_arguments(); ++i) {
      if (f.body()->argument(i)->name() == name) wrt.push_back(i);
    }
  }
  for (uint64_t seed : {1, 2}) {
    std::string report;
    absl::StatusOr<double> error = testing::MaxGradientError(
        f, **grad, wrt, testing::UniformInputs(f, c.lo, c.hi, seed), c.h, &report);
    ASSERT_TRUE(error.ok()) << error.status();
    EXPECT_LE(*error, c.tolerance) << report;
  }
}

// %ids = [2, 0, 2] (i32), and %i0 = [0].
constexpr char kIndices202[] =
    "  %i2 = full() {value = 2} : i32[1]\n  %i0 = full() {value = 0} : i32[1]\n"
    "  %ids = concat(%i2, %i0, %i2) {dim = 0}\n";
// `%r = cross_entropy(%x, labels)` for x: f64[3, 4], the labels built from constants
// (the gradient check draws only float inputs).
std::string CrossEntropyBody(const std::string& labels, const std::string& attrs) {
  std::vector<std::string> parts = absl::StrSplit(labels.substr(1, labels.size() - 2), ", ");
  std::string body;
  for (size_t i = 0; i < parts.size(); ++i) {
    absl::StrAppend(&body, "  %l", i, " = full() {value = ", parts[i], "} : i64[1]\n");
  }
  absl::StrAppend(&body, "  %labels = concat(%l0, %l1, %l2) {dim = 0}\n",
                  "  %r, %lse = cross_entropy(%x, %labels)",
                  attrs.empty() ? "" : absl::StrCat(" {", attrs, "}"));
  return body;
}

std::vector<RuleCase> Cases() {
  const std::string x34 = "%x: f64[3, 4]";
  auto unary = [&](std::string op, double lo = -2, double hi = 2) {
    return RuleCase{op, x34, absl::StrCat("  %r = ", op, "(%x)"), "f64[3, 4]", "x", lo, hi};
  };
  std::vector<RuleCase> cases = {
      unary("neg"),
      unary("abs"),
      unary("exp"),
      unary("log", 0.5, 2),
      unary("sqrt", 0.5, 2),
      unary("rsqrt", 0.5, 2),
      unary("tanh"),
      unary("sigmoid"),
      unary("relu"),
      unary("silu"),
      unary("gelu"),
      {"gelu_tanh", x34, "  %r = gelu(%x) {approximate = tanh}", "f64[3, 4]", "x"},
      // The f32 round trip's rounding noise is about 1e-7 of x: a coarse step keeps it
      // small next to the difference.
      {"convert", x34, "  %h = convert(%x) : f32[3, 4]\n  %r = convert(%h) : f64[3, 4]",
       "f64[3, 4]", "x", -2, 2, 1e-2, 1e-4},
      {"add_broadcast", "%x: f64[3, 4], %y: f64[4]", "  %r = add(%x, %y)", "f64[3, 4]", "x,y"},
      {"sub_broadcast", "%x: f64[3, 1], %y: f64[3, 4]", "  %r = sub(%x, %y)", "f64[3, 4]", "x,y"},
      {"mul_broadcast", "%x: f64[2, 3, 4], %y: f64[3, 1]", "  %r = mul(%x, %y)", "f64[2, 3, 4]",
       "x,y"},
      {"mul_literal", x34, "  %r = mul(%x, 0.25)", "f64[3, 4]", "x"},
      {"div", "%x: f64[3, 4], %y: f64[3, 4]", "  %r = div(%x, %y)", "f64[3, 4]", "x,y", 0.5, 2},
      {"max", "%x: f64[3, 4], %y: f64[4]", "  %r = max(%x, %y)", "f64[3, 4]", "x,y"},
      {"min", "%x: f64[3, 4], %y: f64[3, 4]", "  %r = min(%x, %y)", "f64[3, 4]", "x,y"},
      {"pow", "%x: f64[3, 4], %y: f64[3, 4]", "  %r = pow(%x, %y)", "f64[3, 4]", "x,y", 0.5, 2},
      {"pow_literal", x34, "  %r = pow(%x, 3.0)", "f64[3, 4]", "x"},
      {"relu_as_max", x34, "  %r = max(%x, 0.0)", "f64[3, 4]", "x"},
      {"select", "%x: f64[3, 4], %y: f64[3, 4]",
       "  %m = compare(%x, %y) {cmp = gt}\n  %r = select(%m, %x, %y)", "f64[3, 4]", "x,y"},
      {"reduce_sum", x34, "  %r = reduce_sum(%x) {dims = [1]}", "f64[3]", "x"},
      {"reduce_sum_keepdim", "%x: f64[2, 3, 4]", "  %r = reduce_sum(%x) {dims = [0, 2], keepdim}",
       "f64[1, 3, 1]", "x"},
      {"reduce_mean", x34, "  %r = reduce_mean(%x) {dims = [0]}", "f64[4]", "x"},
      {"reduce_max", x34, "  %r = reduce_max(%x) {dims = [-1]}", "f64[3]", "x"},
      {"softmax", x34, "  %r = softmax(%x)", "f64[3, 4]", "x"},
      // The perturbed forward draws the same mask (same seed, same indices).
      {"dropout", x34, "  %r = dropout(%x) {rate = 0.4, seed = 5}", "f64[3, 4]", "x"},
      {"softmax_dim0", x34, "  %r = softmax(%x) {dim = 0}", "f64[3, 4]", "x"},
      {"layernorm", "%x: f64[3, 4], %w: f64[4], %b: f64[4]", "  %r = layernorm(%x, %w, %b)",
       "f64[3, 4]", "x,w,b"},
      {"rmsnorm", "%x: f64[2, 3, 4], %w: f64[4]", "  %r = rmsnorm(%x, %w) {eps = 0.01}",
       "f64[2, 3, 4]", "x,w"},
      {"matmul", "%a: f64[3, 4], %b: f64[4, 5]", "  %r = matmul(%a, %b)", "f64[3, 5]", "a,b"},
      {"matmul_ta", "%a: f64[4, 3], %b: f64[4, 5]", "  %r = matmul(%a, %b) {transpose_a}",
       "f64[3, 5]", "a,b"},
      {"matmul_tb", "%a: f64[3, 4], %b: f64[5, 4]", "  %r = matmul(%a, %b) {transpose_b}",
       "f64[3, 5]", "a,b"},
      {"matmul_ta_tb", "%a: f64[4, 3], %b: f64[5, 4]",
       "  %r = matmul(%a, %b) {transpose_a, transpose_b}", "f64[3, 5]", "a,b"},
      {"matmul_batch_broadcast", "%a: f64[2, 3, 4], %b: f64[4, 5]", "  %r = matmul(%a, %b)",
       "f64[2, 3, 5]", "a,b"},
      {"matmul_batches", "%a: f64[2, 1, 3, 4], %b: f64[3, 5, 4]",
       "  %r = matmul(%a, %b) {transpose_b}", "f64[2, 3, 3, 5]", "a,b"},
      {"reshape", x34, "  %r = reshape(%x) : f64[2, 6]", "f64[2, 6]", "x"},
      {"transpose", "%x: f64[2, 3, 4]", "  %r = transpose(%x) {perm = [2, 0, 1]}", "f64[4, 2, 3]",
       "x"},
      {"slice", x34, "  %r = slice(%x) {start = [1, 1], size = [2, 2]}", "f64[2, 2]", "x"},
      {"concat", "%x: f64[3, 4], %y: f64[3, 2]", "  %r = concat(%x, %y) {dim = 1}", "f64[3, 6]",
       "x,y"},
      {"broadcast", "%x: f64[3, 1]", "  %r = broadcast(%x) : f64[2, 3, 4]", "f64[2, 3, 4]", "x"},
      // top_k: the cotangent goes back to the chosen positions (the inputs are distinct,
      // so a small step never changes the choice); n = 7 builds the rule's position iota
      // through its odd steps, k = n is a full sort.
      {"top_k", "%x: f64[3, 5]", "  %r, %i = top_k(%x) {k = 2}", "f64[3, 2]", "x"},
      {"top_k_odd_rank3", "%x: f64[2, 3, 7]", "  %r, %i = top_k(%x) {k = 3}", "f64[2, 3, 3]",
       "x"},
      {"top_k_full_sort", "%x: f64[2, 4]", "  %r, %i = top_k(%x) {k = 4}", "f64[2, 4]", "x"},
      // RoPE as Hugging Face's Llama writes it, x cos + rotate_half(x) sin, from slice, neg,
      // concat, mul and add: the composed rules give the rotation by -theta for x and the
      // products' rules for cos and sin.
      {"rope_rotate_half", "%x: f64[2, 3, 4], %cs: f64[3, 4], %sn: f64[3, 4]",
       "  %x1 = slice(%x) {start = [0, 0, 0], size = [2, 3, 2]}\n"
       "  %x2 = slice(%x) {start = [0, 0, 2], size = [2, 3, 2]}\n"
       "  %n2 = neg(%x2)\n  %rot = concat(%n2, %x1) {dim = 2}\n"
       "  %a = mul(%x, %cs)\n  %b = mul(%rot, %sn)\n  %r = add(%a, %b)",
       "f64[2, 3, 4]", "x,cs,sn"},
      // Through attention_grad: plain, causal with GQA (4 query heads over 2 kv heads), and
      // an attention that returns lse (its o and lse are reused, not recomputed).
      {"attention", "%q: f64[1, 2, 3, 4], %k: f64[1, 2, 5, 4], %v: f64[1, 2, 5, 3]",
       "  %r = attention(%q, %k, %v)", "f64[1, 2, 3, 3]", "q,k,v"},
      {"attention_causal_gqa", "%q: f64[1, 4, 4, 4], %k: f64[1, 2, 4, 4], %v: f64[1, 2, 4, 4]",
       "  %r = attention(%q, %k, %v) {causal, scale = 0.3}", "f64[1, 4, 4, 4]", "q,k,v"},
      {"attention_with_lse", "%q: f64[1, 2, 3, 4], %k: f64[1, 2, 3, 4], %v: f64[1, 2, 3, 4]",
       "  %r, %lse = attention(%q, %k, %v) {causal}", "f64[1, 2, 3, 4]", "q,k,v"},
      // Through lse (f32, so a coarse step as for convert): lse alone, and o times lse
      // (causal, GQA), where attention_grad gets dout and dlse in one call.
      {"attention_lse", "%q: f64[1, 2, 3, 4], %k: f64[1, 2, 5, 4], %v: f64[1, 2, 5, 3]",
       "  %o, %l = attention(%q, %k, %v)\n  %r = convert(%l) : f64[1, 2, 3]", "f64[1, 2, 3]",
       "q,k,v", -2, 2, 1e-2, 1e-4},
      {"attention_o_times_lse_causal_gqa",
       "%q: f64[1, 4, 4, 4], %k: f64[1, 2, 4, 4], %v: f64[1, 2, 4, 3]",
       "  %o, %l = attention(%q, %k, %v) {causal, scale = 0.3}\n"
       "  %l64 = convert(%l) : f64[1, 4, 4]\n  %l4 = reshape(%l64) : f64[1, 4, 4, 1]\n"
       "  %lb = broadcast(%l4) : f64[1, 4, 4, 3]\n  %r = mul(%o, %lb)",
       "f64[1, 4, 4, 3]", "q,k,v", -2, 2, 1e-2, 1e-4},
      // gather and scatter_add with the constant indices [2, 0, 2] (a repeated row: its
      // cotangents sum), built in the program so that no random input is an index.
      {"gather", "%x: f64[4, 3]", absl::StrCat(kIndices202, "  %r = gather(%x, %ids) {axis = 0}"),
       "f64[3, 3]", "x"},
      {"gather_axis1_2d_indices", "%x: f64[2, 5, 3]",
       absl::StrCat(kIndices202, "  %i4 = concat(%ids, %i0) {dim = 0}\n",
                    "  %i22 = reshape(%i4) : i32[2, 2]\n",
                    "  %r = gather(%x, %i22) {axis = -2}"),
       "f64[2, 2, 2, 3]", "x"},
      {"scatter_add", "%b: f64[4, 3], %u: f64[3, 3]",
       absl::StrCat(kIndices202, "  %r = scatter_add(%b, %ids, %u) {axis = 0}"), "f64[4, 3]",
       "b,u"},
      {"scatter_add_axis1", "%b: f64[2, 4], %u: f64[2, 3]",
       absl::StrCat(kIndices202, "  %r = scatter_add(%b, %ids, %u) {axis = 1}"), "f64[2, 4]",
       "b,u"},
      // moe_dispatch and moe_collect routed by the top-2 of random scores %s (not
      // differentiated: a small step of x never changes the routing). Capacity 2 for 12
      // choices over 4 experts drops some, whose rows must get no cotangent.
      {"moe_dispatch_token_rows", "%x: f64[6, 3], %s: f64[6, 4]",
       "  %v, %i = top_k(%s) {k = 2}\n"
       "  %r = moe_dispatch(%x, %i) {experts = 4, capacity = 2}",
       "f64[4, 2, 3]", "x"},
      {"moe_dispatch_choice_rows", "%x: f64[6, 2, 3], %s: f64[6, 4]",
       "  %v, %i = top_k(%s) {k = 2}\n"
       "  %r = moe_dispatch(%x, %i) {experts = 4, capacity_factor = 0.5}",
       "f64[4, 2, 3]", "x"},
      {"moe_collect", "%y: f64[4, 2, 3], %s: f64[6, 4]",
       "  %v, %i = top_k(%s) {k = 2}\n  %r = moe_collect(%y, %i)", "f64[6, 2, 3]", "y"},
      // Routed in 2 groups of 3 tokens, capacity 1 per group: the derivatives keep the
      // groups (a slot of group 1 must send its cotangent to group 1's token).
      {"moe_dispatch_grouped", "%x: f64[6, 3], %s: f64[6, 4]",
       "  %v, %i = top_k(%s) {k = 2}\n"
       "  %r = moe_dispatch(%x, %i) {experts = 4, capacity = 1, groups = 2}",
       "f64[4, 2, 3]", "x"},
      {"moe_collect_grouped", "%y: f64[4, 4, 3], %s: f64[6, 4]",
       "  %v, %i = top_k(%s) {k = 2}\n  %r = moe_collect(%y, %i) {groups = 2}", "f64[6, 2, 3]",
       "y"},
      // A whole top-2 layer: through the expert GEMM, the combine weights (softmax, top_k,
      // renormalization) into the router's scores, and both routes into x.
      {"moe_layer", "%x: f64[6, 3], %s: f64[6, 4], %w: f64[4, 3, 5]",
       "  %pr = softmax(%s) {dim = 1}\n  %v, %i = top_k(%pr) {k = 2}\n"
       "  %n = reduce_sum(%v) {dims = [1], keepdim}\n  %g = div(%v, %n)\n"
       "  %buf = moe_dispatch(%x, %i) {experts = 4, capacity = 2}\n"
       "  %h = matmul(%buf, %w)\n  %back = moe_collect(%h, %i)\n"
       "  %g3 = reshape(%g) : f64[6, 2, 1]\n  %wb = mul(%back, %g3)\n"
       "  %r = reduce_sum(%wb) {dims = [1]}",
       "f64[6, 5]", "x,s,w"},
      // Through cross_entropy_grad, which reuses the forward's lse. Labels 1, 3 and an
      // ignored token (its gradient must be 0, and the mean divides by 2).
      {"cross_entropy_mean", x34, CrossEntropyBody("[1, 3, -100]", ""), "f64[]", "x"},
      {"cross_entropy_sum_smoothing_zloss", x34,
       CrossEntropyBody("[2, -100, 0]", "reduction = sum, label_smoothing = 0.2, z_loss = 0.05"),
       "f64[]", "x"},
      {"cross_entropy_none_ignore_index", x34,
       CrossEntropyBody("[3, 0, 1]", "reduction = none, ignore_index = 0, label_smoothing = 0.1"),
       "f64[3]", "x"},
      {"full_gets_no_gradient", x34, "  %z = full() {value = 2.0} : f64[3, 4]\n  %r = mul(%x, %z)",
       "f64[3, 4]", "x"},
  };
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllRules, DerivativeRuleTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<RuleCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace commir
