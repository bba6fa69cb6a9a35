"""Macros for code that needs CUDA. Load with

    load("//third_party/cuda:build_defs.bzl", "if_cuda", "cuda_only", "cuda_cc_library", ...)

CUDA is detected when the @local_cuda repository is fetched (see
cuda_configure.bzl); CUDA_AVAILABLE is a plain bool at loading time.

Two styles are supported:

1. Select lists (the CUDA code simply does not exist without CUDA):

       cc_library(
           name = "backends",
           deps = [":cpu_backend"] + if_cuda([":cuda_backend"]),
           defines = if_cuda(["COMMIR_HAS_CUDA=1"], ["COMMIR_HAS_CUDA=0"]),
       )
       test_suite(name = "cuda_tests", tests = cuda_only([":cuda_test"]))

2. CUDA-only targets (always declared; without CUDA they are marked
   incompatible, so `bazel build //...` / `bazel test //...` skip them and the
   test summary reports them as SKIPPED; building one explicitly gives a
   clear "incompatible" error):

       cuda_cc_library(name = "cuda_backend", srcs = [...], deps = ["@local_cuda//:cudart"])
       cuda_cc_binary(name = "cuda_probe", srcs = ["probe.cc"], deps = ["@local_cuda//:cudart"])
       cuda_cc_test(name = "cuda_test", srcs = [...], deps = [..., "@gtest//:gtest_main"])
       cuda_kernel_library(name = "kernels", srcs = ["add.cu"], hdrs = ["add.h"])

   (cuda_kernel_library compiles .cu files with nvcc; see its docstring.)

   Anything depending on a cuda_cc_library must itself be CUDA-only or use
   if_cuda() for that dependency.

cuda_cc_test adds the tags "cuda" and "no_asan" (the sanitizer run skips CUDA tests:
ASan does not instrument device code, and the default run builds and runs them). Machines may have the CUDA toolkit but no
GPU: a test whose cases need a GPU carries tags = ["requires-gpu"], which
scripts/test.sh filters out (and counts as skipped) when no GPU is present; a
binary that mixes such cases with host-side ones is split in two targets with
gtest_with_gpu_part (//testing:gpu_test.bzl), so the host-side cases still run.
"""

load(
    "@local_cuda//:defs.bzl",
    _CUDA_AVAILABLE = "CUDA_AVAILABLE",
    _CUDA_COMPONENTS = "CUDA_COMPONENTS",
    _CUDA_LIB_DIR = "CUDA_LIB_DIR",
    _CUDA_PATH = "CUDA_PATH",
    _CUDA_VERSION = "CUDA_VERSION",
    _NVCC = "NVCC",
)

CUDA_AVAILABLE = _CUDA_AVAILABLE
CUDA_PATH = _CUDA_PATH
CUDA_VERSION = _CUDA_VERSION
CUDA_LIB_DIR = _CUDA_LIB_DIR
CUDA_COMPONENTS = _CUDA_COMPONENTS

# Absolute path of nvcc (or None), for genrules that compile .cu files, e.g.
#   genrule(name = "k_o", srcs = ["k.cu"], outs = ["k.o"],
#           cmd = "%s -c $< -o $@ -Xcompiler -fPIC" % NVCC)
NVCC = _NVCC

def if_cuda(if_true, if_false = []):
    """Returns if_true when CUDA was detected, else if_false."""
    return if_true if _CUDA_AVAILABLE else if_false

def if_cuda_plugin(if_true, if_false = []):
    """Like if_cuda, but if_false in sanitizer builds (--config=asan).

    For what only carries the cuda plugin along (commir-run's runfiles): building the
    plugin compiles every kernel with nvcc again, uninstrumented, for nothing.
    """
    if not _CUDA_AVAILABLE:
        return if_false
    return select({
        "//third_party/cuda:sanitizer_build": if_false,
        "//conditions:default": if_true,
    })

def cuda_only(targets):
    """Returns targets (a list) when CUDA was detected, else []."""
    return targets if _CUDA_AVAILABLE else []

def if_cuda_component(component, if_true, if_false = []):
    """Like if_cuda, but also requires one library, e.g. "nccl" or "cudnn"."""
    return if_true if _CUDA_AVAILABLE and _CUDA_COMPONENTS.get(component, False) else if_false

