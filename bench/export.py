"""How fast `build-dataset` exports, run as a user runs it (a subprocess of the command).

Fills a fresh database (SQLite file in a temp dir, or --database-url pointing at an empty,
migrated database) with synthetic Examples and votes (default 200,000, 3-5 votes each), then
times, in the same run:

- export: ``build-dataset --out DIR --only raw --database-url URL -q`` (wall seconds and the
  command's max RSS);
- baseline: writing the same records (read back from that all_raw.jsonl in untimed batches)
  with plain ``json.dumps``, one line each;
- full: the whole ``build-dataset`` (raw, validated, random and zero-shot splits, stats.json,
  card with three figures), with its max RSS;
- start-up: ``build-dataset --help``.

Prints seconds and the ratio against the baseline, and the load average. Target: export
<= 3x baseline, the full build in bounded memory.

With ``--vsr-factors 1 10 100`` it exports the real release instead: for each factor a
database with that many copies of it (bench/gen10x.py), imported with ``vsr import-vsr`` or,
with ``--template 'scale{}x'``, copied from an already imported database; the same timings,
and how each grows from the first factor to the others (linear growth = the factor).

    python bench/export.py                  # 200,000 Examples
    python bench/export.py --examples 20000 --repeat 3
    python bench/export.py --vsr-factors 1 10 100 --template 'scale{}x' \
        --database-url postgresql+psycopg://postgres@127.0.0.1/x --prefix me --repeat 1
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.databases import drop_database, fresh_database  # noqa: E402
from bench.user_cli import CliRun, load, run, vsr  # noqa: E402

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


def import_vsr_copies(url: str, factor: int, data_dir: Path) -> str:
    """``factor`` copies of the real release (bench/gen10x.py), imported with the user's
    command (``vsr import-vsr``)."""
    from bench.import_scale import data_file

    run = vsr("import-vsr", str(data_file(factor, data_dir)), "--database-url", url, "-q")
    return f"imported {run.stdout} in {run.seconds:.1f} s"


@dataclass
class Timings:
    records: int
    mb: float
    base: float  # seconds
    export: CliRun
    full: CliRun | None
    parquet: CliRun | None  # build-dataset --only raw --parquet (its memory is the point)
    startup: float  # seconds of `build-dataset --help`: the command's fixed start-up cost
    load_start: str
    load_end: str


def baseline_dumps(raw_path: Path, out: Path, batch: int = 20_000) -> tuple[int, float]:
    """Seconds to write the records of ``raw_path`` with plain ``json.dumps``, one line each.

    The records are read back in batches (untimed) and only writing them is timed, so the
    baseline's memory stays bounded at 100x as the export's should."""
    n, seconds = 0, 0.0
    with raw_path.open() as src, out.open("w") as fh:
        while lines := list(itertools.islice(src, batch)):
            records = [json.loads(line) for line in lines]
            t0 = time.perf_counter()
            for r in records:
                fh.write(json.dumps(r))
                fh.write("\n")
            seconds += time.perf_counter() - t0
            n += len(records)
    out.unlink()
    return n, seconds


def measure(url: str, tmp: Path, repeat: int, full: bool = True, parquet: bool = False) -> Timings:
    """Baseline json.dumps, then ``build-dataset --only raw`` and the full ``build-dataset``
    (the user's command, a subprocess each)."""
    load_start = load()
    raw_dir = tmp / "raw"

    def export_raw() -> CliRun:
        return run(
            "build-dataset", "--out", str(raw_dir), "--only", "raw", "--database-url", url, "-q"
        )

    exports, bases = [], []
    n = 0
    for _ in range(repeat):
        exports.append(export_raw())
        n, seconds = baseline_dumps(raw_dir / "all_raw.jsonl", tmp / "base.jsonl")
        bases.append(seconds)
    mb = (raw_dir / "all_raw.jsonl").stat().st_size / 1e6
    shutil.rmtree(raw_dir, ignore_errors=True)
    whole = None
    if full:
        out = tmp / "full"
        whole = run("build-dataset", "--out", str(out), "--database-url", url, "-q")
        shutil.rmtree(out, ignore_errors=True)
    with_parquet = None
    if parquet:
        out = tmp / "parquet"
        args = ("--out", str(out), "--only", "raw", "--parquet", "--database-url", url, "-q")
        with_parquet = run("build-dataset", *args)
        shutil.rmtree(out, ignore_errors=True)
    export = sorted(exports, key=lambda r: r.seconds)[len(exports) // 2]
    startup = run("build-dataset", "--help").seconds
    return Timings(
        n, mb, statistics.median(bases), export, whole, with_parquet, startup, load_start, load()
    )


def report(t: Timings, backend: str, repeat: int) -> None:
    print(
        f"records: {t.records:,} ({t.mb:.1f} MB of JSONL), backend: {backend}, median of {repeat}"
    )
    print(f"baseline json.dumps write: {t.base:.2f} s")
    print(
        f"build-dataset --only raw: {t.export.seconds:.2f} s "
        f"(ratio {t.export.seconds / t.base:.2f}x, "
        f"max RSS {t.export.rss_mb:.0f} MB); target <= 3x; without the command's start-up "
        f"({t.startup:.2f} s, `build-dataset --help`): "
        f"{(t.export.seconds - t.startup) / t.base:.2f}x"
    )
    if t.full is not None:
        print(
            f"build-dataset (all parts, stats, card, figures): {t.full.seconds:.2f} s "
            f"(ratio {t.full.seconds / t.base:.2f}x, max RSS {t.full.rss_mb:.0f} MB)"
        )
    if t.parquet is not None:
        print(
            f"build-dataset --only raw --parquet: {t.parquet.seconds:.2f} s, "
            f"max RSS {t.parquet.rss_mb:.0f} MB"
        )
    print(f"load average {t.load_start} -> {t.load_end}", flush=True)


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
        help="export N copies of the real VSR release for each N (e.g. 1 10 100)",
    )
    ap.add_argument(
        "--template",
        metavar="PATTERN",
        help="with --vsr-factors on PostgreSQL: copy the database PATTERN.format(N) "
        "(e.g. scale{}x, already imported) when it exists instead of importing again",
    )
    ap.add_argument("--prefix", default="bench", help="prefix of the databases made and dropped")
    ap.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()), help="generated releases"
    )
    ap.add_argument("--no-full", action="store_true", help="time --only raw, not the full build")
    ap.add_argument(
        "--parquet", action="store_true", help="also `--only raw --parquet`: seconds, max RSS"
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
        report(
            measure(url, tmp, args.repeat, not args.no_full, args.parquet),
            url.split(":", 1)[0],
            args.repeat,
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def copy_of(url: str, template: str, name: str) -> str | None:
    """A copy (CREATE DATABASE ... TEMPLATE) of ``template`` named ``name`` on ``url``'s
    server, or None when there is no such template."""
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from vsr_core.db import make_engine

    admin = make_engine(make_url(url).set(database="postgres").render_as_string(False))
    try:
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            found = c.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :t"), {"t": template}
            ).first()
            if found is None:
                return None
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            c.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
    finally:
        admin.dispose()
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def by_factor(args: argparse.Namespace, tmp: Path) -> None:
    results: list[tuple[int, Timings]] = []
    for factor in args.vsr_factors:
        name = f"{args.prefix}_export_{factor}x"
        url = None
        if args.template and args.database_url and args.database_url.startswith("postgresql"):
            url = copy_of(args.database_url, args.template.format(factor), name)
            if url is not None:
                print(f"{factor}x: a copy of {args.template.format(factor)}", flush=True)
        if url is None:
            url = fresh_database(args.database_url, tmp, name)
            print(f"{factor}x: {import_vsr_copies(url, factor, args.data_dir)}", flush=True)
        try:
            t = measure(url, tmp, args.repeat, not args.no_full, args.parquet)
        finally:
            drop_database(url)
        report(t, url.split(":", 1)[0], args.repeat)
        results.append((factor, t))
    f0, t0 = results[0]
    print(
        f"\n{'size':>5s} {'records':>9s} {'dumps s':>8s} {'raw s':>7s} {'x dumps':>8s} "
        f"{'RSS MB':>7s} {'full s':>7s} {'x dumps':>8s} {'RSS MB':>7s}  growth from {f0}x "
        "(dumps / raw / full)   load start -> end"
    )
    for f, t in results:
        full_s = t.full.seconds if t.full else float("nan")
        full_rss = t.full.rss_mb if t.full else float("nan")
        full0 = t0.full.seconds if t0.full else float("nan")
        print(
            f"{f:>4d}x {t.records:>9,} {t.base:8.2f} {t.export.seconds:7.2f} "
            f"{t.export.seconds / t.base:8.2f} {t.export.rss_mb:7.0f} {full_s:7.2f} "
            f"{full_s / t.base:8.2f} {full_rss:7.0f}  "
            f"{t.base / t0.base:.1f} / {t.export.seconds / t0.export.seconds:.1f} / "
            f"{full_s / full0:.1f} (records x{t.records / t0.records:.1f})   "
            f"{t.load_start} -> {t.load_end}"
        )
    for f, t in results[1:]:
        if t.full and t0.full and t.records > t0.records:
            # What the full build holds per Example beyond the fixed cost (imports, figures).
            per = (t.full.rss_mb - t0.full.rss_mb) * 2**20 / (t.records - t0.records)
            print(f"full build RSS from {f0}x to {f}x: {per:,.0f} bytes per added record")
    print(f"wall seconds of the user's command; {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
