// The cuda backend against the cpu backend, op by op and program by program.
//
// Every function of every op case (testdata/ops) and every commir-run test program
// (tools/testdata and the shared examples in testdata/examples) runs through
// runtime::Interpreter twice with the same random inputs: on CpuBackend and on
// CudaBackend (one process driving all mesh devices; with one GPU the whole mesh shares
// it, launch mode (c)). Each device's results must agree within
// the spec's tolerances (1e-5 relative L2 for f32, 5e-3 f16, 2e-2 bf16). This covers
// every tensor op, every collective along every dim the cases use, streams and loops.
// Further tests pin the GEMM mapping (transposes, broadcast batches, mixed result
// types), buffer reuse across streams and the allocator's caching.
//
// Without a GPU every test skips, saying why.
#include "backend_cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "backend_cpu/cpu_backend.h"
#include "backend_cuda/cuda_status.h"
#include "backend_cuda/kernels/elementwise.h"
#include "commir/diagnostics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "runtime/compare.h"
#include "runtime/host_layout.h"
#include "runtime/interpreter.h"
#include "runtime/random_inputs.h"

namespace commir::cuda {
namespace {

using runtime::Tensor;

// Why there is no GPU to test on, or empty when there is one.
std::string NoGpuReason() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) return absl::StrCat("cudaGetDeviceCount: ", cudaGetErrorString(error));
  if (count == 0) return "no CUDA device";
  return "";
}

#define SKIP_WITHOUT_GPU()                                   \
  do {                                                       \
    std::string reason = NoGpuReason();                      \
    if (!reason.empty()) GTEST_SKIP() << "no GPU: " << reason; \
  } while (false)

std::vector<int64_t> MeshShape(const Function& function) {
  std::vector<int64_t> shape;
  if (function.is_spmd() && function.mesh() != nullptr) {
    for (const MeshAxis& axis : function.mesh()->axes()) shape.push_back(axis.size);
  }
  if (shape.empty()) shape.push_back(1);
  return shape;
}

std::unique_ptr<CudaBackend> MakeBackend(std::vector<int64_t> mesh_shape) {
  CudaBackendOptions options;
  options.mesh_shape = std::move(mesh_shape);
  options.timeout = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::Create(options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? *std::move(backend) : nullptr;
}

// Local inputs of every device from the seed, as commir-run makes them.
absl::StatusOr<std::vector<std::vector<Tensor>>> Inputs(const Function& function, uint64_t seed,
                                                        int64_t devices) {
  const Mesh* mesh = function.is_spmd() ? function.mesh() : nullptr;
  std::vector<std::vector<Tensor>> inputs(devices);
  for (size_t i = 0; i < function.arg_types().size(); ++i) {
    Type type = function.arg_types()[i];
    if (!type.is_tensor()) return absl::InvalidArgumentError("index argument");
    Tensor global = runtime::RandomGlobalTensor(seed, static_cast<int>(i), type.element_type(),
                                                type.dims());
    for (int64_t d = 0; d < devices; ++d) {
      absl::StatusOr<Tensor> part = runtime::LocalPart(global, type, mesh, d);
      if (!part.ok()) return part.status();
      inputs[d].push_back(*std::move(part));
    }
  }
  return inputs;
}

// Runs `function` on both backends; false if the cpu backend rejects it (a case about
// errors), else compares every device's results.
bool CompareBackends(const Function& function, const std::string& where, int* compared) {
  cpu::CpuBackend cpu_backend;
  runtime::Interpreter cpu_run(function, cpu_backend);
  absl::StatusOr<std::vector<std::vector<Tensor>>> inputs =
      Inputs(function, /*seed=*/7, cpu_run.num_devices());
  if (!inputs.ok()) return false;
  absl::StatusOr<std::vector<std::vector<Tensor>>> expected = cpu_run.Run(*inputs);
  if (!expected.ok()) return false;

  std::unique_ptr<CudaBackend> cuda_backend = MakeBackend(MeshShape(function));
  if (cuda_backend == nullptr) return false;
  runtime::Interpreter cuda_run(function, *cuda_backend);
  absl::StatusOr<std::vector<std::vector<Tensor>>> actual = cuda_run.Run(*inputs);
  EXPECT_TRUE(actual.ok()) << where << ": " << actual.status();
  if (!actual.ok()) return true;
  for (size_t d = 0; d < expected->size(); ++d) {
    for (size_t r = 0; r < (*expected)[d].size(); ++r) {
      const Tensor& want = (*expected)[d][r];
      const Tensor& got = (*actual)[d][r];
      runtime::Comparison c = runtime::CompareWithReference(
          absl::StrCat("result", r), got, want, runtime::DefaultTolerance(want.element_type()));
      EXPECT_TRUE(c.pass) << where << " device " << d << ": " << runtime::FormatComparison(c);
      ++*compared;
    }
  }
  return true;
}

void CompareDirectory(const std::string& dir) {
  int programs = 0, compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string path = entry.path().string();
    if (!absl::EndsWith(path, ".commir")) continue;
    std::ifstream in(path);
    std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    DiagnosticEngine diagnostics;
    std::unique_ptr<Module> module = ParseModule(source, diagnostics);
    if (module == nullptr) continue;  // error cases
    for (Function* function : module->functions()) {
      if (CompareBackends(*function, absl::StrCat(path, " @", function->name()), &compared)) {
        ++programs;
      }
    }
  }
  EXPECT_GT(programs, 0) << "no program of " << dir << " ran";
  EXPECT_GT(compared, 0);
}

