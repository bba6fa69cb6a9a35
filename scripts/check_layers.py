#!/usr/bin/env python3
"""Checks that the packages' dependencies point down only and form no cycle.

Reads every BUILD file under the repository root (argument 1, default: the current
directory), evaluating it as Starlark with every rule recorded, and builds the graph of
package dependencies of the targets that ship: libraries and binaries, not tests nor
test-only libraries (a test is a leaf that may run any tool; nothing links it). Then:

  - every package must have a layer in LAYERS below, and every dependency of a shipped
    target must go to its own package or to one in a lower layer;
  - independently of LAYERS, the package graph must have no cycle (so a layer list that
    were wrong could not hide one).

Prints each violation as `BUILD_FILE: //pkg:target -> //other:dep (layer a above b)` and
exits 1; prints the package graph's layers and `ok` and exits 0 otherwise.

The same facts from Bazel itself (both print `Empty results`; tests are left out of the
second, since a test may run any tool):
  bazel query 'somepath(//search:*, //search/plan:* + //tools:*)'
  bazel query 'somepath(kind("cc_library|cc_binary", //search/plan:*) - attr(testonly, 1, //search/plan:*), //tools:*)'
"""

import builtins
import collections
import os
import sys

# Low to high. A package may depend on packages of lower layers only; packages in one
# layer are independent of each other. External repositories (@absl, ...) are below all.
LAYERS = [
    ["testdata"],                    # data files only (its golden tests are tests)
    ["third_party", "third_party/cuda", "third_party/fuzzing"],
    ["commir"],                      # the IR: ops, types, printer, verifier, builder, clone
    ["parser"],                      # text -> IR
    ["transforms"],                  # the pass manager, generic passes
    ["transforms/collectives"],      # passes on collectives; the buckets the partitioner prices
    ["transforms/sharding", "transforms/autodiff"],
    ["transforms/schedules"],        # schedules rewrite lowered (spmd) programs
    ["transforms/registry"],         # the table of every pass, above the passes
    ["transforms/fuzz"],
    ["runtime"],                     # tensors, the interpreter, random inputs
    ["backend_cpu", "sim"],          # the cpu backend; the performance model
    ["backend_cuda/kernels"],
    ["backend_cuda/comm"],
    ["backend_cuda"],
    ["testing"],                     # the spmd check and the tests' helpers
    ["search"],                      # the operator search: layouts, schedules, proof
    ["search/plan"],                 # the whole-model planner, on the search's libraries
    ["tools"],                       # every main: commir-opt, commir-run, commir-search
    ["python/ext"],
    ["python", "benchmarks", "docs", "scripts", ""],  # "" is the root BUILD
]

TEST_KINDS = {"cc_test", "sh_test", "py_test", "cuda_cc_test", "gtest_with_gpu_part",
              "commir_run_test", "test_suite", "cc_fuzz_target"}


def read_build(path):
    """The rules of one BUILD file as (kind, attributes) pairs."""
    rules = []

    def rule(kind):
        def record(*args, **attrs):
            if "name" in attrs:
                rules.append((kind, attrs))
                return None
            return []  # a helper macro such as if_cuda(...): contributes nothing
        return record

    class Scope(dict):
        def __missing__(self, key):
            if hasattr(builtins, key):
                raise KeyError(key)  # then Python finds the builtin
            return rule(key)

    scope = Scope()
    scope.update({
        "load": lambda *args, **kwargs: None,
        "glob": lambda *args, **kwargs: [],
        "select": lambda d, **kwargs: [x for v in d.values() for x in v],
        "package": lambda **kwargs: None,
        "exports_files": lambda *args, **kwargs: None,
        "licenses": lambda *args, **kwargs: None,
    })
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), scope)
    return rules


def package_of(label, here):
    """The package a dependency label names, or None for an external repository."""
    if label.startswith("@"):
        return None
    if label.startswith("//"):
        return label[2:].split(":")[0]
    return here  # ":name" or "name"


def is_test(kind, attrs):
    return kind in TEST_KINDS or bool(attrs.get("testonly"))


def find_cycle(graph):
    """One cycle of `graph` (package -> set of packages) as a list, or None."""
    color = {}
    stack = []

    def visit(node):
        color[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if color.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in color:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        color[node] = 2
        return None

    for node in sorted(graph):
        if node not in color:
            found = visit(node)
            if found:
                return found
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    layer = {pkg: i for i, pkgs in enumerate(LAYERS) for pkg in pkgs}
    graph = collections.defaultdict(set)
    # Under `bazel test` only the BUILD files scripts/BUILD names are present: each
    # package with a layer must be one of them, so that none is silently skipped.
    errors = [f"{os.path.join(p, 'BUILD')}: missing (add it to scripts/BUILD's check_layers_test)"
              for p in layer if not os.path.isfile(os.path.join(root, p, "BUILD"))]
    for dirpath, dirnames, filenames in os.walk(root):
        # Skipped: Bazel's outputs, and local repositories (third_party/rules_cc: a
        # WORKSPACE file of their own), which are not packages of this one.
        dirnames[:] = sorted(
            d for d in dirnames if not d.startswith((".", "bazel-"))
            and not os.path.exists(os.path.join(dirpath, d, "WORKSPACE")))
        if "BUILD" not in filenames:
            continue
        pkg = os.path.relpath(dirpath, root)
        pkg = "" if pkg == "." else pkg
        build = os.path.join(pkg, "BUILD")
        if pkg not in layer:
            errors.append(f"{build}: package //{pkg} has no layer in scripts/check_layers.py")
            continue
        for kind, attrs in read_build(os.path.join(dirpath, "BUILD")):
            if is_test(kind, attrs):
                continue
            for attr in ("deps", "actual", "srcs", "data"):
                values = attrs.get(attr, [])
                if isinstance(values, str):
                    values = [values]
                for label in values:
                    if not label.startswith(("//", "@")) and attr != "deps" and attr != "actual":
                        continue  # a file of this package
                    dep = package_of(label, pkg)
                    if dep is None or dep == pkg:
                        continue
                    graph[pkg].add(dep)
                    if dep not in layer:
                        errors.append(f"{build}: //{pkg}:{attrs['name']} -> {label}: "
                                      f"package //{dep} has no layer")
                    elif layer[dep] >= layer[pkg]:
                        errors.append(f"{build}: //{pkg}:{attrs['name']} -> {label} "
                                      f"(layer {layer[dep]} is not below {layer[pkg]})")
    cycle = find_cycle(graph)
    if cycle:
        errors.append("package cycle: " + " -> ".join("//" + p for p in cycle))
    for error in errors:
        print(error)
    if errors:
        return 1
    for i, pkgs in enumerate(LAYERS):
        used = [p for p in pkgs if p in graph or any(p in d for d in graph.values())]
        if used:
            print(f"layer {i}: " + ", ".join("//" + p for p in used))
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
