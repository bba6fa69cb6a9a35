"""The GPT demo (python/examples/gpt_train.py) at a toy size: CommIR's AdamW steps of
the captured GPT on the 2x4 mesh and on one device against PyTorch's own loop; and a
missing text is a clear error. //python:gpt_demo_test runs the demo's own size."""

import io
import os
import runpy

import pytest

PATH = os.path.join(os.path.dirname(__file__), "..", "examples", "gpt_train.py")


def test_toy_gpt_trains_like_pytorch_on_the_mesh_and_one_device(tmp_path):
    demo = runpy.run_path(PATH)
    text = tmp_path / "text.txt"
    text.write_bytes(bytes(range(256)) * 4)
    out = io.StringIO()
    reference, mesh, one = demo["train"](3, batch=2, seq=8, dim=16, heads=4, layers=1, text=str(text), out=out)
    assert len(reference) == len(mesh) == len(one) == 3
    for r, m, o in zip(reference, mesh, one):
        assert abs(m - r) <= 1e-5 * abs(r) and abs(o - r) <= 1e-5 * abs(r), (r, m, o)
    assert "commir 2x4" in out.getvalue()


def test_missing_text_is_a_clear_error():
    demo = runpy.run_path(PATH)
    with pytest.raises(SystemExit, match="/nonexistent/GPL-3 is absent"):
        demo["read_text"]("/nonexistent/GPL-3")