TEST(CudaBackendTest, EveryOpCaseAgreesWithTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  CompareDirectory("testdata/ops");
}

TEST(CudaBackendTest, EveryCommirRunProgramAgreesWithTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  CompareDirectory("tools/testdata");
  CompareDirectory("testdata/examples");
}

// Parses one function from text.
std::unique_ptr<Module> Parse(const std::string& source) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(source, diagnostics);
  EXPECT_NE(module, nullptr) << source;
  return module;
}

// Each of `templates` with $T replaced by each of `types`, compared on both backends.
void CompareForEachType(std::initializer_list<std::string> templates,
                        std::initializer_list<const char*> types) {
  for (const std::string& text : templates) {
    for (const char* type : types) {
      const std::string source = absl::StrReplaceAll(text, {{"$T", type}});
      std::unique_ptr<Module> module = Parse(source);
      if (module == nullptr) continue;
      int compared = 0;
      EXPECT_TRUE(CompareBackends(*module->functions()[0], source, &compared)) << source;
      EXPECT_GT(compared, 0) << source;
    }
  }
}

TEST(CudaBackendTest, MatmulTransposesBatchesAndResultTypes) {
  SKIP_WITHOUT_GPU();
  const char* cases[] = {
      "func @f(%a: f32[3, 5], %b: f32[5, 4]) -> f32[3, 4] {\n"
      "  %c = matmul(%a, %b)\n  return %c\n}\n",
      "func @f(%a: f32[5, 3], %b: f32[4, 5]) -> f32[3, 4] {\n"
      "  %c = matmul(%a, %b) {transpose_a, transpose_b}\n  return %c\n}\n",
      "func @f(%a: bf16[2, 1, 64, 32], %b: bf16[3, 32, 48]) -> bf16[2, 3, 64, 48] {\n"
      "  %c = matmul(%a, %b)\n  return %c\n}\n",
      "func @f(%a: f16[4, 64, 32], %b: f16[48, 32]) -> f32[4, 64, 48] {\n"
      "  %c = matmul(%a, %b) {transpose_b} : f32[4, 64, 48]\n  return %c\n}\n",
      "func @f(%a: f32[16, 8], %b: f32[8, 24]) -> bf16[16, 24] {\n"
      "  %c = matmul(%a, %b) : bf16[16, 24]\n  return %c\n}\n",
      "func @f(%a: f64[7, 9], %b: f64[9, 5]) -> f64[7, 5] {\n"
      "  %c = matmul(%a, %b)\n  return %c\n}\n",
      "func @f(%a: f32[4, 0], %b: f32[0, 6]) -> f32[4, 6] {\n"
      "  %c = matmul(%a, %b)\n  return %c\n}\n",
  };
  for (const char* source : cases) {
    std::unique_ptr<Module> module = Parse(source);
    if (module == nullptr) continue;
    int compared = 0;
    EXPECT_TRUE(CompareBackends(*module->functions()[0], source, &compared)) << source;
    EXPECT_EQ(compared, 1) << source;
  }
}

