#!/usr/bin/env python3
"""Checks the search goldens' predicted figures against published closed forms.

A golden regenerated from commir-search's own output proves only that the output did not
change. Here every plan row of testdata/search/plan_*.golden (whole-model plan search)
is checked, in arithmetic written out below (nothing calls the tools), for:

  * throughput: tokens/s x time/iter = global batch x sequence (the model's tokens);
  * MFU: tokens/s x model FLOPs per token / (GPUs x dense bf16 peak), with the model
    FLOPs of PaLM's MFU definition (Chowdhery et al. 2022, "PaLM", Appendix B:
    6N + 12 L H Q T per token, N the weights that multiply activations, the logits'
    included); for GPT-3 shapes this equals Narayanan et al. 2021 (SC21, eq. 3, without
    its recomputation pass): 72 B s l h^2 (1 + s/6h) + 6 B s h V. Peaks from
    calibration.md ("GPUs"): 989 TFLOP/s for H100/H200, 312 for A100;
  * the time breakdown: compute + exposed communication + bubble + recomputation adds
    up to time/iter;
  * the same MFU closed form for the "best standard setting" line.

Tolerances come from the printed precision alone (0.1 ms, 0.1 MFU points, integer
tokens/s), so the checks are exact up to rounding.

A model written as a .commir file (plan_commir_*, models.commir.d) takes its sizes from
the Megatron-LM arguments the golden prints for plan 1 (layers, hidden, FFN, heads,
query groups, sequence, global batch; --swiglu: Llama) and its vocabulary from the
file's output weight (%head_wout).

Operator-search goldens (CSV: mlp, train_mlp, calls_inlined, zigzag_attention,
renamed_meshes, renamed_meshes_one_node, attention_gqa, pinned_block) are checked in
search_operator_check.py: NCCL's ring model and the ring's bytes for candidates whose
collectives follow from their layouts by hand, a datasheet compute bound for every row,
and the rows that equal placements must make equal.

Usage: search_closed_form_check.py DIR [DIR...]   (exit 0: all pass, 1: a check failed)
"""

import glob
import os
import re
import sys

from search_operator_check import check_operator_goldens

PEAK = {"h100-sxm": 989e12, "h200": 989e12, "a100-sxm-80g": 312e12}

# Presets' published sizes: GPT-3 1.3B (Brown et al. 2020, Table 2.1: 24 layers, d_model
# 2048, 1M-token batches of 2048; 16 heads of 128 as Megatron-LM trains it; the GPT-2 BPE
# vocabulary, 50257), Llama 3 8B (Dubey et al. 2024, Table 3: 32 layers, 4096, FFN 14336,
# 32 heads, 8 key/value heads, vocabulary 128256, 8192 sequence, 4M-token batches).
PRESETS = {
    "gpt3-1.3b": dict(arch="gpt", layers=24, hidden=2048, heads=16, kv_heads=16, ffn=8192, seq=2048,
                      vocab=50257, global_batch=512),
    "llama3-8b": dict(arch="llama", layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, seq=8192,
                      vocab=128256, global_batch=512),
}

ROW = re.compile(r"^\s*(\d+)\s+\*?\s*(tp=.*?)\s+([\d.]+) ms\s+(\d+)\s+([\d.]+)%\s+([\d.]+) ms\s+([\d.]+) ms"
                 r"\s+([\d.]+) ms\s+([\d.]+) ms\s+[\d.]+\s+\S+$")
HEADER = re.compile(r"^== (\S+) on (\d+) x (\S+)")
BEST = re.compile(r"^best standard setting .*, ([\d.]+) ms, MFU ([\d.]+)%")


def model_from_files(case, golden):
    """A .commir model's sizes: the golden's Megatron-LM arguments and the file's logits."""
    with open(golden) as f:
        text = f.read()
    with open(case) as f:
        head = re.search(r"%head_wout: \w+\[(\d+), (\d+)\]", f.read())

    def arg(name, default=None):
        found = re.search(r"^--%s (\d+)" % name, text, re.M)
        if found is None and default is None:
            raise SystemExit("%s: no --%s in the golden's Megatron-LM arguments" % (golden, name))
        return int(found.group(1)) if found else default
    if head is None:
        raise SystemExit("%s: no %%head_wout weight to read the vocabulary from" % case)
    heads = arg("num-attention-heads")
    return dict(arch="llama" if re.search(r"^--swiglu", text, re.M) else "gpt", layers=arg("num-layers"),
                hidden=arg("hidden-size"), heads=heads, kv_heads=arg("num-query-groups", heads),
                ffn=arg("ffn-hidden-size"), seq=arg("seq-length"), vocab=int(head.group(2)),
                global_batch=arg("global-batch-size"))


