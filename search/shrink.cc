#include "search/shrink.h"

#include <algorithm>
#include <deque>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commir/verifier.h"
#include "search/union_find.h"
#include "transforms/sharding/op_rules.h"

namespace commir::search {
namespace {

// An index into Atoms; a dimension is a list of atoms, major first. Atoms of size 1 are
// left out of the lists (they do not change).
using AtomList = std::vector<int>;

// Union-find over atoms, where a root may also be split into a list of finer atoms
// (its children, major first) once some op sees it as several factors.
class Atoms {
 public:
  int New(int64_t size, bool keep = false) {
    atoms_.push_back({size, keep, {}});
    return sets_.Add();
  }

  int Find(int a) { return sets_.Find(a); }

  int64_t Size(int a) { return atoms_[Find(a)].size; }

  // The leaf atoms (roots without children) that `list` stands for.
  AtomList Expand(const AtomList& list) {
    AtomList out;
    for (int a : list) ExpandInto(a, out);
    return out;
  }

  // Makes `a` and `b` (each a list standing for the same dimension) the same atoms,
  // splitting atoms where the two factor the dimension differently.
  absl::Status Align(const AtomList& a, const AtomList& b) {
    std::deque<int> x(a.begin(), a.end()), y(b.begin(), b.end());
    while (!x.empty() && !y.empty()) {
      if (Refine(x) || Refine(y)) continue;
      int u = Find(x.front()), v = Find(y.front());
      if (u == v) {
        x.pop_front();
        y.pop_front();
        continue;
      }
      int64_t su = atoms_[u].size, sv = atoms_[v].size;
      if (su == sv) {
        sets_.Union(u, v);
        atoms_[u].keep |= atoms_[v].keep;
        x.pop_front();
        y.pop_front();
        continue;
      }
      int64_t g = std::gcd(su, sv);
      if (g == 1) break;
      if (su != g) Split(u, g);
      if (sv != g) Split(v, g);
    }
    if (!x.empty() || !y.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the factors ", Describe(a), " and ", Describe(b), " do not divide each other"));
    }
    return absl::OkStatus();
  }

  // Takes atoms from the front of `queue` (splitting one if needed) whose product is
  // `size`; fails if the atoms do not divide it.
  absl::StatusOr<AtomList> Take(std::deque<int>& queue, int64_t size) {
    AtomList out;
    int64_t covered = 1;
    while (covered < size) {
      if (queue.empty()) return absl::FailedPreconditionError("too few factors");
      if (Refine(queue)) continue;
      int a = Find(queue.front());
      int64_t need = size / covered;
      int64_t s = atoms_[a].size;
      if (need % s == 0) {
        out.push_back(a);
        covered *= s;
        queue.pop_front();
        continue;
      }
      int64_t g = std::gcd(s, need);
      if (g == 1) {
        return absl::FailedPreconditionError(
            absl::StrCat("a factor of size ", s, " straddles a dimension of size ", size));
      }
      Split(a, g);
    }
    return out;
  }

  // Makes the atom keep its size.
  // True if it did not before.
  bool Keep(int a) {
    Atom& atom = atoms_[Find(a)];
    bool was = atom.keep;
    atom.keep = true;
    return !was;
  }

  // The size the atom gets: gcd(size, k), or its own size where it must keep it.
  int64_t NewSize(int a, int64_t k) {
    const Atom& atom = atoms_[Find(a)];
    return atom.keep ? atom.size : std::gcd(atom.size, k);
  }

 private:
  // The facts of each atom, indexed by its id in sets_ (those of a root hold).
  struct Atom {
    int64_t size;
    bool keep;  // keeps its size (the part count of a concatenation)
    AtomList children;
  };

  void ExpandInto(int a, AtomList& out) {
    a = Find(a);
    if (atoms_[a].children.empty()) {
      out.push_back(a);
      return;
    }
    // Copied: expanding may grow atoms_.
    AtomList children = atoms_[a].children;
    for (int c : children) ExpandInto(c, out);
  }

  // Replaces the front of `queue` by its children if it was split; true if it did.
  bool Refine(std::deque<int>& queue) {
    int a = Find(queue.front());
    if (atoms_[a].children.empty()) return false;
    AtomList children = atoms_[a].children;
    queue.pop_front();
    queue.insert(queue.begin(), children.begin(), children.end());
    return true;
  }

