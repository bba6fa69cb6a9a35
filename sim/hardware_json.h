// The JSON file format for hardware descriptions users write for their own cluster.
//
// Keys name their unit (_tflops, _gb_per_s = 1e9 bytes/s, _gib, _us, ...); every key of
// HardwareSpec must be given, unless the file starts from a built-in with
// "base": "h100-sxm", in which case it lists only what differs:
//   { "base": "h100-sxm", "name": "my-h100", "gpus_per_node": 4,
//     "network_bandwidth_per_gpu_gb_per_s": 25 }
// Per-protocol NCCL figures are arrays in the order [LL, LL128, Simple].
// Unknown keys, keys given twice, values of the wrong type or out of range (each number
// has a physically meaningful range, so that no derived time is infinite or NaN), a
// "name" holding control characters, and missing keys are errors that name the file and
// the key.
#ifndef COMMIR_SIM_HARDWARE_JSON_H_
#define COMMIR_SIM_HARDWARE_JSON_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/hardware.h"

namespace commir::sim {

// Parses `text`; `source` names the file in error messages.
absl::StatusOr<HardwareSpec> ParseHardwareJson(absl::string_view text, absl::string_view source);
absl::StatusOr<HardwareSpec> LoadHardwareJsonFile(absl::string_view path);

// Every key the format accepts besides "base" and "name" (for documentation and tests).
std::vector<std::string> HardwareJsonKeys();

// Checks one number, in the key's unit, against the key's range as a file's would be
// (for values given elsewhere, such as a command line's what-if); `source` names where
// it came from. An error for a key that is not a number key of the format.
absl::Status CheckHardwareJsonNumber(absl::string_view key, double value,
                                     absl::string_view source);

}  // namespace commir::sim

#endif  // COMMIR_SIM_HARDWARE_JSON_H_
