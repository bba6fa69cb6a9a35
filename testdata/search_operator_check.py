"""Operator-search goldens (CSV) against closed forms that do not call or re-use the tools.

Figures used, each from the H100 SXM datasheet or NCCL as calibration.md quotes them:

  * NCCL's ring model (calibration.md, "NCCL's own tuning model"): a ring collective takes
    base + steps x step latency + bus bytes / bandwidth, the fastest of LL/LL128/Simple;
    all_gather and reduce_scatter take n-1 steps and move (n-1)/n of the gathered buffer,
    all_reduce 2(n-1) steps and 2(n-1)/n of it. The bus bandwidth is sim/hardware.cc's
    documented one (NVLink 4's 450 GB/s x 0.82 measured nccl-tests efficiency, halved at
    0.75 MiB messages). The goldens agree to 1e-8 (their printed digits); the 1%
    tolerance leaves room for a refinement the published model lacks, while one NCCL
    step more or less (5% of these latency-bound collectives), another protocol or
    other bytes fail.
  * Bytes per device: the ring's share above, exactly (integers); an all_to_all sends
    (n-1)/n of its local buffer. NCCL's tuning model has no all_to_all, so a candidate
    with one is held to a lower bound: NCCL's smallest base latency plus its bytes at
    NVLink's 450 GB/s per direction, the ring collectives' bound likewise.
  * Compute lower bound: the program's FLOPs split perfectly over the devices at the
    highest f32-input matmul rate of the datasheet (TF32 tensor cores, 495 TFLOP/s;
    calibration.md "GPUs"), plus its operands read and result written once at the HBM
    bandwidth (3.35 TB/s). Every row's compute (time - exposed communication) must be at
    least that: no schedule or overlap can beat the hardware.
  * A collective that crosses nodes is no faster than the same one over NVLink inside a
    node and no faster than its bus bytes over one NDR NIC (400 Gb/s = 50 GB/s, the
    datasheet's one NIC per GPU) after NCCL's smallest base latency.
  * Placements equal up to naming mesh axes (a 1-D mesh of n and the same devices as
    (a,b) flattened row-major) run the same per-device program: equal time, bytes and
    memory, exactly. Two layouts that give every device the same shards run the same
    compute (time - exposed), whatever path their collectives take.
  * Training rows: forward + backward = time (printed to 9 digits); the backward has
    twice the forward's matmul FLOPs (dX and dW per matmul), which enters the lower bound.
  * Causal attention: 4 B H S^2 D FLOPs for QK^T and PV (FlashAttention, Dao et al.
    2022), half of them under the causal mask.
"""

import csv
import os

MiB = 1024.0 ** 2
NCCL_BASE = (6.6e-6, 14.0e-6, 8.4e-6)  # LL, LL128, Simple (ring)
NCCL_STEP = (0.6e-6, 1.9e-6, 3.4e-6)
NCCL_FRACTION = (0.5, 0.92, 1.0)
NVLINK_PEAK = 450e9
NVLINK_BUS = NVLINK_PEAK * 0.82
NIC_BYTES_PER_S = 400e9 / 8
PEAK_TF32 = 495e12
HBM = 3.35e12
F32 = 4


def ring_time(kind, n, size_bytes):
    """One ring collective of a `size_bytes` buffer (the gathered / reduced one) on n H100s."""
    bus = NVLINK_BUS * size_bytes / (size_bytes + 0.75 * MiB)
    steps, share = (2 * (n - 1), 2.0 * (n - 1) / n) if kind == "all_reduce" else (n - 1, (n - 1.0) / n)
    return min(NCCL_BASE[p] + steps * NCCL_STEP[p] + share * size_bytes / (bus * NCCL_FRACTION[p])
               for p in range(3))


def ring_bytes(kind, n, size_bytes):
    if kind == "all_to_all":
        return size_bytes * (n - 1) // n  # the local buffer, (n-1)/n of it to the others
    return (2 if kind == "all_reduce" else 1) * size_bytes * (n - 1) // n


def least_time(kind, n, size_bytes, path):
    """A lower bound: NCCL's smallest base latency, then the bytes at the link's peak."""
    sent = ring_bytes(kind, n, size_bytes)
    if path == "network":
        return max(ring_time(kind, n, size_bytes), min(NCCL_BASE) + sent / NIC_BYTES_PER_S)
    return min(NCCL_BASE) + sent / NVLINK_PEAK


