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
    trainer = demo["trainer"](model, (idx, idx), demo["Hyperparameters"](), {"dp": 2, "ep": 2})
    text = trainer.step_module.text()
    for layer in range(2):
        # Each device multiplies its 2 of the 4 experts (w1 [4@ep, 16, 16] is [2, 16, 16]
        # per device), forward and backward.
        first = re.findall(r"= matmul\([^)]*%%blocks\.%d\.moe\.w1\) : f32\[(\d+), " % layer, text)
        assert first and set(first) == {"2"}, first
    counts = demo["collectives"](trainer.step_module.comm_report().split("@moe_step:")[1].split("@moe_step_init")[0])
    # The weights' gradients are summed over the devices holding copies.
    assert counts.get("all_reduce", 0) >= 1


def test_at_the_demos_size_the_experts_exchange_tokens_by_all_to_all():
    # docs/moe-demo.md's model (hidden 512, experts of width 512, batch 4 x 32): each
    # layer's dispatch and combine are one all_to_all over ep each in the forward (and the
    # combine's again in the backward), the expert weights' gradients are summed over dp,
    # the replicated weights' over (dp, ep).
    demo = runpy.run_path(PATH)
    torch.manual_seed(0)
    model = demo["MoEGPT"](dim=512, heads=8, layers=2, seq=32, ffn=512, groups=4, layout=demo["DISPATCH_LAYOUT"])
    idx = torch.randint(0, 256, (4, 32))
    trainer = demo["trainer"](model, (idx, idx), demo["Hyperparameters"](), demo["MESH"])
    text = trainer.step_module.text()
    forward = text[text.index("spmd func @moe("):text.index("spmd func @moe_step(")]
    step = text[text.index("spmd func @moe_step("):text.index("spmd func @moe_step_init(")]
    assert re.findall(r"= all_to_all\(.*\{axis = (\w+),", forward) == ["ep"] * 4
    assert len(re.findall(r"= all_to_all\(.*\{axis = ep,", step)) >= 4
    axes = re.findall(r"= all_reduce\(.*\{axis = ([^}]*)\}", step)
    assert "dp" in axes and "(dp, ep)" in axes, axes
