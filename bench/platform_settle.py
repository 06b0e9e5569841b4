"""plan() and the Platforms page at 5,000 submissions: SQL statements and time, against a
baseline of 50 submissions measured in the same run (same database, same process).

Each submission's worker has one batch from its own session with one kept caption, so
plan() approves and pays every one and writes 5,000 ledger rows. The statement count must
be the same at 50 and 5,000 (grouped reads, multi-row inserts); the time grows with the rows.

    python bench/platform_settle.py                    # SQLite in a temp dir
    python bench/platform_settle.py --database-url postgresql+psycopg://...   (empty, migrated)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _measure(engine: Any, job: Callable[[], object]) -> tuple[int, float]:
    from sqlalchemy import event

    seen: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    t0 = time.perf_counter()
    try:
        job()
    finally:
        event.remove(engine, "before_cursor_execute", count)
    return len(seen), time.perf_counter() - t0


def main() -> None:
    from fastapi.testclient import TestClient
    from sqlmodel import Session

    from migrations.runner import upgrade
    from tests.support import platform_work as work
    from vsr_core.db import make_engine
    from vsr_core.models import DEFAULT_STUDY_ID, AdminRole, PlatformStudy
    from vsr_core.settings import Settings
    from webapp.admin.auth import create_admin
    from webapp.app import create_app
    from webapp.platforms.engine import Rules, plan

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--database-url", default=None)
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--baseline", type=int, default=50)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    url = args.database_url or f"sqlite:///{tmp}/settle.db"
    upgrade(url)
    engine = make_engine(url)
    ids = {}
    with Session(engine) as s:
        create_admin(s, "bench", "bench-password-123", grants={DEFAULT_STUDY_ID: AdminRole.owner})
        for label, n in (("baseline", args.baseline), ("large", args.n)):
            row = PlatformStudy(
                platform="prolific",
                external_id=f"bench-{label}",
                settings={"kind": "generate", "reward_cents": 100},
            )
            s.add(row)
            s.commit()
            work.crowd(s, row, n, start=0 if label == "baseline" else args.baseline)
            ids[label] = row.id
    rules = Rules(min_items=1, bonus_cents_per_kept=10)
    app = create_app(
        Settings(
            database_url=url,
            secret_key="bench-secret-0123456789abcdef",
            image_cache_dir=tmp / "cache",
        ),
        engine,
    )
    client = TestClient(app)
    form = client.get("/admin/login").text
    token = form.split('name="csrf_token" value="')[1].split('"')[0]
    client.post(
        "/admin/login",
        data={"username": "bench", "password": "bench-password-123", "csrf_token": token},
    )
    results: dict[str, dict[str, tuple[int, float]]] = {}
    for label in ("baseline", "large"):
        with Session(engine) as s:
            chosen = s.get(PlatformStudy, ids[label])
            assert chosen is not None
            s.commit()
            results[label] = {"plan": _measure(engine, partial(plan, s, chosen, rules))}
        page = f"/admin/platform?ps={ids[label]}"
        client.get(page)  # warm caches
        # Three loads: fewest statements (a time-based refresh of the admin session or a
        # cache can add a few to one load, whatever the size) and the median time.
        loads = sorted(_measure(engine, partial(client.get, page)) for _ in range(3))
        results[label]["page"] = (loads[0][0], sorted(t for _, t in loads)[1])
    print(f"backend: {engine.dialect.name}")
    for what in ("plan", "page"):
        (b_n, b_t), (l_n, l_t) = results["baseline"][what], results["large"][what]
        print(
            f"{what}: {l_n} statements at {args.n} submissions vs {b_n} at {args.baseline} "
            f"(ratio {l_n / b_n:.2f}); {l_t:.2f} s vs {b_t:.3f} s (ratio {l_t / b_t:.1f}, "
            f"submissions ratio {args.n / args.baseline:.0f})"
        )


if __name__ == "__main__":
    main()
