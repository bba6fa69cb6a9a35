#!/usr/bin/python3
"""testdata/ops/moe_layer.commir (a Mixtral-style top-2 mixture-of-experts layer) on the
cpu backend against the same layer written here in PyTorch (torch 1.13, f32 on the CPU):

- the forward (loss, output, balancing loss) and, through `autodiff`, the gradient of
  every argument;
- the same choices dropped: the reference places choices in GShard's order (every first
  choice in token order, then every second) with its own loop, and a token whose two
  choices are both dropped must come out as its residual, bit for bit;
- the Switch balancing loss against two closed forms;
- three SGD steps of `training-step` against torch's own loop.

usage: moe_layer_torch_check.py COMMIR_OPT COMMIR_RUN PROGRAM
"""
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

TOKENS, HIDDEN, EXPERTS, WIDTH, K = 16, 8, 4, 12, 2
CAPACITY_FACTOR = 1.0
AUX_WEIGHT = 0.01
PARAMS = ["wr", "w1", "w3", "w2"]
ARGS = PARAMS + ["x", "target"]
LR, STEPS = 0.5, 3
RTOL = 2e-5


def inputs(seed):
    rng = np.random.default_rng(seed)
    shapes = {"wr": (HIDDEN, EXPERTS), "w1": (EXPERTS, HIDDEN, WIDTH),
              "w3": (EXPERTS, HIDDEN, WIDTH), "w2": (EXPERTS, WIDTH, HIDDEN),
              "x": (TOKENS, HIDDEN), "target": (TOKENS, HIDDEN)}
    values = {n: rng.uniform(-1, 1, s).astype(np.float32) for n, s in shapes.items()}
    # A router that favours experts 0 and 1, so that they overflow: with seed 16 five
    # choices are dropped, both of one token's (the test checks that it is so).
    values["wr"][:, :2] *= 5
    return values


def slots(experts):
    """Slot (expert, position) of each choice, None when dropped: first choices of all
    tokens in token order, then second choices (GShard, Switch)."""
    capacity = math.ceil(TOKENS * K * CAPACITY_FACTOR / EXPERTS)
    filled = [0] * EXPERTS
    out = [[None] * K for _ in range(TOKENS)]
    for j in range(K):
        for t in range(TOKENS):
            e = int(experts[t, j])
            if filled[e] < capacity:
                out[t][j] = (e, filled[e])
            filled[e] += 1
    return capacity, out


def torch_layer(p, x, target):
    """The layer as a PyTorch user writes it: per-expert FFNs applied to the rows each
    expert keeps; returns (loss, y, aux) and the slots."""
    probs = torch.softmax(x @ p["wr"], dim=1)
    top, experts = torch.topk(probs, K, dim=1)
    gates = top / top.sum(dim=1, keepdim=True)
    capacity, placed = slots(experts)
    rows = []
    for t in range(TOKENS):
        acc = torch.zeros(HIDDEN)
        for j in range(K):
            if placed[t][j] is None:
                continue
            e = placed[t][j][0]
            h = torch.nn.functional.silu(x[t] @ p["w1"][e]) * (x[t] @ p["w3"][e])
            acc = acc + gates[t, j] * (h @ p["w2"][e])
        rows.append(acc)
    y = x + torch.stack(rows)
    counts = torch.zeros(EXPERTS)
    for e in experts.flatten().tolist():
        counts[e] += 1
    aux = EXPERTS * torch.sum(counts / (TOKENS * K) * probs.mean(dim=0))
    loss = ((y - target) ** 2).mean() + AUX_WEIGHT * aux
    return loss, y, aux, placed


def run(commir_run, program, func, values, out, extra=()):
    args = [commir_run, program, f"--func=@{func}", f"--output-dir={out}", *extra]
    os.makedirs(out, exist_ok=True)
    for n, v in values.items():
        path = os.path.join(out, f"in_{n}.npy")
        np.save(path, v)
        args += ["--input", f"{n}={path}"]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def result(out, i):
    return np.load(os.path.join(out, f"result{i}.npy"))


