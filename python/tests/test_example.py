"""The example script runs and checks itself against PyTorch."""

import os
import runpy



def test_capture_mlp_example(capsys):
    path = os.path.join(os.path.dirname(__file__), "..", "examples", "capture_mlp.py")
    module = runpy.run_path(path)
    assert module["main"]() == 0
    out = capsys.readouterr().out
    assert "spmd func @MLP" in out
    assert "comm-report @MLP" in out and "reduce_scatter" in out
    assert "matches PyTorch" in out
