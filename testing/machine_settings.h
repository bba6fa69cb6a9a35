// Machine settings under which CommIR's cpu results must not change: thread counts, a
// one-CPU affinity mask, the CPU model OpenBLAS would pick its kernels for, and the
// instruction set an older machine has (the GEMM kernel it would run and the code paths
// the C library's math functions would pick there). Tests
// fork a child, apply a setting in it, run the code under test and compare the bytes
// it produced with those of the default setting.
#ifndef COMMIR_TESTING_MACHINE_SETTINGS_H_
#define COMMIR_TESTING_MACHINE_SETTINGS_H_

#include <string>
#include <vector>

namespace commir::testing {

struct MachineSetting {
  std::string name;
  std::string threads;   // OMP_NUM_THREADS and OPENBLAS_NUM_THREADS; empty: unset
  bool one_cpu = false;  // restrict the child to the first CPU it may use
  // OPENBLAS_CORETYPE: the CPU model whose kernels OpenBLAS would pick; empty: unset.
  std::string coretype;
  // Run as a machine with only this instruction set: "avx2" (AVX2 and FMA, no AVX-512,
  // like an AMD Zen 2/3) or "baseline" (x86-64 without AVX, FMA or AVX-512). Sets
  // COMMIR_GEMM_ISA and masks the CPU features glibc dispatches on (GLIBC_TUNABLES, read
  // when the child is exec'd). Empty: this machine as it is.
  std::string isa;
};

// The settings to compare, the default first. "Haswell" and the AVX2 machine are
// included only where the CPU has AVX2 and FMA (a feature can be masked, not added).
std::vector<MachineSetting> MachineSettingsToCompare();

// Applies `setting` to the calling process: meant for a forked child before exec.
// Returns false if the CPU mask cannot be set.
bool ApplyMachineSetting(const MachineSetting& setting);

}  // namespace commir::testing

#endif  // COMMIR_TESTING_MACHINE_SETTINGS_H_
