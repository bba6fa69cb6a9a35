"""End-to-end tests of the real commir-run binary."""

load("@rules_cc//cc:defs.bzl", "cc_test")

def commir_run_test(name, size = "small", args = [], data = [], deps = [], **kwargs):
    """A test of NAME.cc that runs //:commir-run as a child process.

    The binary's path is the test's first argument (its main() reads argv[1]), followed by
    `args`; the binary is in the runfiles with `data`. The child is run with
    //testing:subprocess and checked with GoogleTest/GoogleMock.
    """
    cc_test(
        name = name,
        size = size,
        srcs = [name + ".cc"],
        args = ["$(rootpath //:commir-run)"] + args,
        data = ["//:commir-run"] + data,
        deps = deps + [
            "//testing:subprocess",
            "@absl//:absl",
            "@gtest//:gmock",
            "@gtest//:gtest",
        ],
        **kwargs
    )
