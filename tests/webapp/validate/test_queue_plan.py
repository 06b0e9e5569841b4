"""The candidate query's plan on PostgreSQL at 10x the data (docs/scaling.md): with a large settled,
imported history below the open Examples, the planner must still walk ix_example_open in id
order to the first free Example (a LIMIT on an ordered index scan), not read and sort every
open Example per lease. The fix: ``id + 0 >= floor`` in webapp.validate.statements (the id
histogram is the whole table's) and the extended statistics of migration 0008 (open Examples
are all of the votable origins)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from psycopg import sql as psql
from sqlalchemy import insert
from sqlalchemy.engine import Engine

from vsr_core.db import make_lean_engine
from vsr_core.studies.settings import StudyConfig
from vsr_core.tables import EXAMPLE, IMAGE, WORKER
from vsr_core.types import utcnow
from webapp.validate.rules import room_params
from webapp.validate.statements import statements_for

SETTLED = 60_000  # imported history, the shape of 10x VSR below the open Examples
OPEN = 2_000


def _fill(engine: Engine, settled: int = SETTLED) -> tuple[int, int]:
    now = utcnow()
    with engine.begin() as conn:
        worker = conn.execute(
            insert(WORKER).returning(WORKER.c.id),
            {
                "source": "prolific",
                "external_id": "W-plan",
                "roles": ["validate"],
                "blocked": False,
                "flagged": False,
                "created_at": now,
            },
        ).scalar_one()
        conn.execute(
            insert(IMAGE),
            [
                {
                    "coco_id": i + 1,
                    "file_name": f"{i + 1:012d}.jpg",
                    "coco_split": "train2017",
                    "width": 640,
                    "height": 480,
                }
                for i in range(1000)
            ],
        )
        image = conn.exec_driver_sql("SELECT min(id) FROM image").scalar_one()

        def rows(n: int, origin: str, open_: bool) -> list[dict[str, object]]:
            return [
                {
                    "image_id": image + i % 1000,
                    "caption": "The cat is on the bed.",
                    "relation": "on",
                    "subj": "cat",
                    "obj": "bed",
                    "label": i % 2 == 0,
                    "origin": origin,
                    "is_gold": False,
                    "created_at": now,
                    "queue_open": open_,
                    "queue_settled": not open_,
                    "queue_votes": 0 if open_ else 3,
                    "queue_agree": 0 if open_ else 3,
                    "queue_leases": 0,
                }
                for i in range(n)
            ]

        conn.execute(insert(EXAMPLE), rows(SETTLED, "imported", False))
        if settled > SETTLED:  # more of the same history, copied inside the database
            conn.exec_driver_sql(
                "INSERT INTO example (image_id, caption, relation, subj, obj, label, origin,"
                " is_gold, created_at, queue_open, queue_settled, queue_votes, queue_agree,"
                " queue_leases, study_id) SELECT e.image_id, e.caption, e.relation, e.subj,"
                " e.obj, e.label, e.origin, e.is_gold, e.created_at, e.queue_open,"
                " e.queue_settled, e.queue_votes, e.queue_agree, e.queue_leases, e.study_id"
                " FROM example e, generate_series(1, %(copies)s)",
                {"copies": settled // SETTLED - 1},
            )
        conn.execute(insert(EXAMPLE), rows(OPEN, "human", True))
        floor = conn.exec_driver_sql(
            "SELECT min(id) FROM example WHERE queue_open AND NOT is_gold"
        ).scalar_one()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")
    return worker, floor


def test_candidates_walk_the_open_index_in_order_at_10x(backend: str, engine: Engine) -> None:
    if backend != "postgresql":
        pytest.skip("a PostgreSQL planner question")
    worker, floor = _fill(engine)
    params = {
        "q_worker": worker,
        "q_limit": 1,
        "q_floor": floor,
        "q_boundary": 1,
        "q_study": 1,
        **room_params(StudyConfig()),
    }
    stmt = statements_for("postgresql").regular
    state = stmt.compile(dialect=engine.dialect).construct_expanded_state(params)
    with engine.connect() as conn:
        plan = "\n".join(
            conn.exec_driver_sql(
                "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + state.statement,
                dict(state.parameters),
            ).scalars()
        )
        conn.rollback()
    main = plan.split("SubPlan", 1)[0]  # the Example scan, not its subqueries
    assert "Index Scan using ix_example_open on example" in main, plan
    assert "Sort" not in main and "Bitmap" not in main, plan
    # The first open Example is free: one row visited, none filtered out.
    assert "Rows Removed by Filter" not in main, plan


def _generic_plan(engine: Engine, stmt: Any, params: dict[str, Any]) -> tuple[str, int, int]:
    """EXPLAIN of ``stmt`` prepared on a connection of the API pool's kind (one generic plan
    per statement, ``vsr_core.db.GENERIC_PLANS``), run 6 times as psycopg would; with the
    generic and custom plan counts PostgreSQL reports for it."""
    compiled = stmt.compile(dialect=engine.dialect)
    names: list[str] = []

    def positional(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    text = re.sub(r"%\((\w+)\)s", positional, compiled.string)
    values = compiled.construct_params(params)
    args = psql.SQL(", ").join(psql.Literal(values[name]) for name in names)
    lean = make_lean_engine(engine, 1)
    try:
        with lean.connect() as conn:
            cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            cur.execute(psql.SQL("PREPARE lease AS " + text.replace("%%", "%")))
            for _ in range(6):
                cur.execute(psql.SQL("EXPLAIN (COSTS OFF) EXECUTE lease({})").format(args))
                plan = "\n".join(row[0] for row in cur.fetchall())
            cur.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE name = 'lease'"
            )
            generic, custom = cur.fetchone()  # type: ignore[misc]
            conn.rollback()
    finally:
        lean.dispose()
    return plan, generic, custom


@pytest.mark.parametrize("settled", [SETTLED, 10 * SETTLED], ids=["10x", "100x"])
def test_the_lease_statement_keeps_one_generic_plan_that_walks_in_order(
    backend: str, engine: Engine, settled: int
) -> None:
    """The hot path's lease statement, planned once per connection for any values (docs/scaling.md:
    planning it on every run was a fifth of PostgreSQL's CPU per round trip), still walks
    ix_example_open in id order at 10x, as the plan made for the values does; and with a
    history so large that the votable origins look rare (600,000 imported rows, 2,000
    open: the planner read and sorted every open Example at 100x VSR when it could combine
    the index with ix_example_origin, migration 0027)."""
    if backend != "postgresql":
        pytest.skip("a PostgreSQL planner question")
    worker, floor = _fill(engine, settled)
    now = utcnow()
    params = {
        "q_worker": worker,
        "q_floor": floor,
        "q_boundary": 1,
        "q_study": 1,
        "q_batch": 1,
        "q_now": now,
        "q_expires": now,
        **room_params(StudyConfig()),
    }
    plan, generic, custom = _generic_plan(
        engine, statements_for("postgresql").lease_regular, params
    )
    assert (generic, custom) == (6, 0), plan
    cand = plan.split("CTE taken", 1)[0].split("SubPlan", 1)[0]  # the Example walk itself
    assert "Limit" in cand and "Index Scan using ix_example_open on example" in cand, plan
    assert "Sort" not in cand and "Bitmap" not in cand, plan
