#!/usr/bin/env bash
# The demo: install, then scripts/demo_data.sh (an SQLite database ./vsr_demo.db in this
# folder, 34 image pairs from the bundled real COCO slice, the demo admin and invite links for
# one annotator and three validators, printed once with the walk-through), then the
# annotation site at http://127.0.0.1:8000 (PORT=8100 bash scripts/demo.sh moves the site and
# every link printed: BASE_URL follows PORT unless set).
set -euo pipefail
cd "$(dirname "$0")/.."
# A busy port is named first, in a second, with a free one to use (system Python, stdlib only).
python3 -m vsr_cli.ports 127.0.0.1 "${PORT:-8000}" "PORT={port} bash scripts/demo.sh"
bash scripts/setup.sh match
. .venv/bin/activate
export DATABASE_URL="${DATABASE_URL:-sqlite:///./vsr_demo.db}"
export IMAGE_ROOT="${IMAGE_ROOT:-demo/coco/images}"
export PORT="${PORT:-8000}"
export BASE_URL="${BASE_URL:-http://127.0.0.1:$PORT}"
bash scripts/demo_data.sh
exec vsr serve --host 127.0.0.1 --port "$PORT"
