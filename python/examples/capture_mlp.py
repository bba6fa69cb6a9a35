"""A PyTorch MLP in, the partitioned CommIR program and its comm-report out, checked
against PyTorch.

    bazel build //python:_commir.so
    PYTHONPATH=python:bazel-bin/python /usr/bin/python3 python/examples/capture_mlp.py

The MLP's first linear is split by output columns and the second by input rows over
tp=4 (Megatron style), the input's rows over the same axis (sequence parallel):
propagation and lowering turn that into an all_gather before the first matmul and a
reduce_scatter after the second.
"""

import sys

import torch
import torch.nn as nn

import commir
import commir.torch


class MLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.down(self.act(self.up(x)))


def main():
    torch.manual_seed(0)
    seq, dim, hidden = 64, 32, 128
    model = MLP(dim, hidden).eval()
    x = torch.randn(seq, dim)
    layouts = {
        "x": ["tp", None],
        "up.weight": ["tp", None],     # nn.Linear stores [out, in]: split the outputs
        "up.bias": ["tp"],
        "down.weight": [None, "tp"],   # split the inputs
    }
    cap = commir.torch.capture(model, (x,), mesh={"tp": 4}, layouts=layouts,
                               result_layouts=[["tp", None]])
    print("// captured (global):")
    print(cap.text)
    spmd = cap.partition()
    print("// partitioned (spmd):")
    print(spmd.text())
    print(spmd.comm_report())
    got = torch.from_numpy(cap.run(x, module=spmd))
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(got, expected)
    print("matches PyTorch: max abs difference %.3g" % (got - expected).abs().max().item())
    return 0


if __name__ == "__main__":
    sys.exit(main())