// A ring's accumulator updated in place (the interpreter hands the dying destination
// over): row and column blocks, f32 and bf16, and a reader of the accumulator on another
// stream just before the update, which the in-place write must wait for.
TEST(CudaBackendTest, AccumulatorsUpdatedInPlaceAgreeWithTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  const std::string ring =
      "mesh @m(tp=4)\n"
      "spmd func @f(%a: $T[64@tp, 24], %b: $T[24, 52@tp]) -> $T[64, 52@tp] on @m {\n"
      "  %r = rank() {axis = tp} : index\n"
      "  %c_init = full() {value = 0.0} : $T[64, 13]\n"
      "  %c_part, %a_last = for %i = 0 to 3 step 1 iter(%c_acc = %c_init, %a_blk = %a) {\n"
      "    %a_next = shift(%a_blk) {axis = tp, offset = 1, stream = 1} : $T[16, 24]\n"
      "    %src_raw = sub(%r, %i) : index\n"
      "    %src = rem(%src_raw, 4) : index\n"
      "    %off = mul(%src, 16) : index\n"
      "    %c_blk = matmul(%a_blk, %b) : $T[16, 13]\n"
      "    %c_acc_1 = dynamic_update_slice(%c_acc, %c_blk, %off) {dim = 0} : $T[64, 13]\n"
      "    yield %c_acc_1, %a_next\n"
      "  } : ($T[64, 13], $T[16, 24])\n"
      "  %src_last_raw = add(%r, 1) : index\n"
      "  %src_last = rem(%src_last_raw, 4) : index\n"
      "  %off_1 = mul(%src_last, 16) : index\n"
      "  %c_blk_1 = matmul(%a_last, %b) : $T[16, 13]\n"
      "  %c = dynamic_update_slice(%c_part, %c_blk_1, %off_1) {dim = 0} : $T[64, 13]\n"
      "  return %c\n"
      "}\n";
  const std::string columns =
      "mesh @m(tp=4)\n"
      "spmd func @f(%a: $T[64@tp, 24], %b: $T[24, 52@tp]) -> $T[64@tp, 52] on @m {\n"
      "  %r = rank() {axis = tp} : index\n"
      "  %c_init = full() {value = 0.0} : $T[16, 52]\n"
      "  %c_part, %b_last = for %i = 0 to 3 step 1 iter(%c_acc = %c_init, %b_blk = %b) {\n"
      "    %b_next = shift(%b_blk) {axis = tp, offset = -1, stream = 1} : $T[24, 13]\n"
      "    %src_raw = add(%r, %i) : index\n"
      "    %src = rem(%src_raw, 4) : index\n"
      "    %off = mul(%src, 13) : index\n"
      "    %c_blk = matmul(%a, %b_blk) : $T[16, 13]\n"
      "    %c_acc_1 = dynamic_update_slice(%c_acc, %c_blk, %off) {dim = 1} : $T[16, 52]\n"
      "    yield %c_acc_1, %b_next\n"
      "  } : ($T[16, 52], $T[24, 13])\n"
      "  %src_last_raw = add(%r, 3) : index\n"
      "  %src_last = rem(%src_last_raw, 4) : index\n"
      "  %off_1 = mul(%src_last, 13) : index\n"
      "  %c_blk_1 = matmul(%a, %b_last) : $T[16, 13]\n"
      "  %c = dynamic_update_slice(%c_part, %c_blk_1, %off_1) {dim = 1} : $T[16, 52]\n"
      "  return %c\n"
      "}\n";
  // The accumulator is read on stream 1 right before it is updated on stream 0.
  const std::string cross_stream =
      "mesh @m(tp=2)\n"
      "spmd func @f(%x: $T[8, 16], %u: $T[2, 16]) -> ($T[8, 16], $T[8, 16]) on @m {\n"
      "  %acc0 = full() {value = 1.0} : $T[8, 16]\n"
      "  %acc, %seen = for %i = 0 to 4 step 1 iter(%a = %acc0, %s = %x) {\n"
      "    %n = neg(%a) {stream = 1} : $T[8, 16]\n"
      "    %off = mul(%i, 2) : index\n"
      "    %a1 = dynamic_update_slice(%a, %u, %off) {dim = 0} : $T[8, 16]\n"
      "    %s1 = add(%s, %n) {stream = 1} : $T[8, 16]\n"
      "    yield %a1, %s1\n"
      "  } : ($T[8, 16], $T[8, 16])\n"
      "  return %acc, %seen\n"
      "}\n";
  CompareForEachType({ring, columns, cross_stream}, {"f32", "bf16"});
}