def matmul(m, k, n):
    """FLOPs and least HBM bytes (operands read, result written once) of an f32 matmul."""
    return 2.0 * m * k * n, F32 * (m * k + k * n + m * n)


def mlp_work(rows, hidden, ffn):
    a, b = matmul(rows, hidden, ffn), matmul(rows, ffn, hidden)
    return a[0] + b[0], a[1] + b[1]


def causal_attention_work(batch, heads, seq, dim):
    flops = 2.0 * batch * heads * seq * seq * dim
    return flops, F32 * 4 * batch * heads * seq * dim


# (golden, [(mesh, layouts)], [(kind, devices, reduced bytes, "nvlink" or "network")]):
# candidates whose collectives follow from their layouts by hand, on the plain pipeline (a
# schedule such as ring attention replaces those collectives by its own).
COLLECTIVES = [
    # Causal attention, kv heads over a, the sequence over b: each device needs every
    # earlier key and value of its kv head: k and v ([1, 1, 128, 16] f32, 8 KiB)
    # all_gathered over b.
    ("attention_gqa.golden", [(None, "q.1@a q.2@b")], [("all_gather", 2, 8192, "nvlink")] * 2),
    # Megatron-SP on 4: h ([64, 64] f32, 16 KiB) all_gathered before w1, d reduce_scattered.
    ("pinned_block.golden", [(None, "x.0@a w1.1@a")],
     [("all_gather", 4, 16384, "nvlink"), ("reduce_scatter", 4, 16384, "nvlink")]),
    # x's rows over a, its columns (so w1's rows) over b: u's partial sums ([128, 512] f32,
    # 256 KiB) all_reduced over b; w2's columns split after that need nothing.
    ("mlp.golden", [("2x2", "x.0@a x.1@b w2.1@b")], [("all_reduce", 2, 262144, "nvlink")]),
    # w1's (v1's) columns over 2: the layer's output d ([64, 32] f32, 8 KiB) is a partial sum.
    ("calls_inlined.golden", [("2", "w1.1@a")], [("all_reduce", 2, 8192, "nvlink")]),
    ("calls_inlined.golden", [("2", "v1.1@a")], [("all_reduce", 2, 8192, "nvlink")]),
    # Training, w1's rows over 4: forward all_reduces u ([256, 512], 512 KiB); the backward's
    # dx, dw1 (rows), dw2 need nothing more.
    ("train_mlp.golden", [("4", "x.1@a"), ("2x2", "x.1@(a,b)")], [("all_reduce", 4, 524288, "nvlink")]),
    # Training, batch over 4: dw1 and dw2 (256 KiB each) all_reduced (data parallelism) in
    # one bucket of 512 KiB, as the default pipeline's combine-all-reduces makes it (DDP).
    ("train_mlp.golden", [("4", "x.0@a"), ("2x2", "x.0@(a,b)")], [("all_reduce", 4, 524288, "nvlink")]),
    # Training, w1's columns over 4: y ([256, 128], 128 KiB) forward and dx backward; the
    # returned y is first read at the return, so the two share one 256 KiB bucket.
    ("train_mlp.golden", [("4", "w1.1@a"), ("2x2", "w1.1@(a,b)")], [("all_reduce", 4, 262144, "nvlink")]),
    # Zigzag sequence over b (2 devices), kv heads over a: q, k and v ([1, 2, 64, 16] f32,
    # 8 KiB) leave the zigzag order by one all_to_all each, k and v are all_gathered
    # (16 KiB), the output returns to the zigzag order by one more all_to_all.
    ("zigzag_attention.golden", [("2x2", "q.1@a q.2@b")],
     [("all_to_all", 2, 8192, "nvlink")] * 4 + [("all_gather", 2, 16384, "nvlink")] * 2),
    # Zigzag sequence over a, v's head dimension over b: q, k ([1, 4, 64, 16], 16 KiB) and
    # v (8 KiB) leave the zigzag order, k and v are all_gathered (32 and 16 KiB), the
    # output (v's split, 8 KiB) returns to it.
    ("zigzag_attention.golden", [("2x2", "q.2@a v.3@b")],
     [("all_to_all", 2, 16384, "nvlink")] * 2 + [("all_to_all", 2, 8192, "nvlink")] * 2 +
     [("all_gather", 2, 32768, "nvlink"), ("all_gather", 2, 16384, "nvlink")]),
    # 8 devices on nodes of 4: on 2x4 b is inside a node, a across; on 4x2 b is inside.
    # Batch over 4, w1's columns over the size-2 axis: y's shard ([64, 128], 32 KiB).
    ("renamed_meshes.golden", [("4x2", "x.0@a w1.1@b")], [("all_reduce", 2, 32768, "nvlink")]),
    ("renamed_meshes.golden", [("2x4", "x.0@b w1.1@a")], [("all_reduce", 2, 32768, "network")]),
    # Rows over the size-4 axis, x's columns over the size-2 one: u's shard ([64, 512], 128 KiB).
    ("renamed_meshes.golden", [("4x2", "x.0@a x.1@b")], [("all_reduce", 2, 131072, "nvlink")]),
    ("renamed_meshes.golden", [("2x4", "x.0@b x.1@a")], [("all_reduce", 2, 131072, "network")]),
    # Rows over 2, columns over the in-node 4: u's shard ([128, 512], 256 KiB).
    ("renamed_meshes.golden", [("2x4", "x.0@a x.1@b")], [("all_reduce", 4, 262144, "nvlink")]),
]