def model_from_run(run, case, golden):
    """The model sizes a `--plan SPEC` RUN line asks for."""
    spec = re.search(r"--plan (\S+)", run).group(1)
    fields = spec.split(",")
    if fields[0] == "%s":
        return model_from_files(case, golden)
    model = {}
    if "=" not in fields[0]:
        model.update(PRESETS[fields[0]])
        fields = fields[1:]
    for field in fields:
        key, value = field.split("=")
        model[key] = value if key in ("name", "arch") else int(value)
    model.setdefault("kv_heads", model["heads"])
    return model


def flops_per_token(m):
    """PaLM's model FLOPs per token: 6N + 12 L H Q T (H Q = hidden)."""
    head_dim = m["hidden"] // m["heads"]
    q, kv = m["heads"] * head_dim, m["kv_heads"] * head_dim
    mlp_matrices = 2 if m["arch"] == "gpt" else 3
    n = m["layers"] * (m["hidden"] * q + 2 * m["hidden"] * kv + q * m["hidden"] + mlp_matrices * m["hidden"] * m["ffn"])
    n += m["hidden"] * m["vocab"]
    return 6.0 * n + 12.0 * m["layers"] * q * m["seq"]


class Checker:
    def __init__(self):
        self.checks = self.failures = 0

    def check(self, ok, what):
        self.checks += 1
        self.failures += not ok
        if not ok:
            print("FAIL " + what)


def check_golden(path, model, c):
    gpus = peak = None
    rows = 0
    tokens = model["global_batch"] * model["seq"]
    per_token = flops_per_token(model)
    with open(path) as f:
        for line in f:
            header = HEADER.match(line)
            if header:
                gpus, peak = int(header.group(2)), PEAK[header.group(3)]
                continue
            row = ROW.match(line)
            best = BEST.match(line)
            where = "%s: %s" % (os.path.basename(path), line.strip())
            if row:
                rows += 1
                time_ms, tokens_per_s, mfu = float(row.group(3)), int(row.group(4)), float(row.group(5))
                parts = [float(row.group(i)) for i in range(6, 10)]
                # time/iter printed to 0.1 ms: tokens/s x time within that rounding.
                slack = 0.05 / time_ms + 1.0 / tokens_per_s if tokens_per_s else 1
                c.check(abs(tokens_per_s * time_ms / 1e3 / tokens - 1) <= slack + 1e-6,
                        "%s: tokens/s x time/iter = %.0f, the model has %d tokens" % (
                            where, tokens_per_s * time_ms / 1e3, tokens))
                want_mfu = 100 * tokens_per_s * per_token / (gpus * peak)
                c.check(abs(mfu - want_mfu) <= 0.05 + want_mfu * slack + 1e-9,
                        "%s: MFU %.1f%%, the closed form gives %.2f%%" % (where, mfu, want_mfu))
                # Four figures each rounded to 0.1 ms against one.
                c.check(abs(sum(parts) - time_ms) <= 0.25,
                        "%s: compute + comm + bubble + recompute = %.1f ms" % (where, sum(parts)))
            elif best:
                time_ms, mfu = float(best.group(1)), float(best.group(2))
                want_mfu = 100 * tokens * per_token / (time_ms / 1e3) / (gpus * peak)
                c.check(abs(mfu - want_mfu) <= 0.05 + want_mfu * 0.05 / time_ms + 1e-9,
                        "%s: MFU %.1f%%, the closed form gives %.2f%%" % (where, mfu, want_mfu))
    c.check(rows > 0, "%s: no plan rows found" % path)
    return rows


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    c = Checker()
    for directory in sys.argv[1:]:
        check_operator_goldens(directory, c)
        cases = glob.glob(os.path.join(directory, "plan_*.commir")) + glob.glob(
            os.path.join(directory, "models.commir.d", "*.commir"))
        for case in sorted(cases):
            golden = case[:-len(".commir")] + ".golden"
            with open(case) as f:
                run = next((l for l in f if l.startswith("// RUN:")), "")
            with open(golden) as f:
                if "rank  plan" not in f.read():
                    continue  # an error case: no predictions
            model = model_from_run(run, case, golden)
            print("%s: %d plan rows" % (golden, check_golden(golden, model, c)))
    print("%d checks, %d failed" % (c.checks, c.failures))
    return 1 if c.failures or c.checks == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
