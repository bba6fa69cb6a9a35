"""End-to-end tests of the real commir-run binary."""

load("@rules_cc//cc:defs.bzl", "cc_test")
load("//testing:gpu_test.bzl", "gtest_with_gpu_part")

def commir_run_test(name, size = "small", args = [], data = [], deps = [], host_tests = None, **kwargs):
    """A test of NAME.cc that runs //:commir-run as a child process.

    The binary's path is the test's first argument (its main() reads argv[1]), followed by
    `args`; the binary is in the runfiles with `data`. The child is run with
    //testing:subprocess and checked with GoogleTest/GoogleMock.

    With host_tests (a gtest filter), the cases it names are NAME and the others, which
    need a GPU, NAME_gpu tagged "requires-gpu" (//testing:gpu_test.bzl).
    """
    common = dict(
        args = ["$(rootpath //:commir-run)"] + args,
        data = ["//:commir-run"] + data,
        deps = deps + [
            "//testing:subprocess",
            "@absl//:absl",
            "@gtest//:gmock",
            "@gtest//:gtest",
        ],
    )
    if host_tests:
        gtest_with_gpu_part(
            name = name,
            size = size,
            srcs = [name + ".cc"],
            host_tests = host_tests,
            **dict(common, **kwargs)
        )
        return
    cc_test(
        name = name,
        size = size,
        srcs = [name + ".cc"],
        **dict(common, **kwargs)
    )
