#!/usr/bin/env bash
# Create .venv and install the project with everything it needs (idempotent).
# PyTorch is pinned first: torch==2.13.0 picks the CPU build; a looser pin pulls CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
python -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('2.13.0') else 1)" 2>/dev/null \
  || python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[${1:-test}]"
