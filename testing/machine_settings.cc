#include "testing/machine_settings.h"

#include <sched.h>
#include <stdlib.h>

#include <string>

namespace commir::testing {

std::vector<MachineSetting> MachineSettingsToCompare() {
  std::vector<MachineSetting> settings = {
      {"default", "", false, "", ""},
      {"threads1", "1", false, "", ""},
      {"threads2", "2", false, "", ""},
      {"threads4", "4", false, "", ""},
      {"one_cpu", "", true, "", ""},
      {"one_cpu_threads2", "2", true, "", ""},
      {"nehalem_threads2", "2", false, "Nehalem", ""},
      {"baseline_x86_64_machine", "2", false, "Nehalem", "baseline"},
  };
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    settings.push_back({"haswell_threads1", "1", false, "Haswell", ""});
    settings.push_back({"haswell_threads2", "2", false, "Haswell", ""});
    settings.push_back({"avx2_machine", "2", false, "Haswell", "avx2"});
  }
  return settings;
}

bool ApplyMachineSetting(const MachineSetting& setting) {
  for (const char* var : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
    if (setting.threads.empty()) {
      unsetenv(var);
    } else {
      setenv(var, setting.threads.c_str(), 1);
    }
  }
  if (setting.coretype.empty()) {
    unsetenv("OPENBLAS_CORETYPE");
  } else {
    setenv("OPENBLAS_CORETYPE", setting.coretype.c_str(), 1);
  }
  if (setting.isa.empty()) {
    unsetenv("COMMIR_GEMM_ISA");
    unsetenv("GLIBC_TUNABLES");
  } else {
    setenv("COMMIR_GEMM_ISA", setting.isa.c_str(), 1);
    // The features glibc's ifunc resolvers test (libm's exp, log, pow, sin... have FMA and
    // AVX2 variants whose results differ from the baseline's in the last bit).
    const char* masked = setting.isa == "avx2"
                             ? "-AVX512F,-AVX512CD,-AVX512BW,-AVX512DQ,-AVX512VL"
                             : "-AVX,-AVX2,-FMA,-FMA4,-AVX512F,-AVX512CD,-AVX512BW,-AVX512DQ,"
                               "-AVX512VL";
    setenv("GLIBC_TUNABLES", (std::string("glibc.cpu.hwcaps=") + masked).c_str(), 1);
  }
  if (!setting.one_cpu) return true;
  cpu_set_t allowed, one;
  CPU_ZERO(&one);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return false;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  return sched_setaffinity(0, sizeof(one), &one) == 0;
}

}  // namespace commir::testing
