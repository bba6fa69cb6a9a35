#!/usr/bin/env python3
"""Times `commir-opt` against `mlir-opt` on the same elementwise chain.

Writes a CommIR file and the equivalent MLIR file, each an N-op (default 200,000)
elementwise chain on 16x16 f32 tensors in one global function:

    CommIR                                       MLIR (mlir-14: builtin `func`)
    %c0 = full() {value = 0.5} : f32[16, 16]     %c0 = arith.constant dense<5.000000e-01> : tensor<16x16xf32>
    %v0 = add(%x, %c0) : f32[16, 16]             %v0 = arith.addf %x, %c0 : tensor<16x16xf32>
    %v1 = mul(%v0, %c1) : f32[16, 16]            %v1 = arith.mulf %v0, %c1 : tensor<16x16xf32>
    %v2 = sub(%v1, %c2) : f32[16, 16]            %v2 = arith.subf %v1, %c2 : tensor<16x16xf32>
    ...                                          ...

(three constants, then add/mul/sub alternating, each using the previous result and a
constant; N counts every op but the return). Then runs, interleaved, `commir-opt FILE
-o /dev/null` (parse + verify + print) and `mlir-opt FILE -o /dev/null` (parse +
verify + print; mlir-opt verifies by default) several times each and prints the min
and median wall time, the peak RSS (from wait4's rusage of each child) and the ratio
mlir-opt / commir-opt of the medians. The goal is a ratio of at least 2.

Usage:
    benchmarks/compare_mlir_opt.py                  # builds //:commir-opt with -c opt
    benchmarks/compare_mlir_opt.py --commir-opt PATH --runs 7 --ops 200000
    benchmarks/compare_mlir_opt.py --keep DIR       # keep the generated files in DIR

Exit status: 0 if both tools succeed on every run (whatever the ratio; pass
--require-ratio X to fail below X), 1 if a tool fails, 2 on bad usage.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (value, CommIR spelling, MLIR spelling) of the three constants.
CONSTANTS = [(0.5, "0.5", "5.000000e-01"), (2.0, "2.0", "2.000000e+00"), (0.25, "0.25", "2.500000e-01")]
CHAIN = [("add", "arith.addf"), ("mul", "arith.mulf"), ("sub", "arith.subf")]


def chain_lines(num_ops):
    """Yields (name, commir_op_index, operand names) for the chain after the constants."""
    prev = "x"
    for i in range(num_ops - len(CONSTANTS)):
        name = "v%d" % i
        yield name, i % len(CHAIN), prev, "c%d" % (i % len(CONSTANTS))
        prev = name


def write_commir(path, num_ops):
    ty = "f32[16, 16]"
    out = ["func @main(%%x: %s) -> %s {\n" % (ty, ty)]
    for k, (_, text, _) in enumerate(CONSTANTS):
        out.append("  %%c%d = full() {value = %s} : %s\n" % (k, text, ty))
    last = "x"
    for name, op, a, b in chain_lines(num_ops):
        out.append("  %%%s = %s(%%%s, %%%s) : %s\n" % (name, CHAIN[op][0], a, b, ty))
        last = name
    out.append("  return %%%s\n}\n" % last)
    with open(path, "w") as f:
        f.write("".join(out))


def write_mlir(path, num_ops, func_keyword):
    ty = "tensor<16x16xf32>"
    out = ["%s @main(%%x: %s) -> %s {\n" % (func_keyword, ty, ty)]
    for k, (_, _, text) in enumerate(CONSTANTS):
        out.append("  %%c%d = arith.constant dense<%s> : %s\n" % (k, text, ty))
    last = "x"
    for name, op, a, b in chain_lines(num_ops):
        out.append("  %%%s = %s %%%s, %%%s : %s\n" % (name, CHAIN[op][1], a, b, ty))
        last = name
    out.append("  return %%%s : %s\n}\n" % (last, ty))
    with open(path, "w") as f:
        f.write("".join(out))


def mlir_func_keyword(mlir_opt, workdir):
    """`func.func` (MLIR >= 15) or the builtin `func` (MLIR 14): whichever parses."""
    for keyword in ("func.func", "func"):
        probe = os.path.join(workdir, "probe.mlir")
        write_mlir(probe, len(CONSTANTS) + 3, keyword)
        r = subprocess.run([mlir_opt, probe, "-o", os.devnull], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        if r.returncode == 0:
            return keyword
    sys.exit("error: %s parses neither `func.func` nor `func`" % mlir_opt)


def find_commir_opt(args):
    if args.commir_opt:
        return args.commir_opt
    print("Building //:commir-opt with -c opt ...", file=sys.stderr)
    r = subprocess.run(["bazel", "build", "-c", "opt", "//:commir-opt"], cwd=REPO_ROOT)
    if r.returncode != 0:
        sys.exit("error: `bazel build -c opt //:commir-opt` failed")
    bin_dir = subprocess.run(["bazel", "info", "-c", "opt", "bazel-bin"], cwd=REPO_ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True, check=True).stdout.strip()
    return os.path.join(bin_dir, "commir-opt")


def run_once(cmd):
    """Runs `cmd`; returns (wall seconds, CPU seconds (user + system), peak RSS in KiB,
    exit status, stderr)."""
    with tempfile.TemporaryFile() as err_file:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err_file)
        # wait4 gives this child's own rusage (ru_maxrss is in KiB on Linux).
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err_file.seek(0)
        err = err_file.read(8192).decode(errors="replace")
    return wall, rusage.ru_utime + rusage.ru_stime, rusage.ru_maxrss, proc.returncode, err


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=200000, help="ops per program (default 200000)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per tool (default 5)")
    parser.add_argument("--commir-opt", help="commir-opt binary (default: build //:commir-opt -c opt)")
    parser.add_argument("--mlir-opt", default=shutil.which("mlir-opt-14") or "/usr/bin/mlir-opt-14",
                        help="mlir-opt binary (default: mlir-opt-14)")
    parser.add_argument("--keep", metavar="DIR", help="write the inputs to DIR and keep them")
    parser.add_argument("--require-ratio", type=float, default=0.0,
                        help="exit 1 if mlir-opt/commir-opt (medians) is below this")
    args = parser.parse_args()
    if args.ops < len(CONSTANTS) + 1 or args.runs < 1:
        parser.error("--ops must be >= 4 and --runs >= 1")
    if not os.path.exists(args.mlir_opt):
        parser.error("mlir-opt not found at %s (Debian package mlir-14-tools)" % args.mlir_opt)

    commir_opt = find_commir_opt(args)
    if not os.path.exists(commir_opt):
        sys.exit("error: commir-opt not found at %s" % commir_opt)

    workdir = args.keep or tempfile.mkdtemp(prefix="commir-vs-mlir.")
    os.makedirs(workdir, exist_ok=True)
    try:
        keyword = mlir_func_keyword(args.mlir_opt, workdir)
        commir_file = os.path.join(workdir, "chain.commir")
        mlir_file = os.path.join(workdir, "chain.mlir")
        write_commir(commir_file, args.ops)
        write_mlir(mlir_file, args.ops, keyword)

        # Correctness first (untimed): commir-opt must accept the file and, since it is
        # canonical, print it back unchanged.
        printed = os.path.join(workdir, "chain.printed.commir")
        r = subprocess.run([commir_opt, commir_file, "-o", printed], stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit("error: commir-opt failed (%d):\n%s" % (r.returncode, r.stderr[:4000]))
        with open(commir_file) as a, open(printed) as b:
            if a.read() != b.read():
                sys.exit("error: commir-opt did not reproduce its canonical input")

        tools = [
            ("commir-opt", [commir_opt, commir_file, "-o", os.devnull]),
            (os.path.basename(args.mlir_opt), [args.mlir_opt, mlir_file, "-o", os.devnull]),
        ]
        # One untimed warm-up each (page cache, binary loading), then interleaved runs.
        results = {name: [] for name, _ in tools}
        for round_ in range(args.runs + 1):
            for name, cmd in tools:
                wall, cpu, rss, rc, err = run_once(cmd)
                if rc != 0:
                    sys.exit("error: %s failed with status %d:\n%s" % (name, rc, err[:4000]))
                if round_ > 0:
                    results[name].append((wall, cpu, rss))

        sizes = {tools[0][0]: os.path.getsize(commir_file), tools[1][0]: os.path.getsize(mlir_file)}
        print("Elementwise chain: %d ops on 16x16 f32 tensors, %d timed runs per tool "
              "(interleaved, after one warm-up)" % (args.ops, args.runs))
        print("Inputs: %s (%.1f MB), %s (%.1f MB, `%s`)" % (
            commir_file if args.keep else "chain.commir", sizes["commir-opt"] / 1e6,
            mlir_file if args.keep else "chain.mlir", sizes[tools[1][0]] / 1e6, keyword))
        print()
        header = "%-12s %10s %10s %10s %10s %12s %9s %10s" % (
            "tool", "wall min", "wall med", "cpu min", "cpu med", "ops/s (med)", "MB/s", "RSS (MiB)")
        print(header)
        print("-" * len(header))
        walls, cpus = {}, {}
        for name, _ in tools:
            walls[name] = [w for w, _, _ in results[name]]
            cpus[name] = [c for _, c, _ in results[name]]
            rss = max(r for _, _, r in results[name])
            med = statistics.median(walls[name])
            print("%-12s %9.3fs %9.3fs %9.3fs %9.3fs %12.0f %9.1f %10.1f" % (
                name, min(walls[name]), med, min(cpus[name]), statistics.median(cpus[name]),
                args.ops / med, sizes[name] / 1e6 / med, rss / 1024.0))
        other = tools[1][0]
        ratio = statistics.median(walls[other]) / statistics.median(walls["commir-opt"])
        min_ratio = min(walls[other]) / min(walls["commir-opt"])
        cpu_ratio = statistics.median(cpus[other]) / statistics.median(cpus["commir-opt"])
        print()
        print("speedup of commir-opt over %s: %.2fx wall (medians), %.2fx wall (minimums), "
              "%.2fx CPU time (medians); goal >= 2x: %s"
              % (other, ratio, min_ratio, cpu_ratio, "met" if ratio >= 2.0 else "NOT met"))
        try:
            load = os.getloadavg()[0]
            if load > (os.cpu_count() or 1) * 0.75:
                print("note: load average %.1f on %d CPUs; wall times include waiting for a CPU, "
                      "CPU times are the steadier comparison" % (load, os.cpu_count() or 1))
        except OSError:
            pass
        if ratio < args.require_ratio:
            return 1
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
