#include "benchmarks/program_generator.h"

#include "absl/strings/str_cat.h"

namespace commir::bench {
namespace {

constexpr char kType[] = "f32[16, 16]";
constexpr char kHeader[] =
    "func @chain(%x: f32[16, 16], %y: f32[16, 16]) -> f32[16, 16] {\n";

// Bytes per generated line is about 40; reserving avoids regrowth of a 40 MB string.
std::string Reserved(int64_t num_ops) {
  std::string text;
  text.reserve(static_cast<size_t>(num_ops) * 48 + 128);
  return text;
}

}  // namespace

GeneratedProgram GenerateElementwiseChain(int64_t num_ops) {
  GeneratedProgram program;
  program.num_ops = num_ops;
  std::string& out = program.text = Reserved(num_ops);
  out += kHeader;
  // The previous result ("x" before the first op).
  std::string prev = "x";
  for (int64_t i = 0; i < num_ops; ++i) {
    std::string name = absl::StrCat("v", i);
    absl::StrAppend(&out, "  %", name, " = ");
    switch (i % 8) {
      case 0: absl::StrAppend(&out, "add(%", prev, ", %y)"); break;
      case 1: absl::StrAppend(&out, "mul(%", prev, ", 0.5)"); break;
      case 2: absl::StrAppend(&out, "sub(%", prev, ", %x)"); break;
      case 3: absl::StrAppend(&out, "tanh(%", prev, ")"); break;
      case 4: absl::StrAppend(&out, "max(%", prev, ", %y)"); break;
      case 5: absl::StrAppend(&out, "exp(%", prev, ")"); break;
      case 6: absl::StrAppend(&out, "div(%", prev, ", 2.0)"); break;
      default: absl::StrAppend(&out, "mul(%", prev, ", %x)"); break;
    }
    absl::StrAppend(&out, " : ", kType, "\n");
    prev = std::move(name);
  }
  absl::StrAppend(&out, "  return %", prev, "\n}\n");
  return program;
}

GeneratedProgram GenerateCseDceMix(int64_t num_ops) {
  GeneratedProgram program;
  program.num_ops = num_ops;
  std::string& out = program.text = Reserved(num_ops);
  out += kHeader;
  std::string prev = "x";
  int64_t groups = num_ops / 5;
  for (int64_t g = 0; g < groups; ++g) {
    absl::StrAppend(&out, "  %a", g, " = add(%", prev, ", %x) : ", kType, "\n");
    absl::StrAppend(&out, "  %b", g, " = add(%", prev, ", %x) : ", kType, "\n");
    absl::StrAppend(&out, "  %m", g, " = mul(%a", g, ", %b", g, ") : ", kType, "\n");
    absl::StrAppend(&out, "  %d", g, " = exp(%m", g, ") : ", kType, "\n");
    absl::StrAppend(&out, "  %e", g, " = tanh(%d", g, ") : ", kType, "\n");
    prev = absl::StrCat("m", g);
  }
  for (int64_t i = groups * 5; i < num_ops; ++i) {
    std::string name = absl::StrCat("r", i);
    absl::StrAppend(&out, "  %", name, " = add(%", prev, ", %y) : ", kType, "\n");
    prev = std::move(name);
  }
  absl::StrAppend(&out, "  return %", prev, "\n}\n");
  program.num_duplicate_ops = groups;
  program.num_dead_ops = 2 * groups;
  return program;
}

}  // namespace commir::bench
