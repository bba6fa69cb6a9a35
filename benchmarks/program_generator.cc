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

namespace {

// Appends `%sK = add(total, %cK)` (or starts the total at the first product) and
// returns the ops written.
int64_t SumInto(std::string& out, std::string& total, int64_t k, const char* type) {
  if (total.empty()) {
    total = absl::StrCat("c", k);
    return 0;
  }
  absl::StrAppend(&out, "  %s", k, " = add(%", total, ", %c", k, ") : ", type, "\n");
  total = absl::StrCat("s", k);
  return 1;
}

}  // namespace

GeneratedProgram GenerateShardedMatmulChain(int64_t num_ops) {
  GeneratedProgram program;
  program.num_ops = num_ops;
  std::string& out = program.text = Reserved(num_ops);
  out += "mesh @m(tp=4)\n\nfunc @f(%a: f32[16@tp, 8], %b: f32[8, 8@tp]) -> f32[16, 8@tp] on @m {\n";
  std::string total;
  int64_t written = 0;
  for (int64_t k = 0; written < num_ops; ++k) {
    absl::StrAppend(&out, "  %c", k, " = matmul(%a, %b) : f32[16, 8]\n");
    ++written;
    if (k > 0) ++program.num_duplicate_ops;
    if (written < num_ops || total.empty()) {
      written += SumInto(out, total, k, "f32[16, 8]");
    } else {
      ++program.num_dead_ops;  // no room for its add
    }
  }
  absl::StrAppend(&out, "  return %", total.empty() ? "a" : total, "\n}\n");
  return program;
}

GeneratedProgram GenerateGatherMatmulPairs(int64_t num_ops) {
  GeneratedProgram program;
  program.num_ops = num_ops;
  std::string& out = program.text = Reserved(num_ops);
  out += "mesh @m(tp=4)\n\nspmd func @f(%a: f32[16@tp, 8], %b: f32[8, 8@tp]) -> f32[16, 8@tp] on "
         "@m {\n";
  std::string total;
  int64_t written = 0;
  for (int64_t k = 0; written < num_ops; ++k) {
    absl::StrAppend(&out, "  %g", k, " = all_gather(%a) {axis = tp, dim = 0} : f32[16, 8]\n");
    ++written;
    if (written == num_ops) {  // no room for its matmul: the gather is dead
      ++program.num_dead_ops;
      break;
    }
    absl::StrAppend(&out, "  %c", k, " = matmul(%g", k, ", %b) : f32[16, 2]\n");
    ++written;
    if (written < num_ops || total.empty()) {
      written += SumInto(out, total, k, "f32[16, 2]");
    } else {
      program.num_dead_ops += 2;  // no room for its add: the matmul and its gather
    }
  }
  absl::StrAppend(&out, "  return %", total.empty() ? "a" : total, "\n}\n");
  return program;
}

GeneratedProgram GenerateGatheredAttentionChain(int64_t num_ops) {
  GeneratedProgram program;
  program.num_ops = num_ops;
  std::string& out = program.text = Reserved(num_ops);
  out += "mesh @m(sp=4)\n\nspmd func @f(%q: f32[1, 4, 32@sp, 8], %k: f32[1, 4, 32@sp, 8], "
         "%v: f32[1, 4, 32@sp, 8]) -> f32[1, 4, 32@sp, 8] on @m {\n";
  std::string previous = "q";
  int64_t groups = num_ops / 3;
  for (int64_t i = 0; i < groups; ++i) {
    absl::StrAppend(&out, "  %kg", i, " = all_gather(%k) {axis = sp, dim = 2} : f32[1, 4, 32, 8]\n");
    absl::StrAppend(&out, "  %vg", i, " = all_gather(%v) {axis = sp, dim = 2} : f32[1, 4, 32, 8]\n");
    absl::StrAppend(&out, "  %o", i, " = attention(%", previous, ", %kg", i, ", %vg", i,
                    ") : f32[1, 4, 8, 8]\n");
    previous = absl::StrCat("o", i);
  }
  for (int64_t i = groups * 3; i < num_ops; ++i) {
    absl::StrAppend(&out, "  %d", i, " = all_gather(%k) {axis = sp, dim = 2} : f32[1, 4, 32, 8]\n");
    ++program.num_dead_ops;
  }
  absl::StrAppend(&out, "  return %", previous, "\n}\n");
  return program;
}

}  // namespace commir::bench
