// Pass pipeline text (commir-opt --pass-pipeline):
//
//   pipeline := [entry (',' entry)*]
//   entry    := PASS-NAME ['{' [option (',' option)*] '}']
//   option   := OPTION-NAME ['=' value]       a bare name sets a bool option to true
//   value    := "quoted, with \" and \\ escapes" | text up to the next ',' or '}'
//
// Whitespace around every token is ignored; an empty pipeline has no passes.
#ifndef COMMIR_TRANSFORMS_PIPELINE_H_
#define COMMIR_TRANSFORMS_PIPELINE_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "transforms/pass.h"

namespace commir {

// Parses `text` against `registry` (normally RegisteredPasses()) into configured passes,
// in order. Every error is a usage error with code kInvalidArgument: malformed text
// (with the column), an unknown pass (the message lists every valid pass), an unknown
// or repeated option or a bad value (the message lists that pass's options).
absl::StatusOr<std::vector<std::unique_ptr<Pass>>> ParsePassPipeline(
    absl::string_view text, absl::Span<const PassInfo> registry);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_PIPELINE_H_
