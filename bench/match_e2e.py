"""Benchmark: `vsr match` end to end as a user runs it, at 1x, 10x and 100x on PostgreSQL.

Each size is a PostgreSQL database holding an imported release (bench/gen10x.py + `vsr
import-vsr`); this script never writes into it: every run gets a fresh copy (`CREATE DATABASE
... TEMPLATE ...`), dropped afterwards. On the copy it runs, as a subprocess, the installed
command with its defaults (model load, matching, diagnostics, writing the McItems, queueing
the negatives for validation):

    vsr match --database-url postgresql+psycopg://.../<copy>

and measures its wall seconds, its peak RSS (wait4's ru_maxrss: the largest single process
of the command's tree, its fork workers included) and the peak PSS of the whole tree
(/proc/*/smaps_rollup sampled every second: pages the fork workers share with the parent
count once), which is what the memory goal bounds.

Baseline, measured in the same run on the same copy, also a subprocess: the floor any
`vsr match` pays, i.e. the Python start with the sentence-transformers model loaded (a fixed
cost) plus one streamed read of the rows the command matches (every Example of the study
with its votes, the join `matching.store.load_records` runs). It grows with the data like the
input does, so match / baseline says how much the matching, the diagnostics and the writes
cost over reading the data, and how that changes with size (the ratio stays flat when the
command grows linearly). The load average is printed at the start and end of every run: the
machine is shared.

    python -m bench.match_e2e --sources 1:smatch1x,10:scale10x,100:scale100x
    python -m bench.match_e2e --sources 1:smatch1x,10:smatch10x --json /tmp/e2e.json

``--sources`` maps a factor to a database on the server of ``--server``; a missing 1x
database is made here from the real raw release (`vsr db upgrade` + `vsr import-vsr`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.load.memory import rss_pss_kb, tree

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT.parent / "shared/vsr/data/data_files/all_vsr_raw_data.jsonl"
SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432"
COPY_PREFIX = "smatch_e2e"
GOALS = {10: 60.0, 100: 600.0}  # seconds
RSS_GOAL_GB = 8.0

BASELINE = """
import sys, time
t0 = time.perf_counter()
from matching.relevance import load_encoder
from sqlalchemy import create_engine, select
from vsr_core.tables import EXAMPLE, IMAGE, VOTE
enc = load_encoder(None)
t1 = time.perf_counter()
engine = create_engine(sys.argv[1])
n = 0
with engine.connect() as conn:
    stmt = (
        select(EXAMPLE.c.id, EXAMPLE.c.caption, EXAMPLE.c.subj, EXAMPLE.c.relation,
               EXAMPLE.c.obj, EXAMPLE.c.label, IMAGE.c.file_name, VOTE.c.value)
        .select_from(EXAMPLE.join(IMAGE, IMAGE.c.id == EXAMPLE.c.image_id)
                     .outerjoin(VOTE, VOTE.c.example_id == EXAMPLE.c.id))
        .order_by(EXAMPLE.c.id)
    )
    for part in conn.execution_options(yield_per=20000).execute(stmt).partitions():
        n += len(part)