  // Splits root `a` into a major atom of size `major` and the rest.
  void Split(int a, int64_t major) {
    bool keep = atoms_[a].keep;
    int64_t rest = atoms_[a].size / major;
    int m = New(major, keep);
    int r = New(rest, keep);
    atoms_[a].children = {m, r};
  }

  std::string Describe(const AtomList& list) {
    std::vector<int64_t> sizes;
    for (int a : list) sizes.push_back(Size(a));
    return absl::StrCat("[", absl::StrJoin(sizes, "x"), "]");
  }

  UnionFind sets_;
  std::vector<Atom> atoms_;
};

std::string Where(const Operation& op) {
  return absl::StrCat(op.name(), " at ", op.loc().line, ":", op.loc().col);
}

// Finds the atoms of every dimension of the function's values.
class AtomAnalysis {
 public:
  absl::Status Run(const Function& function) {
    for (Value* arg : function.body()->arguments()) {
      if (absl::Status s = Define(arg, /*from=*/nullptr); !s.ok()) return s;
    }
    for (Operation* op = function.body()->front(); op != nullptr; op = op->next()) {
      absl::Status s = Visit(*op);
      if (!s.ok()) return absl::Status(s.code(), absl::StrCat(Where(*op), ": ", s.message()));
    }
    return absl::OkStatus();
  }

  Atoms& atoms() { return atoms_; }
  const std::vector<const Operation*>& slices() const { return slices_; }
  // The atoms of each dimension of `value` (a tensor of the function).
  const std::vector<AtomList>& dims(const Value* value) { return dims_.at(value); }

 private:
  // Gives each dimension of `value` a fresh atom (or `from`'s atoms).
  absl::Status Define(const Value* value, const std::vector<AtomList>* from) {
    if (!value->type().is_tensor()) return absl::OkStatus();
    if (from != nullptr) {
      dims_[value] = *from;
      return absl::OkStatus();
    }
    std::vector<AtomList> dims;
    for (int64_t size : value->type().dims()) {
      if (size == 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("%", value->name(), " has an empty dimension"));
      }
      dims.push_back(size == 1 ? AtomList{} : AtomList{atoms_.New(size)});
    }
    dims_[value] = std::move(dims);
    return absl::OkStatus();
  }

  absl::Status Visit(const Operation& op) {
    if (op.num_regions() > 0) {
      return absl::FailedPreconditionError("ops with regions cannot be shrunk");
    }
    if (op.Is(OpKind::kReturn)) return absl::OkStatus();
    for (int i = 0; i < op.num_operands(); ++i) {
      Value* v = op.operand(i);
      bool needs_dims = op.Is(OpKind::kReshape) || op.Is(OpKind::kConcat) ||
                        (!v->is_literal() && v->type().is_tensor());
      if (needs_dims && !dims_.contains(v)) {
        return absl::FailedPreconditionError(
            absl::StrCat("operand ", i, " is not a value of the function"));
      }
    }
    for (Value* r : op.results()) {
      if (!r->type().is_tensor()) continue;
      for (int64_t size : r->type().dims()) {
        if (size == 0) return absl::FailedPreconditionError("the result has an empty dimension");
      }
    }
    if (op.Is(OpKind::kReshape)) return VisitReshape(op);
    if (op.Is(OpKind::kConcat)) return VisitConcat(op);
    absl::StatusOr<sharding::OpRule> rule = sharding::RuleFor(op);
    if (!rule.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no sharding rule to relate its dimensions: ", rule.status().message()));
    }
    if (rule->operands.size() != static_cast<size_t>(op.num_operands()) ||
        rule->results.size() != static_cast<size_t>(op.num_results())) {
      return absl::InternalError("the sharding rule does not cover every operand and result");
    }
    std::vector<AtomList> factor_atoms;
    for (int64_t size : rule->sizes) {
      factor_atoms.push_back(size <= 1 ? AtomList{} : AtomList{atoms_.New(size)});
    }
    auto atoms_of = [&](const std::vector<int>& factors) {
      AtomList list;
      for (int f : factors) list.insert(list.end(), factor_atoms[f].begin(), factor_atoms[f].end());
      return list;
    };
    for (int i = 0; i < op.num_operands(); ++i) {
      const sharding::TensorFactors& t = rule->operands[i];
      Value* v = op.operand(i);
      if (!t.is_tensor || !v->type().is_tensor() || !dims_.contains(v)) continue;
      const std::vector<AtomList>& dims = dims_.at(v);
      if (t.dims.size() != dims.size()) return absl::InternalError("operand rank mismatch");
      for (size_t d = 0; d < dims.size(); ++d) {
        absl::Status s = atoms_.Align(atoms_.Expand(dims[d]), atoms_.Expand(atoms_of(t.dims[d])));
        if (!s.ok()) {
          return absl::FailedPreconditionError(
              absl::StrCat("operand ", i, " dimension ", d, ": ", s.message()));
        }
      }
    }
    for (int r = 0; r < op.num_results(); ++r) {
      const sharding::TensorFactors& t = rule->results[r];
      if (!t.is_tensor || !op.result(r)->type().is_tensor()) continue;
      std::vector<AtomList> dims;
      for (const std::vector<int>& factors : t.dims) dims.push_back(atoms_of(factors));
      if (dims.size() != op.result(r)->type().dims().size()) {
        return absl::InternalError("result rank mismatch");
      }
      dims_[op.result(r)] = std::move(dims);
    }
    for (Value* r : op.results()) {
      if (r->type().is_tensor() && !dims_.contains(r)) {
        return absl::InternalError("the sharding rule leaves a tensor result out");
      }
    }
    if (op.Is(OpKind::kSlice)) {
      RelateSlicedParts(op);
      slices_.push_back(&op);
    }
    return absl::OkStatus();
  }