class Report:
    def __init__(self):
        self.failures = 0

    def close(self, what, got, want, rtol=RTOL, atol=1e-6):
        got = np.asarray(got, np.float64)
        want = np.asarray(want, np.float64)
        error = float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
        ok = got.shape == want.shape and (error <= rtol or
                                          float(np.max(np.abs(got - want))) <= atol)
        self.check(what, ok, f"rel_l2 {error:.1e}")

    def check(self, what, ok, detail=""):
        self.failures += not ok
        print(f"{what:40s} {detail:20s} {'PASS' if ok else 'FAIL'}")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    commir_opt, commir_run, program = sys.argv[1:]
    report = Report()
    values = inputs(16)
    p = {n: torch.tensor(values[n], requires_grad=True) for n in PARAMS}
    x = torch.tensor(values["x"], requires_grad=True)
    target = torch.tensor(values["target"], requires_grad=True)
    loss, y, aux, placed = torch_layer(p, x, target)
    loss.backward()
    dropped = [(t, j) for t in range(TOKENS) for j in range(K) if placed[t][j] is None]
    both = [t for t in range(TOKENS) if all(placed[t][j] is None for j in range(K))]
    report.check("the inputs drop choices", len(dropped) > 0 and len(both) > 0,
                 f"{len(dropped)} choices")

    with tempfile.TemporaryDirectory() as tmp:
        # Forward.
        out = os.path.join(tmp, "forward")
        run(commir_run, program, "moe_layer", values, out)
        report.close("loss", result(out, 0), loss.item())
        report.close("output y", result(out, 1), y.detach().numpy())
        report.close("balancing loss", result(out, 2), aux.item())
        for t in both:
            report.check(f"token {t} (both choices dropped) is x",
                         np.array_equal(result(out, 1)[t], values["x"][t]))

        # Gradient of every argument.
        grad_program = os.path.join(tmp, "grad.commir")
        subprocess.run([commir_opt, program, "--pass-pipeline=autodiff{func=@moe_layer}",
                        "-o", grad_program], check=True)
        out = os.path.join(tmp, "grad")
        run(commir_run, grad_program, "moe_layer_grad", values, out)
        want = [p[n].grad for n in PARAMS] + [x.grad, target.grad]
        for i, (n, w) in enumerate(zip(ARGS, want)):
            report.close(f"d loss / d {n}", result(out, 3 + i), w.numpy())

        # The balancing loss in closed form. Every token's logits [0, ln 2, ln 3, ln 4]
        # (x all ones, wr[h, e] = ln(e + 1) / 8) give probabilities [1, 2, 3, 4] / 10,
        # the top 2 experts 3 and 2, f = [0, 0, 1/2, 1/2]: 4 (0.3 + 0.4) / 2 = 1.4. A zero
        # router ties every expert at 1/4: whichever two each token picks, the f_e sum to
        # 1 and the loss is 4 x 1/4 = 1.
        closed = dict(values)
        closed["x"] = np.ones((TOKENS, HIDDEN), np.float32)
        closed["wr"] = np.tile(np.log(np.arange(1, EXPERTS + 1)) / HIDDEN,
                               (HIDDEN, 1)).astype(np.float32)
        out = os.path.join(tmp, "aux_skewed")
        run(commir_run, program, "moe_layer", closed, out)
        report.close("balancing loss, skewed router = 1.4", result(out, 2), 1.4, atol=2e-6)
        closed["wr"] = np.zeros((HIDDEN, EXPERTS), np.float32)
        out = os.path.join(tmp, "aux_uniform")
        run(commir_run, program, "moe_layer", closed, out)
        report.close("balancing loss, uniform router = 1", result(out, 2), 1.0, atol=2e-6)

        # Training steps against torch's SGD loop.
        step_program = os.path.join(tmp, "step.commir")
        subprocess.run([commir_opt, program, "--pass-pipeline=training-step{func=@moe_layer,"
                        f"params=\"{','.join(PARAMS)}\",lr={LR}}}", "-o", step_program],
                       check=True)
        out = os.path.join(tmp, "steps")
        stdout = run(commir_run, step_program, "moe_layer_step", values, out,
                     [f"--steps={STEPS}"])
        losses = [float(m.group(1)) for m in re.finditer(r"^step \d+ loss (\S+)", stdout, re.M)]
        q = {n: torch.tensor(values[n], requires_grad=True) for n in PARAMS}
        xs, ts = torch.tensor(values["x"]), torch.tensor(values["target"])
        optimizer = torch.optim.SGD(list(q.values()), lr=LR)
        want_losses = []
        for _ in range(STEPS):
            optimizer.zero_grad()
            step_loss = torch_layer(q, xs, ts)[0]
            step_loss.backward()
            optimizer.step()
            want_losses.append(step_loss.item())
        report.check("step lines", len(losses) == STEPS, f"{len(losses)}")
        for k, (got, w) in enumerate(zip(losses, want_losses), 1):
            # commir-run prints 6 decimals.
            report.close(f"step {k} loss", got, w, atol=1e-6)
        report.check("the loss falls", want_losses[-1] < want_losses[0])
        for i, n in enumerate(PARAMS):
            report.close(f"new {n} after {STEPS} steps", result(out, 1 + i),
                         q[n].detach().numpy())
    print(f"{report.failures} failed")
    sys.exit(1 if report.failures else 0)


if __name__ == "__main__":
    main()