// A shift received straight into its slot of a gathered buffer (runtime/in_place.h:
// ShiftReceivesInto): a row slot (an offset receive pointer), a column slot and a
// sequence slot of several heads (2-D copies on the copy engines), each into a buffer
// the program made and the shift on another stream than the buffer's producer. Against
// the cpu backend, which copies each block into its slot on the host.
TEST(CudaBackendTest, ShiftsReceivedIntoTheirSlotsAgreeWithTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  const std::string rows =
      "mesh @m(tp=4)\n"
      "spmd func @f(%x: $T[16, 24], %buf: $T[64, 24]) -> $T[64, 24] on @m {\n"
      "  %r = rank() {axis = tp} : index\n"
      "  %off = mul(%r, 16) : index\n"
      "  %acc = neg(%buf) : $T[64, 24]\n"
      "  %got = shift(%x) {axis = tp, offset = 1, stream = 1} : $T[16, 24]\n"
      "  %out = dynamic_update_slice(%acc, %got, %off) {dim = 0} : $T[64, 24]\n"
      "  return %out\n"
      "}\n";
  const std::string columns =
      "mesh @m(tp=4)\n"
      "spmd func @f(%x: $T[24, 13], %buf: $T[24, 52]) -> $T[24, 52] on @m {\n"
      "  %r = rank() {axis = tp} : index\n"
      "  %off = mul(%r, 13) : index\n"
      "  %acc = neg(%buf) : $T[24, 52]\n"
      "  %got = shift(%x) {axis = tp, offset = -1, stream = 1} : $T[24, 13]\n"
      "  %out = dynamic_update_slice(%acc, %got, %off) {dim = 1} : $T[24, 52]\n"
      "  return %out\n"
      "}\n";
  const std::string sequence =
      "mesh @m(sp=2)\n"
      "spmd func @f(%k: $T[1, 4, 8, 16], %buf: $T[1, 4, 16, 16]) -> $T[1, 4, 16, 16] on @m {\n"
      "  %r = rank() {axis = sp} : index\n"
      "  %off = mul(%r, 8) : index\n"
      "  %acc = neg(%buf) : $T[1, 4, 16, 16]\n"
      "  %got = shift(%k) {axis = sp, offset = 1, stream = 1} : $T[1, 4, 8, 16]\n"
      "  %out = dynamic_update_slice(%acc, %got, %off) {dim = 2} : $T[1, 4, 16, 16]\n"
      "  return %out\n"
      "}\n";
  CompareForEachType({rows, columns, sequence}, {"f32", "bf16"});
}

