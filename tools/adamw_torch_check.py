#!/usr/bin/python3
"""commir-run --steps of a training-step{optimizer=adamw{...},clip_grad_norm=...} step
function against torch.optim.AdamW and torch.nn.utils.clip_grad_norm_ (PyTorch's own
code, f32 on the CPU) on the same MLP from the same inputs: every step's loss, and after
the last step the params, both moments and the step count. The step runs on one device
and partitioned on a 2x2 mesh (data-parallel batch, Megatron-split weights).

usage: adamw_torch_check.py COMMIR_OPT COMMIR_RUN
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

PROGRAM = """mesh @m(MESH)
func @mlp(%w1: f32[8, 16TP], %w2: f32[16TP, 8], %b: f32[8], %x: f32[12DP, 8], %t: f32[12DP, 8]) -> f32[] {
  %h = matmul(%x, %w1)
  %a = tanh(%h)
  %y = matmul(%a, %w2)
  %yb = add(%y, %b)
  %e = sub(%yb, %t)
  %sq = mul(%e, %e)
  %loss = reduce_mean(%sq) {dims = [0, 1]}
  return %loss
}
"""
PARAMS = ["w1", "w2", "b"]
LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 0.02, 0.9, 0.99, 1e-6, 0.1
CLIP = 0.3  # below the first gradients' norm, so the clipping is exercised
STEPS = 6
PIPELINE = ("training-step{func=@mlp,params=\"w1,w2,b\",optimizer=adamw{lr=%g,beta1=%g,"
            "beta2=%g,eps=%g,weight_decay=%g},clip_grad_norm=%g}"
            % (LR, BETA1, BETA2, EPS, WEIGHT_DECAY, CLIP))
RTOL = 2e-5


def inputs():
    rng = np.random.default_rng(7)
    return {
        "w1": rng.uniform(-0.5, 0.5, (8, 16)).astype(np.float32),
        "w2": rng.uniform(-0.5, 0.5, (16, 8)).astype(np.float32),
        "b": rng.uniform(-0.5, 0.5, (8,)).astype(np.float32),
        "x": rng.uniform(-1, 1, (12, 8)).astype(np.float32),
        "t": rng.uniform(-1, 1, (12, 8)).astype(np.float32),
    }


def torch_steps(values):
    params = [torch.tensor(values[n], requires_grad=True) for n in PARAMS]
    w1, w2, b = params
    x, t = torch.tensor(values["x"]), torch.tensor(values["t"])
    optimizer = torch.optim.AdamW(params, lr=LR, betas=(BETA1, BETA2), eps=EPS,
                                  weight_decay=WEIGHT_DECAY, foreach=False)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = ((torch.tanh(x @ w1) @ w2 + b - t) ** 2).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        optimizer.step()
        losses.append(loss.item())
    state = [optimizer.state[p] for p in params]
    final = ([p.detach().numpy() for p in params] + [s["exp_avg"].numpy() for s in state] +
             [s["exp_avg_sq"].numpy() for s in state] + [state[0]["step"].numpy()])
    return losses, final


def commir_steps(commir_opt, commir_run, mesh, dp, tp, values, tmp):
    name = mesh.replace("=", "").replace(", ", "x")
    source = os.path.join(tmp, f"mlp_{name}.commir")
    with open(source, "w") as f:
        f.write(PROGRAM.replace("MESH", mesh).replace("DP", dp).replace("TP", tp))
    step = os.path.join(tmp, f"mlp_{name}_step.commir")
    subprocess.run([commir_opt, source, f"--pass-pipeline={PIPELINE}", "-o", step], check=True)
    args = [commir_run, step, "--func=@mlp_step", f"--steps={STEPS}",
            f"--output-dir={os.path.join(tmp, name)}"]
    for n, v in values.items():
        path = os.path.join(tmp, f"{n}.npy")
        np.save(path, v)
        args += ["--input", f"{n}={path}"]
    run = subprocess.run(args, check=True, capture_output=True, text=True)
    losses = [float(m.group(1)) for m in re.finditer(r"^step \d+ loss (\S+)", run.stdout, re.M)]
    results = [np.load(os.path.join(tmp, name, f"result{i}.npy")) for i in range(11)]
    return losses, results[1:]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    values = inputs()
    want_losses, want = torch_steps(values)
    names = ([f"new {n}" for n in PARAMS] + [f"exp_avg {n}" for n in PARAMS] +
             [f"exp_avg_sq {n}" for n in PARAMS] + ["step"])
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for mesh, dp, tp in [("tp=1", "", ""), ("dp=2, tp=2", "@dp", "@tp")]:
            losses, got = commir_steps(sys.argv[1], sys.argv[2], mesh, dp, tp, values, tmp)
            if len(losses) != STEPS:
                print(f"{mesh}: {len(losses)} step lines, expected {STEPS}")
                failures += 1
                continue
            for k, (loss, reference) in enumerate(zip(losses, want_losses), 1):
                # commir-run prints 6 decimals.
                ok = abs(loss - reference) <= 1e-6 + RTOL * abs(reference)
                failures += not ok
                print(f"{mesh}  step {k}  loss {loss:.6f}  torch {reference:.6f}  "
                      f"{'PASS' if ok else 'FAIL'}")
            for name, g, w in zip(names, got, want):
                error = float(np.linalg.norm(g.astype(np.float64) - w) /
                              max(np.linalg.norm(w.astype(np.float64)), 1e-30))
                ok = g.shape == w.shape and error <= RTOL
                failures += not ok
                print(f"{mesh}  {name}  rel_l2 {error:.1e}  {'PASS' if ok else 'FAIL'}")
    print(f"{failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
