"""cc_fuzz_target(): libFuzzer targets that also build in normal configs.

    load("//third_party/fuzzing:fuzz.bzl", "cc_fuzz_target")

    cc_fuzz_target(
        name = "parser_fuzzer",
        srcs = ["parser_fuzzer.cc"],       # defines LLVMFuzzerTestOneInput
        deps = ["//parser"],
        corpus = glob(["testdata/fuzz/parser/**"]),   # optional seed inputs
    )

creates
  :parser_fuzzer              cc_binary. Under --config=fuzz (clang-14,
                              -fsanitize=fuzzer,address,undefined) it is a real
                              libFuzzer binary; otherwise it links a small
                              main() that replays the files/dirs given as
                              arguments (so it always builds).
  :parser_fuzzer_corpus_test  cc_test that replays the empty input and the
                              corpus (regression test; part of //...).

Fuzz:
    bazel build --config=fuzz //parser:parser_fuzzer
    mkdir -p /tmp/corpus && bazel-bin/parser/parser_fuzzer -max_total_time=60 /tmp/corpus testdata/fuzz/parser
"""

_FUZZ_SETTING = "//third_party/fuzzing:fuzzing_enabled"
_STANDALONE_MAIN = "//third_party/fuzzing:standalone_fuzz_main"

def cc_fuzz_target(name, srcs, deps = [], corpus = [], tags = [], corpus_test = True, **kwargs):
    """A libFuzzer target plus a corpus regression test (see file docstring)."""
    native.cc_binary(
        name = name,
        srcs = srcs,
        deps = deps + select({
            _FUZZ_SETTING: [],
            "//conditions:default": [_STANDALONE_MAIN],
        }),
        linkopts = select({
            _FUZZ_SETTING: ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        tags = tags + ["fuzz_target"],
        data = corpus,
        **kwargs
    )
    if corpus_test:
        native.cc_test(
            name = name + "_corpus_test",
            srcs = srcs,
            deps = deps + [_STANDALONE_MAIN],
            data = corpus,
            args = ["$(locations %s)" % c for c in corpus],
            tags = tags + ["fuzz_corpus"],
            **kwargs
        )