  // A slice that takes one of n equal parts of a dimension (a fused projection's q, k or
  // v) makes the dimension n (keeping its size) x (the part), so that the shrunk slice
  // still takes exactly that part. Best effort: where the atoms do not allow it, the
  // slice's start is scaled instead (ShrunkSliceStart).
  void RelateSlicedParts(const Operation& op) {
    std::vector<int64_t> start = op.RequiredIntListAttr("start");
    const std::vector<int64_t>& in = op.operand(0)->type().dims();
    const std::vector<int64_t>& out = op.result(0)->type().dims();
    for (size_t d = 0; d < start.size() && d < in.size(); ++d) {
      if (out[d] == in[d] || out[d] <= 1 || in[d] % out[d] != 0 || start[d] % out[d] != 0 ||
          in[d] / out[d] > 8) {
        continue;  // not a few equal parts
      }
      AtomList parts = {atoms_.New(in[d] / out[d], /*keep=*/true)};
      AtomList part = atoms_.Expand(dims_.at(op.result(0))[d]);
      parts.insert(parts.end(), part.begin(), part.end());
      // A failure leaves the dimensions related less closely, which the scaled start
      // handles.
      atoms_.Align(atoms_.Expand(dims_.at(op.operand(0))[d]), parts).IgnoreError();
    }
  }

  // A reshape keeps the row-major order of the elements, so its result is the operand's
  // atoms, cut at the result's dimension boundaries.
  absl::Status VisitReshape(const Operation& op) {
    std::deque<int> queue;
    for (const AtomList& dim : dims_.at(op.operand(0))) {
      AtomList leaves = atoms_.Expand(dim);
      queue.insert(queue.end(), leaves.begin(), leaves.end());
    }
    std::vector<AtomList> dims;
    const std::vector<int64_t>& out = op.result(0)->type().dims();
    for (size_t d = 0; d < out.size(); ++d) {
      absl::StatusOr<AtomList> dim = atoms_.Take(queue, out[d]);
      if (!dim.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "result dimension ", d, " (", out[d],
            ") does not factor the operand's dimensions: ", dim.status().message()));
      }
      dims.push_back(*std::move(dim));
    }
    dims_[op.result(0)] = std::move(dims);
    return absl::OkStatus();
  }

  // Concatenated parts that are alike (the same atoms) make the result dimension
  // (number of parts) x (a part), where the number of parts keeps its size. Parts of
  // different sizes keep their sizes (a shrunk part count would not add up), and so does
  // the result dimension.
  absl::Status VisitConcat(const Operation& op) {
    Type r = op.result(0)->type();
    int64_t dim = op.IntAttr("dim");
    if (dim < 0) dim += r.rank();
    const std::vector<AtomList>& first = dims_.at(op.operand(0));
    bool alike = true;
    for (int i = 1; i < op.num_operands(); ++i) {
      const std::vector<AtomList>& other = dims_.at(op.operand(i));
      alike &= op.operand(i)->type().dims()[dim] == op.operand(0)->type().dims()[dim];
      for (size_t d = 0; d < first.size(); ++d) {
        if (static_cast<int64_t>(d) == dim && !alike) continue;
        if (absl::Status s = atoms_.Align(atoms_.Expand(first[d]), atoms_.Expand(other[d]));
            !s.ok()) {
          return absl::FailedPreconditionError(
              absl::StrCat("operand ", i, " dimension ", d, ": ", s.message()));
        }
      }
    }
    std::vector<AtomList> dims = first;
    AtomList concat_dim;
    if (alike) {
      if (op.num_operands() > 1) concat_dim.push_back(atoms_.New(op.num_operands(), /*keep=*/true));
      AtomList part = atoms_.Expand(first[dim]);
      concat_dim.insert(concat_dim.end(), part.begin(), part.end());
    } else {
      for (Value* part : op.operands()) {
        for (int a : atoms_.Expand(dims_.at(part)[dim])) atoms_.Keep(a);
      }
      if (r.dims()[dim] > 1) concat_dim.push_back(atoms_.New(r.dims()[dim], /*keep=*/true));
    }
    dims[dim] = concat_dim;
    dims_[op.result(0)] = std::move(dims);
    return absl::OkStatus();
  }

  Atoms atoms_;
  absl::flat_hash_map<const Value*, std::vector<AtomList>> dims_;
  std::vector<const Operation*> slices_;
};

