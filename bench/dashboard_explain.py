"""What each data-browser page of the page list costs PostgreSQL, by EXPLAIN (ANALYZE, BUFFERS).

For every /admin/data URL of ``bench.dashboard_pages`` (each filter, sort and bare page
number), the statements the page runs when its figures are cached: the first page, the
last page (the pager's "last") and, for a bare ``?page=N``, what the route does with it.
Prints per statement PostgreSQL's execution time, the buffers it touched and how many
``example`` rows its scans read, and flags any statement that reads the whole example
table (a plan node reading more than half of its rows): a filter that selects nothing must
answer from a count, an index or a cached figure.

    python -m bench.dashboard_explain --database-url postgresql+psycopg://postgres@127.0.0.1/scale10x
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from sqlalchemy import text
from sqlmodel import Session

from bench.dashboard_pages import pages, read_choices
from bench.loadavg import load_note
from vsr_core.db import make_engine
from vsr_core.models import DEFAULT_STUDY_ID
from vsr_core.studies.settings import load_study_config
from webapp.admin import stats
from webapp.admin.routes.data import PAGE, data_statements


def _explain(session: Session, stmt: Any) -> dict[str, Any]:
    conn = session.connection()
    sql = str(stmt.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
    raw = conn.execute(text("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql))
    plan = raw.scalar_one()
    return (json.loads(plan) if isinstance(plan, str) else plan)[0]  # type: ignore[no-any-return]


def _example_rows(node: dict[str, Any]) -> int:
    """Rows read from the example table by the plan's scans (those passing and removed)."""
    own = 0
    if node.get("Relation Name") == "example":
        loops = node.get("Actual Loops", 1)
        own = (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)) * loops
    return own + sum(_example_rows(c) for c in node.get("Plans", ()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--database-url", required=True, help="a PostgreSQL database (read only)")
    ap.add_argument("--only", default="", help="URLs containing this text")
    args = ap.parse_args()
    load_start = os.getloadavg()
    engine = make_engine(args.database_url)
    worst = 0.0
    over = []
    with Session(engine) as s:
        s.connection().execute(text("SET TRANSACTION READ ONLY"))
        cfg = load_study_config(s, DEFAULT_STUDY_ID)
        n_ex = s.connection().execute(text("SELECT count(*) FROM example")).scalar_one()
        data_pages = max(1, -(-n_ex // PAGE))
        urls = sorted(
            {
                p.path.format(data_pages=data_pages)
                for p in pages(read_choices(s, DEFAULT_STUDY_ID))
                if p.route == "/admin/data" and args.only in p.path
            }
        )
        print(f"{n_ex:,} Examples; load average at start {load_start}")
        print(f"{'URL / statement':70s} {'ms':>8s} {'buffers':>8s} {'example rows':>13s}")
        for url in urls:
            params = dict(parse_qsl(urlsplit(url).query))
            filters = stats.parse_filters(params)
            page = int(params.get("page", 1))
            for name, stmt in data_statements(s, cfg, filters, page, DEFAULT_STUDY_ID):
                plan = _explain(s, stmt)
                ms = float(plan["Execution Time"])
                top = plan["Plan"]
                buffers = top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0)
                rows = _example_rows(top)
                whole = rows > n_ex / 2 and not name.startswith("count")
                flag = "  <-- reads the whole example table" if whole else ""
                if flag:
                    over.append(f"{url} {name}")
                worst = max(worst, ms)
                print(f"{(url + ' ' + name)[:70]:70s} {ms:8.1f} {buffers:8d} {rows:13,d}{flag}")
    print(f"slowest statement {worst:.1f} ms; {len(over)} read the whole example table")
    print(load_note(load_start))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
