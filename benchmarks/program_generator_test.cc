#include "benchmarks/program_generator.h"

#include <memory>

#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "commir/printer.h"
#include "gtest/gtest.h"
#include "parser/parser.h"

namespace commir::bench {
namespace {

// Parses and verifies `program`, checks that it is canonical (printing reproduces it)
// and that its body has num_ops ops plus the return.
void ExpectValidCanonical(const GeneratedProgram& program) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(program.text, diagnostics);
  ASSERT_NE(module, nullptr) << diagnostics.Render("<generated>", program.text);
  EXPECT_EQ(PrintModule(*module), program.text);
  ASSERT_EQ(module->functions().size(), 1u);
  EXPECT_EQ(static_cast<int64_t>(module->functions()[0]->body()->size()), program.num_ops + 1);
}

TEST(ProgramGeneratorTest, ElementwiseChainIsValidAndCanonical) {
  for (int64_t n : {0, 1, 7, 8, 9, 1000}) {
    SCOPED_TRACE(n);
    GeneratedProgram program = GenerateElementwiseChain(n);
    EXPECT_EQ(program.num_ops, n);
    EXPECT_EQ(program.num_duplicate_ops, 0);
    EXPECT_EQ(program.num_dead_ops, 0);
    ExpectValidCanonical(program);
  }
}

TEST(ProgramGeneratorTest, ElementwiseChainIsDeterministic) {
  EXPECT_EQ(GenerateElementwiseChain(100).text, GenerateElementwiseChain(100).text);
}

TEST(ProgramGeneratorTest, CseDceMixIsValidAndCanonical) {
  for (int64_t n : {0, 3, 5, 12, 1000}) {
    SCOPED_TRACE(n);
    GeneratedProgram program = GenerateCseDceMix(n);
    EXPECT_EQ(program.num_ops, n);
    ExpectValidCanonical(program);
  }
}

TEST(ProgramGeneratorTest, CseDceMixCounts) {
  GeneratedProgram program = GenerateCseDceMix(1003);
  EXPECT_EQ(program.num_duplicate_ops, 200);
  EXPECT_EQ(program.num_dead_ops, 400);

  // The dead ops are exactly those without users (after the first round) or used only
  // by dead ops; count the ops with no users directly.
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(program.text, diagnostics);
  ASSERT_NE(module, nullptr);
  int64_t unused = 0;
  for (Operation* op : *module->functions()[0]->body()) {
    if (op->num_results() == 1 && op->result(0)->use_empty()) ++unused;
  }
  EXPECT_EQ(unused, 200);  // the tanh at the end of each dead pair
}

TEST(ProgramGeneratorTest, MatmulProgramsAreValidAndCanonical) {
  for (int64_t n : {2, 3, 4, 5, 6, 7, 1000, 1001, 1002}) {
    SCOPED_TRACE(n);
    GeneratedProgram chain = GenerateShardedMatmulChain(n);
    EXPECT_EQ(chain.num_ops, n);
    ExpectValidCanonical(chain);
    GeneratedProgram pairs = GenerateGatherMatmulPairs(n);
    EXPECT_EQ(pairs.num_ops, n);
    ExpectValidCanonical(pairs);
  }
  // 1000 = 2 + 3 * 332 + 2: the last pair has no add.
  EXPECT_EQ(GenerateGatherMatmulPairs(1000).num_dead_ops, 2);
  EXPECT_EQ(GenerateGatherMatmulPairs(1001).num_dead_ops, 0);
  EXPECT_EQ(GenerateShardedMatmulChain(1000).num_duplicate_ops, 500);
  EXPECT_EQ(GenerateShardedMatmulChain(1000).num_dead_ops, 1);
  EXPECT_EQ(GenerateShardedMatmulChain(1001).num_dead_ops, 0);
}

TEST(ProgramGeneratorTest, AttentionChainIsValidAndCanonical) {
  for (int64_t n : {3, 4, 5, 6, 999, 1000}) {
    SCOPED_TRACE(n);
    GeneratedProgram program = GenerateGatheredAttentionChain(n);
    EXPECT_EQ(program.num_ops, n);
    EXPECT_EQ(program.num_dead_ops, n % 3);
    ExpectValidCanonical(program);
  }
}

}  // namespace
}  // namespace commir::bench