// A ring whose carried block lives in its slot of the gathered value (runtime/in_place.h:
// CarriedBlockInSlot), the ring schedules' form with the shift on its own stream: row
// blocks are sent from their slot and read there by cuBLASLt (each reader waiting for its
// own slot's receive), column blocks (strided) keep a buffer of their own. Against the
// cpu backend, which runs both rings with the block in its slot.
TEST(CudaBackendTest, RingsWithTheCarriedBlockInItsSlotAgreeWithTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  const std::string ring =
      "mesh @m(tp=4)\n"
      "spmd func @f(%x: $T[$B], %w: $T[$W]) -> ($T[$G], $T[$C]) on @m {\n"
      "  %r = rank() {axis = tp} : index\n"
      "  %g_init = full() {value = 0.0} : $T[$G]\n"
      "  %c_init = full() {value = 0.0} : $T[$C]\n"
      "  %g_part, %c_part, %blk_last = for %i = 0 to 3 step 1 iter(%g_acc = %g_init, "
      "%c_acc = %c_init, %blk = %x) {\n"
      "    %blk_next = shift(%blk) {axis = tp, offset = 1, stream = 1} : $T[$B]\n"
      "    %src_raw = sub(%r, %i) : index\n"
      "    %src = rem(%src_raw, 4) : index\n"
      "    %off = mul(%src, $N) : index\n"
      "    %c_blk = matmul($A) $Q: $T[$P]\n"
      "    %c_acc_1 = dynamic_update_slice(%c_acc, %c_blk, %off) {dim = $D} : $T[$C]\n"
      "    %g_acc_1 = dynamic_update_slice(%g_acc, %blk, %off) {dim = $D} : $T[$G]\n"
      "    yield %g_acc_1, %c_acc_1, %blk_next\n"
      "  } : ($T[$G], $T[$C], $T[$B])\n"
      "  %src_last_raw = add(%r, 1) : index\n"
      "  %src_last = rem(%src_last_raw, 4) : index\n"
      "  %off_1 = mul(%src_last, $N) : index\n"
      "  %c_blk_1 = matmul($L) $Q: $T[$P]\n"
      "  %c = dynamic_update_slice(%c_part, %c_blk_1, %off_1) {dim = $D} : $T[$C]\n"
      "  %g = dynamic_update_slice(%g_part, %blk_last, %off_1) {dim = $D} : $T[$G]\n"
      "  return %g, %c\n"
      "}\n";
  // Row blocks: %x [16, 24] into [64, 24]; %c = %g %w, [64, 8].
  const std::string rows = absl::StrReplaceAll(
      ring, {{"$B", "16, 24"}, {"$W", "24, 8"}, {"$G", "64, 24"}, {"$C", "64, 8"},
             {"$P", "16, 8"}, {"$N", "16"}, {"$D", "0"}, {"$A", "%blk, %w"},
             {"$L", "%blk_last, %w"},
             {"$Q", ""}});
  // Column blocks: %x [24, 13] into [24, 52]; %c = %w^T %g, [8, 52].
  const std::string columns = absl::StrReplaceAll(
      ring, {{"$B", "24, 13"}, {"$W", "24, 8"}, {"$G", "24, 52"}, {"$C", "8, 52"},
             {"$P", "8, 13"}, {"$N", "13"}, {"$D", "1"}, {"$A", "%w, %blk"},
             {"$L", "%w, %blk_last"},
             {"$Q", "{transpose_a} "}});
  for (const std::string* source : {&rows, &columns}) {
    DiagnosticEngine diagnostics;
    const std::string f32 = absl::StrReplaceAll(*source, {{"$T", "f32"}});
    std::unique_ptr<Module> module = ParseModule(f32, diagnostics);
    ASSERT_NE(module, nullptr) << f32;
    int rings = 0;
    WalkOps(module->functions()[0]->body(),
            [&](Operation* op) { rings += runtime::CarriedBlockInSlot(*op).has_value(); });
    // Both hold in the program; the cuda backend takes the row ring only
    // (CarriedBlockContiguous, shift_slot_test).
    EXPECT_EQ(rings, 1) << f32;
  }
  CompareForEachType({rows, columns}, {"f32", "bf16"});
}

