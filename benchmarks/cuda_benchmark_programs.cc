#include "benchmarks/cuda_benchmark_programs.h"

#include "absl/strings/str_format.h"

namespace commir::bench {

std::string GemmProgram(int64_t m, int64_t n, int64_t k) {
  return absl::StrFormat(
      "func @f(%%a: bf16[%d, %d], %%b: bf16[%d, %d]) -> bf16[%d, %d] {\n"
      "  %%c = matmul(%%a, %%b)\n  return %%c\n}\n",
      m, k, k, n, m, n);
}

std::string ExecutorPerOpProgram(int64_t trips) {
  return absl::StrFormat(
      "spmd func @f(%%x: f32[256]) -> f32[256] {\n"
      "  %%r = for %%i = 0 to %d iter(%%v = %%x) {\n"
      "    %%a = mul(%%v, 0.5)\n    %%b = add(%%a, 0.25)\n    %%c = tanh(%%b)\n"
      "    %%d = sub(%%c, %%a)\n    yield %%d\n  } : f32[256]\n  return %%r\n}\n",
      trips);
}

std::string PlainAgGemmProgram(const AgGemmShape& s) {
  const char* t = s.type.c_str();
  return absl::StrFormat(
      "mesh @m(tp=%d)\n"
      "spmd func @f(%%a: %s[%d@tp, %d], %%b: %s[%d, %d@tp]) -> %s[%d, %d@tp] {\n"
      "  %%g = all_gather(%%a) {axis = tp, dim = 0} : %s[%d, %d]\n"
      "  %%c = matmul(%%g, %%b) : %s[%d, %d]\n  return %%c\n}\n",
      s.devices, t, s.m, s.k, t, s.k, s.n, t, s.m, s.n, t, s.m, s.k, t, s.m, s.n / s.devices);
}

std::string PipelinedAgGemmProgram(const AgGemmShape& s) {
  const int64_t block = s.m / s.devices, cols = s.n / s.devices;
  const char* t = s.type.c_str();
  return absl::StrFormat(
      "mesh @m(tp=%d)\n"
      "spmd func @f(%%a: %s[%d@tp, %d], %%b: %s[%d, %d@tp]) -> %s[%d, %d@tp] {\n"
      "  %%r = rank() {axis = tp}\n"
      "  %%c0 = full() {value = 0.0} : %s[%d, %d]\n"
      "  %%c, %%last = for %%i = 0 to %d iter(%%acc = %%c0, %%blk = %%a) {\n"
      "    %%next = shift(%%blk) {axis = tp, offset = 1, stream = 1} : %s[%d, %d]\n"
      "    %%part = matmul(%%blk, %%b) : %s[%d, %d]\n"
      "    %%src = sub(%%r, %%i)\n    %%src4 = rem(%%src, %d)\n    %%off = mul(%%src4, %d)\n"
      "    %%acc1 = dynamic_update_slice(%%acc, %%part, %%off) {dim = 0} : %s[%d, %d]\n"
      "    yield %%acc1, %%next\n"
      "  } : (%s[%d, %d], %s[%d, %d])\n  return %%c\n}\n",
      s.devices, t, s.m, s.k, t, s.k, s.n, t, s.m, s.n, t, s.m, cols, s.devices, t, block, s.k,
      t, block, cols, s.devices, block, t, s.m, cols, t, s.m, cols, t, block, s.k);
}

std::string GlobalAgGemmProgram(const AgGemmShape& s) {
  const char* t = s.type.c_str();
  return absl::StrFormat(
      "func @f(%%a: %s[%d, %d], %%b: %s[%d, %d]) -> %s[%d, %d] {\n"
      "  %%c = matmul(%%a, %%b)\n  return %%c\n}\n",
      t, s.m, s.k, t, s.k, s.n, t, s.m, s.n);
}

}  // namespace commir::bench
