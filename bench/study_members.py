"""How much the dashboard's per-study workers KPI costs: the study's members counted three ways
on the real VSR release, against the old global count of every worker.

Imports the raw VSR file into a fresh database (as bench/dashboard.py does), then times, in one
process and interleaved, the median of N runs of: the old ``count(*) from worker``; a UNION of
the ids of everyone with a batch, Example, vote, caption or invite in the study; the same as
correlated EXISTS probes without and with the "study_id + 0" hint; the last is
``vsr_core.standing.study_members``. Prints milliseconds and the ratio to the old count.

    python bench/study_members.py
    python bench/study_members.py --database-url postgresql+psycopg://postgres@127.0.0.1/bench
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.dashboard import VSR_RAW, _import  # noqa: E402
from bench.databases import fresh_database  # noqa: E402


def main() -> None:
    from sqlalchemy import exists, func, or_, select
    from sqlmodel import Session

    from vsr_core import standing as s
    from vsr_core import tables as t
    from vsr_core.db import make_engine

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--database-url", default=None)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--raw", type=Path, default=VSR_RAW)
    args = ap.parse_args()
    url = fresh_database(args.database_url, Path(tempfile.mkdtemp()), "vsr_bench_members")
    engine = make_engine(url)
    print(_import(engine, args.raw))
    w, sid = t.WORKER.c.id, 1

    def union() -> Any:
        in_study = select(t.EXAMPLE.c.id).where(t.EXAMPLE.c.study_id == sid)
        ids = (
            select(t.BATCH.c.worker_id)
            .where(t.BATCH.c.study_id == sid)
            .union(
                select(t.EXAMPLE.c.author_id).where(t.EXAMPLE.c.study_id == sid),
                select(t.VOTE.c.worker_id).where(t.VOTE.c.example_id.in_(in_study)),
                select(t.ANNOTATION.c.worker_id)
                .select_from(
                    t.ANNOTATION.join(t.IMAGE_PAIR, t.IMAGE_PAIR.c.id == t.ANNOTATION.c.pair_id)
                )
                .where(t.IMAGE_PAIR.c.study_id == sid),
                select(t.INVITE_TOKEN.c.worker_id).where(t.INVITE_TOKEN.c.study_id == sid),
            )
        )
        return w.in_(ids.scalar_subquery())

    def plain_exists() -> Any:
        return or_(
            exists().where(t.BATCH.c.worker_id == w, t.BATCH.c.study_id == sid),
            exists().where(
                t.VOTE.c.worker_id == w,
                t.EXAMPLE.c.id == t.VOTE.c.example_id,
                t.EXAMPLE.c.study_id == sid,
            ),
            exists().where(t.EXAMPLE.c.author_id == w, t.EXAMPLE.c.study_id == sid),
            exists().where(
                t.ANNOTATION.c.worker_id == w,
                t.IMAGE_PAIR.c.id == t.ANNOTATION.c.pair_id,
                t.IMAGE_PAIR.c.study_id == sid,
            ),
            exists().where(t.INVITE_TOKEN.c.worker_id == w, t.INVITE_TOKEN.c.study_id == sid),
        )

    count = select(func.count()).select_from(t.WORKER)
    variants = {
        "old: every worker (baseline)": count,
        "UNION of ids": count.where(union()),
        "EXISTS": count.where(plain_exists()),
        "EXISTS, study_id + 0 (used)": count.where(s.study_members(sid)),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    with Session(engine) as session:
        conn = session.connection()
        found = {k: conn.execute(q).scalar_one() for k, q in variants.items()}
        for _ in range(args.repeat):
            for k, q in variants.items():
                t0 = time.perf_counter()
                conn.execute(q).scalar_one()
                times[k].append(time.perf_counter() - t0)
    base = statistics.median(times["old: every worker (baseline)"])
    print(f"database: {engine.dialect.name}; median of {args.repeat}")
    for k, v in times.items():
        m = statistics.median(v)
        print(f"{k:32s} {m * 1000:8.2f} ms  x{m / base:7.1f}  workers={found[k]}")


if __name__ == "__main__":
    main()
