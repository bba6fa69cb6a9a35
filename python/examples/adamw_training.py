"""What the GPT and MoE demos share: their text, its batches, the hyperparameters,
PyTorch's own AdamW loop, and CommIR's training step run step after step.

Both demos train a captured model three ways from the same initial weights on the same
batches: PyTorch's loop, CommIR on a mesh and CommIR on one device."""
import os

import numpy as np
import torch

import commir
import commir.torch

TEXT = "/usr/share/common-licenses/GPL-3"


def read_text(path=TEXT):
    if not os.path.exists(path):
        raise SystemExit("%s is absent: the demo trains on its bytes (Debian's base-files package "
                         "installs it); give another text file with --text" % path)
    with open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8).astype(np.int64)


def batches(data, steps, batch, seq, seed=0):
    """`steps` batches of (inputs, targets), [batch, seq] int64 each: windows of the token
    ids (bytes, or byte-pair tokens) at offsets from a seeded generator, targets the inputs
    shifted by one token."""
    if len(data) < seq + 2:
        raise SystemExit("the text has %d tokens; the demo needs more than %d" % (len(data), seq + 1))
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        offsets = rng.integers(0, len(data) - seq - 1, size=batch)
        window = np.stack([data[o:o + seq + 1] for o in offsets])
        out.append((torch.from_numpy(window[:, :-1].copy()), torch.from_numpy(window[:, 1:].copy())))
    return out


class Hyperparameters:
    def __init__(self, lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, clip=1.0):
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.weight_decay, self.clip = weight_decay, clip


def torch_losses(model, data, hp):
    """PyTorch's own loop: torch.optim.AdamW and clip_grad_norm_, f32."""
    params = list(model.parameters())  # a tied weight once
    optimizer = torch.optim.AdamW(params, lr=hp.lr, betas=(hp.beta1, hp.beta2), eps=hp.eps,
                                  weight_decay=hp.weight_decay, foreach=False)
    losses = []
    for idx, targets in data:
        optimizer.zero_grad()
        loss = model(idx, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, hp.clip)
        optimizer.step()
        losses.append(loss.item())
    return losses


class CommirTrainer:
    """The captured model's training step (`training-step` with AdamW and clipping), run step
    after step with its results fed back. `name` names the captured function (@name and
    @name_step); `layouts` are the arguments' layouts on `mesh` (None on one device)."""

    def __init__(self, model, example, hp, mesh, name, layouts=None):
        self.name = name
        self.captured = commir.torch.capture(model, example, mesh=mesh, name=name,
                                             layouts=layouts if mesh else None)
        names = [arg for arg, _ in self.captured.params]
        pipeline = ("training-step{func=@%s,params=\"%s\",optimizer=adamw{lr=%r,beta1=%r,beta2=%r,eps=%r,"
                    "weight_decay=%r},clip_grad_norm=%r}"
                    % (name, ",".join(names), hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay, hp.clip))
        self.module = commir.opt(self.captured.module, pipeline)
        # The state before the first step, from the params (a global function: one device).
        # Copies: the arrays of the weights share memory with the model's tensors, which
        # PyTorch's loop then trains in place.
        self.values = {k: np.array(v, copy=True) for k, v in self.captured.argument_arrays(*example).items()}
        init = commir.run_with(self.module, {n: self.values[n] for n in names}, name + "_step_init")
        init = init if isinstance(init, tuple) else (init,)
        signature = [n for n, _ in self.module.signature(name + "_step")]
        self.fed_back = [n for n in signature if n not in ("idx", "targets")]  # params, then state
        self.values.update(zip(self.fed_back[len(names):], init))
        # On the mesh: the step partitioned into the per-device program by the default
        # pipeline, which ends by combining its independent all_reduces (the gradients, the
        # clipping norm's squared sums) into buckets as DDP does, as propagate-sharding's
        # plan cost assumes. A global function runs on one device.
        self.step_module = commir.opt(self.module, commir.DEFAULT_SPMD_PIPELINE) if mesh else self.module

    def step(self, idx, targets):
        self.values["idx"], self.values["targets"] = idx, targets
        out = commir.run_with(self.step_module, self.values, self.name + "_step")
        self.values.update(zip(self.fed_back, out[1:]))
        return float(out[0])


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-30)
