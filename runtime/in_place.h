// Which dynamic_update_slice ops may write into their destination's buffer, and which
// matmuls may write their result straight into such a destination, decided from the
// program alone so that the interpreter (which runs it) and the sim (which prices it)
// agree. The ring and pipeline schedules build their output block by block on a loop
// carried accumulator:
//
//   %c_blk = matmul(%a_blk, %b)
//   %c_acc_1 = dynamic_update_slice(%c_acc, %c_blk, %off) {dim = 0}
//
// A production runtime neither copies %c_acc every step nor materialises %c_blk: the
// GEMM's epilogue stores its tile at the block's place in the accumulator (an offset
// output pointer; a column block is a row stride of the whole row).
//
// What is decided here is only what the program allows. Whether a buffer is really
// free at run time (not a caller's argument, not shared with another value or device)
// is the interpreter's check (interpreter.h).
#ifndef COMMIR_RUNTIME_IN_PLACE_H_
#define COMMIR_RUNTIME_IN_PLACE_H_

#include <cstdint>
#include <optional>

#include "absl/types/span.h"
#include "commir/ir.h"

namespace commir::runtime {

// Whether `update`, a dynamic_update_slice, is its destination's (operand 0) last use in
// the destination's block (a use nested in a later op's region counts as that op's) and
// the destination is not also the update: its buffer may become the result.
bool UpdatesDestinationInPlace(const Operation& update);

// Whether `dims` is one matrix: rank >= 2 and every dimension before the last two 1 (a
// [1, S, H] activation is an [S, H] matrix).
bool IsOneMatrix(absl::Span<const int64_t> dims);

// For a block along `dim` (negative counts from the end) of a tensor of `rank`
// dimensions that IsOneMatrix: 0 for its matrix's rows, 1 for its columns, -1 for any
// other dimension.
int64_t MatrixDimOf(int64_t dim, int64_t rank);

// For a matmul, the dynamic_update_slice its result may be written into, or null. It
// applies when:
//  - the matmul's result, one matrix (IsOneMatrix), has one use: the update (operand 1)
//    of a dynamic_update_slice of the same block along the rows or the columns
//    (MatrixDimOf) of a destination of the same rank that is one matrix too, that
//    UpdatesDestinationInPlace;
//  - the destination and the offset are defined before the matmul, the matmul does not
//    read the destination, and no op between the two uses it (the destination's old
//    contents are not seen once the block is written).
const Operation* MatmulWritesInto(const Operation& matmul);

// The inverse: for a dynamic_update_slice, the matmul that writes its update in place
// (MatmulWritesInto(*matmul) == &update), or null.
const Operation* UpdateWrittenByMatmul(const Operation& update);

// Where the block of a row-major tensor of `dims` that a dynamic_slice takes at `offset`
// along `dim` (negative counts from the end) with extent `size` lies, as a batch of
// strided matrices: the first element of the first matrix (in elements from the tensor's
// start), the row stride of each matrix, and the distance between consecutive matrices
// of the block's batch (row-major over its batch dimensions). Empty where the block is no
// such layout or does not fit (an offset out of range: dynamic_slice's run-time error,
// which the slice itself then reports).
struct MatrixBlock {
  int64_t first = 0;
  int64_t row_stride = 0;
  int64_t matrix_stride = 0;
};
std::optional<MatrixBlock> SliceAsMatrices(absl::Span<const int64_t> dims, int64_t dim,
                                           int64_t offset, int64_t size);

// Where a row-major [m, n] product goes in a row-major [rows, cols] destination when it is
// the block at `offset` along `dim` (0: rows offset..offset+m; 1: columns offset..offset+n;
// -1 and -2 count from the end): SliceAsMatrices of the destination, where the block also
// spans the other dimension whole. What a GEMM needs to store the block in place: an
// offset output pointer (`first`) and the destination's row length as leading dimension
// (`row_stride`). Empty where the block does not fit there (the other extent differs, the
// offset is out of range) or `dim` is no dimension of a matrix.
std::optional<MatrixBlock> PlaceBlock(int64_t rows, int64_t cols, int64_t dim, int64_t offset,
                                      int64_t m, int64_t n);

// The block a slice op takes along one dimension: dynamic_slice's `dim` and `size` (its
// offset, operand 1, is known only when it runs), or a static `slice` that keeps every
// other dimension whole (its offset is its start along `dim`; a slice that keeps every
// dimension whole is taken along the last). Empty for any other op or slice.
struct SliceExtent {
  int64_t dim = 0;  // normalised: 0 <= dim < rank
  int64_t size = 0;
  std::optional<int64_t> start;  // a static slice's offset
};
std::optional<SliceExtent> SliceAlongOneDim(const Operation& slice);

// GEMM and attention operands read where they lie. cuBLASLt and BLAS describe each matrix by a pointer
// and a leading dimension (and a batch stride), so a block of a larger tensor that is one
// such strided layout is read with no copy: TransformerEngine's overlapped GEMMs read
// each chunk in place (sim/gemm_views.h). FlashAttention takes q, k and v [B, H, S, D]
// as a pointer and a stride per dimension, so TransformerEngine's context parallelism
// reads a sequence block of a k/v buffer in place too (a row block of each (b, h)
// matrix: an offset pointer, the matrix stride the whole buffer's). A `dynamic_slice`,
// or a static `slice` along one dimension (SliceAlongOneDim), is such a view when:
//  - every use of its result is a matmul, or an attention's or attention_grad's q, k
//    or v (a block read by anything else is a kernel);
//  - the block is one strided matrix layout of its operand: the sliced dimension is one
//    of the last two (rows: an offset pointer; columns: an offset pointer with the whole
//    row as leading dimension; batch matrices keep the operand's matrix stride), or every
//    dimension before it is 1 (a contiguous range).
// The interpreter then hands the reader the sliced tensor and the block's place
// (SlicedOperand in backend.h) instead of running the slice, where the backend reads
// such a block for every reader (Backend::ReadsSliceInPlaceFor), and the sim prices the
// slice as free: the same predicate for both (docs/commir-run-sim.md lists the backend
// that still copies attention's blocks).
bool SliceReadInPlace(const Operation& slice);

// The block a ring passes on, written into the gathered value: a dynamic_update_slice
// whose update is a `shift`'s result, or the loop-carried value each iteration replaces
// by one, in the update's own block, along a dimension that keeps the block one strided
// layout of the result. TransformerEngine's ring exchange receives each chunk where it
// belongs in the gathered buffer, so the sim prices this update as free. The backends
// receive the block there where ShiftReceivesInto holds (a shift's result) or where
// CarriedBlockInSlot holds (a carried block, which lives in its slot as a view of the
// gathered value); elsewhere the block is received into a buffer of its own and copied
// (block bytes, not the destination: the destination is updated in place where
// UpdatesDestinationInPlace), which docs/commir-run-sim.md lists.
bool RingBlockLandsInPlace(const Operation& update);

// A ring's carried block that lives in its slot of the gathered value, the ring
// schedules' form:
//
//   %g, %blk_last = for %i = ... iter(%g_acc = %g_init, %blk = %x) {
//     %blk_next = shift(%blk) ...
//     %c = matmul(%blk, %w) ...
//     %g_acc_1 = dynamic_update_slice(%g_acc, %blk, %off) ...
//     yield ..., %g_acc_1, %blk_next
//   }
//   %c_last = matmul(%blk_last, %w) ...
//   %g_all = dynamic_update_slice(%g, %blk_last, %off_last) ...
//
// Each step's shift receives the next block straight into the slot the next update (or
// the one after the loop) writes it to, and the block is then a view of the gathered
// value: the next shift sends from the slot, the matmul reads it there, and the update
// finds it in place (no copy). Valid because the gathered value is updated only by
// these updates, in place, each in its own slot (the interpreter checks that each step's
// slot is apart from the one the block it sends lies in), and the view keeps it alive.
// It holds when:
//  - the shift's operand is a carried value of a `for` (its body argument) and its
//    result, used only by the yield, is what the loop carries there next;
//  - that body argument's uses are the shift, one RingBlockLandsInPlace update
//    (operand 1) of another carried value (the gathered value: its only use, the
//    update's result used only by the yield, in the gathered value's place), and readers
//    of the block (matmuls, an attention's q, k or v);
//  - after the loop, the loop's block result is the update of a dynamic_update_slice of
//    the loop's gathered result (its only use) of the same dimension, that
//    UpdatesDestinationInPlace, and is otherwise read only by such readers before it;
//  - both updates' offsets can be worked out before the shift: index arithmetic of
//    values defined before the loop, literals and (in the body) the induction variable.
struct CarriedRing {
  const Operation* loop = nullptr;
  int block = 0;        // the block's position among the loop's carried values
  int gathered = 0;     // the gathered value's
  const Operation* shift = nullptr;        // in the body
  const Operation* update = nullptr;       // in the body
  const Operation* last_update = nullptr;  // after the loop
};
std::optional<CarriedRing> CarriedBlockInSlot(const Operation& shift);

// Whether `reader` reads `block` only as a GEMM or attention operand that a backend may
// take as a strided view (a matmul's operand, an attention's q, k or v).
bool ReadsAsMatrices(const Operation& reader, const Value* block);

// For a shift, the dynamic_update_slice that RingBlockLandsInPlace whose update is the
// shift's result, where the shift may receive straight into the update's destination
// (the block's slot), or null. The same conditions as MatmulWritesInto: the shift's
// result has that one use, the destination and the offset are defined before the shift,
// the shift does not send the destination, and no op between the two uses it (the slot
// is written when the block arrives, before the update's turn).
const Operation* ShiftReceivesInto(const Operation& shift);

// The inverse: for a dynamic_update_slice, the shift that receives its update in place
// (ShiftReceivesInto(*shift) == &update), or null.
const Operation* UpdateReceivedByShift(const Operation& update);

// The block at `offset` along `dim` (negative counts from the end) with extent `size` of
// a row-major tensor of `dims`, as the rows of one 2-D strided copy: `rows` runs of
// `width` contiguous elements, the first at element `first`, each `pitch` elements after
// the one before (the dimensions before `dim` flattened into rows, the block's extent
// and every dimension after it into one run). Every dimension-`dim` block is such a
// copy, cudaMemcpy2D's shape; contiguous when `rows` is 1 or the block spans `dim` whole.
// Empty where it does not fit (an offset out of range, a negative extent).
struct BlockRows {
  int64_t first = 0;
  int64_t width = 0;
  int64_t pitch = 0;
  int64_t rows = 0;
  bool contiguous() const { return rows <= 1 || width == pitch; }
};
std::optional<BlockRows> SliceAsRows(absl::Span<const int64_t> dims, int64_t dim, int64_t offset,
                                     int64_t size);

// Whether `full`'s result is a buffer every element of which is written before anything
// reads it, on every device: the ring schedules' accumulators and gathered values, and
// the owner-form reduce-scatter's slots, which TransformerEngine allocates without a
// fill. Its value then never shows, and the backends allocate it without running the
// fill (Backend::AllocateUnfilled); the sim prices it as free. It holds when:
//  - the buffer passes through a chain of values, each with one use: the destination
//    (operand 0 only) of a dynamic_update_slice whose update spans every other dimension
//    whole, all along one dimension, or a `for`'s init, whose body argument's chain
//    reaches the yield in the same place and whose result continues the chain (loops
//    not nested in the chain's loops);
//  - the updates' offsets are index arithmetic (rank, literals, add/sub/mul/div/rem,
//    the loop's induction variable) whose values, worked out for every device of the
//    function's mesh and every iteration, make the blocks cover the dimension whole
//    (each block in range) by the end of the chain, where the first reader is.
// A bound on the devices times iterations worked out (kMaxFillEvaluations) keeps the
// check cheap; past it the fill is kept.
bool FillOverwrittenBeforeRead(const Operation& full);
inline constexpr int64_t kMaxFillEvaluations = 1 << 16;

}  // namespace commir::runtime

#endif  // COMMIR_RUNTIME_IN_PLACE_H_
