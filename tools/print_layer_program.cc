// print_layer_program MODEL TP CP SP(0|1) MICRO_BATCH [head]: the generated program.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "commir/printer.h"
#include "search/plan/layer_program.h"
#include "search/plan/model_spec.h"

int main(int argc, char** argv) {
  using namespace commir::search::plan;
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s MODEL TP CP SP MICRO_BATCH [head]\n", argv[0]);
    return 2;
  }
  absl::StatusOr<ModelSpec> model = ParseModelSpec(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 2;
  }
  LayerLayout l{std::atoll(argv[2]), std::atoll(argv[3]), std::atoi(argv[4]) != 0,
                std::atoll(argv[5])};
  absl::StatusOr<std::unique_ptr<commir::Module>> program =
      argc > 6 && std::string(argv[6]) == "head" ? HeadProgram(*model, l)
                                                 : TransformerLayerProgram(*model, l);
  if (!program.ok()) {
    std::fprintf(stderr, "%s\n", std::string(program.status().message()).c_str());
    return 1;
  }
  // Text at the boundary: the tool's output.
  std::fputs(commir::PrintModule(**program).c_str(), stdout);
  return 0;
}
