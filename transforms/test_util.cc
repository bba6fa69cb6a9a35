#include "transforms/test_util.h"

#include "absl/status/statusor.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "gtest/gtest.h"
#include "parser/parser.h"

namespace commir::testing {

std::unique_ptr<Module> ParseForTest(absl::string_view text) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "test.commir");
  if (!module.ok()) {
    ADD_FAILURE() << "input does not parse:\n" << module.status().message();
    return nullptr;
  }
  return *std::move(module);
}

std::string TransformText(absl::string_view input, const std::function<void(Module&)>& transform) {
  std::unique_ptr<Module> module = ParseForTest(input);
  if (module == nullptr) return "";
  transform(*module);
  absl::Status verified = VerifyModule(*module);
  EXPECT_TRUE(verified.ok()) << "invalid IR after the transform:\n"
                             << verified.message() << "\n"
                             << PrintModule(*module);
  return PrintModule(*module);
}

}  // namespace commir::testing
