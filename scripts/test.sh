#!/usr/bin/env bash
# Install everything and run the checks (ruff check and format, mypy --strict, the import
# contracts) and the whole test suite, on SQLite and PostgreSQL.
#   PostgreSQL: VSR_TEST_PG_ADMIN_URL (default postgresql+psycopg://postgres@127.0.0.1:5432/test);
#   each run creates and drops its own database there.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh match,test
. .venv/bin/activate
# Real-browser tests use Debian's chromium (never a downloaded browser).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core fonts-noto-cjk) >/dev/null 2>&1 \
    || echo "warning: could not install chromium; browser tests will be skipped" >&2
fi
# The proxy tests (tests/deploy) run Debian's nginx, unprivileged, over the shipped config.
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light \
    || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx; }) >/dev/null 2>&1 \
    || echo "warning: could not install nginx; proxy tests will be skipped" >&2
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ -n "${CI:-}" ]; then
  python - <<'PY'
import os, sys
from sqlalchemy import create_engine, text
url = os.environ.get("VSR_TEST_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
try:
    with create_engine(url).connect() as c:
        c.execute(text("select 1"))
except Exception as exc:
    print(f"PostgreSQL unreachable at {url}: {str(exc).splitlines()[0]}", file=sys.stderr)
    sys.exit(1)
PY
fi
ruff check .
ruff format --check .
mypy .
# the floors and rooms of docs/DESIGN.md (contracts in pyproject.toml)
lint-imports --no-cache
python -m pytest "$@"