std::vector<int64_t> NewDims(AtomAnalysis& analysis, const Value* value, int64_t k) {
  std::vector<int64_t> dims;
  for (const AtomList& dim : analysis.dims(value)) {
    int64_t size = 1;
    for (int a : analysis.atoms().Expand(dim)) size *= analysis.atoms().NewSize(a, k);
    dims.push_back(size);
  }
  return dims;
}

// A slice whose result would shrink less than its operand (their sizes are unrelated
// factors) keeps both sizes along that dimension. Keeping sizes only grows, so this
// ends: a round that keeps no more atoms is the last.
void KeepSlicesThatWouldNotFit(AtomAnalysis& analysis, int64_t k) {
  for (bool changed = true; changed;) {
    changed = false;
    for (const Operation* slice : analysis.slices()) {
      std::vector<int64_t> in = NewDims(analysis, slice->operand(0), k);
      std::vector<int64_t> out = NewDims(analysis, slice->result(0), k);
      for (size_t d = 0; d < in.size() && d < out.size(); ++d) {
        if (out[d] <= in[d]) continue;
        for (const Value* v : {slice->operand(0), slice->result(0)}) {
          for (int a : analysis.atoms().Expand(analysis.dims(v)[d])) {
            changed |= analysis.atoms().Keep(a);
          }
        }
      }
    }
  }
}

Type Resized(Type type, std::vector<int64_t> dims) {
  return Type::Tensor(type.element_type(), std::move(dims), type.dim_axes(), type.partial());
}

// The slice's start along each dimension in the shrunk program: a start that was a whole
// number of result sizes stays that number of (shrunk) result sizes (the parts of a fused
// projection stay the parts); any other scales with the operand and is clamped to fit.
absl::StatusOr<std::vector<int64_t>> ShrunkSliceStart(const Operation& op,
                                                      const std::vector<int64_t>& in,
                                                      const std::vector<int64_t>& out) {
  std::vector<int64_t> start = op.RequiredIntListAttr("start");
  const std::vector<int64_t>& old_in = op.operand(0)->type().dims();
  const std::vector<int64_t>& old_out = op.result(0)->type().dims();
  for (size_t d = 0; d < start.size(); ++d) {
    if (out[d] > in[d]) {
      return absl::FailedPreconditionError(absl::StrCat(
          Where(op), ": dimension ", d, " would slice ", out[d], " of ", in[d], " elements"));
    }
    int64_t s = start[d];
    if (old_out[d] > 0 && s % old_out[d] == 0 && (s / old_out[d] + 1) * out[d] <= in[d]) {
      start[d] = s / old_out[d] * out[d];
    } else {
      start[d] = std::min(s * in[d] / std::max<int64_t>(old_in[d], 1), in[d] - out[d]);
    }
  }
  return start;
}

// Calls fn(original op, copied op) for the ops of two functions printed from one another.
template <typename Fn>
void ForEachOpPair(const Function& a, const Function& b, Fn&& fn) {
  for (Operation *x = a.body()->front(), *y = b.body()->front(); x != nullptr && y != nullptr;
       x = x->next(), y = y->next()) {
    fn(*x, *y);
  }
}

}  // namespace

