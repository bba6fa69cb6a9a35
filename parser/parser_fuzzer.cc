// libFuzzer target for the CommIR parser, verifier and printer.
//
// For arbitrary bytes: parse with verification. Errors are fine (and must be rendered
// without crashing); a module that parses must print, the printed text must parse
// again, and printing that must reproduce it byte for byte. Input that fails
// verification is parsed again without it and must round-trip the same way. Any
// violation aborts with both texts on stderr so that the reproducer explains itself.
//
//   bazel --output_base=$HOME/.cache/bazel-commir-fuzz build --config=fuzz //parser:parser_fuzzer
//   parser/run_fuzz.sh            (bounded run over a copy of parser/fuzz_corpus)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "commir/diagnostics.h"
#include "commir/printer.h"
#include "parser/parser.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& first, const std::string& second) {
  std::fprintf(stderr, "parser_fuzzer: %s\n--- first ---\n%s\n--- second ---\n%s\n", what,
               first.c_str(), second.c_str());
  std::abort();
}

// Parses `source`; if that succeeds, checks that printing is a fixed point of
// parse . print (with the same verification setting). Returns whether it parsed.
bool CheckRoundTrip(absl::string_view source, bool verify) {
  commir::ParseOptions options;
  options.verify = verify;
  commir::DiagnosticEngine diagnostics;
  std::unique_ptr<commir::Module> module = commir::ParseModule(source, diagnostics, options);
  if (module == nullptr) {
    if (!diagnostics.has_errors()) Fail("parse failed without an error", std::string(source), "");
    // Rendering reads the source at every error location: exercise it too.
    std::string rendered = diagnostics.Render("fuzz.commir", source);
    if (rendered.empty()) Fail("errors rendered as nothing", std::string(source), "");
    return false;
  }
  if (diagnostics.has_errors()) {
    Fail("a module was returned together with errors", std::string(source),
         diagnostics.Render("fuzz.commir", source));
  }
  const std::string printed = commir::PrintModule(*module);

  commir::DiagnosticEngine reparse_diagnostics;
  std::unique_ptr<commir::Module> reparsed =
      commir::ParseModule(printed, reparse_diagnostics, options);
  if (reparsed == nullptr) {
    Fail(verify ? "the printed module does not parse"
                : "the printed module does not parse (without verification)",
         printed, reparse_diagnostics.Render("printed.commir", printed));
  }
  const std::string reprinted = commir::PrintModule(*reparsed);
  if (reprinted != printed) Fail("printing is not a fixed point", printed, reprinted);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view source(reinterpret_cast<const char*>(data), size);
  // Most mutated inputs fail verification; parsing them without it still reaches the
  // printer (invalid layouts, wrong returns, misplaced ops) and must round-trip too.
  if (!CheckRoundTrip(source, /*verify=*/true)) CheckRoundTrip(source, /*verify=*/false);
  return 0;
}
