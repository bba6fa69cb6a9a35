"""GoogleTest binaries whose cases split into host checks and checks that need a GPU.

    load("//testing:gpu_test.bzl", "gtest_with_gpu_part")

    gtest_with_gpu_part(
        name = "elementwise_test",
        host_tests = "*.Rejects*",
        srcs = ["elementwise_test.cc"],
        deps = [...],
        library_rule = cuda_cc_library,
        test_rule = cuda_cc_test,
    )

declares two tests over one compiled library of the sources:

  NAME      the cases that host_tests (a positive gtest filter, patterns joined by ':')
            selects: argument checks and error paths that need no GPU. They run
            everywhere, in CI too.
  NAME_gpu  every other case, tagged "requires-gpu": scripts/test.sh filters it out
            and counts it as skipped where `nvidia-smi -L` lists no GPU, and runs it
            where one does. scripts/gpu_bundle.sh bundles the tests with that tag.

The two filters are complements, so a new case lands in exactly one of them: in the GPU
part unless host_tests names it. (Without the split, a GPU case that GTEST_SKIPs on a
machine without a GPU makes the whole binary report PASSED.)
"""

load("@rules_cc//cc:defs.bzl", "cc_library", "cc_test")

GPU_TAG = "requires-gpu"

def gtest_with_gpu_part(
        name,
        host_tests,
        srcs,
        deps = [],
        args = [],
        data = [],
        tags = [],
        size = "small",
        gpu_size = None,
        library_rule = cc_library,
        test_rule = cc_test,
        **kwargs):
    """Declares NAME (the host_tests cases) and NAME_gpu (the rest, requires-gpu).

    Args:
      name: the host part's name; the GPU part is NAME_gpu.
      host_tests: positive gtest filter of the cases that need no GPU, e.g.
        "Fixture.*:*.Rejects*"; must not contain '-'.
      srcs: the test sources, compiled once into NAME_lib (alwayslink).
      deps: their dependencies (a gtest main among them, or a main() in srcs).
      args: arguments of both tests, before the gtest filter.
      data: runfiles of both tests.
      tags: tags of both tests (NAME_gpu adds "requires-gpu").
      size: the host part's size.
      gpu_size: the GPU part's size (default: size).
      library_rule: the rule of the compiled sources (cuda_cc_library for CUDA code).
      test_rule: the test rule (cuda_cc_test for CUDA code).
      **kwargs: passed to both tests (local_defines go to the library).
    """
    if not host_tests or "-" in host_tests:
        fail("host_tests must be a non-empty positive gtest filter, got '%s'" % host_tests)
    local_defines = kwargs.pop("local_defines", [])
    library_rule(
        name = name + "_lib",
        testonly = True,
        srcs = srcs,
        deps = deps,
        local_defines = local_defines,
        alwayslink = True,
        visibility = ["//visibility:private"],
    )
    test_rule(
        name = name,
        size = size,
        args = args + ["--gtest_filter=" + host_tests],
        data = data,
        tags = tags,
        deps = [":" + name + "_lib"],
        **kwargs
    )
    test_rule(
        name = name + "_gpu",
        size = gpu_size or size,
        args = args + ["--gtest_filter=-" + host_tests],
        data = data,
        tags = tags + [GPU_TAG],
        deps = [":" + name + "_lib"],
        **kwargs
    )