def _cuda_kwargs(kwargs, is_test = False):
    if not _CUDA_AVAILABLE:
        kwargs["target_compatible_with"] = kwargs.get("target_compatible_with", []) + [
            "@platforms//:incompatible",
        ]
    if is_test:
        # no_asan: a CUDA test under --config=asan would compile every kernel it links
        # with nvcc a second time, uninstrumented; the default run covers it.
        tags = kwargs.get("tags", [])
        kwargs["tags"] = tags + [t for t in ("cuda", "no_asan") if t not in tags]
    return kwargs

def cuda_cc_library(name, **kwargs):
    """cc_library that is skipped (incompatible) when CUDA is not available."""
    native.cc_library(name = name, **_cuda_kwargs(kwargs))

def cuda_cc_binary(name, **kwargs):
    """cc_binary that is skipped (incompatible) when CUDA is not available."""
    native.cc_binary(name = name, **_cuda_kwargs(kwargs))

def cuda_cc_test(name, **kwargs):
    """cc_test that is skipped (incompatible) when CUDA is not available."""
    native.cc_test(name = name, **_cuda_kwargs(kwargs, is_test = True))

# GPU architectures for cuda_kernel_library (CUDA 13 supports sm_75 and newer).
# The PTX for the newest one lets the driver JIT-compile for future GPUs.
CUDA_DEFAULT_GENCODE = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=[sm_90,compute_90]",
]

def cuda_kernel_library(name, srcs, hdrs = [], deps = [], nvcc_flags = [], gencode = None, **kwargs):
    """Compiles .cu files with nvcc (one genrule each) into a cuda_cc_library.

    The .cu files may include standard/CUDA/system headers and the headers
    listed in `hdrs` (paths from the workspace root, e.g.
    #include "backend_cuda/kernels.h"); headers of `deps` are only visible to
    the C++ side. Host code in .cu files is compiled by nvcc with -std=c++20
    -fPIC and is not sanitizer-instrumented. Without CUDA the library is
    incompatible (skipped), like every cuda_cc_* target.

    Args:
      name: library name; depend on it from C++ code that calls the kernels.
      srcs: .cu files.
      hdrs: headers shared by the .cu files and the C++ callers.
      deps: extra cc deps (@local_cuda//:cudart is always added).
      nvcc_flags: extra nvcc flags, e.g. ["-O3", "--use_fast_math"].
      gencode: list of -gencode flags (default CUDA_DEFAULT_GENCODE).
      **kwargs: passed to cuda_cc_library (visibility, tags, ...).
    """
    flags = ["-std=c++20", "-Xcompiler", "-fPIC", "-I.", "-I$(GENDIR)"]
    flags += CUDA_DEFAULT_GENCODE if gencode == None else gencode
    flags += nvcc_flags
    objs = []
    for src in srcs:
        stem = src[:src.rfind(".")] if "." in src else src
        out = "_%s_nvcc/%s.o" % (name, stem)
        rule_name = "%s_nvcc_%s" % (name, stem.replace("/", "_"))
        native.genrule(
            name = rule_name,
            srcs = [src] + hdrs,
            outs = [out],
            # nvcc names its temporaries after its PID. In linux-sandbox every action
            # runs in a PID namespace as PID 2 and /tmp may be shared, so two nvcc
            # genrules running at once overwrite each other's .ptx files ("ptxas
            # fatal: Input file ... could not be opened"). A private TMPDIR per action
            # keeps them apart.
            cmd = ("tmp=$$(mktemp -d) && trap 'rm -rf \"$$tmp\"' EXIT && " +
                   "TMPDIR=$$tmp %s -c $(location %s) -o $@ %s") % (_NVCC, src, " ".join(flags)) if _NVCC else "false",
            target_compatible_with = [] if (_CUDA_AVAILABLE and _NVCC) else ["@platforms//:incompatible"],
            tags = kwargs.get("tags", []),
            visibility = ["//visibility:private"],
        )
        objs.append(":" + out)
    cuda_cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart"],
        **kwargs
    )
