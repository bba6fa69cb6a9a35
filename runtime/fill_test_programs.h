// Programs for the tests of FillOverwrittenBeforeRead (in_place.h) in the rule's own test,
// the cpu backend's and the sim's: an all_gather spelt as a ring on 4 devices whose
// buffer starts as a `full` of 7.0, and variants that leave part of it unwritten or read
// it early. Where the rule holds every row of the result is some device's `%x`; where it
// does not, the fill's 7.0 shows in the rows left unwritten, so a backend that skipped
// that fill would be caught by the values alone.
#ifndef COMMIR_RUNTIME_FILL_TEST_PROGRAMS_H_
#define COMMIR_RUNTIME_FILL_TEST_PROGRAMS_H_

#include <string>

#include "absl/strings/str_replace.h"

namespace commir::runtime::fill_test {

inline constexpr int kDevices = 4;
inline constexpr int kRows = 8;  // every device's block
inline constexpr int kCols = 8;
inline constexpr double kFillValue = 7.0;

// $UPPER: the loop's last trip + 1 (3 covers every block with the update after the
// loop); $LAST: the update after the loop's offset source (rank + 1 as the ring has it);
// $EXTRA: more results.
inline constexpr char kRingTemplate[] = R"(mesh @m(tp=4)

spmd func @f(%x: f32[8, 8]) -> ($RESULTS) on @m {
  %r = rank() {axis = tp} : index
  %buf = full() {value = 7.0} : f32[32, 8]
  %part, %blk_last = for %i = 0 to $UPPER step 1 iter(%acc = %buf, %blk = %x) {
    %next = shift(%blk) {axis = tp, offset = 1, stream = 1} : f32[8, 8]
    %src_raw = sub(%r, %i) : index
    %src = rem(%src_raw, 4) : index
    %off = mul(%src, 8) : index
    %acc_1 = dynamic_update_slice(%acc, %blk, %off) {dim = 0} : f32[32, 8]
    yield %acc_1, %next
  } : (f32[32, 8], f32[8, 8])
  %last_raw = $LAST : index
  %last = rem(%last_raw, 4) : index
  %off_last = mul(%last, 8) : index
  %g = dynamic_update_slice(%part, %blk_last, %off_last) {dim = 0} : f32[32, 8]
  return $RETURNS
}
)";

inline std::string Ring(const std::string& upper, const std::string& last, bool read_early) {
  return absl::StrReplaceAll(
      kRingTemplate,
      {{"$UPPER", upper},
       {"$LAST", last},
       {"$RESULTS", read_early ? "f32[32, 8], f32[32, 8]" : "f32[32, 8]"},
       {"$RETURNS", read_early ? "%g, %part" : "%g"}});
}

// Every block written: steps 0..2 the blocks of rank, rank - 1, rank - 2, then rank + 1.
inline std::string Covered() { return Ring("3", "add(%r, 1)", false); }
// One block short: the loop stops a step early, so the block held after it is rank - 2's
// (written at rank + 1's rows) and rank + 2's rows keep the fill.
inline std::string OneBlockShort() { return Ring("2", "add(%r, 1)", false); }
// Every block written, but the loop's result is also returned, read before the last
// update: what it shows of the last block is the fill.
inline std::string ReadBeforeLastWrite() { return Ring("3", "add(%r, 1)", true); }
// The last update writes rank - 1's block again, which the loop wrote: rank + 1's rows
// are never written on any device.
inline std::string RepeatedBlock() { return Ring("3", "sub(%r, 1)", false); }

// The owner form's straight-line slots (ring_collective_matmul.h, rs=owner): four
// updates at constant offsets, the own block last.
inline constexpr char kSlots[] = R"(mesh @m(tp=4)

spmd func @f(%x: f32[8, 8]) -> f32[32, 8] on @m {
  %buf = full() {value = 7.0} : f32[32, 8]
  %o0 = full() {value = 0} : index
  %a = shift(%x) {axis = tp, offset = 1, stream = 1} : f32[8, 8]
  %s0 = dynamic_update_slice(%buf, %a, %o0) {dim = 0} : f32[32, 8]
  %o1 = full() {value = 8} : index
  %b = shift(%x) {axis = tp, offset = 2, stream = 1} : f32[8, 8]
  %s1 = dynamic_update_slice(%s0, %b, %o1) {dim = 0} : f32[32, 8]
  %o2 = full() {value = 16} : index
  %c = shift(%x) {axis = tp, offset = 3, stream = 1} : f32[8, 8]
  %s2 = dynamic_update_slice(%s1, %c, %o2) {dim = 0} : f32[32, 8]
  %o3 = full() {value = $OWN} : index
  %s3 = dynamic_update_slice(%s2, %x, %o3) {dim = 0} : f32[32, 8]
  return %s3
}
)";
// Slot 3 written last: every slot written.
inline std::string Slots() { return absl::StrReplaceAll(kSlots, {{"$OWN", "24"}}); }
// The own block written over slot 2: slot 3 keeps the fill.
inline std::string SlotsOneShort() { return absl::StrReplaceAll(kSlots, {{"$OWN", "16"}}); }

}  // namespace commir::runtime::fill_test

#endif  // COMMIR_RUNTIME_FILL_TEST_PROGRAMS_H_
