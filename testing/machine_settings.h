// Machine settings under which CommIR's cpu results must not change: thread counts, a
// one-CPU affinity mask, and the CPU model OpenBLAS would pick its kernels for. Tests
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
};

// The settings to compare, the default first. "Haswell" is included only where the
// CPU has AVX2 and FMA (its kernels would not run elsewhere).
std::vector<MachineSetting> MachineSettingsToCompare();

// Applies `setting` to the calling process: meant for a forked child before exec.
// Returns false if the CPU mask cannot be set.
bool ApplyMachineSetting(const MachineSetting& setting);

}  // namespace commir::testing

#endif  // COMMIR_TESTING_MACHINE_SETTINGS_H_
