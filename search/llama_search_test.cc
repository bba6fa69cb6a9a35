// The search's Llama-3-8B check: on the layer with separate q/k/v weights (sequence 4096,
// hidden 4096, 32 query and 8 kv heads, SwiGLU 14336, bf16; its Megatron layouts written
// as pins), Megatron's own plan is among the candidates, sends what Megatron sends, and
// the search's best is no slower and sends no more bytes per device.
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "parser/parser.h"
#include "search/search.h"
#include "sim/hardware.h"

namespace commir::search {
namespace {

TEST(LlamaSearch, BestIsNoWorseThanMegatron) {
  absl::StatusOr<std::unique_ptr<Module>> module =
      ParseFile("testdata/partitioning/llama3_8b_layer_report.commir");
  ASSERT_TRUE(module.ok()) << module.status();
  SearchOptions options;
  options.devices = 8;
  options.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
  options.top = 0;
  options.verify = VerifyMode::kNone;
  absl::StatusOr<SearchResult> result = Search(**module, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(result->ranked.empty());

  // Megatron TP+SP: one axis of 8 splitting the sequence of the residual stream, the
  // heads and the FFN; plain collectives.
  const Candidate* megatron = nullptr;
  for (const Candidate& c : result->ranked) {
    if (c.layout.mesh.ToString() == "8" && c.layout.description == "x.0@a wq.1@a wg.1@a" &&
        c.schedule.empty()) {
      megatron = &c;
    }
  }
  ASSERT_NE(megatron, nullptr);
  // Per layer, 2 all_gathers of the normed [4096, 4096] bf16 activation and 2
  // reduce_scatters of the [4096, 4096] bf16 partial sums: each sends 7/8 of 32 MiB.
  const double activation = 4096.0 * 4096 * 2;
  EXPECT_DOUBLE_EQ(megatron->bytes_per_device, 4 * activation * 7 / 8);

  const Candidate& best = result->ranked.front();
  EXPECT_LE(best.time_s, megatron->time_s);
  EXPECT_LE(best.bytes_per_device, megatron->bytes_per_device)
      << best.layout.mesh.ToString() << " " << best.layout.description << " " << best.PipelineText();
}

}  // namespace
}  // namespace commir::search
