// Helpers for pass tests: IR from text in, printed IR out.
#ifndef COMMIR_TRANSFORMS_TEST_UTIL_H_
#define COMMIR_TRANSFORMS_TEST_UTIL_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "commir/ir.h"

namespace commir::testing {

// Parses and verifies `text`; a parse or verify error fails the test (and returns null).
std::unique_ptr<Module> ParseForTest(absl::string_view text);

// Parses `input`, applies `transform`, fails the test if the result does not verify,
// and returns the printed module ("" if `input` did not parse).
std::string TransformText(absl::string_view input, const std::function<void(Module&)>& transform);

}  // namespace commir::testing

#endif  // COMMIR_TRANSFORMS_TEST_UTIL_H_
