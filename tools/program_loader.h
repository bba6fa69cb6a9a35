// How commir-run gets the program it runs: the module read and parsed from a file (or
// stdin), the function chosen, and a global function partitioned by the default spmd
// pipeline. Shared by the executing backends (run_session.cc) and the sim backend
// (sim_session.cc); failures carry the exit status they map to.
#ifndef COMMIR_TOOLS_PROGRAM_LOADER_H_
#define COMMIR_TOOLS_PROGRAM_LOADER_H_

#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "commir/ir.h"
#include "tools/exit_codes.h"

namespace commir {

// A failure with the exit status it maps to.
struct Failure {
  int code = kExitInvalidInput;
  std::string message;  // already formatted, without a trailing newline
};

// Prints the failure's message on `err` and returns its exit status.
int Report(std::ostream& err, const Failure& failure);

struct LoadedModule {
  std::string path;  // as messages name it ("<stdin>" for -)
  std::string source;
  std::unique_ptr<Module> module;
};

// Reads and parses `path` ("-": stdin). Parse and verifier errors point into the source.
std::optional<Failure> LoadModule(const std::string& path, LoadedModule& loaded);

// A second copy of `loaded`, partitioned by the default pipeline (a global
// function is lowered before a multi-device run). Errors point into the source.
std::optional<Failure> Partition(const LoadedModule& loaded, LoadedModule& partitioned);

// The function named `name` (without '@'), or the module's only function when empty.
std::optional<Failure> ChooseFunction(const LoadedModule& loaded, const std::string& name,
                                      Function*& function);

}  // namespace commir

#endif  // COMMIR_TOOLS_PROGRAM_LOADER_H_
