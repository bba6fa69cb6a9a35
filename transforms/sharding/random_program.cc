#include "transforms/sharding/random_program.h"

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace commir::sharding {
namespace {

struct Axis {
  std::string name;
  int64_t size;
};

// A value the program can use: its name, shape and whether it stays within a small
// range (so exp cannot overflow).
struct Val {
  std::string name;
  std::vector<int64_t> dims;
  bool bounded = true;
};

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

class ProgramGenerator {
 public:
  ProgramGenerator(uint64_t seed, const RandomProgramOptions& options)
      : rng_(seed), options_(options) {}

  std::string Generate() {
    MakeMesh();
    element_type_ = Coin(0.15) ? "bf16" : "f32";
    int args = Uniform(1, 3);
    for (int i = 0; i < args; ++i) pool_.push_back(NewArg(RandomDims(Uniform(1, 4))));
    int ops = Uniform(2, 7);
    for (int i = 0; i < ops; ++i) {
      for (int attempt = 0; attempt < 8; ++attempt) {
        if (GenerateOp()) break;
      }
    }
    // Return the last value and sometimes another one.
    std::vector<Val> returned = {pool_.back()};
    if (Coin(0.3)) returned.push_back(Pick());
    std::vector<std::string> names, types;
    for (const Val& v : returned) {
      names.push_back(v.name);
      types.push_back(TypeText(v.dims, /*allow_partial=*/true, /*p_split=*/0.4));
    }
    // Patterns are returned too (dce would otherwise erase those nothing reads), mostly
    // in the layout they were annotated with.
    for (const auto& [name, type] : pattern_results_) {
      if (std::find(names.begin(), names.end(), name) != names.end()) continue;
      names.push_back(name);
      types.push_back(type);
    }
    std::string mesh = absl::StrCat(
        "mesh @m(", absl::StrJoin(axes_, ", ", [](std::string* out, const Axis& a) {
          absl::StrAppend(out, a.name, "=", a.size);
        }), ")\n\n");
    std::string result_types = types.size() == 1 ? types[0] : absl::StrCat("(", absl::StrJoin(types, ", "), ")");
    return absl::StrCat(mesh, "func @f(", absl::StrJoin(arg_decls_, ", "), ") -> ", result_types,
                        " {\n", absl::StrJoin(body_, ""), "  return ", absl::StrJoin(names, ", "),
                        "\n}\n");
  }

 private:
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Coin(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <typename T>
  const T& OneOf(const std::vector<T>& items) {
    return items[Uniform(0, static_cast<int>(items.size()) - 1)];
  }

  void MakeMesh() {
    if (!options_.mesh.empty()) {
      for (const auto& [name, size] : options_.mesh) axes_.push_back({name, size});
      return;
    }
    switch (Uniform(0, 8)) {
      case 0: axes_ = {{"x", 1}}; break;
      case 1: axes_ = {{"x", 2}}; break;
      case 2: axes_ = {{"x", 4}}; break;
      case 3: axes_ = {{"x", 8}}; break;
      case 4: axes_ = {{"a", 2}, {"b", 2}}; break;
      case 5: axes_ = {{"a", 2}, {"b", 4}}; break;
      case 6: axes_ = {{"a", 4}, {"b", 2}}; break;
      case 7: axes_ = {{"a", 1}, {"b", 4}}; break;
      default: axes_ = {{"a", 2}, {"b", 1}}; break;
    }
  }

  std::vector<int64_t> RandomDims(int rank) {
    std::vector<int64_t> dims;
    for (int i = 0; i < rank; ++i) dims.push_back(OneOf<int64_t>({2, 4, 8, 8, 16}));
    while (Product(dims) > 1024) dims[Uniform(0, rank - 1)] = 2;
    return dims;
  }

  // A type with a random layout: each dimension split with probability `p_split` over
  // one or two unused axes that divide it; partial over unused axes sometimes.
  std::string TypeText(const std::vector<int64_t>& dims, bool allow_partial, double p_split,
                       const std::string& element_type = "") {
    std::vector<std::string> unused;
    for (const Axis& a : axes_) unused.push_back(a.name);
    std::shuffle(unused.begin(), unused.end(), rng_);
    auto size_of = [&](const std::string& name) {
      for (const Axis& a : axes_) {
        if (a.name == name) return a.size;
      }
      return int64_t{1};
    };
    std::vector<std::string> parts;
    for (int64_t d : dims) {
      std::string text = absl::StrCat(d);
      if (Coin(p_split) && !unused.empty()) {
        std::vector<std::string> group;
        int64_t product = 1;
        int want = Coin(0.3) ? 2 : 1;
        for (size_t i = 0; i < unused.size() && static_cast<int>(group.size()) < want;) {
          if (d % (product * size_of(unused[i])) == 0) {
            product *= size_of(unused[i]);
            group.push_back(unused[i]);
            unused.erase(unused.begin() + static_cast<std::ptrdiff_t>(i));
          } else {
            ++i;
          }
        }
        if (group.size() == 1) absl::StrAppend(&text, "@", group[0]);
        if (group.size() > 1) absl::StrAppend(&text, "@(", absl::StrJoin(group, ", "), ")");
      }
      parts.push_back(text);
    }
    std::string out = absl::StrCat(element_type.empty() ? element_type_ : element_type, "[",
                                   absl::StrJoin(parts, ", "), "]");
    if (allow_partial && !unused.empty() && Coin(0.15)) {
      absl::StrAppend(&out, " partial(", unused[0], ")");
    }
    return out;
  }

  Val NewArg(const std::vector<int64_t>& dims) {
    std::string name = absl::StrCat("%a", arg_decls_.size());
    arg_decls_.push_back(absl::StrCat(name, ": ", TypeText(dims, false, 0.5)));
    return {name, dims, true};
  }

  std::string Fresh() { return absl::StrCat("%v", next_value_++); }

  // A value from the pool, usually a recent one.
  Val Pick() {
    int n = static_cast<int>(pool_.size());
    if (n > 3 && Coin(0.7)) return pool_[Uniform(n - 3, n - 1)];
    return pool_[Uniform(0, n - 1)];
  }

  // ": TYPE" with a random layout, or nothing (the layout is then inferred).
  std::string MaybeAnnotation(const std::vector<int64_t>& dims) {
    if (!Coin(0.3)) return "";
    return absl::StrCat(" : ", TypeText(dims, true, 0.5));
  }

  void Add(const std::string& line, Val v) {
    body_.push_back(absl::StrCat("  ", line, "\n"));
    pool_.push_back(std::move(v));
  }

  bool GenerateOp() {
    // Draws nothing unless the knob is set, so default programs stay as they were.
    if (options_.p_schedule_pattern > 0 && Coin(options_.p_schedule_pattern)) {
      return Coin(0.6) ? ScheduleMatmul() : SequenceAttention();
    }
    switch (Uniform(0, 15)) {
      case 0:
      case 1: return Unary();
      case 2:
      case 3: return Binary();
      case 4:
      case 5: return Matmul();
      case 6: return Reduce();
      case 7: return Softmax();
      case 8: return Norm();
      case 9: return Reshape();
      case 10: return Transpose();
      case 11: return Slice();
      case 12: return Concat();
      case 13: return Broadcast();
      case 14: return Attention();
      default: return ReshardOrFull();
    }
  }

  bool Unary() {
    Val x = Pick();
    std::vector<std::string> ops = {"neg", "abs", "tanh", "sigmoid", "relu", "silu", "gelu"};
    if (x.bounded) ops.push_back("exp");
    std::string op = OneOf(ops);
    std::string name = Fresh();
    bool bounded = op == "tanh" || op == "sigmoid" || (x.bounded && op != "exp");
    Add(absl::StrCat(name, " = ", op, "(", x.name, ")", MaybeAnnotation(x.dims)), {name, x.dims, bounded});
    return true;
  }

  bool Binary() {
    Val a = Pick();
    // "select" stands for a compare of the two operands choosing between them.
    std::string op = OneOf<std::string>({"add", "sub", "mul", "max", "min", "select"});
    std::string name = Fresh();
    if (Coin(0.2)) {
      if (op == "select") op = "max";  // select takes no literal
      Add(absl::StrCat(name, " = ", op, "(", a.name, ", 0.5)", MaybeAnnotation(a.dims)),
          {name, a.dims, a.bounded});
      return true;
    }
    // The other operand: a value of the same shape, or a new argument of the same shape
    // or a broadcastable one (trailing dims, some set to 1).
    Val b;
    std::vector<Val> same;
    for (const Val& v : pool_) {
      if (v.dims == a.dims && v.name != a.name) same.push_back(v);
    }
    if (!same.empty() && Coin(0.5)) {
      b = OneOf(same);
    } else {
      std::vector<int64_t> dims = a.dims;
      if (Coin(0.4) && !dims.empty()) {
        dims.erase(dims.begin(), dims.begin() + Uniform(0, static_cast<int>(dims.size()) - 1));
        for (int64_t& d : dims) {
          if (Coin(0.3)) d = 1;
        }
      }
      b = NewArg(dims);
    }
    if (Coin(0.5)) std::swap(a, b);
    std::vector<int64_t> out = a.dims.size() >= b.dims.size() ? a.dims : b.dims;
    const std::vector<int64_t>& shorter = a.dims.size() >= b.dims.size() ? b.dims : a.dims;
    for (size_t i = 0; i < shorter.size(); ++i) {
      int64_t& d = out[out.size() - shorter.size() + i];
      d = std::max(d, shorter[i]);
    }
    if (op == "select") {
      std::string predicate = Fresh();
      // The i1 predicate is no f32 value for later ops to pick: it stays out of the pool.
      body_.push_back(absl::StrCat("  ", predicate, " = compare(", a.name, ", ", b.name,
                                   ") {cmp = ",
                                   OneOf<std::string>({"lt", "le", "gt", "ge", "eq", "ne"}),
                                   "}\n"));
      Add(absl::StrCat(name, " = select(", predicate, ", ", a.name, ", ", b.name, ")",
                       MaybeAnnotation(out)),
          {name, out, a.bounded && b.bounded});
      return true;
    }
    Add(absl::StrCat(name, " = ", op, "(", a.name, ", ", b.name, ")", MaybeAnnotation(out)),
        {name, out, a.bounded && b.bounded && op != "mul"});
    return true;
  }

  bool Matmul() {
    Val a = Pick();
    if (a.dims.size() < 2) return false;
    size_t r = a.dims.size();
    bool ta = Coin(0.2), tb = Coin(0.3);
    int64_t m = ta ? a.dims[r - 1] : a.dims[r - 2];
    int64_t k = ta ? a.dims[r - 2] : a.dims[r - 1];
    int64_t n = OneOf<int64_t>({2, 4, 8, 16});
    std::vector<int64_t> batch(a.dims.begin(), a.dims.end() - 2);
    std::vector<int64_t> b_dims = Coin(0.5) ? batch : std::vector<int64_t>{};
    b_dims.push_back(tb ? n : k);
    b_dims.push_back(tb ? k : n);
    std::vector<int64_t> out = batch;
    out.push_back(m);
    out.push_back(n);
    if (Product(out) > 2048) return false;
    Val b = NewArg(b_dims);
    std::string attrs;
    if (ta && tb) attrs = " {transpose_a, transpose_b}";
    else if (ta) attrs = " {transpose_a}";
    else if (tb) attrs = " {transpose_b}";
    std::string name = Fresh();
    Add(absl::StrCat(name, " = matmul(", a.name, ", ", b.name, ")", attrs, MaybeAnnotation(out)),
        {name, out, false});
    return true;
  }

  bool Reduce() {
    Val x = Pick();
    if (x.dims.empty()) return false;
    std::string op = OneOf<std::string>({"reduce_sum", "reduce_max", "reduce_mean"});
    std::vector<int64_t> dims;
    for (size_t d = 0; d < x.dims.size(); ++d) {
      if (Coin(0.5)) dims.push_back(static_cast<int64_t>(d));
    }
    if (dims.empty()) dims.push_back(Uniform(0, static_cast<int>(x.dims.size()) - 1));
    bool keepdim = Coin(0.3);
    std::vector<int64_t> out;
    for (size_t d = 0; d < x.dims.size(); ++d) {
      bool reduced = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
      if (!reduced) out.push_back(x.dims[d]);
      else if (keepdim) out.push_back(1);
    }
    std::string name = Fresh();
    Add(absl::StrCat(name, " = ", op, "(", x.name, ") {dims = [", absl::StrJoin(dims, ", "), "]",
                     keepdim ? ", keepdim" : "", "}", MaybeAnnotation(out)),
        {name, out, x.bounded && op != "reduce_sum"});
    return true;
  }

  bool Softmax() {
    Val x = Pick();
    if (x.dims.empty()) return false;
    int dim = Uniform(-1, static_cast<int>(x.dims.size()) - 1);
    std::string name = Fresh();
    Add(absl::StrCat(name, " = softmax(", x.name, ") {dim = ", dim, "}", MaybeAnnotation(x.dims)),
        {name, x.dims, true});
    return true;
  }

  bool Norm() {
    Val x = Pick();
    if (x.dims.empty()) return false;
    bool layer = Coin(0.5);
    Val w = NewArg({x.dims.back()});
    std::string operands = absl::StrCat(x.name, ", ", w.name);
    if (layer) absl::StrAppend(&operands, ", ", NewArg({x.dims.back()}).name);
    std::string name = Fresh();
    Add(absl::StrCat(name, " = ", layer ? "layernorm" : "rmsnorm", "(", operands, ")",
                     MaybeAnnotation(x.dims)),
        {name, x.dims, false});
    return true;
  }

  bool Reshape() {
    Val x = Pick();
    std::vector<int64_t> out = x.dims;
    switch (Uniform(0, 3)) {
      case 0:  // merge two adjacent dims
        if (out.size() < 2) return false;
        {
          size_t d = Uniform(0, static_cast<int>(out.size()) - 2);
          out[d] *= out[d + 1];
          out.erase(out.begin() + static_cast<std::ptrdiff_t>(d) + 1);
        }
        break;
      case 1:  // split a dim
        {
          std::vector<size_t> even;
          for (size_t d = 0; d < out.size(); ++d) {
            if (out[d] % 2 == 0 && out[d] > 2) even.push_back(d);
          }
          if (even.empty() || out.size() >= 4) return false;
          size_t d = OneOf(even);
          int64_t f = out[d] % 4 == 0 && Coin(0.5) ? 4 : 2;
          if (Coin(0.5)) f = out[d] / f;
          out.insert(out.begin() + static_cast<std::ptrdiff_t>(d) + 1, out[d] / f);
          out[d] = f;
        }
        break;
      case 2:  // insert a unit dim
        if (out.size() >= 4) return false;
        out.insert(out.begin() + Uniform(0, static_cast<int>(out.size())), 1);
        break;
      default:  // flatten
        out = {Product(x.dims)};
        break;
    }
    std::string name = Fresh();
    Add(absl::StrCat(name, " = reshape(", x.name, ") : ", TypeText(out, true, 0.4)),
        {name, out, x.bounded});
    return true;
  }

  bool Transpose() {
    Val x = Pick();
    if (x.dims.size() < 2) return false;
    std::vector<int64_t> perm(x.dims.size());
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
    std::shuffle(perm.begin(), perm.end(), rng_);
    std::vector<int64_t> out;
    for (int64_t p : perm) out.push_back(x.dims[p]);
    std::string name = Fresh();
    Add(absl::StrCat(name, " = transpose(", x.name, ") {perm = [", absl::StrJoin(perm, ", "), "]}",
                     MaybeAnnotation(out)),
        {name, out, x.bounded});
    return true;
  }

  bool Slice() {
    Val x = Pick();
    if (x.dims.empty()) return false;
    std::vector<int64_t> start, size;
    for (int64_t d : x.dims) {
      if (Coin(0.5)) {
        int64_t s = Uniform(1, static_cast<int>(d));
        start.push_back(Uniform(0, static_cast<int>(d - s)));
        size.push_back(s);
      } else {
        start.push_back(0);
        size.push_back(d);
      }
    }
    std::string name = Fresh();
    Add(absl::StrCat(name, " = slice(", x.name, ") {start = [", absl::StrJoin(start, ", "),
                     "], size = [", absl::StrJoin(size, ", "), "]}", MaybeAnnotation(size)),
        {name, size, x.bounded});
    return true;
  }

  bool Concat() {
    Val x = Pick();
    if (x.dims.empty()) return false;
    int dim = Uniform(0, static_cast<int>(x.dims.size()) - 1);
    Val y = x;
    if (Coin(0.6)) {
      std::vector<int64_t> dims = x.dims;
      dims[dim] = OneOf<int64_t>({2, 4, 8});
      y = NewArg(dims);
    }
    std::vector<int64_t> out = x.dims;
    out[dim] += y.dims[dim];
    std::string name = Fresh();
    Add(absl::StrCat(name, " = concat(", x.name, ", ", y.name, ") {dim = ", dim, "}",
                     MaybeAnnotation(out)),
        {name, out, x.bounded && y.bounded});
    return true;
  }

  bool Broadcast() {
    Val x = Pick();
    if (x.dims.size() >= 4) return false;
    std::vector<int64_t> out = x.dims;
    out.insert(out.begin(), OneOf<int64_t>({2, 4}));
    if (Product(out) > 2048) return false;
    std::string name = Fresh();
    Add(absl::StrCat(name, " = broadcast(", x.name, ") : ", TypeText(out, true, 0.4)),
        {name, out, x.bounded});
    return true;
  }

  bool Attention() {
    int64_t b = OneOf<int64_t>({1, 2});
    int64_t h = OneOf<int64_t>({2, 4, 8});
    int64_t hkv = Coin(0.5) ? h : OneOf<int64_t>({1, 2});
    if (h % hkv != 0) hkv = h;
    int64_t sq = OneOf<int64_t>({4, 8, 16});
    int64_t skv = Coin(0.6) ? sq : OneOf<int64_t>({8, 16});
    int64_t d = OneOf<int64_t>({4, 8});
    int64_t dv = Coin(0.7) ? d : 8;
    Val q;
    bool have_q = false;
    for (const Val& v : pool_) {
      if (v.dims.size() == 4 && Coin(0.5) && v.dims[1] % 1 == 0) {
        q = v;
        have_q = true;
      }
    }
    if (have_q) {
      b = q.dims[0];
      h = q.dims[1];
      sq = q.dims[2];
      d = q.dims[3];
      hkv = h;
    } else {
      q = NewArg({b, h, sq, d});
    }
    Val k = NewArg({b, hkv, skv, d});
    Val v = NewArg({b, hkv, skv, dv});
    std::string operands = absl::StrCat(q.name, ", ", k.name, ", ", v.name);
    if (Coin(0.2)) {
      std::string pos = Fresh();
      body_.push_back(absl::StrCat("  ", pos, " = full() {value = ", Uniform(0, static_cast<int>(skv)),
                                   "} : index\n"));
      absl::StrAppend(&operands, ", ", pos);
    }
    bool causal = Coin(0.6);
    std::string name = Fresh();
    std::vector<int64_t> out = {b, h, sq, dv};
    if (Coin(0.25)) {
      std::string lse = Fresh();
      Add(absl::StrCat(name, ", ", lse, " = attention(", operands, ")", causal ? " {causal}" : "",
                       " : (", TypeText(out, false, 0.4), ", ", TypeText({b, h, sq}, false, 0.4, "f32"),
                       ")"),
          {name, out, v.bounded});
      return true;
    }
    Add(absl::StrCat(name, " = attention(", operands, ")", causal ? " {causal}" : "",
                     MaybeAnnotation(out)),
        {name, out, v.bounded});
    return true;
  }

  bool ReshardOrFull() {
    Val x = Pick();
    std::string name = Fresh();
    if (Coin(0.5)) {
      Add(absl::StrCat(name, " = reshard(", x.name, ") : ", TypeText(x.dims, true, 0.5)),
          {name, x.dims, x.bounded});
      return true;
    }
    std::string c = Fresh();
    body_.push_back(absl::StrCat("  ", c, " = full() {value = 0.25} : ", TypeText(x.dims, false, 0.5),
                                 "\n"));
    Add(absl::StrCat(name, " = add(", x.name, ", ", c, ")", MaybeAnnotation(x.dims)),
        {name, x.dims, x.bounded});
    return true;
  }

  // ---- Patterns of the communication schedules (options_.p_schedule_pattern) ----------

  // A group of mesh axes of more than one device: one axis, or on a 2-D mesh sometimes
  // both. Returns the layout text ("x" or "(a, b)") and the group size; size 0 if the
  // mesh has no axis of size > 1.
  std::pair<std::string, int64_t> AxisGroup() {
    std::vector<Axis> real;
    for (const Axis& a : axes_) {
      if (a.size > 1) real.push_back(a);
    }
    if (real.empty()) return {"", 0};
    if (real.size() >= 2 && Coin(0.3)) {
      return {absl::StrCat("(", real[0].name, ", ", real[1].name, ")"), real[0].size * real[1].size};
    }
    const Axis& a = OneOf(real);
    return {a.name, a.size};
  }

  // Returns `name` in the layout `type` it was annotated with, or sometimes another.
  void AddPatternResult(const std::string& name, const std::vector<int64_t>& dims,
                        const std::string& type, const std::string& element_type = "") {
    pattern_results_.push_back(
        {name, Coin(0.7) ? type : TypeText(dims, true, 0.4, element_type)});
  }

  // "T[d0, d1@g, ...]": `split` holds, per dim, whether it is split over `group`.
  std::string SplitType(const std::vector<int64_t>& dims, const std::vector<bool>& split,
                        const std::string& group, const std::string& element_type = "") {
    std::vector<std::string> parts;
    for (size_t i = 0; i < dims.size(); ++i) {
      parts.push_back(split[i] ? absl::StrCat(dims[i], "@", group) : absl::StrCat(dims[i]));
    }
    return absl::StrCat(element_type.empty() ? element_type_ : element_type, "[",
                        absl::StrJoin(parts, ", "), "]");
  }

  // An activation of shape `dims` laid out by `split`: a pool value of that shape
  // resharded, or a new argument passed through an elementwise op, so the matmul or
  // attention reads a computed, sharded value.
  Val Activation(const std::vector<int64_t>& dims, const std::vector<bool>& split,
                 const std::string& group) {
    std::string type = SplitType(dims, split, group);
    std::string name = Fresh();
    for (const Val& v : pool_) {
      if (v.dims == dims && v.bounded && Coin(0.6)) {
        Add(absl::StrCat(name, " = reshard(", v.name, ") : ", type), {name, dims, true});
        return pool_.back();
      }
    }
    std::string arg = absl::StrCat("%a", arg_decls_.size());
    arg_decls_.push_back(absl::StrCat(arg, ": ", type));
    Add(absl::StrCat(name, " = ", OneOf<std::string>({"tanh", "sigmoid", "neg"}), "(", arg, ") : ",
                     type),
        {name, dims, true});
    return pool_.back();
  }

  // A matmul whose layouts make lower-to-spmd gather an operand along M, N or a batch
  // dimension, or reduce-scatter the product along one of them (K split).
  bool ScheduleMatmul() {
    auto [group, n] = AxisGroup();
    if (n == 0) return false;
    int64_t m = n * OneOf<int64_t>({2, 4, 8}), k = OneOf<int64_t>({4, 8, 16});
    int64_t nn = n * OneOf<int64_t>({2, 4});
    bool batched = Coin(0.25);
    int64_t b = batched ? n * OneOf<int64_t>({1, 2}) : 1;
    if (b * m * std::max(k, nn) > 4096) return false;
    bool ta = Coin(0.2), tb = Coin(0.2);
    // Which dims are split: 0 gather M, 1 gather N, 2 scatter to M, 3 scatter to N,
    // 4 (batched) gather the batch.
    int kind = Uniform(0, batched ? 4 : 3);
    bool a_m = kind == 0 || kind == 1, b_n = kind == 0 || kind == 1, k_split = kind >= 2 && kind <= 3;
    if (k_split && k % n != 0) k = n * OneOf<int64_t>({1, 2});
    bool out_m = kind == 1 || kind == 2, out_n = kind == 0 || kind == 3;
    bool a_batch = kind == 4;
    std::vector<int64_t> a_dims, b_dims, out_dims;
    std::vector<bool> a_split, b_split, out_split;
    if (batched) {
      a_dims.push_back(b);
      a_split.push_back(a_batch);
      out_dims.push_back(b);
      out_split.push_back(false);
      if (Coin(0.5)) {
        b_dims.push_back(b);
        b_split.push_back(false);
      }
    }
    auto push2 = [](std::vector<int64_t>& dims, std::vector<bool>& split, bool transpose,
                    int64_t d0, bool s0, int64_t d1, bool s1) {
      dims.push_back(transpose ? d1 : d0);
      split.push_back(transpose ? s1 : s0);
      dims.push_back(transpose ? d0 : d1);
      split.push_back(transpose ? s0 : s1);
    };
    push2(a_dims, a_split, ta, m, a_m, k, k_split);
    push2(b_dims, b_split, tb, k, k_split, nn, b_n);
    push2(out_dims, out_split, false, m, out_m, nn, out_n);
    Val a = Activation(a_dims, a_split, group);
    std::string w = absl::StrCat("%a", arg_decls_.size());
    arg_decls_.push_back(absl::StrCat(w, ": ", SplitType(b_dims, b_split, group)));
    std::string attrs;
    if (ta && tb) attrs = " {transpose_a, transpose_b}";
    else if (ta) attrs = " {transpose_a}";
    else if (tb) attrs = " {transpose_b}";
    std::string name = Fresh();
    std::string type = SplitType(out_dims, out_split, group);
    Add(absl::StrCat(name, " = matmul(", a.name, ", ", w, ")", attrs, " : ", type),
        {name, out_dims, false});
    AddPatternResult(name, out_dims, type);
    return true;
  }

  // Attention with q, k and v split along the sequence over one axis group (k and v
  // all-gathered by lower-to-spmd): causal or not, GQA, sometimes the lse too.
  bool SequenceAttention() {
    auto [group, n] = AxisGroup();
    if (n == 0) return false;
    int64_t b = OneOf<int64_t>({1, 2});
    int64_t h = OneOf<int64_t>({2, 4, 8});
    int64_t hkv = Coin(0.6) ? h : OneOf<int64_t>({1, 2});
    if (h % hkv != 0) hkv = h;
    int64_t sq = n * OneOf<int64_t>({1, 2, 2, 4});
    int64_t skv = Coin(0.7) ? sq : n * OneOf<int64_t>({2, 4});
    int64_t d = OneOf<int64_t>({4, 8});
    int64_t dv = Coin(0.8) ? d : 8;
    if (b * h * std::max(sq, skv) * 8 > 4096) return false;
    std::vector<bool> seq = {false, false, true, false};
    Val q = Activation({b, h, sq, d}, seq, group);
    std::string k = absl::StrCat("%a", arg_decls_.size());
    arg_decls_.push_back(absl::StrCat(k, ": ", SplitType({b, hkv, skv, d}, seq, group)));
    std::string v = absl::StrCat("%a", arg_decls_.size());
    arg_decls_.push_back(absl::StrCat(v, ": ", SplitType({b, hkv, skv, dv}, seq, group)));
    bool causal = Coin(0.6);
    std::string name = Fresh();
    std::vector<int64_t> out = {b, h, sq, dv};
    std::string operands = absl::StrCat(q.name, ", ", k, ", ", v);
    std::string attrs = causal ? " {causal}" : "";
    std::string type = SplitType(out, seq, group);
    if (Coin(0.25)) {
      std::string lse = Fresh();
      std::string lse_type = SplitType({b, h, sq}, {false, false, true}, group, "f32");
      Add(absl::StrCat(name, ", ", lse, " = attention(", operands, ")", attrs, " : (", type, ", ",
                       lse_type, ")"),
          {name, out, true});
      AddPatternResult(lse, {b, h, sq}, lse_type, "f32");
    } else {
      Add(absl::StrCat(name, " = attention(", operands, ")", attrs, " : ", type), {name, out, true});
    }
    AddPatternResult(name, out, type);
    return true;
  }

  std::mt19937_64 rng_;
  RandomProgramOptions options_;
  std::vector<std::pair<std::string, std::string>> pattern_results_;  // name, result type
  std::vector<Axis> axes_;
  std::string element_type_;
  std::vector<std::string> arg_decls_;
  std::vector<Val> pool_;
  std::vector<std::string> body_;
  int next_value_ = 0;
};

}  // namespace

std::string GenerateRandomProgram(uint64_t seed) {
  return ProgramGenerator(seed, RandomProgramOptions()).Generate();
}

std::string GenerateRandomProgram(uint64_t seed, const RandomProgramOptions& options) {
  return ProgramGenerator(seed, options).Generate();
}

}  // namespace commir::sharding