std::string FormatSizes(const std::vector<std::pair<int64_t, int64_t>>& sizes) {
  if (sizes.empty()) return "unchanged";
  std::vector<std::string> parts;
  for (const auto& [from, to] : sizes) parts.push_back(absl::StrCat(from, "->", to));
  return absl::StrJoin(parts, ", ");
}

int64_t MaxValueElements(const Function& function) {
  int64_t most = 0;
  for (Value* arg : function.body()->arguments()) {
    if (arg->type().is_tensor()) most = std::max(most, arg->type().num_elements());
  }
  for (Operation* op = function.body()->front(); op != nullptr; op = op->next()) {
    for (Value* r : op->results()) {
      if (r->type().is_tensor()) most = std::max(most, r->type().num_elements());
    }
  }
  return most;
}

absl::StatusOr<ShrunkModule> ShrinkFunction(const Module& module, absl::string_view function,
                                            int64_t keep_divisors_of,
                                            int64_t max_elements_per_value) {
  if (keep_divisors_of < 1) {
    return absl::InvalidArgumentError("keep_divisors_of must be positive");
  }
  const Function* original = module.FindFunction(function);
  if (original == nullptr) return absl::NotFoundError(absl::StrCat("no function @", function));
  if (original->is_spmd()) {
    return absl::FailedPreconditionError(
        absl::StrCat("@", function, " is a spmd function: only global functions are shrunk"));
  }
  AtomAnalysis analysis;
  if (absl::Status s = analysis.Run(*original); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("@", function, " cannot be shrunk: ", s.message()));
  }

  KeepSlicesThatWouldNotFit(analysis, keep_divisors_of);

  // The copy to resize: op for op the same as the original (ForEachOpPair).
  std::unique_ptr<Module> copy = module.Clone();
  Function* shrunk = copy->FindFunction(function);

  ShrunkModule result;
  absl::flat_hash_map<int64_t, int64_t> size_map;
  auto resize = [&](const Value* from, Value* to) {
    if (!from->type().is_tensor()) return;
    std::vector<int64_t> dims = NewDims(analysis, from, keep_divisors_of);
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] != from->type().dims()[d]) size_map[from->type().dims()[d]] = dims[d];
    }
    to->set_type(Resized(to->type(), std::move(dims)));
  };
  for (int i = 0; i < original->body()->num_arguments(); ++i) {
    const Value* arg = original->body()->argument(i);
    if (!arg->type().is_tensor()) continue;
    shrunk->SetArgType(i, Resized(shrunk->arg_types()[i],
                                  NewDims(analysis, arg, keep_divisors_of)));
    resize(arg, shrunk->body()->argument(i));
  }
  shrunk->RefreshArgumentTypes();
  absl::Status status;
  ForEachOpPair(*original, *shrunk, [&](const Operation& from, Operation& to) {
    for (int r = 0; r < from.num_results(); ++r) resize(from.result(r), to.result(r));
    if (from.Is(OpKind::kSlice) && status.ok()) {
      absl::StatusOr<std::vector<int64_t>> start =
          ShrunkSliceStart(from, to.operand(0)->type().dims(), to.result(0)->type().dims());
      if (!start.ok()) {
        status = start.status();
        return;
      }
      to.mutable_attrs().Set("start", Attribute::IntList(*start));
      to.mutable_attrs().Set("size", Attribute::IntList(to.result(0)->type().dims()));
    }
    if (from.Is(OpKind::kReturn)) {
      for (int i = 0; i < to.num_operands(); ++i) {
        if (!to.operand(i)->type().is_tensor()) continue;
        shrunk->SetResultType(
            i, Resized(shrunk->result_types()[i], to.operand(i)->type().dims()));
      }
    }
  });
  if (!status.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("@", function, " cannot be shrunk: ", status.message()));
  }
  if (absl::Status s = VerifyModule(*copy); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the shrunk copy of @", function, " does not verify: ", s.message()));
  }
  result.max_elements = MaxValueElements(*shrunk);
  if (result.max_elements > max_elements_per_value) {
    return absl::FailedPreconditionError(absl::StrCat(
        "@", function, " shrunk keeping divisors of ", keep_divisors_of, " still has a value of ",
        result.max_elements, " elements (more than ", max_elements_per_value, ")"));
  }
  result.sizes.assign(size_map.begin(), size_map.end());
  std::sort(result.sizes.begin(), result.sizes.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  result.module = std::move(copy);
  return result;
}

}  // namespace commir::search
