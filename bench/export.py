"""How fast `build-dataset` exports: 200,000 synthetic Examples with 3-5 votes each.

Fills a fresh database (SQLite file in a temp dir, or --database-url pointing at an empty,
migrated database) with synthetic Examples and votes, then times, in the same run:

- baseline: writing the same records (the dicts of all_raw.jsonl, already in memory) with
  plain ``json.dumps``, one line each;
- export: ``build_dataset(..., only=raw)``: read every Example with its votes from the
  database, build the records, serialise and write all_raw.jsonl;
- full: the whole ``build_dataset`` (raw, validated, random and zero-shot splits, stats.json,
  card with three figures), for information.

Prints seconds and the ratio against the baseline. Target: export <= 3x baseline.

With ``--vsr-factors 1 10`` it exports the real release instead: for each factor a fresh
database with that many copies of it (bench/gen10x.py: 1x = 12,809 Examples / 39,057 votes,
10x = 128,090 / 390,570) imported by the project's importer, the same timings, and how each
grows from the first factor to the others (linear growth = the factor).

    python bench/export.py                  # 200,000 Examples
    python bench/export.py --examples 20000 --repeat 3
    python bench/export.py --vsr-factors 1 10
    python bench/export.py --vsr-factors 1 10 --database-url postgresql+psycopg://postgres@127.0.0.1/bench_export
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.databases import drop_database, fresh_database  # noqa: E402

CONCEPTS = [
    "person",
    "cat",
    "dog",
    "teddy bear",
    "dining table",
    "bed",
    "laptop",
    "pizza",
    "car",
    "cake",
    "truck",
    "couch",
    "suitcase",
    "bench",
    "umbrella",
    "sandwich",
    "bus",
    "motorcycle",
    "banana",
    "book",
    "oven",
    "bowl",
    "refrigerator",
    "bicycle",
    "chair",
    "train",
    "cow",
    "donut",
    "horse",
    "toilet",
    "keyboard",
    "bird",
    "tv",
    "elephant",
    "hot dog",
    "potted plant",
    "cup",
    "backpack",
    "apple",
    "handbag",
]


def fill(url: str, n_examples: int, seed: int = 0) -> None:
    from sqlalchemy import insert

    from vsr_core.captions import render_caption
    from vsr_core.db import make_engine
    from vsr_core.relations import enabled_relations
    from vsr_core.tables import EXAMPLE, IMAGE, VOTE, WORKER
    from vsr_core.types import utcnow

    rng = random.Random(seed)
    rels = [r.name for r in enabled_relations()]
    engine = make_engine(url)
    now = utcnow()
    n_images = max(1, n_examples // 2)
    with engine.begin() as conn:
        conn.execute(
            insert(WORKER),
            [
                {
                    "source": "prolific",
                    "external_id": f"W{i:03d}",
                    "roles": ["validator"],
                    "blocked": False,
                    "flagged": False,
                    "created_at": now,
                }
                for i in range(60)
            ],
        )
        conn.execute(
            insert(IMAGE),
            [
                {
                    "coco_id": i + 1,
                    "file_name": f"{i + 1:012d}.jpg",
                    "coco_split": "train2017" if i % 5 else "val2017",
                    "width": 640,
                    "height": 480,
                }
                for i in range(n_images)
            ],
        )
    ex_rows = []
    for i in range(n_examples):
        subj, obj = rng.sample(CONCEPTS, 2)
        rel = rng.choice(rels)
        ex_rows.append(
            {
                "image_id": i // 2 + 1,
                "caption": render_caption(subj, rel, obj),
                "relation": rel,
                "subj": subj,
                "obj": obj,
                "label": i % 2 == 0,
                "origin": "human",
                "author_id": rng.randint(1, 20),
                "is_gold": False,
                "created_at": now,
            }
        )
    with engine.begin() as conn:
        for i in range(0, len(ex_rows), 20_000):
            conn.execute(insert(EXAMPLE), ex_rows[i : i + 20_000])
    votes = []
    for eid in range(1, n_examples + 1):
        label = eid % 2 == 1
        p = rng.choice([0.95, 0.8, 0.5])
        for w in rng.sample(range(21, 61), rng.randint(3, 5)):
            votes.append(
                {
                    "example_id": eid,
                    "worker_id": w,
                    "value": label if rng.random() < p else not label,
                    "created_at": now,
                }
            )
    with engine.begin() as conn:
        for i in range(0, len(votes), 50_000):
            conn.execute(insert(VOTE), votes[i : i + 50_000])
    engine.dispose()
    print(f"filled {n_examples:,} Examples, {len(votes):,} votes")


def import_vsr_copies(url: str, factor: int, tmp: Path) -> str:
    """``factor`` copies of the real release (bench/gen10x.py) through the project's importer."""
    from bench.gen10x import VSR_RAW, copy_record
    from vsr_core.db import make_engine
    from vsr_dataset.import_vsr import import_vsr_file

    if not VSR_RAW.is_file():
        sys.exit(f"real VSR raw file not found: {VSR_RAW}")
    records = [json.loads(line) for line in VSR_RAW.read_text().splitlines() if line.strip()]
    path = tmp / f"vsr{factor}x.jsonl"
    with path.open("w") as out:
        for k in range(factor):
            for rec in records:
                out.write(json.dumps(copy_record(rec, k)) + "\n")
    engine = make_engine(url)
    t0 = time.perf_counter()
    line = import_vsr_file(engine, path).line()
    engine.dispose()
    path.unlink()
    return f"imported {line} in {time.perf_counter() - t0:.1f} s"


