"""PostgreSQL's own execution time per dashboard page: less sensitive to the machine's load
than a page's wall time.

Every page of ``bench.dashboard_pages`` (the generated list: every admin GET route and every
value its filters, sorts and links offer) is requested in-process (the app ``vsr serve``
builds, logged in through the form) once its figures are ready (the start-up warm-up run
to its end, as on a warm server), then once more while every statement the request's own
thread sends is recorded; each recorded statement is then run again under
``EXPLAIN (ANALYZE, BUFFERS)`` with the same parameters. Prints per page the statements,
PostgreSQL's planning + execution time summed over them, the buffers they touched and the
slowest statement, and the load average at the start and end. Figures computed in the
background (the warm-up, refreshes) are not a page's: they are left out, and the warm-up's
own time is printed.

    python -m bench.dashboard_pg_time --template i42b_100x \\
        --database-url postgresql+psycopg://postgres@127.0.0.1/i42b_pg100x
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import event

from bench.dashboard_scale import ADMIN, PASSWORD, describe, pager_target, prepare
from bench.loadavg import load_note

# A statement a page sends that reads (the session's own bookkeeping writes are not pages').
# A page whose statements take this long names its three slowest (on stderr).
SHOW_ABOVE_MS = 50.0
READS = re.compile(r"^\s*(SELECT|WITH)\b", re.IGNORECASE)


def _client(url: str, tmp: Path) -> Any:
    from fastapi.testclient import TestClient

    from vsr_core.settings import Settings
    from webapp.app import create_app

    settings = Settings(
        database_url=url,
        secret_key=os.urandom(24).hex(),
        image_cache_dir=tmp / "image_cache",
    )
    client = TestClient(create_app(settings))
    form = client.get("/admin/login").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', form)
    if token is None:
        sys.exit("no CSRF token on /admin/login")
    r = client.post(
        "/admin/login",
        data={"username": ADMIN, "password": PASSWORD, "csrf_token": token.group(1)},
        follow_redirects=False,
    )
    if r.status_code != 303:
        sys.exit(f"login failed: HTTP {r.status_code}")
    return client


def _explain(engine: Any, statement: str, params: Any) -> tuple[float, int]:
    """(planning + execution ms, shared buffers hit + read) of one statement."""
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, params)
        plan = cur.fetchone()[0]
        raw.rollback()
    finally:
        raw.close()
    doc = (json.loads(plan) if isinstance(plan, str) else plan)[0]
    top = doc["Plan"]
    buffers = int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
    return float(doc.get("Planning Time", 0.0)) + float(doc["Execution Time"]), buffers


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--database-url", required=True, help="a database this bench may write to")
    ap.add_argument("--template", default=None, help="PostgreSQL database to copy first")
    ap.add_argument("--only", nargs="*", default=None, help="paths starting with these")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    args.raw = None
    load_start = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="i42b-pgtime-"))
    url = prepare(args, tmp)
    what, values, listed = describe(url)
    if args.only:
        listed = [p for p in listed if any(p.path.startswith(o) for o in args.only)]
    print(f"database: {what}; load average at start {load_start}")

    from webapp.admin import warmup
    from webapp.admin.cache import in_background

    client = _client(url, tmp)
    app = client.app
    t0 = time.perf_counter()
    state = warmup.start(app)
    assert state.thread is not None
    state.thread.join()
    print(f"warm-up: {state.done} figures in {time.perf_counter() - t0:.1f} s (in-process)")
    engine = app.state.engine
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool):  # type: ignore[no-untyped-def]
        if not in_background() and not many and READS.match(statement):
            seen.append((statement, params))

    rows: list[tuple[str, int, int, float, int, float]] = []
    for p in listed:
        path = pager_target(lambda u: client.get(u).text, p.path.format(**values), p.follow)
        label = p.path.format(**values) + (f" -> {p.follow}" if p.follow else "")
        client.get(path, follow_redirects=False)  # its figures, if any still missing
        seen.clear()
        event.listen(engine, "before_cursor_execute", record)
        try:
            status = client.get(path, follow_redirects=False).status_code
        finally:
            event.remove(engine, "before_cursor_execute", record)
        total = worst = 0.0
        buffers = 0
        timed: list[tuple[float, str]] = []
        for statement, params in list(seen):
            ms, buf = _explain(engine, statement, params)
            total, worst, buffers = total + ms, max(worst, ms), buffers + buf
            timed.append((ms, " ".join(statement.split())))
        rows.append((label, status, len(seen), total, buffers, worst))
        if total >= SHOW_ABOVE_MS:  # which statements a slow page's time is in
            for ms, sql in sorted(timed, reverse=True)[:3]:
                print(f"  {label}: {ms:.1f} ms {sql[:300]}", file=sys.stderr)
    print(
        f"\n{'page':66s} {'status':>6s} {'stmts':>5s} {'PG ms':>7s} {'buffers':>8s} "
        f"{'slowest':>7s}  {args.label}"
    )
    for label, status, n, total, buffers, worst in rows:
        flag = "  <-- over 300 ms" if total >= 300 else ""
        print(f"{label[:66]:66s} {status:6d} {n:5d} {total:7.1f} {buffers:8d} {worst:7.1f}{flag}")
    top = max(rows, key=lambda r: r[3])
    print(f"most PostgreSQL time: {top[0]} {top[3]:.1f} ms over {top[2]} statements")
    print(load_note(load_start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
