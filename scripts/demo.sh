#!/usr/bin/env bash
# The demo: install, create an SQLite database, sample image pairs from the bundled real COCO
# slice (demo/coco, see demo/SOURCE.md) and start the annotation site at http://127.0.0.1:8000.
#
# The demo samples with --min-area 10000 instead of the VSR paper's 30,000 px: the bundled
# slice holds too few large single instances otherwise (34 pairs over 23 concept pairs).
# Re-running it is safe: the schema upgrade and the sampler are idempotent (no pair twice).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
. .venv/bin/activate
export DATABASE_URL="${DATABASE_URL:-sqlite:///./vsr_demo.db}"
export IMAGE_ROOT="${IMAGE_ROOT:-demo/coco/images}"
vsr db upgrade
vsr sample --coco demo/coco/annotations/instances_demo.json --min-area 10000 --pairs 34 --seed 0
# Demo accounts (local only): an admin and two invite links, one per role, so the validator is
# never the author of the captions they judge.
VSR_ADMIN_PASSWORD="${VSR_ADMIN_PASSWORD:-demo-admin}" vsr admin create --username admin --update >/dev/null
vsr invite create --label "demo annotator" --roles generate --token demo-annotator
vsr invite create --label "demo validator" --roles validate --token demo-validator
cat <<EOT

Demo site: http://127.0.0.1:8000   (Ctrl-C stops it)
  write captions:  http://127.0.0.1:8000/start/generate?token=demo-annotator
  validate them:   http://127.0.0.1:8000/start/validate?token=demo-validator
  admin dashboard: http://127.0.0.1:8000/admin   (user admin, password ${VSR_ADMIN_PASSWORD:-demo-admin})
EOT
exec vsr serve --host 127.0.0.1 --port 8000
