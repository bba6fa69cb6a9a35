// Random global programs (the partitioner's property-test generator: every op with a
// sharding rule, random shapes and layouts on 1-D and 2-D meshes) shrunk as far as the
// mesh allows: each either shrinks to a program that keeps every dimension's
// divisibility and still lowers and matches its reference on the cpu mesh, or is refused
// with a reason; and nearly all shrink.
#include <memory>
#include <cstdio>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "search/shrink.h"
#include "testing/spmd_check.h"
#include "transforms/sharding/random_program.h"

namespace commir::search {
namespace {

constexpr int kPrograms = 150;

TEST(ShrinkProperty, ShrunkRandomProgramsKeepDivisibilityAndMatch) {
  int shrunk_count = 0, changed = 0, refused = 0;
  for (uint64_t seed = 1; seed <= kPrograms; ++seed) {
    std::string program = sharding::GenerateRandomProgram(seed);
    absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(program, "random");
    ASSERT_TRUE(module.ok()) << module.status();
    const Function* f = (*module)->FindFunction("f");
    // Only the mesh's own divisibility: the most shrinking the layouts allow.
    int64_t keep = 2 * (f->mesh() == nullptr ? 1 : f->mesh()->num_devices());
    absl::StatusOr<ShrunkModule> shrunk =
        ShrinkFunction(**module, "f", keep, std::numeric_limits<int64_t>::max());
    if (!shrunk.ok()) {
      // A refusal names the function and why.
      EXPECT_EQ(shrunk.status().code(), absl::StatusCode::kFailedPrecondition)
          << "seed " << seed << ": " << shrunk.status();
      EXPECT_NE(shrunk.status().message().find("@f"), absl::string_view::npos);
      ++refused;
      continue;
    }
    ++shrunk_count;
    if (!shrunk->sizes.empty()) ++changed;
    // Divisibility by every divisor of `keep` that divided the dimension.
    const Function* g = shrunk->module->FindFunction("f");
    for (int i = 0; i < f->body()->num_arguments(); ++i) {
      Type a = f->arg_types()[i], b = g->arg_types()[i];
      if (!a.is_tensor()) continue;
      for (int64_t d = 0; d < a.rank(); ++d) {
        for (int64_t divisor = 2; divisor <= keep; ++divisor) {
          if (keep % divisor == 0 && a.dims()[d] % divisor == 0) {
            EXPECT_EQ(b.dims()[d] % divisor, 0) << "seed " << seed << ": " << a.ToString()
                                                << " -> " << b.ToString();
          }
        }
      }
    }
    std::string text = PrintModule(*shrunk->module);
    absl::StatusOr<testing::SpmdCheck> check = testing::CheckPartitioned(text, "f", seed);
    ASSERT_TRUE(check.ok()) << "seed " << seed << ": " << check.status() << "\noriginal:\n"
                            << program << "shrunk:\n"
                            << text;
    EXPECT_TRUE(check->pass) << "seed " << seed << ":\n"
                             << check->report << "shrunk:\n"
                             << text;
  }
  std::printf("%d shrunk (%d changed), %d refused\n", shrunk_count, changed, refused);
  // The generator's ops all have rules; refusals (reshapes that do not factor) stay the
  // exception (none in these seeds), and shrinking does change programs.
  EXPECT_GT(shrunk_count, kPrograms * 9 / 10) << refused << " refused";
  EXPECT_GT(changed, kPrograms / 4);
}

}  // namespace
}  // namespace commir::search
