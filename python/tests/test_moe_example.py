"""The MoE demo (python/examples/moe_train.py) at a toy size: CommIR's AdamW steps of the
captured mixture-of-experts model on the dp x ep mesh and on one device against PyTorch's
own loop, and the partitioned step holding each device's experts only.
//python:moe_demo_test runs the demo's own size."""

import io
import os
import re
import runpy

import torch

import commir
import commir.torch

PATH = os.path.join(os.path.dirname(__file__), "..", "examples", "moe_train.py")


def test_toy_moe_trains_like_pytorch_on_the_mesh_and_one_device(tmp_path):
    demo = runpy.run_path(PATH)
    text = tmp_path / "text.txt"
    text.write_bytes(bytes(range(256)) * 4)
    out = io.StringIO()
    reference, mesh, one, report = demo["train"](3, batch=4, seq=8, dim=16, heads=2, layers=1, ffn=16,
                                                 text=str(text), out=out)
    assert len(reference) == len(mesh) == len(one) == 3
    for r, m, o in zip(reference, mesh, one):
        assert abs(m - r) <= 1e-5 * abs(r) and abs(o - r) <= 1e-5 * abs(r), (r, m, o)
    assert "comm-report @moe_step" in out.getvalue()


def test_the_partitioned_step_splits_the_experts_over_ep():
    demo = runpy.run_path(PATH)
    torch.manual_seed(0)
    model = demo["MoEGPT"](dim=16, heads=2, layers=2, seq=8, ffn=16, experts=4, groups=4)
    idx = torch.randint(0, 256, (4, 8))
    trainer = demo["CommirTrainer"](model, (idx, idx), demo["Hyperparameters"](), {"dp": 2, "ep": 2})
    text = trainer.step_module.text()
    for layer in range(2):
        # Each device multiplies its 2 of the 4 experts (w1 [4@ep, 16, 16] is [2, 16, 16]
        # per device), forward and backward.
        first = re.findall(r"= matmul\([^)]*%%blocks\.%d\.moe\.w1\) : f32\[(\d+), " % layer, text)
        assert first and set(first) == {"2"}, first
    counts = demo["collectives"](trainer.step_module.comm_report().split("@moe_step:")[1].split("@moe_step_init")[0])
    # The weights' gradients are summed over the devices holding copies.
    assert counts.get("all_reduce", 0) >= 1
