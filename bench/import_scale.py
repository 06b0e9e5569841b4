"""How `vsr import-vsr` grows with the data: the user's command at 1x, 10x and 100x the real
VSR release, against a bulk-load baseline of the same rows measured in the same run.

For each size and backend:

- import: ``vsr import-vsr FILE --database-url URL -q`` as a subprocess on a fresh, migrated
  database (wall seconds and the subprocess's max RSS);
- baseline: the rows that import wrote (every column of worker, image, example and vote,
  dumped from that database) loaded into another fresh, migrated database with the backend's
  bulk path and nothing else: on PostgreSQL, in one transaction, a bare ``COPY ... FROM
  STDIN`` (psycopg 3) into tables without their secondary indexes, then building the same
  indexes (the trigram index on captions included); on SQLite ``executemany`` in one
  transaction (the stdlib sqlite3 module, rows already in memory). No parsing, no
  validation, no lookups.

Prints seconds, import / baseline, the import's peak RSS, rows per second and the load
average at the start and end of each pair (a pair above 1.5 is marked LOADED). 1x is the
real release, 10x and 100x come from bench/gen10x.py (written to --data-dir when missing).
The goal: import <= 3x baseline on PostgreSQL, growing linearly, peak RSS < 500 MB.

    python bench/import_scale.py                          # PostgreSQL 1x 10x 100x, SQLite 1x 10x
    python bench/import_scale.py --pg-sizes 1 10 --sqlite-sizes 1
    python bench/import_scale.py --pg-url postgresql+psycopg://postgres@127.0.0.1/x --prefix me
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.databases import drop_database, fresh_database  # noqa: E402
from bench.gen10x import VSR_RAW  # noqa: E402
from bench.loadavg import LOADED_ABOVE  # noqa: E402
from bench.user_cli import CliRun, vsr  # noqa: E402

TABLES = ("worker", "image", "example", "vote")  # in foreign-key order


@dataclass
class Run:
    backend: str
    size: int
    rows: int
    seconds: float
    startup: float
    rss_mb: float
    baseline: float
    load_start: tuple[float, float, float]
    load_end: tuple[float, float, float]
    line: str


def data_file(size: int, data_dir: Path) -> Path:
    if size == 1:
        return VSR_RAW
    path = data_dir / f"vsr{size}x.jsonl"
    if not path.is_file():
        gen = [sys.executable, str(ROOT / "bench/gen10x.py"), str(path), "--factor", str(size)]
        subprocess.run(gen, check=True)
    return path


def vsr_import(path: Path, url: str) -> CliRun:
    return vsr("import-vsr", str(path), "--database-url", url, "-q")


def libpq(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def pg_baseline(imported: str, fresh: str, tmp: Path) -> tuple[int, float]:
    """COPY the imported rows out to files, then time, in ``fresh`` and in one transaction:
    dropping the secondary indexes of image, example and vote, ``COPY ... FROM STDIN`` of
    every table, and creating those indexes again (the same statements the catalogue
    prints). Returns (rows, seconds)."""
    import psycopg

    from vsr_core.db import make_engine
    from vsr_core.deferred_indexes import built_after_load

    rows = 0
    with psycopg.connect(libpq(imported)) as src:
        for table in TABLES:
            with (tmp / f"{table}.copy").open("wb") as fh, src.cursor() as cur:
                with cur.copy(f'COPY (SELECT * FROM "{table}" ORDER BY id) TO STDOUT') as copy:
                    for block in copy:
                        fh.write(block)
                rows += src.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]  # type: ignore[index]
    engine = make_engine(fresh)
    t0 = time.perf_counter()
    with (
        engine.begin() as conn,
        built_after_load(conn, list(TABLES[1:])),
        conn.connection.driver_connection.cursor() as cur,  # type: ignore[union-attr]
    ):
        for table in TABLES:
            path = tmp / f"{table}.copy"
            with path.open("rb") as fh, cur.copy(f'COPY "{table}" FROM STDIN') as copy:
                while block := fh.read(1 << 20):
                    copy.write(block)
    seconds = time.perf_counter() - t0
    engine.dispose()
    for table in TABLES:
        (tmp / f"{table}.copy").unlink()
    return rows, seconds


def sqlite_baseline(imported: str, fresh: str) -> tuple[int, float]:
    """executemany of the imported rows into ``fresh`` in one transaction (rows in memory)."""
    src = sqlite3.connect(imported.removeprefix("sqlite:///"))
    data = {}
    for table in TABLES:
        cur = src.execute(f'SELECT * FROM "{table}" ORDER BY id')
        data[table] = ([d[0] for d in cur.description], cur.fetchall())
    src.close()
    dst = sqlite3.connect(fresh.removeprefix("sqlite:///"))
    t0 = time.perf_counter()
    with dst:
        for table, (cols, rows) in data.items():
            marks = ", ".join("?" * len(cols))
            names = ", ".join(f'"{c}"' for c in cols)
            dst.executemany(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', rows)
    seconds = time.perf_counter() - t0
    dst.close()
    return sum(len(rows) for _, rows in data.values()), seconds


def startup(backend: str, args: argparse.Namespace, tmp: Path) -> float:
    """Seconds of ``vsr import-vsr`` of a one-record file: the command's fixed cost (Python
    start-up, loading the models, connecting), which dominates at 1x."""
    one = tmp / "one.jsonl"
    with VSR_RAW.open() as fh:
        one.write_text(fh.readline())
    base_url = args.pg_url if backend == "postgresql" else None
    url = fresh_database(base_url, tmp, f"{args.prefix}_import_startup")
    try:
        return vsr_import(one, url).seconds
    finally:
        drop_database(url)


def measure(backend: str, size: int, args: argparse.Namespace, tmp: Path) -> Run:
    path = data_file(size, args.data_dir)
    base_url = args.pg_url if backend == "postgresql" else None
    target = fresh_database(base_url, tmp, f"{args.prefix}_import_{size}x")
    copy_to = fresh_database(base_url, tmp, f"{args.prefix}_baseline_{size}x")
    try:
        load_start = os.getloadavg()
        cli = vsr_import(path, target)
        seconds, rss, line = cli.seconds, cli.rss_mb, cli.stdout
        if backend == "postgresql":
            rows, baseline = pg_baseline(target, copy_to, tmp)
        else:
            rows, baseline = sqlite_baseline(target, copy_to)
        load_end = os.getloadavg()
    finally:
        if not args.keep:
            drop_database(target)
        drop_database(copy_to)
    fixed = startup(backend, args, tmp)
    run = Run(backend, size, rows, seconds, fixed, rss, baseline, load_start, load_end, line)
    print(
        f"{backend} {size}x: import {seconds:.1f} s (max RSS {rss:.0f} MB), baseline "
        f"{baseline:.1f} s, ratio {seconds / baseline:.2f}x ({(seconds - fixed) / baseline:.2f}x "
        f"without the {fixed:.1f} s of a one-record import), load {fmt(load_start)} -> "
        f"{fmt(load_end)}\n    {line}",
        flush=True,
    )
    return run


def fmt(load: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.2f}" for x in load)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument("--pg-sizes", type=int, nargs="*", default=[1, 10, 100])
    ap.add_argument("--sqlite-sizes", type=int, nargs="*", default=[1, 10])
    ap.add_argument(
        "--pg-url",
        default="postgresql+psycopg://postgres@127.0.0.1/postgres",
        help="a PostgreSQL server (its database name is replaced by the bench's own)",
    )
    ap.add_argument("--prefix", default="bench", help="prefix of the databases made and dropped")
    ap.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--keep", action="store_true", help="keep the imported databases")
    args = ap.parse_args()

    runs: list[Run] = []
    tmp = Path(tempfile.mkdtemp(prefix="bench-import-"))
    try:
        for size in args.pg_sizes:
            runs.append(measure("postgresql", size, args, tmp))
        for size in args.sqlite_sizes:
            runs.append(measure("sqlite", size, args, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"\n{'backend':<10s} {'size':>5s} {'rows':>10s} {'import s':>9s} {'baseline s':>10s} "
        f"{'ratio':>6s} {'-fixed':>6s} {'rows/s':>9s} {'RSS MB':>7s} {'growth':>7s}  "
        "load start -> end"
    )
    first: dict[str, Run] = {}
    for r in runs:
        f = first.setdefault(r.backend, r)
        print(
            f"{r.backend:<10s} {r.size:>4d}x {r.rows:>10,} {r.seconds:9.1f} {r.baseline:10.1f} "
            f"{r.seconds / r.baseline:6.2f} {(r.seconds - r.startup) / r.baseline:6.2f} "
            f"{r.rows / r.seconds:9,.0f} {r.rss_mb:7.0f} "
            f"{r.seconds / f.seconds:6.1f}x  {fmt(r.load_start)} -> {fmt(r.load_end)}"
            + ("  LOADED" if max(r.load_start[0], r.load_end[0]) > LOADED_ABOVE else "")
        )
    print(
        "-fixed: the ratio without a one-record import's seconds (start-up); growth: import "
        f"seconds / those at the smallest size; {os.cpu_count()} CPUs; LOADED: a 1-minute "
        f"load average above {LOADED_ABOVE} at the start or end"
    )


if __name__ == "__main__":
    main()
