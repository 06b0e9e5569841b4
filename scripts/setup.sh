#!/usr/bin/env bash
# Create .venv and install the project (idempotent), saying what each step installs and why.
#   bash scripts/setup.sh              # the site, the CLI, matching's model and the tests
#   bash scripts/setup.sh match        # the site, the CLI and matching's model (the demo)
#   bash scripts/setup.sh ""           # the site and the CLI only: no PyTorch (~2 GB less)
# PyTorch is pinned first: torch==2.13.0 picks the CPU build; a looser pin pulls CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
EXTRAS=${1-match,test}
step() { printf '\n==> %s\n' "$*"; }
if [ ! -x .venv/bin/python ]; then
  step "creating the virtual environment .venv"
  "$PY" -m venv .venv
fi
. .venv/bin/activate
# Nothing changed since the last install (same pyproject.toml and Python, the extras asked
# for among those installed: scripts/demo.sh's "match" after the default "match,test"): the
# editable install already sees every source change, so pip is not run again.
stamp=".venv/.vsr-installed"
base="$(python -c 'import hashlib,sys; print(hashlib.sha256(open("pyproject.toml","rb").read()).hexdigest(), sys.version.split()[0])')"
want="$base extras=$EXTRAS"
installed() {
  [ -f "$stamp" ] && command -v vsr >/dev/null || return 1
  local have
  have="$(cat "$stamp")"
  [ "${have% extras=*}" = "$base" ] || return 1
  local extra
  for extra in ${EXTRAS//,/ }; do
    case ",${have##* extras=}," in *",$extra,"*) ;; *) return 1 ;; esac
  done
}
if installed; then
  step "already installed, pyproject.toml unchanged: $(command -v vsr) (rm $stamp to reinstall)"
  exit 0
fi
rm -f "$stamp"
step "updating pip"
python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
case ",$EXTRAS," in
  *,match,*|*,test,*)
    if python -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('2.13.0') else 1)" 2>/dev/null; then
      step "PyTorch 2.13.0 is already installed"
    else
      step "installing PyTorch 2.13.0 (CPU build, about 1 GB to download; only \`vsr match\` needs it, for its sentence model); this is the long step"
      python -m pip install --progress-bar on "torch==2.13.0"
    fi ;;
esac
spec="."
[ -n "$EXTRAS" ] && spec=".[$EXTRAS]"
step "installing the project and its libraries ($spec: web site, database, COCO tools, export${EXTRAS:+; extras: $EXTRAS})"
# pip's own lines show the progress; the hundred "already satisfied" of a re-run are left out.
python -m pip install --progress-bar on -e "$spec" | { grep -v '^Requirement already satisfied' || true; }
echo "$want" > "$stamp"
step "installed: $(command -v vsr)"