// Matmuls reading dynamic_slice blocks in place (cuBLASLt with an offset pointer and the
// sliced matrix's row length as leading dimension): row and column blocks of a and b at
// offsets computed from a loop's index, transposed operands, a column block written into
// a ring's accumulator, and blocks of a batch (sliced first). Against the cpu backend.
TEST(CudaBackendTest, SlicesReadInPlaceAgreeWithTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  const std::string loop =
      "mesh @m(tp=1)\n"
      "spmd func @f(%a: $T[16, 40], %b: $T[40, 9], %c: $T[12, 40]) -> ($T[16, 9], $T[16, 12]) on @m {\n"
      "  %acc0 = full() {value = 0.0} : $T[16, 9]\n"
      "  %t0 = full() {value = 0.0} : $T[16, 12]\n"
      "  %acc, %t = for %i = 0 to 5 step 1 iter(%s = %acc0, %u = %t0) {\n"
      "    %off = mul(%i, 8) : index\n"
      "    %a_blk = dynamic_slice(%a, %off) {dim = 1, size = 8} : $T[16, 8]\n"
      "    %b_blk = dynamic_slice(%b, %off) {dim = 0, size = 8} : $T[8, 9]\n"
      "    %c_blk = dynamic_slice(%c, %off) {dim = -1, size = 8} : $T[12, 8]\n"
      "    %p = matmul(%a_blk, %b_blk) : $T[16, 9]\n"
      "    %q = matmul(%a_blk, %c_blk) {transpose_b} : $T[16, 12]\n"
      "    %s1 = add(%s, %p) : $T[16, 9]\n"
      "    %u1 = add(%u, %q) : $T[16, 12]\n"
      "    yield %s1, %u1\n"
      "  } : ($T[16, 9], $T[16, 12])\n"
      "  return %acc, %t\n"
      "}\n";
  // The reduce_scatter ring's row blocks of the input, and a column block of b read and
  // written into the accumulator in place.
  const std::string ring =
      "mesh @m(tp=4)\n"
      "spmd func @f(%a: $T[64, 24@tp], %w: $T[24@tp, 52]) -> $T[64@tp, 52] on @m {\n"
      "  %r = rank() {axis = tp} : index\n"
      "  %dst_raw = add(%r, 3) : index\n"
      "  %dst = rem(%dst_raw, 4) : index\n"
      "  %off = mul(%dst, 16) : index\n"
      "  %a_blk = dynamic_slice(%a, %off) {dim = 0, size = 16} : $T[16, 6]\n"
      "  %zero = full() {value = 0} : index\n"
      "  %half = full() {value = 26} : index\n"
      "  %y0 = full() {value = 0.0} : $T[16, 52]\n"
      "  %w_l = dynamic_slice(%w, %zero) {dim = 1, size = 26} : $T[6, 26]\n"
      "  %y_l = matmul(%a_blk, %w_l) : $T[16, 26]\n"
      "  %y1 = dynamic_update_slice(%y0, %y_l, %zero) {dim = 1} : $T[16, 52]\n"
      "  %w_r = dynamic_slice(%w, %half) {dim = 1, size = 26} : $T[6, 26]\n"
      "  %y_r = matmul(%a_blk, %w_r) : $T[16, 26]\n"
      "  %y_part = dynamic_update_slice(%y1, %y_r, %half) {dim = 1} : $T[16, 52]\n"
      "  %y = for %i = 1 to 4 step 1 iter(%y_acc = %y_part) {\n"
      "    %y_recv = shift(%y_acc) {axis = tp, offset = 1, stream = 1} : $T[16, 52]\n"
      "    %dst_raw_1 = sub(%r, %i) : index\n"
      "    %dst_sum = add(%dst_raw_1, 3) : index\n"
      "    %dst_1 = rem(%dst_sum, 4) : index\n"
      "    %off_1 = mul(%dst_1, 16) : index\n"
      "    %a_blk_1 = dynamic_slice(%a, %off_1) {dim = 0, size = 16} : $T[16, 6]\n"
      "    %y_part_1 = matmul(%a_blk_1, %w) : $T[16, 52]\n"
      "    %y_next = add(%y_recv, %y_part_1) : $T[16, 52]\n"
      "    yield %y_next\n"
      "  } : $T[16, 52]\n"
      "  return %y\n"
      "}\n";
  const std::string batched =
      "mesh @m(tp=1)\n"
      "spmd func @f(%x: $T[3, 20, 12], %w: $T[12, 4]) -> $T[3, 5, 4] on @m {\n"
      "  %o = full() {value = 10} : index\n"
      "  %blk = dynamic_slice(%x, %o) {dim = 1, size = 5} : $T[3, 5, 12]\n"
      "  %p = matmul(%blk, %w) : $T[3, 5, 4]\n"
      "  return %p\n"
      "}\n";
  CompareForEachType({loop, ring, batched}, {"f32", "bf16", "f64"});
}

TEST(CudaBackendTest, ValuesCrossStreamsAndBuffersAreReused) {
  SKIP_WITHOUT_GPU();
  // A producer on stream 1 feeding consumers on streams 0 and 2, in a loop so that
  // buffers freed on one stream come back: a missing wait or an early reuse corrupts
  // the sums.
  std::unique_ptr<Module> valid = Parse(
      "mesh @m(tp=2)\n"
      "spmd func @f(%x: f32[256@tp, 256], %g: f32[256]) -> f32[256@tp, 256] {\n"
      "  %r = for %i = 0 to 8 iter(%acc = %x) {\n"
      "    %big = matmul(%acc, %acc) {transpose_b, stream = 1} : f32[128, 128]\n"
      "    %s = mul(%big, 0.001) {stream = 2} : f32[128, 128]\n"
      "    %t = add(%acc, 1.0) : f32[128, 256]\n"
      "    %u = slice(%t) {start = [0, 0], size = [128, 128]} : f32[128, 128]\n"
      "    %v = add(%u, %s) {stream = 2} : f32[128, 128]\n"
      "    %w = concat(%v, %u) {dim = 1, stream = 1} : f32[128, 256]\n"
      "    %n = rmsnorm(%w, %g) : f32[128, 256]\n"
      "    %a = all_reduce(%n) {axis = tp, stream = 1} : f32[128, 256]\n"
      "    %m = mul(%a, 0.5) : f32[128, 256]\n"
      "    yield %m\n"
      "  } : f32[128, 256]\n"
      "  return %r\n"
      "}\n");
  if (valid == nullptr) return;
  int compared = 0;
  EXPECT_TRUE(CompareBackends(*valid->functions()[0], "streams program", &compared));
  EXPECT_EQ(compared, 2);
}

