"""How many captions does `vsr match --k 3` need on the demo? (The number README and the demo
banner give.)

For each N, on a fresh SQLite database: the demo's data steps (the pairs scripts/demo_data.sh
samples from the bundled COCO slice), N captions on the first N pairs with relations drawn
at random (seeded) from the enabled ones, each caption's two Examples judged right by three
validators (so every one is kept), then `vsr match --k K --dry-run` as a user runs it. Prints
the items per N and seed, and the fewest captions from which every larger size measured gave items
for every seed.

  python bench/match_demo_size.py [--k 3] [--sizes 4,5,6,7,8,10] [--seeds 1,2,3,4,5]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
VSR = Path(sys.executable).with_name("vsr")

from tests.support.kept_captions import write_kept_captions  # noqa: E402
from vsr_core.db import make_engine  # noqa: E402


def _vsr(*args: str, db_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": db_url, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(
        [str(VSR), *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=900
    )


def items_for(n: int, seed: int, k: int) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        db_url = f"sqlite:///{tmp}/demo.db"
        r = _vsr("db", "upgrade", db_url=db_url)
        assert r.returncode == 0, r.stderr
        engine = make_engine(db_url)
        write_kept_captions(engine, n, seed)
        engine.dispose()
        r = _vsr("match", "--k", str(k), "--dry-run", db_url=db_url)
        m = re.search(r"dry run: (\d+) items", r.stdout)
        return (int(m.group(1)) if m else 0), (r.stderr.strip() or r.stdout.strip())[-160:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--sizes", default="4,5,6,7,8,10")
    ap.add_argument("--seeds", default="1,2,3,4,5")
    args = ap.parse_args()
    sizes = [int(v) for v in args.sizes.split(",")]
    seeds = [int(v) for v in args.seeds.split(",")]
    enough: int | None = None  # from here on, every size gave items for every seed
    for n in sorted(sizes):
        got = [items_for(n, seed, args.k) for seed in seeds]
        counts = [c for c, _ in got]
        print(f"{n} captions, k = {args.k}: items per seed {counts}", flush=True)
        for c, why in got:
            if c == 0:
                print(f"    {why}", flush=True)
        if not all(counts):
            enough = None
        elif enough is None:
            enough = n
    print(f"fewest captions from which every size measured gave items for every seed: {enough}")


if __name__ == "__main__":
    main()
