#!/bin/bash
# tools/moe_layer_torch_check.py with Debian's /usr/bin/python3, which has numpy and torch.
# Arguments: the commir-opt and commir-run binaries and the layer's program.
set -euo pipefail
if ! /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null; then
  echo "/usr/bin/python3 lacks torch or numpy (scripts/setup.sh installs them)" >&2
  exit 1
fi
exec /usr/bin/python3 tools/moe_layer_torch_check.py "$@"
