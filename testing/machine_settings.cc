#include "testing/machine_settings.h"

#include <sched.h>
#include <stdlib.h>

namespace commir::testing {

std::vector<MachineSetting> MachineSettingsToCompare() {
  std::vector<MachineSetting> settings = {
      {"default", "", false, ""},          {"threads1", "1", false, ""},
      {"threads2", "2", false, ""},        {"threads4", "4", false, ""},
      {"one_cpu", "", true, ""},           {"one_cpu_threads2", "2", true, ""},
      {"nehalem_threads2", "2", false, "Nehalem"},
  };
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    settings.push_back({"haswell_threads1", "1", false, "Haswell"});
    settings.push_back({"haswell_threads2", "2", false, "Haswell"});
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