@dataclass
class Timings:
    records: int
    mb: float
    base: tuple[float, float]  # wall, cpu seconds
    export: tuple[float, float]
    full: tuple[float, float]


def measure(url: str, tmp: Path, repeat: int) -> Timings:
    """Baseline json.dumps, export of all_raw.jsonl, and the full build, in this order."""
    from vsr_core.db import make_engine
    from vsr_dataset.export import BuildOptions, build_dataset

    engine = make_engine(url)

    def export_raw(k: int) -> Path:
        out = tmp / f"raw{k}"
        build_dataset(engine, out, BuildOptions(only=frozenset({"raw"})))
        return out / "all_raw.jsonl"

    raw_path = export_raw(-1)  # warm-up, and the records for the baseline
    records = [json.loads(line) for line in raw_path.open()]

    def baseline(k: int) -> None:
        with (tmp / f"base{k}.jsonl").open("w") as fh:
            for r in records:
                fh.write(json.dumps(r))
                fh.write("\n")

    # Wall time, and CPU time of this process: on a shared, loaded machine the CPU
    # figure is the steadier one (SQLite runs in-process, so it includes the database;
    # with PostgreSQL the server's CPU is not in it, so read the wall figure).
    def timed(fn: Callable[[int], object], k: int) -> tuple[float, float]:
        w0, c0 = time.perf_counter(), time.process_time()
        fn(k)
        return time.perf_counter() - w0, time.process_time() - c0

    base_t, exp_t = [], []
    for k in range(repeat):
        base_t.append(timed(baseline, k))
        exp_t.append(timed(export_raw, k))
    full = timed(lambda k: build_dataset(engine, tmp / "full", BuildOptions()), 0)
    engine.dispose()
    mb = raw_path.stat().st_size / 1e6
    for k in range(-1, repeat):
        shutil.rmtree(tmp / f"raw{k}", ignore_errors=True)
        (tmp / f"base{max(k, 0)}.jsonl").unlink(missing_ok=True)
    shutil.rmtree(tmp / "full", ignore_errors=True)

    def med(ts: list[tuple[float, float]]) -> tuple[float, float]:
        return statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts)

    return Timings(len(records), mb, med(base_t), med(exp_t), full)


def report(t: Timings, backend: str, repeat: int) -> None:
    (bw, bc), (ew, ec), (fw, fc) = t.base, t.export, t.full
    print(
        f"records: {t.records:,} ({t.mb:.1f} MB of JSONL), backend: {backend}, median of {repeat}"
    )
    print(f"baseline json.dumps write: wall {bw:.2f} s, cpu {bc:.2f} s")
    print(
        f"export all_raw.jsonl from the database: wall {ew:.2f} s (ratio {ew / bw:.2f}x), "
        f"cpu {ec:.2f} s (ratio {ec / bc:.2f}x); target <= 3x"
    )
    print(
        f"full build-dataset (all parts, stats, card, figures): wall {fw:.2f} s "
        f"(ratio {fw / bw:.2f}x), cpu {fc:.2f} s (ratio {fc / bc:.2f}x)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3, help="median of N timings")
    ap.add_argument(
        "--database-url",
        help="an empty migrated database (default: SQLite temp); "
        "with --vsr-factors, a PostgreSQL URL whose database name is replaced",
    )
    ap.add_argument(
        "--vsr-factors",
        type=int,
        nargs="+",
        metavar="N",
        help="export N copies of the real VSR release for each N (e.g. 1 10)",
    )
    args = ap.parse_args()

    from migrations.runner import upgrade

    tmp = Path(tempfile.mkdtemp(prefix="bench-export-"))
    try:
        if args.vsr_factors:
            by_factor(args, tmp)
            return
        url = args.database_url or f"sqlite:///{tmp / 'bench.db'}"
        if not args.database_url:
            upgrade(url)
        fill(url, args.examples)
        report(measure(url, tmp, args.repeat), url.split(":", 1)[0], args.repeat)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def by_factor(args: argparse.Namespace, tmp: Path) -> None:
    results: list[tuple[int, Timings]] = []
    for factor in args.vsr_factors:
        url = fresh_database(args.database_url, tmp, f"bench_export_{factor}x")
        try:
            print(f"{factor}x: {import_vsr_copies(url, factor, tmp)}", flush=True)
            t = measure(url, tmp, args.repeat)
        finally:
            drop_database(url)
        report(t, url.split(":", 1)[0], args.repeat)
        results.append((factor, t))
    f0, t0 = results[0]
    print(
        f"\n{'size':>5s} {'records':>8s} {'json.dumps s':>12s} {'export s':>9s} "
        f"{'x dumps':>8s} {'full s':>7s} {'x dumps':>8s}   growth from {f0}x "
        "(dumps / export / full; linear = the size ratio)"
    )
    for f, t in results:
        print(
            f"{f:>4d}x {t.records:>8,} {t.base[0]:12.2f} {t.export[0]:9.2f} "
            f"{t.export[0] / t.base[0]:8.2f} {t.full[0]:7.2f} {t.full[0] / t.base[0]:8.2f}   "
            f"{t.base[0] / t0.base[0]:.1f} / {t.export[0] / t0.export[0]:.1f} / "
            f"{t.full[0] / t0.full[0]:.1f}  (records x{t.records / t0.records:.1f})"
        )
    print(f"wall seconds; load average {os.getloadavg()} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