# Groups of (mesh, layouts) that place every shard on the same devices: equal rows.
SAME_PLACEMENT = {
    "mlp.golden": [[("4", "x.0@a"), ("2x2", "x.0@(a,b)")], [("4", "w2.1@a"), ("2x2", "w2.1@(a,b)")]],
    "train_mlp.golden": [[("4", "x.1@a"), ("2x2", "x.1@(a,b)")], [("4", "x.0@a"), ("2x2", "x.0@(a,b)")],
                         [("4", "w1.1@a"), ("2x2", "w1.1@(a,b)")]],
    "renamed_meshes.golden": [[("8", "x.0@a"), ("2x4", "x.0@(a,b)"), ("4x2", "x.0@(a,b)")],
                              [("8", "w1.1@a"), ("2x4", "w1.1@(a,b)"), ("4x2", "w1.1@(a,b)")]],
    "renamed_meshes_one_node.golden": [[("8", "x.0@a"), ("2x4", "x.0@(a,b)"), ("4x2", "x.0@(a,b)")]],
}

# Pairs that give every device the same shards but route their collective differently
# (inside a node against across nodes): equal compute.
SAME_SHARDS = {
    "renamed_meshes.golden": [(("4x2", "x.0@a w1.1@b"), ("2x4", "x.0@b w1.1@a")),
                              (("4x2", "x.0@a x.1@b"), ("2x4", "x.0@b x.1@a"))],
}

# golden: (devices, (FLOPs, least HBM bytes) of the whole forward program, training?).
WORK = {
    "mlp.golden": (4, mlp_work(256, 128, 512), False),
    "train_mlp.golden": (4, mlp_work(256, 128, 512), True),
    "calls_inlined.golden": (2, tuple(2 * w for w in mlp_work(64, 32, 128)), False),
    "zigzag_attention.golden": (4, causal_attention_work(1, 4, 128, 16), False),
    "renamed_meshes.golden": (8, mlp_work(256, 128, 512), False),
    "renamed_meshes_one_node.golden": (8, mlp_work(256, 128, 512), False),
}

# The default spmd pipeline (transforms/sharding/lower.h) with no schedule after it.
PLAIN_PIPELINE = "propagate-sharding,lower-to-spmd,canonicalize,cse,dce,combine-all-reduces"


def read_rows(directory, golden, c):
    path = os.path.join(directory, golden)
    c.check(os.path.exists(path), "%s: missing" % golden)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def pick(rows, mesh, layouts, plain):
    return [r for r in rows if r["layouts"] == layouts and (mesh is None or r["mesh"] == mesh)
            and (not plain or r["pipeline"] == PLAIN_PIPELINE)]


