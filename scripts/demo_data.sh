#!/usr/bin/env bash
# The demo's data (scripts/demo.sh runs it after installing, then starts the site): an SQLite
# database ./vsr_demo.db in the repository's folder (or $DATABASE_URL), 34 image pairs sampled
# from the bundled real COCO slice (demo/coco, see demo/SOURCE.md), the demo admin, and invite
# links for one annotator and three validators: an Example is decided by 3 votes from
# validators other than its author, so one person can walk the whole path alone.
#
# The demo samples with --min-area 10000 instead of the VSR paper's 30,000 px: the bundled
# slice holds too few large single instances otherwise (34 pairs over 23 concept pairs).
# Re-running it is safe: the schema upgrade, the sampler and the invites are idempotent, and
# with nothing changed since the last run on the same SQLite file they are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
export DATABASE_URL="${DATABASE_URL:-sqlite:///./vsr_demo.db}"
# The links follow the site: BASE_URL, or the local address on PORT (scripts/demo.sh sets both).
export BASE_URL="${BASE_URL:-http://127.0.0.1:${PORT:-8000}}"
SITE="${BASE_URL%/}"
# A second run on the same SQLite file with nothing changed (this script, the schema's
# migrations, the bundled slice, the admin password, the file itself) skips the steps below:
# each is a process of its own, about 1 s apiece. The stamp sits next to the database.
stamp=""
case "$DATABASE_URL" in
  sqlite:///*) stamp="${DATABASE_URL#sqlite:///}.demo-stamp" ;;
esac
inputs() {
  VSR_ADMIN_PASSWORD="${VSR_ADMIN_PASSWORD:-}" python3 - "${DATABASE_URL#sqlite:///}" <<'PY'
import hashlib, os, pathlib, sys
h = hashlib.sha256(os.environ["VSR_ADMIN_PASSWORD"].encode())
db = pathlib.Path(sys.argv[1])
h.update(str(db.stat().st_ino if db.exists() else "none").encode())
files = ["scripts/demo_data.sh", "demo/coco/annotations/instances_demo.json"]
files += sorted(str(p) for p in pathlib.Path("migrations/versions").glob("*.py"))
for name in files:
    h.update(name.encode() + pathlib.Path(name).read_bytes())
print(h.hexdigest())
PY
}
if [ -n "$stamp" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(inputs)" ]; then
  echo "demo data already in place, nothing changed (rm $stamp to redo the steps)"
else
  rm -f "$stamp"
  vsr db upgrade
  vsr sample --coco demo/coco/annotations/instances_demo.json --min-area 10000 --pairs 34 --seed 0
  # One person walks the demo alone: writing batches are not limited to one a day (VSR's
  # default for a real collection), so a second batch after "Finish now" opens at once.
  vsr study set generate_batches_per_day=0 >/dev/null
  VSR_ADMIN_PASSWORD="${VSR_ADMIN_PASSWORD:-vsr-demo-admin-2026}" vsr admin create --username admin --update --study vsr --role owner >/dev/null
  # `vsr invite create` prints each link; the walk-through below prints them once, in order.
  vsr invite create --label "demo annotator" --roles generate --token demo-annotator >/dev/null
  for n in 1 2 3; do
    vsr invite create --label "demo validator $n" --roles validate --token "demo-validator-$n" >/dev/null
  done
  if [ -n "$stamp" ]; then inputs > "$stamp"; fi
fi
cat <<EOT

Demo site: $SITE   (Ctrl-C stops it)   database: $DATABASE_URL
  1. write captions (one annotator; 10 or more, each with a different relation, so matching has enough;
     after "Finish now", "Check for more work" opens another batch):
       $SITE/start/generate?token=demo-annotator
  2. validate them as three validators (each Example needs 3 votes; open the links one after
     another, in this browser or in private windows; a batch holds one image of each caption,
     so press "Check for more work" once at its end for the other images):
       $SITE/start/validate?token=demo-validator-1
       $SITE/start/validate?token=demo-validator-2
       $SITE/start/validate?token=demo-validator-3
  3. watch it on the admin dashboard: $SITE/admin   (user admin, password ${VSR_ADMIN_PASSWORD:-vsr-demo-admin-2026})
  4. then, in another terminal in $(pwd):
       . .venv/bin/activate
       export DATABASE_URL=$DATABASE_URL BASE_URL=$SITE
       vsr match --k 3 --report          # multiple-choice distractors from the kept Examples
     then judge the distractors with the validator links again ("Check for more work" until
     none is left: one photo's distractors come in separate batches), and:
       build-dataset --out demo-dataset  # JSONL splits, stats.json, the dataset card, mc/
EOT
