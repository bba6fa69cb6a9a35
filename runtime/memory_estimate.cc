#include "runtime/memory_estimate.h"

#include <unistd.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "commir/call_graph.h"
#include "commir/element_type.h"
#include "commir/liveness.h"
#include "runtime/in_place.h"

namespace commir::runtime {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

// What a call of each function adds while its callee runs: the callee's peak less its
// arguments, which are the call's operands and already live in the caller. Computed
// once per function, callees first: following each call down would recurse once per
// call and take time exponential in the depth of calls that fan out.
using CallPeaks = absl::flat_hash_map<const Function*, uint64_t>;

// The peak bytes of `block`'s own values (arguments included) and what its ops nest,
// while it runs once. A callee not in `call_peaks` (only in an unverified, recursive
// program, which the interpreter refuses to run) counts as nothing more.
// The rings of `loop` whose carried block lives in its slot (in_place.h:
// CarriedBlockInSlot), found by their shifts in its body.
std::vector<CarriedRing> RingsOf(const Operation& loop) {
  std::vector<CarriedRing> rings;
  if (!loop.Is(OpKind::kFor) || loop.num_regions() < 1) return rings;
  for (const Operation* op : *loop.region(0)) {
    if (std::optional<CarriedRing> ring = CarriedBlockInSlot(*op); ring.has_value()) {
      rings.push_back(*ring);
    }
  }
  return rings;
}

uint64_t BlockPeak(const Block& block, const Liveness& liveness, const FunctionsByName& functions,
                   const CallPeaks& call_peaks) {
  uint64_t live = 0;
  for (const Value* arg : block.arguments()) live = SaturatingAdd(live, TypeBytes(arg->type()));
  // A slice read in place (in_place.h: SliceReadInPlace) is a view: it holds no bytes of
  // its own but keeps the tensor it views, which is released only once that tensor and
  // every view of it are dead. `viewed` maps each view to the tensor whose bytes it
  // holds (a view of a view holds the same); `views` counts the live views of each such
  // tensor, and `dead` holds those whose own last use has passed.
  absl::flat_hash_map<const Value*, const Value*> viewed;
  absl::flat_hash_map<const Value*, int64_t> views;
  absl::flat_hash_set<const Value*> dead;
  auto add_view = [&](const Value* view, const Value* source) {
    auto through = viewed.find(source);
    if (through != viewed.end()) source = through->second;
    viewed[view] = source;
    ++views[source];
  };
  // A ring's carried block that lives in its slot (in_place.h: CarriedBlockInSlot) is a
  // view of the gathered value: the body's block argument, the shift's result and the
  // loop's block result hold no bytes of their own. The ring's updates write the
  // gathered value in place, so its views pass on to the update's result.
  absl::flat_hash_map<const Operation*, const Value*> ring_shifts;  // to the gathered value
  absl::flat_hash_set<const Operation*> ring_updates;
  const Operation* parent = block.parent_op();
  if (parent != nullptr && parent->Is(OpKind::kFor)) {
    for (const CarriedRing& ring : RingsOf(*parent)) {
      const Value* carried = block.argument(ring.block + 1);
      live -= std::min(live, TypeBytes(carried->type()));
      add_view(carried, ring.update->operand(0));
      ring_shifts[ring.shift] = ring.update->operand(0);
      ring_updates.insert(ring.update);
    }
  }
  uint64_t peak = live;
  for (const Operation* op : block) {
    if (op->def().Has(kTerminator)) break;
    uint64_t results = 0;
    const std::vector<CarriedRing> rings = RingsOf(*op);
    if (SliceReadInPlace(*op)) {
      add_view(op->result(0), op->operand(0));
    } else if (auto ring = ring_shifts.find(op); ring != ring_shifts.end()) {
      add_view(op->result(0), ring->second);
    } else {
      for (const Value* result : op->results()) {
        bool is_view = false;
        for (const CarriedRing& ring : rings) is_view = is_view || result == op->result(ring.block);
        if (!is_view) results = SaturatingAdd(results, TypeBytes(result->type()));
      }
    }
    uint64_t during = SaturatingAdd(live, results);
    for (int r = 0; r < op->num_regions(); ++r) {
      // The loop holds its carried values (results-sized) besides the body's values,
      // whose arguments are the previous iteration's carried values.
      during = std::max(during,
                        SaturatingAdd(SaturatingAdd(live, results),
                                      BlockPeak(*op->region(r), liveness, functions, call_peaks)));
    }
    if (const Function* callee = functions.Callee(*op); callee != nullptr) {
      auto it = call_peaks.find(callee);
      if (it != call_peaks.end()) during = std::max(during, SaturatingAdd(live, it->second));
    }
    peak = std::max(peak, during);
    live = SaturatingAdd(live, results);
    for (const CarriedRing& ring : rings) {
      add_view(op->result(ring.block), op->result(ring.gathered));
      ring_updates.insert(ring.last_update);
    }
    if (ring_updates.contains(op)) {
      // Written in place: the gathered value's views are the result's now.
      const Value* from = op->operand(0);
      const Value* to = op->result(0);
      const int64_t held = views.contains(from) ? views[from] : 0;
      if (held > 0) {
        for (auto& [view, source] : viewed) {
          if (source == from) source = to;
        }
        views[from] = 0;
        views[to] += held;
      }
    }
    auto release = [&](const Value* value) { live -= std::min(live, TypeBytes(value->type())); };
    for (const Value* value : liveness.DeadAfter(*op)) {
      if (auto view = viewed.find(value); view != viewed.end()) {
        // The view's last reader has run; its tensor goes with its last view.
        const Value* source = view->second;
        if (--views[source] == 0 && dead.erase(source) > 0) release(source);
        continue;
      }
      if (auto held = views.find(value); held != views.end() && held->second > 0) {
        dead.insert(value);
        continue;
      }
      release(value);
    }
  }
  return peak;
}

}  // namespace

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return a > kMax - b ? kMax : a + b; }

uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  uint64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? kMax : product;
}

uint64_t TypeBytes(Type type) {
  if (type.is_null() || !type.is_tensor()) return 0;
  return SaturatingMul(static_cast<uint64_t>(type.num_elements()),
                       static_cast<uint64_t>(ElementTypeByteWidth(type.element_type())));
}

uint64_t TotalBytes(absl::Span<const Type> types) {
  uint64_t total = 0;
  for (Type type : types) total = SaturatingAdd(total, TypeBytes(type));
  return total;
}

uint64_t PeakLiveBytesPerDevice(const Function& function) {
  if (function.module() == nullptr) {
    Liveness liveness(function);
    return BlockPeak(*function.body(), liveness, FunctionsByName(Module()), CallPeaks());
  }
  const FunctionsByName functions(*function.module());
  CallPeaks call_peaks;
  Function* root = const_cast<Function*>(&function);
  for (const Function* f : CalleesFirst(*function.module(), {&root, 1},
                                        [](Operation&, const Function&,
                                           absl::Span<Function* const>) {})) {
    Liveness liveness(*f);
    uint64_t peak = BlockPeak(*f->body(), liveness, functions, call_peaks);
    if (f == &function) return peak;
    uint64_t args = 0;
    for (const Value* arg : f->body()->arguments()) {
      args = SaturatingAdd(args, TypeBytes(arg->type()));
    }
    call_peaks[f] = peak - std::min(peak, args);
  }
  return 0;  // not reached: the root comes last
}

uint64_t PhysicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return SaturatingMul(static_cast<uint64_t>(pages), static_cast<uint64_t>(page_size));
}

}  // namespace commir::runtime
