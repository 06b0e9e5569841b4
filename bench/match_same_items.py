"""Check: `vsr match` of this tree writes the same run as a baseline commit, on both backends.

For each backend (SQLite file, PostgreSQL database): `vsr db upgrade` and `vsr import-vsr` of
the real raw release (1x) with this tree, two copies of that database, then `vsr match
--seed S --split-seed S` of the baseline commit (its tree extracted with `git archive`, run
with PYTHONPATH pointing at it) on one copy and of this tree on the other. It compares every
McItem (split, query, choices, relations, answer, distractor sources, params with the
negatives' ids), every adversarial negative Example (id, image, caption, triple, label,
parent, queue state) and the run's validation cost, and prints each run's wall time.
Exit status 1 when anything differs.

    python -m bench.match_same_items --baseline-ref main
    python -m bench.match_same_items --baseline-ref 0f8ae67 --backends postgresql --seeds 0,1
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT.parent / "shared/vsr/data/data_files/all_vsr_raw_data.jsonl"
PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
PREFIX = "smatch_same"


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}


def _vsr(tree: Path, *args: str) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "vsr_cli.main", *args],
        capture_output=True,
        text=True,
        env=_env(tree),
        cwd=tree,
    )
    if done.returncode != 0:
        raise SystemExit(f"vsr {' '.join(args[:2])} failed: {done.stderr.strip()[-2000:]}")
    return time.perf_counter() - t0


def _pg(sql: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            for attempt in range(10):
                try:
                    conn.execute(text(sql))
                    return
                except Exception:  # a template still in use for a moment: try again
                    if attempt == 9:
                        raise
                    time.sleep(1)
    finally:
        engine.dispose()


DEFAULTED_COLUMNS = (
    "gold_label",
    "target_votes",
    "annotation_id",
    "author_id",
    "source_key",
    "queue_votes",
    "queue_open",
    "queue_settled",
)


def _snapshot(url: str) -> dict[str, Any]:
    """The run as rows, without timestamps and row ids of McItems."""
    from sqlalchemy import create_engine, select

    from matching.store import MC_ITEM_COLUMNS, NEGATIVE_COLUMNS
    from vsr_core.tables import EXAMPLE, MATCH_RUN, MC_ITEM

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            # Every column a run writes, but the ones that differ run to run (row ids,
            # timestamps), and for negatives the columns left to their defaults as well.
            item_cols = [MC_ITEM.c[c] for c in MC_ITEM_COLUMNS if c not in ("run_id", "created_at")]
            items = [
                tuple(r)
                for r in conn.execute(select(*item_cols).order_by(MC_ITEM.c.query_example_id))
            ]
            cols = [EXAMPLE.c[c] for c in ("id", *NEGATIVE_COLUMNS, *DEFAULTED_COLUMNS)]
            negatives = [
                tuple(r)
                for r in conn.execute(
                    select(*cols).where(EXAMPLE.c.origin == "adversarial").order_by(EXAMPLE.c.id)
                )
            ]
            diag = conn.execute(select(MATCH_RUN.c.diagnostics)).scalar_one()
    finally:
        engine.dispose()
    return {"items": items, "negatives": negatives, "cost": diag.get("validation_cost")}


def _compare(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    diffs = []
    for key in ("items", "negatives"):
        if a[key] != b[key]:
            first = next(
                (i for i, (x, y) in enumerate(zip(a[key], b[key], strict=False)) if x != y), None
            )
            diffs.append(
                f"{key}: {len(a[key])} vs {len(b[key])} rows, first difference at row {first}"
            )
    if a["cost"] != b["cost"]:
        diffs.append(f"validation cost: {a['cost']} vs {b['cost']}")
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--baseline-ref", default="main", help="commit whose `vsr match` is compared")
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--seeds", default="0", help="--seed and --split-seed of each run")
    ap.add_argument("--release", type=Path, default=RELEASE)
    ap.add_argument("--prefix", default=PREFIX, help="name prefix of the databases made")
    args = ap.parse_args()
    prefix = args.prefix
    ok = True
    with tempfile.TemporaryDirectory(prefix="smatch-same-") as tmp:
        base_tree = Path(tmp) / "baseline"
        base_tree.mkdir()
        archive = subprocess.Popen(
            ["git", "-C", str(ROOT), "archive", args.baseline_ref], stdout=subprocess.PIPE
        )
        subprocess.run(["tar", "-x", "-C", str(base_tree)], stdin=archive.stdout, check=True)
        archive.wait()
        for backend in args.backends.split(","):
            for seed in args.seeds.split(","):
                urls: dict[str, str] = {}
                if backend == "sqlite":
                    src = f"sqlite:///{tmp}/src.db"
                    _vsr(ROOT, "db", "upgrade", "--database-url", src)
                    _vsr(ROOT, "import-vsr", str(args.release), "-q", "--database-url", src)
                    for name in ("baseline", "this"):
                        shutil.copy(f"{tmp}/src.db", f"{tmp}/{name}.db")
                        urls[name] = f"sqlite:///{tmp}/{name}.db"
                else:
                    base = PG_ADMIN.rsplit("/", 1)[0]
                    _pg(f"DROP DATABASE IF EXISTS {prefix}_src")
                    _pg(f"CREATE DATABASE {prefix}_src")
                    src = f"{base}/{prefix}_src"
                    _vsr(ROOT, "db", "upgrade", "--database-url", src)
                    _vsr(ROOT, "import-vsr", str(args.release), "-q", "--database-url", src)
                    for name in ("baseline", "this"):
                        _pg(f"DROP DATABASE IF EXISTS {prefix}_{name}")
                        _pg(f"CREATE DATABASE {prefix}_{name} TEMPLATE {prefix}_src")
                        urls[name] = f"{base}/{prefix}_{name}"
                snaps, secs = {}, {}
                for name, tree in (("baseline", base_tree), ("this", ROOT)):
                    secs[name] = _vsr(
                        tree,
                        "match",
                        "--seed",
                        seed,
                        "--split-seed",
                        seed,
                        "--database-url",
                        urls[name],
                    )
                    snaps[name] = _snapshot(urls[name])
                diffs = _compare(snaps["baseline"], snaps["this"])
                ok &= not diffs
                print(
                    f"{backend} seed {seed}: {len(snaps['this']['items']):,} items, "
                    f"{len(snaps['this']['negatives']):,} negatives; "
                    f"{'identical' if not diffs else 'DIFFERENT: ' + '; '.join(diffs)}; "
                    f"vsr match {secs['baseline']:.1f} s ({args.baseline_ref}) vs "
                    f"{secs['this']:.1f} s (this tree); load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
                if backend == "postgresql":
                    for name in ("src", "baseline", "this"):
                        _pg(f"DROP DATABASE IF EXISTS {prefix}_{name}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
