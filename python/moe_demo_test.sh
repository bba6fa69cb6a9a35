#!/usr/bin/env bash
# //python:moe_demo_test: the MoE demo's short run (python/examples/moe_train.py, 20
# steps): CommIR's AdamW steps of the captured mixture-of-experts model on the 2x2 dp x ep
# mesh and on one device against PyTorch's own loop, every step's loss within 1e-5
# relative (the script exits 1 otherwise). Debian's /usr/bin/python3 with numpy and
# torch, the extension from the runfiles tree as in run_pytest.sh.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
export PYTHONPATH="${root}/python${PYTHONPATH:+:${PYTHONPATH}}"
export PYTHONDONTWRITEBYTECODE=1
# A smaller model than the docs' (hidden 512), so that it runs in about a minute.
exec /usr/bin/python3 "${root}/python/examples/moe_train.py" --steps=20 --every=5 --rtol=1e-5 \
    --dim=128 --heads=4 --ffn=256 --batch=8