TEST(CudaBackendTest, AllocatorCachesBlocksAcrossRuns) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Module> module = Parse(
      "func @f(%x: f32[1024, 1024]) -> f32[1024, 1024] {\n"
      "  %a = exp(%x)\n  %b = mul(%a, %x)\n  %c = sub(%b, %a)\n  return %c\n}\n");
  ASSERT_NE(module, nullptr);
  std::unique_ptr<CudaBackend> backend = MakeBackend({1});
  ASSERT_NE(backend, nullptr);
  runtime::Interpreter run(*module->functions()[0], *backend);
  absl::StatusOr<std::vector<std::vector<Tensor>>> inputs = Inputs(*module->functions()[0], 1, 1);
  ASSERT_TRUE(inputs.ok());
  ASSERT_TRUE(run.Run(*inputs).ok());
  const CachingAllocator::Stats first = backend->MemoryStats(backend->GpuOf(0));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(run.Run(*inputs).ok());
  const CachingAllocator::Stats later = backend->MemoryStats(backend->GpuOf(0));
  // Steady state: every buffer comes from the cache, none from cudaMalloc.
  EXPECT_EQ(later.driver_allocations, first.driver_allocations);
  EXPECT_GT(later.cache_hits, first.cache_hits);
  EXPECT_EQ(later.in_use_bytes, first.in_use_bytes);
}

// The runtime records cudaErrorNotReady from cudaEventQuery as the thread's last error,
// and the kernel launchers return cudaGetLastError(): polling a pending event (as the
// allocator does for fences, inside steps) must not fail the next launch.
TEST(CudaBackendTest, PollingAPendingEventDoesNotFailTheNextLaunch) {
  SKIP_WITHOUT_GPU();
  cudaStream_t blocked = nullptr, other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&blocked, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  std::atomic<bool> release{false};
  ASSERT_EQ(cudaLaunchHostFunc(
                blocked,
                [](void* flag) {
                  while (!static_cast<std::atomic<bool>*>(flag)->load()) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                  }
                },
                &release),
            cudaSuccess);
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(event, blocked), cudaSuccess);
  EXPECT_EQ(QueryEvent(event), cudaErrorNotReady);
  void* buffer = nullptr;
  ASSERT_EQ(cudaMalloc(&buffer, 1024), cudaSuccess);
  EXPECT_EQ(cuda_kernels::LaunchFill(cuda_kernels::KDType::kF32, buffer, 256, 1.0, other),
            cudaSuccess);
  release = true;
  EXPECT_EQ(cudaStreamSynchronize(blocked), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(other), cudaSuccess);
  cudaFree(buffer);
  cudaEventDestroy(event);
  cudaStreamDestroy(other);
  cudaStreamDestroy(blocked);
}

TEST(CudaBackendTest, OutOfRangeDynamicSliceIsAProgramError) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Module> module = Parse(
      "mesh @m(tp=2)\n"
      "spmd func @f(%x: f32[8@tp]) -> f32[4@tp] {\n"
      "  %r = rank() {axis = tp}\n  %o = mul(%r, 3)\n"
      "  %y = dynamic_slice(%x, %o) {dim = 0, size = 2} : f32[2]\n  return %y\n}\n");
  ASSERT_NE(module, nullptr);
  std::unique_ptr<CudaBackend> backend = MakeBackend({2});
  ASSERT_NE(backend, nullptr);
  runtime::Interpreter run(*module->functions()[0], *backend);
  absl::StatusOr<std::vector<std::vector<Tensor>>> inputs = Inputs(*module->functions()[0], 1, 2);
  ASSERT_TRUE(inputs.ok());
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = run.Run(*inputs);
  EXPECT_EQ(outputs.status().code(), absl::StatusCode::kInvalidArgument) << outputs.status();
  EXPECT_THAT(std::string(outputs.status().message()), ::testing::HasSubstr("out of range"));
}

}  // namespace
}  // namespace commir::cuda
