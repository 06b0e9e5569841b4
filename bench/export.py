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

    python bench/export.py                  # 200,000 Examples
    python bench/export.py --examples 20000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONCEPTS = ["person", "cat", "dog", "teddy bear", "dining table", "bed", "laptop", "pizza",
            "car", "cake", "truck", "couch", "suitcase", "bench", "umbrella", "sandwich", "bus",
            "motorcycle", "banana", "book", "oven", "bowl", "refrigerator", "bicycle", "chair",
            "train", "cow", "donut", "horse", "toilet", "keyboard", "bird", "tv", "elephant",
            "hot dog", "potted plant", "cup", "backpack", "apple", "handbag"]


def fill(url: str, n_examples: int, seed: int = 0) -> None:
    from sqlalchemy import insert

    from vsr_core.captions import render_caption
    from vsr_core.db import make_engine
    from vsr_core.models import Example, Image, Vote, Worker
    from vsr_core.relations import enabled_relations
    from vsr_core.types import utcnow

    rng = random.Random(seed)
    rels = [r.name for r in enabled_relations()]
    engine = make_engine(url)
    now = utcnow()
    n_images = max(1, n_examples // 2)
    with engine.begin() as conn:
        conn.execute(insert(Worker.__table__), [  # type: ignore[attr-defined]
            {"source": "prolific", "external_id": f"W{i:03d}", "roles": ["validator"],
             "blocked": False, "flagged": False, "created_at": now}
            for i in range(60)
        ])
        conn.execute(insert(Image.__table__), [  # type: ignore[attr-defined]
            {"coco_id": i + 1, "file_name": f"{i + 1:012d}.jpg",
             "coco_split": "train2017" if i % 5 else "val2017", "width": 640, "height": 480}
            for i in range(n_images)
        ])
    ex_rows = []
    for i in range(n_examples):
        subj, obj = rng.sample(CONCEPTS, 2)
        rel = rng.choice(rels)
        ex_rows.append({
            "image_id": i // 2 + 1, "caption": render_caption(subj, rel, obj), "relation": rel,
            "subj": subj, "obj": obj, "label": i % 2 == 0, "origin": "human",
            "author_id": rng.randint(1, 20), "is_gold": False, "created_at": now,
        })
    with engine.begin() as conn:
        for i in range(0, len(ex_rows), 20_000):
            conn.execute(insert(Example.__table__), ex_rows[i : i + 20_000])  # type: ignore[attr-defined]
    votes = []
    for eid in range(1, n_examples + 1):
        label = eid % 2 == 1
        p = rng.choice([0.95, 0.8, 0.5])
        for w in rng.sample(range(21, 61), rng.randint(3, 5)):
            votes.append({"example_id": eid, "worker_id": w,
                          "value": label if rng.random() < p else not label, "created_at": now})
    with engine.begin() as conn:
        for i in range(0, len(votes), 50_000):
            conn.execute(insert(Vote.__table__), votes[i : i + 50_000])  # type: ignore[attr-defined]
    engine.dispose()
    print(f"filled {n_examples:,} Examples, {len(votes):,} votes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3, help="median of N timings")
    ap.add_argument("--database-url", help="an empty migrated database (default: SQLite temp)")
    args = ap.parse_args()

    from migrations.runner import upgrade
    from vsr_core.db import make_engine
    from vsr_dataset.export import BuildOptions, build_dataset

    tmp = Path(tempfile.mkdtemp(prefix="bench-export-"))
    try:
        url = args.database_url or f"sqlite:///{tmp / 'bench.db'}"
        if not args.database_url:
            upgrade(url)
        fill(url, args.examples)
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
        def timed(fn: object, k: int) -> tuple[float, float]:
            w0, c0 = time.perf_counter(), time.process_time()
            fn(k)  # type: ignore[operator]
            return time.perf_counter() - w0, time.process_time() - c0

        base_t, exp_t = [], []
        for k in range(args.repeat):
            base_t.append(timed(baseline, k))
            exp_t.append(timed(export_raw, k))
        full_t = timed(lambda k: build_dataset(engine, tmp / "full", BuildOptions()), 0)
        engine.dispose()

        bw, bc = (statistics.median(t[i] for t in base_t) for i in (0, 1))
        ew, ec = (statistics.median(t[i] for t in exp_t) for i in (0, 1))
        size = raw_path.stat().st_size / 1e6
        print(f"records: {len(records):,} ({size:.1f} MB of JSONL), backend: "
              f"{url.split(':', 1)[0]}, median of {args.repeat}")
        print(f"baseline json.dumps write: wall {bw:.2f} s, cpu {bc:.2f} s")
        print(f"export all_raw.jsonl from the database: wall {ew:.2f} s (ratio {ew / bw:.2f}x), "
              f"cpu {ec:.2f} s (ratio {ec / bc:.2f}x); target <= 3x")
        print(f"full build-dataset (all parts, stats, card, figures): wall {full_t[0]:.2f} s "
              f"(ratio {full_t[0] / bw:.2f}x), cpu {full_t[1]:.2f} s "
              f"(ratio {full_t[1] / bc:.2f}x)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