def check_collectives(directory, c):
    for golden, candidates, collectives in COLLECTIVES:
        rows = read_rows(directory, golden, c)
        for mesh, layouts in candidates:
            found = pick(rows, mesh, layouts, plain=True)
            c.check(len(found) > 0, "%s: no candidate %s %s" % (golden, mesh, layouts))
            for row in found:
                what = "%s %s %s" % (golden, row["mesh"], layouts)
                exposed = float(row["exposed_communication_s"])
                nvlink = sum(ring_time(k, n, s) for k, n, s, _ in collectives)
                sent = sum(ring_bytes(k, n, s) for k, n, s, _ in collectives)
                c.check(int(row["bytes_per_device"]) == sent, "%s: %s bytes per device, the collectives send %d" % (
                    what, row["bytes_per_device"], sent))
                exact = all(path == "nvlink" and k != "all_to_all" for k, _, _, path in collectives)
                if exact:
                    c.check(abs(exposed / nvlink - 1) <= 0.01, "%s: exposed communication %.6g s, NCCL's ring "
                            "model gives %.6g s" % (what, exposed, nvlink))
                else:
                    least = sum(least_time(*collective) for collective in collectives)
                    c.check(exposed >= least * (1 - 1e-6), "%s: exposed communication %.6g s, below the "
                            "links' bound %.6g s" % (what, exposed, least))
                print("%s: exposed %.6g s, %s %.6g s" % (what, exposed, "NCCL's ring model" if exact else
                                                             "at least", nvlink if exact else least))


def one(rows, golden, mesh, layouts, c):
    found = pick(rows, mesh, layouts, plain=True)
    c.check(len(found) == 1, "%s: %d rows for %s %s on the plain pipeline" % (golden, len(found), mesh, layouts))
    return found[0] if found else None


def check_equalities(directory, c):
    for golden, groups in SAME_PLACEMENT.items():
        rows = read_rows(directory, golden, c)
        for group in groups:
            found = [one(rows, golden, mesh, layouts, c) for mesh, layouts in group]
            if None in found:
                continue
            for row in found[1:]:
                for column in ("time_s", "exposed_communication_s", "bytes_per_device", "peak_memory_bytes"):
                    c.check(row[column] == found[0][column], "%s: %s %s has %s %s, the same placement %s %s "
                            "has %s" % (golden, row["mesh"], row["layouts"], column, row[column],
                                        found[0]["mesh"], found[0]["layouts"], found[0][column]))
    for golden, pairs in SAME_SHARDS.items():
        rows = read_rows(directory, golden, c)
        for (mesh_in, layouts_in), (mesh_out, layouts_out) in pairs:
            inside, across = one(rows, golden, mesh_in, layouts_in, c), one(rows, golden, mesh_out, layouts_out, c)
            if inside is None or across is None:
                continue
            compute = [float(r["time_s"]) - float(r["exposed_communication_s"]) for r in (inside, across)]
            c.check(abs(compute[0] - compute[1]) <= 1e-8 * compute[0], "%s: %s and %s have the same shards but "
                    "compute %.6g s and %.6g s" % (golden, layouts_in, layouts_out, compute[0], compute[1]))


def check_bounds(directory, c):
    for golden, (devices, (flops, hbm_bytes), training) in WORK.items():
        rows = read_rows(directory, golden, c)
        c.check(len(rows) > 0, "%s: no rows" % golden)
        # The backward does two matmuls per forward one and reads about twice the bytes.
        scale = 3 if training else 1
        bound = scale * (flops / (devices * PEAK_TF32) + hbm_bytes / (devices * HBM))
        for row in rows:
            what = "%s %s %s %s" % (golden, row["mesh"], row["layouts"], row["pipeline"].split(",")[-1])
            time, exposed = float(row["time_s"]), float(row["exposed_communication_s"])
            sent = int(row["bytes_per_device"])
            c.check(0 <= exposed <= time, "%s: exposed communication %.6g s outside [0, %.6g s]" % (
                what, exposed, time))
            c.check(exposed == 0 or sent > 0, "%s: %.6g s of communication with no bytes" % (what, exposed))
            c.check(time - exposed >= bound, "%s: compute %.6g s, below the hardware's bound %.6g s" % (
                what, time - exposed, bound))
            if training:
                parts = float(row["forward_time_s"]) + float(row["backward_time_s"])
                c.check(abs(parts / time - 1) <= 1e-7, "%s: forward + backward = %.9g s, time %.9g s" % (
                    what, parts, time))
                c.check(float(row["backward_time_s"]) >= 2 * (flops / (devices * PEAK_TF32)),
                        "%s: backward %s s, below twice the forward's FLOPs at peak" % (what, row["backward_time_s"]))
        print("%s: %d rows, compute bound %.3g s" % (golden, len(rows), bound))


def check_operator_goldens(directory, c):
    check_collectives(directory, c)
    check_equalities(directory, c)
    check_bounds(directory, c)
