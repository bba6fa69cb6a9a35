// commir-opt: parse, verify, transform and print CommIR (docs/commir-opt.md). The work is
// in tools/opt_driver.cc; this binds it to the process: argv, the standard streams,
// every registered pass, and `bazel run`'s working directory.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tools/exit_codes.h"
#include "tools/opt_driver.h"
#include "tools/output_file.h"
#include "transforms/registry/pass_registry.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  commir::OptEnvironment env;
  env.registry = commir::RegisteredPasses();
  // Under `bazel run` the process runs in the runfiles tree; paths the user typed are
  // relative to where they typed them.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY")) env.working_dir = dir;
  env.in = &std::cin;
  env.in_fd = 0;
  env.out = &std::cout;
  env.err = &std::cerr;
  // The process exits right after; under sanitizers keep the teardown so that
  // LeakSanitizer still checks the IR's ownership.
#if !defined(__SANITIZE_ADDRESS__)
  env.skip_module_teardown = true;
#endif
  int code = commir::RunCommirOpt(args, env);
  // What went to stdout (the module, --help, --list-passes) must all have arrived.
  if (code == commir::kExitSuccess) {
    if (absl::Status s = commir::FinishStandardOutput(); !s.ok()) {
      std::cerr << "commir-opt: error: " << s.message() << "\n";
      code = commir::kExitInvalidInput;
    }
  }
  return code;
}
