#include "transforms/autodiff/forward_copy.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/container/flat_hash_set.h"

namespace commir {
namespace {

// The values matched so far, numbered: the same number in both functions is the same
// forward value.
using Numbers = absl::flat_hash_map<const Value*, int64_t>;

// A top-level op as a byte string that determines what it computes from the numbered
// values it reads: equal strings, equal computations. Every variable-length part is
// length-prefixed (as in commir/fingerprint.cc), so different ops never encode alike.
// Values defined inside the op's regions are numbered locally, in definition order.
class OpKey {
 public:
  explicit OpKey(const Numbers& outer) : outer_(outer) {}

  std::string Of(const Operation& op) {
    Op(op);
    return std::move(out_);
  }

 private:
  void Op(const Operation& op) {
    Tag('O');
    String(op.name());
    Int(op.num_operands());
    for (const Value* operand : op.operands()) Use(operand);
    if (const Value* stream = op.stream_operand()) {
      Tag('S');
      Use(stream);
    } else {
      Tag('N');
    }
    std::vector<const AttrDict::Entry*> attrs;
    for (const AttrDict::Entry& entry : op.attrs().entries()) attrs.push_back(&entry);
    std::sort(attrs.begin(), attrs.end(),
              [](const AttrDict::Entry* x, const AttrDict::Entry* y) {
                return x->first < y->first;
              });
    Int(static_cast<int64_t>(attrs.size()));
    for (const AttrDict::Entry* entry : attrs) {
      String(entry->first);
      String(entry->second.ToString());
    }
    Int(op.num_regions());
    for (int r = 0; r < op.num_regions(); ++r) {
      const Block& block = *op.region(r);
      Tag('B');
      Int(block.num_arguments());
      for (int i = 0; i < block.num_arguments(); ++i) Define(block.argument(i));
      Int(static_cast<int64_t>(block.size()));
      for (const Operation* inner : block) Op(*inner);
    }
    // A top-level op's results are compared and numbered by the caller (the copy may
    // have more); those of an op inside a region belong to the key.
    if (op.parent_op() == nullptr) return;
    Int(op.num_results());
    for (int i = 0; i < op.num_results(); ++i) Define(op.result(i));
  }

  void Define(const Value* value) {
    EncodeType(value->type());
    local_.emplace(value, static_cast<int64_t>(local_.size()));
  }

  void Use(const Value* value) {
    if (value->is_literal()) {
      Tag('L');
      double number = value->literal_value();
      int64_t bits;
      std::memcpy(&bits, &number, sizeof bits);
      Int(bits);
      EncodeType(value->type());
      return;
    }
    if (auto it = local_.find(value); it != local_.end()) {
      Tag('R');
      Int(it->second);
      return;
    }
    auto it = outer_.find(value);
    Tag(it == outer_.end() ? 'U' : 'V');
    Int(it == outer_.end() ? -1 : it->second);
  }

  void EncodeType(Type type) { String(type.is_null() ? std::string() : type.ToString()); }
  void Tag(char c) { out_.push_back(c); }
  void Int(int64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void String(absl::string_view s) {
    Int(static_cast<int64_t>(s.size()));
    out_.append(s.data(), s.size());
  }

  const Numbers& outer_;
  Numbers local_;
  std::string out_;
};

// Whether `copy` returns what `op` returns, and maybe more: autodiff's copy of a
// differentiated attention also returns the log-sum-exp its backward reads.
bool ResultsExtend(const Operation& op, const Operation& copy) {
  if (copy.num_results() < op.num_results()) return false;
  for (int i = 0; i < op.num_results(); ++i) {
    if (copy.result(i)->type() != op.result(i)->type()) return false;
  }
  return true;
}

const Operation* TopLevel(const Operation* op) {
  while (op->parent_op() != nullptr) op = op->parent_op();
  return op;
}

// The top-level ops of `function` that its first `results` returned values are computed
// from (operands read inside regions included).
absl::flat_hash_set<const Operation*> ComputingResults(const Function& function, int results) {
  absl::flat_hash_set<const Operation*> found;
  const Operation* ret = function.body()->terminator();
  if (ret == nullptr || !ret->Is(OpKind::kReturn)) return found;
  std::vector<const Operation*> work;
  auto reach = [&](const Value* value) {
    if (value->kind() != Value::Kind::kResult) return;
    const Operation* op = TopLevel(value->defining_op());
    if (op->parent_block() == function.body() && found.insert(op).second) work.push_back(op);
  };
  for (int i = 0; i < results && i < ret->num_operands(); ++i) reach(ret->operand(i));
  while (!work.empty()) {
    const Operation* op = work.back();
    work.pop_back();
    for (const Value* operand : op->all_operands()) reach(operand);
    for (int r = 0; r < op->num_regions(); ++r) {
      WalkOps(op->region(r), [&](Operation* inner) {
        for (const Value* operand : inner->all_operands()) reach(operand);
      });
    }
  }
  return found;
}

}  // namespace

bool ForwardCopy::Recomputes(const Operation* op) const {
  return forward_part.contains(TopLevel(op));
}

ForwardCopy MatchForwardCopy(const Function& forward, const Function& gradient) {
  ForwardCopy copy;
  Numbers numbers;
  int64_t next = 0;
  const Block& fwd = *forward.body();
  const Block& grad = *gradient.body();
  // The gradient function's leading arguments are the forward's.
  for (int i = 0; i < fwd.num_arguments(); ++i) {
    numbers[fwd.argument(i)] = next;
    if (i < grad.num_arguments()) {
      numbers[grad.argument(i)] = next;
      copy.values[grad.argument(i)] = fwd.argument(i);
    }
    ++next;
  }
  // The forward's ops by what they compute; identical ones queue in program order.
  absl::flat_hash_map<std::string, std::deque<const Operation*>> by_key;
  for (const Operation* op : fwd) {
    if (op->def().Has(kTerminator)) continue;
    by_key[OpKey(numbers).Of(*op)].push_back(op);
    for (const Value* result : op->results()) numbers[result] = next++;
  }
  for (int i = fwd.num_arguments(); i < grad.num_arguments(); ++i) {
    numbers[grad.argument(i)] = next++;
  }
  for (const Operation* op : grad) {
    if (op->def().Has(kTerminator)) continue;
    const Operation* twin = nullptr;
    if (auto it = by_key.find(OpKey(numbers).Of(*op)); it != by_key.end()) {
      std::deque<const Operation*>& candidates = it->second;
      for (auto c = candidates.begin(); c != candidates.end(); ++c) {
        if (!ResultsExtend(**c, *op)) continue;
        twin = *c;
        candidates.erase(c);
        break;
      }
    }
    for (int i = 0; i < op->num_results(); ++i) {
      // Results beyond the forward op's (an attention's log-sum-exp) are the copy's own.
      if (twin == nullptr || i >= twin->num_results()) {
        numbers[op->result(i)] = next++;
        continue;
      }
      numbers[op->result(i)] = numbers.at(twin->result(i));
      copy.values[op->result(i)] = twin->result(i);
    }
    if (twin != nullptr) copy.ops[op] = twin;
  }
  copy.forward_part =
      ComputingResults(gradient, static_cast<int>(forward.result_types().size()));
  for (const auto& [op, twin] : copy.ops) copy.forward_part.insert(op);
  return copy;
}

}  // namespace commir
