"""EXPLAIN ANALYZE of the validation queue's statements (webapp/validate/statements.py) on a
database bench.load left behind (``--keep-db``), for the validator with the most queue votes:
the plan, the time PostgreSQL reports, and the buffers each statement touched. The writing
statements run inside a transaction that is rolled back.

    python -m bench.load --history 10 --keep-db        # a 10x database after a run
    python -m bench.load.explain postgresql+psycopg://postgres@127.0.0.1:5432/vsr_load_...
    # (its name: psql -c "SELECT datname FROM pg_database WHERE datname LIKE 'vsr_load%'";
    #  drop it afterwards: DROP DATABASE ... WITH (FORCE))
    python -m bench.load.explain URL --plans            # the whole plans, not just the times
    python -m bench.load.explain URL --custom           # plans made for the values

The plans are the generic ones the server's connections run (vsr_core.db.GENERIC_PLANS:
planned once per prepared statement, whatever the values), unless ``--custom``.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import timedelta
from typing import Any

import psycopg

PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def explain(
    c: Any, sql: str, values: dict[str, Any], types: dict[str, str], custom: bool
) -> list[str]:
    """EXPLAIN (ANALYZE, BUFFERS) of ``sql``. Generic: as the server's connections run it,
    a prepared statement planned once for any values (EXPLAIN of a statement with
    parameters plans it for their values instead); the values are passed to EXECUTE."""
    if custom:
        return list(
            c.exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS, SETTINGS OFF) " + sql, values)
            .scalars()
            .all()
        )
    names: list[str] = []

    def number(m: re.Match[str]) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    c.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
    numbered = PLACEHOLDER.sub(number, sql)
    declared = ", ".join(types[n] for n in names)
    c.exec_driver_sql(f"PREPARE bench_explain ({declared}) AS {numbered}")
    # EXECUTE takes no bind parameters inside EXPLAIN: the values as literals (psycopg's own
    # quoting, client side).
    raw = c.connection.driver_connection
    args = ", ".join(f"%({n})s" for n in names)
    query = psycopg.ClientCursor(raw).mogrify(
        f"EXPLAIN (ANALYZE, BUFFERS, SETTINGS OFF) EXECUTE bench_explain({args})", values
    )
    with raw.cursor() as cur:
        cur.execute(query)
        plan = [row[0] for row in cur.fetchall()]
        cur.execute("DEALLOCATE bench_explain")
    return plan


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("--plans", action="store_true", help="print every plan in full")
    ap.add_argument(
        "--custom",
        action="store_true",
        help="plans made for the values (by default the generic plans the server's pool "
        "runs: vsr_core.db.GENERIC_PLANS)",
    )
    args = ap.parse_args()

    from sqlalchemy import func, select, text
    from sqlmodel import col

    from vsr_core.db import make_engine
    from vsr_core.models import DEFAULT_STUDY_ID, Assignment, Example
    from vsr_core.studies.settings import StudyConfig
    from vsr_core.types import utcnow
    from webapp.validate.rules import decision_states, room_params
    from webapp.validate.statements import sibling_params, statements_for

    engine = make_engine(args.url)
    st = statements_for("postgresql")
    with engine.connect() as c:
        counts = {
            t: c.execute(text(f"SELECT count(*) FROM {t}")).scalar()
            for t in ("example", "vote", "assignment", "batch")
        }
        worker, batch = c.execute(
            select(Assignment.worker_id, func.max(Assignment.batch_id))  # type: ignore[call-overload]
            .group_by(Assignment.worker_id)
            .order_by(func.count().desc())
            .limit(1)
        ).one()
        lease = c.execute(
            select(func.max(Assignment.id)).where(Assignment.worker_id == worker)
        ).scalar()
        # An active lease of that validator, for the vote in one statement (vote_on_active).
        active = c.execute(
            select(func.max(Assignment.id)).where(
                col(Assignment.worker_id) == worker, col(Assignment.status) == "active"
            )
        ).scalar()
        open_ex = (
            c.execute(
                select(func.min(Example.id)).where(
                    col(Example.queue_open).is_(True), col(Example.is_gold).is_(False)
                )
            ).scalar()
            or 0
        )
        print(
            f"database: {counts}; validator {worker} (batch {batch}, last lease {lease}); "
            f"open floor {open_ex}"
        )
        now = utcnow()
        config = StudyConfig()
        room = room_params(config)
        states = decision_states(config)
        params: dict[str, dict[str, Any]] = {
            "open_floor": {"q_study": DEFAULT_STUDY_ID},
            "regular": {
                "q_worker": worker,
                "q_limit": 1,
                "q_floor": open_ex,
                "q_study": DEFAULT_STUDY_ID,
                **room,
                **sibling_params(),
            },
            "gold": {"q_worker": worker, "q_limit": 1, "q_study": DEFAULT_STUDY_ID},
            "batch_state": {"q_worker": worker, "q_study": DEFAULT_STUDY_ID},
            "lock_lease": {"q_lease": lease},
            "lease_regular": {
                "q_worker": worker,
                "q_limit": 1,
                "q_floor": open_ex,
                "q_study": DEFAULT_STUDY_ID,
                "q_batch": batch,
                "q_now": now,
                "q_expires": now + timedelta(minutes=10),
                **room,
                **sibling_params(),
            },
            "count_vote": {"q_id": open_ex, "q_value": True, "q_release": 1, **states},
            "vote_on_active": {
                "q_lease": active or lease,
                "q_worker": worker,
                "q_study": DEFAULT_STUDY_ID,
                "q_value": True,
                "q_now": now,
                "v_reference_frame": None,
                "v_duration_ms": 1200,
                **states,
            },
        }
        for name, p in params.items():
            stmt = getattr(st, name)
            # IN lists expanded and the bound values processed, as execution would.
            compiled = stmt.compile(dialect=engine.dialect)
            state = compiled.construct_expanded_state(p)
            sql, values = state.statement, dict(state.parameters)
            types = {
                compiled.bind_names[b]: b.type.compile(dialect=engine.dialect)
                for b in compiled.binds.values()
            }
            c.rollback()  # the writing statements' changes go with it
            try:
                rows = explain(c, sql, values, types, args.custom)
            finally:
                c.rollback()
            plan = "\n".join(rows)
            exec_ms = re.search(r"Execution Time: ([\d.]+) ms", plan)
            plan_ms = re.search(r"Planning Time: ([\d.]+) ms", plan)
            buffers = re.search(r"Buffers: shared hit=(\d+)(?: read=(\d+))?", plan)
            hits = f"{buffers.group(1)}+{buffers.group(2) or 0}" if buffers else "?"
            print(
                f"{name:14s} execution {exec_ms.group(1) if exec_ms else '?':>8s} ms  "
                f"planning {plan_ms.group(1) if plan_ms else '?':>7s} ms  "
                f"buffers hit+read {hits}"
            )
            if args.plans:
                print("  " + plan.replace("\n", "\n  "))
    engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
