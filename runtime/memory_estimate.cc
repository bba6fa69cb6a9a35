#include "runtime/memory_estimate.h"

#include <unistd.h>

#include <algorithm>
#include <limits>

#include "commir/element_type.h"
#include "runtime/liveness.h"

namespace commir::runtime {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

// Calls nest at most this deep here; deeper (only an unverified, recursive program)
// counts the callee as nothing more, and the interpreter refuses to run it.
constexpr int kMaxCallDepth = 64;

uint64_t BlockPeak(const Block& block, const Liveness& liveness, int call_depth);

// What a call adds while its callee runs: the callee's peak less its arguments, which
// are the call's operands and already live in the caller.
uint64_t CallPeak(const Operation& call, int call_depth) {
  const Attribute* name = call.attrs().Find("callee");
  const Function* caller = call.parent_function();
  const Module* module = caller == nullptr ? nullptr : caller->module();
  const Function* callee =
      name == nullptr || module == nullptr ? nullptr : module->FindFunction(name->string_value());
  if (callee == nullptr || call_depth >= kMaxCallDepth) return 0;
  Liveness liveness(*callee);
  uint64_t peak = BlockPeak(*callee->body(), liveness, call_depth + 1);
  uint64_t args = 0;
  for (const Value* arg : callee->body()->arguments()) {
    args = SaturatingAdd(args, TypeBytes(arg->type()));
  }
  return peak - std::min(peak, args);
}

// The peak bytes of `block`'s own values (arguments included) and what its ops nest,
// while it runs once.
uint64_t BlockPeak(const Block& block, const Liveness& liveness, int call_depth) {
  uint64_t live = 0;
  for (const Value* arg : block.arguments()) live = SaturatingAdd(live, TypeBytes(arg->type()));
  uint64_t peak = live;
  for (const Operation* op : block) {
    if (op->def().Has(kTerminator)) break;
    uint64_t results = 0;
    for (const Value* result : op->results()) {
      results = SaturatingAdd(results, TypeBytes(result->type()));
    }
    uint64_t during = SaturatingAdd(live, results);
    for (int r = 0; r < op->num_regions(); ++r) {
      // The loop holds its carried values (results-sized) besides the body's values,
      // whose arguments are the previous iteration's carried values.
      during = std::max(during, SaturatingAdd(SaturatingAdd(live, results),
                                              BlockPeak(*op->region(r), liveness, call_depth)));
    }
    if (op->Is(OpKind::kCall)) {
      during = std::max(during, SaturatingAdd(live, CallPeak(*op, call_depth)));
    }
    peak = std::max(peak, during);
    live = SaturatingAdd(live, results);
    for (const Value* dead : liveness.DeadAfter(*op)) {
      live -= std::min(live, TypeBytes(dead->type()));
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
  Liveness liveness(function);
  return BlockPeak(*function.body(), liveness, 0);
}

uint64_t PhysicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return SaturatingMul(static_cast<uint64_t>(pages), static_cast<uint64_t>(page_size));
}

}  // namespace commir::runtime