print(f"{t1 - t0:.3f} {time.perf_counter() - t1:.3f} {n}")
"""


def _vsr_bin() -> str:
    here = Path(sys.executable).parent / "vsr"
    return str(here) if here.exists() else "vsr"


def _env() -> dict[str, str]:
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(path),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


def _admin(sql: str) -> None:
    """One statement on the server's maintenance database; CREATE ... TEMPLATE fails while
    someone is connected to the template, so it is tried again for a while."""
    from sqlalchemy import create_engine, text

    engine = create_engine(f"{SERVER}/postgres", isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            for attempt in range(60):
                try:
                    conn.execute(text(sql))
                    return
                except Exception as exc:
                    if "being accessed by other users" not in str(exc) or attempt == 59:
                        raise
                    time.sleep(5)
    finally:
        engine.dispose()


def _exists(db: str) -> bool:
    from sqlalchemy import create_engine, text

    engine = create_engine(f"{SERVER}/postgres")
    try:
        with engine.connect() as conn:
            q = text("SELECT 1 FROM pg_database WHERE datname = :d")
            return conn.execute(q, {"d": db}).first() is not None
    finally:
        engine.dispose()


def tree_pss_gb(pid: int) -> float:
    """The memory of ``pid``'s process tree as PSS: each page divided among the processes
    that share it, so forked workers' pages shared with the parent count once (RSS counts
    them in every process). 0 where /proc has no smaps_rollup."""
    return sum(rss_pss_kb(p)[1] for p in tree(pid)) / 1024**2


def timed(cmd: list[str], timeout: float | None = None) -> dict[str, Any]:
    """Run ``cmd``; wall seconds, the peak RSS (GB) and CPU seconds of its process tree
    (wait4's rusage: the child and the descendants it waited for), the peak PSS of the
    whole tree (sampled every second), exit status."""
    import tempfile

    load0 = os.getloadavg()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=_env(), stdout=out, stderr=err, text=True)
        killed = False
        pss, sampled = 0.0, 0.0
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - sampled >= 1.0:
                pss, sampled = max(pss, tree_pss_gb(proc.pid)), time.perf_counter()
            if timeout is not None and time.perf_counter() - t0 > timeout:
                proc.kill()
                killed = True
                pid, status, ru = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    return {
        "cmd": " ".join(cmd),
        "seconds": wall,
        "rss_gb": ru.ru_maxrss / 1024**2,
        "pss_gb": pss,
        "cpu": ru.ru_utime + ru.ru_stime,
        "rc": proc.returncode,
        "killed": killed,
        "stdout": stdout,
        "stderr": stderr[-3000:],
        "load_start": load0,
        "load_end": os.getloadavg(),
    }


def one_size(factor: int, source: str, args: argparse.Namespace) -> dict[str, Any]:
    copy = f"{args.prefix}_{factor}x"
    url = f"{SERVER}/{copy}"
    _admin(f"DROP DATABASE IF EXISTS {copy}")
    _admin(f"CREATE DATABASE {copy} TEMPLATE {source}")
    try:
        base = timed([sys.executable, "-c", BASELINE, url], timeout=args.timeout)
        if base["rc"] != 0:
            raise SystemExit(f"baseline failed at {factor}x: {base['stderr']}")
        model_s, read_s, rows = base["stdout"].split()
        base |= {"model_s": float(model_s), "read_s": float(read_s), "rows": int(rows)}
        cmd = [_vsr_bin(), "match", *args.match_args.split(), "--database-url", url]
        run = timed(cmd, timeout=args.timeout)
        run["cmd"] = run["cmd"].replace(url, f".../{copy}")
        if run["rc"] != 0 and not run["killed"]:
            print(f"  vsr match failed at {factor}x: {run['stderr'][-500:]}", flush=True)
        run["stages"] = _stages(url)
        items = next(
            (ln for ln in run["stdout"].splitlines() if ln.startswith("match run")), "no run"
        )
        return {"factor": factor, "source": source, "match": run, "baseline": base, "run": items}
    finally:
        _admin(f"DROP DATABASE IF EXISTS {copy}")


def _stages(url: str) -> dict[str, float]:
    """The run's own stage seconds (MatchRun.diagnostics: fit P_rel, matching wall time,
    filtering), to say where the time inside the command went."""
    from sqlalchemy import create_engine, select

    from vsr_core.tables import MATCH_RUN

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            diag = conn.execute(select(MATCH_RUN.c.diagnostics)).scalar()
    finally:
        engine.dispose()
    return dict((diag or {}).get("seconds", {}))


def _ensure_1x(db: str) -> None:
    if _exists(db):
        return
    _admin(f"CREATE DATABASE {db}")
    url = f"{SERVER}/{db}"
    for cmd in (
        [_vsr_bin(), "db", "upgrade", "--database-url", url],
        [_vsr_bin(), "import-vsr", str(RELEASE), "-q", "--database-url", url],
    ):
        subprocess.run(cmd, env=_env(), check=True, capture_output=True)


def _load(xs: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.1f}" for x in xs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sources", default="1:smatch1x,10:scale10x,100:scale100x")
    ap.add_argument("--match-args", default="", help="extra `vsr match` options")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per command")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--prefix", default=COPY_PREFIX, help="name prefix of the copies made")
    args = ap.parse_args()
    sources = sorted((int(f), db) for f, db in (s.split(":") for s in args.sources.split(",")))
    print(
        f"load average at start: {_load(os.getloadavg())} on {os.cpu_count()} cores",
        flush=True,
    )
    results = []
    for factor, db in sources:
        if factor == 1:
            _ensure_1x(db)
        r = one_size(factor, db, args)
        results.append(r)
        m, b = r["match"], r["baseline"]
        state = " (KILLED at timeout)" if m["killed"] else "" if m["rc"] == 0 else " (FAILED)"
        print(
            f"{factor}x: vsr match {m['seconds']:.1f} s{state}, peak RSS {m['rss_gb']:.2f} GB "
            f"(tree PSS {m['pss_gb']:.2f} GB), CPU {m['cpu']:.0f} s | "
            f"baseline {b['seconds']:.1f} s (model {b['model_s']:.1f} s "
            f"+ read {b['rows']:,} rows {b['read_s']:.1f} s), RSS {b['rss_gb']:.2f} GB | "
            f"ratio {m['seconds'] / b['seconds']:.1f}x | load {_load(m['load_start'])} -> "
            f"{_load(m['load_end'])}\n    {r['run']}\n    stages (s): {m.get('stages')}",
            flush=True,
        )
    print(
        "\n| size | command | seconds | peak RSS (largest process) | peak PSS (tree) "
        "| baseline (s) | match/baseline "
        "| load start -> end |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        m, b = r["match"], r["baseline"]
        print(
            f"| {r['factor']}x | `{m['cmd']}` | "
            f"{m['seconds']:.1f} | {m['rss_gb']:.2f} GB | {m['pss_gb']:.2f} GB | "
            f"{b['seconds']:.1f} | "
            f"{m['seconds'] / b['seconds']:.1f}x | {_load(m['load_start'])} -> "
            f"{_load(m['load_end'])} |"
        )
    for prev, cur in zip(results, results[1:], strict=False):
        f = cur["factor"] / prev["factor"]
        print(
            f"{prev['factor']}x -> {cur['factor']}x ({f:.0f}x the data): vsr match "
            f"{cur['match']['seconds'] / prev['match']['seconds']:.1f}x the time, "
            f"{cur['match']['cpu'] / max(prev['match']['cpu'], 1e-9):.1f}x the CPU; baseline "
            f"{cur['baseline']['seconds'] / prev['baseline']['seconds']:.1f}x"
        )
    for r in results:
        goal = GOALS.get(r["factor"])
        if goal:
            m = r["match"]
            # The bound is the command's memory: its whole tree, each shared page once.
            mem = max(m["rss_gb"], m["pss_gb"])
            met = m["rc"] == 0 and m["seconds"] < goal and mem < RSS_GOAL_GB
            print(
                f"goal at {r['factor']}x (< {goal:.0f} s, < {RSS_GOAL_GB:.0f} GB): "
                f"{'met' if met else 'NOT met'}"
            )
    print(f"load average at end: {_load(os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
