// Programs for the search's tests: a small residual MLP, the shared examples
// (testdata/examples) and the Llama-shaped layer (search/testdata/llama_layer.commir), read from the test's
// runfiles, with their mesh and layout axes substituted.
#ifndef COMMIR_SEARCH_TEST_PROGRAMS_H_
#define COMMIR_SEARCH_TEST_PROGRAMS_H_

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"

namespace commir::search {

// A residual MLP, x [64, 32], w1 [32, 128], w2 [128, 32], f32: cheap to search (few ops
// and dimension classes), so the search tests that use it stay fast under ASan.
inline constexpr char kResidualMlp[] = R"(
mesh @m(d=1)
func @mlp(%x: f32[64, 32], %w1: f32[32, 128], %w2: f32[128, 32]) -> f32[64, 32] {
  %u = matmul(%x, %w1) : f32[64, 128]
  %a = gelu(%u)
  %d = matmul(%a, %w2) : f32[64, 32]
  %y = add(%x, %d)
  return %y
}
)";

inline std::string ReadRunfile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline std::string Example(absl::string_view name) {
  return ReadRunfile(absl::StrCat("testdata/examples/", name, ".commir"));
}

// The Llama-shaped layer on `mesh` ("tp=8", "sp=2, tp=4"), the residual stream split
// over `seq` and the weights over `tp`.
inline std::string LlamaLayer(absl::string_view mesh, absl::string_view seq,
                              absl::string_view tp) {
  return absl::StrReplaceAll(ReadRunfile("search/testdata/llama_layer.commir"),
                             {{"MESH", mesh}, {"@SEQ", absl::StrCat("@", seq)},
                              {"@TP", absl::StrCat("@", tp)}});
}

}  // namespace commir::search

#endif  // COMMIR_SEARCH_TEST_PROGRAMS_H_
