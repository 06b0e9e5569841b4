"""The candidate query's plan on PostgreSQL at 10x the data (issue 17): with a large settled,
imported history below the open Examples, the planner must still walk ix_example_open in id
order to the first free Example (a LIMIT on an ordered index scan), not read and sort every
open Example per lease. The fix: ``id + 0 >= floor`` in webapp.validate.statements (the id
histogram is the whole table's) and the extended statistics of migration 0008 (open Examples
are all of the votable origins)."""

from __future__ import annotations

import pytest
from sqlalchemy import insert
from sqlalchemy.engine import Engine

from vsr_core.models import Example, Image, Worker
from vsr_core.study import StudyConfig
from vsr_core.types import utcnow
from webapp.validate.rules import room_params
from webapp.validate.statements import statements_for

SETTLED = 60_000  # imported history, the shape of 10x VSR below the open Examples
OPEN = 2_000


def _fill(engine: Engine) -> tuple[int, int]:
    now = utcnow()
    with engine.begin() as conn:
        worker = conn.execute(insert(Worker.__table__).returning(Worker.__table__.c.id), {  # type: ignore[attr-defined]
            "source": "prolific", "external_id": "W-plan", "roles": ["validate"],
            "blocked": False, "flagged": False, "created_at": now,
        }).scalar_one()
        conn.execute(insert(Image.__table__), [  # type: ignore[attr-defined]
            {"coco_id": i + 1, "file_name": f"{i + 1:012d}.jpg", "coco_split": "train2017",
             "width": 640, "height": 480} for i in range(1000)
        ])
        image = conn.exec_driver_sql("SELECT min(id) FROM image").scalar_one()

        def rows(n: int, origin: str, open_: bool) -> list[dict[str, object]]:
            return [{
                "image_id": image + i % 1000, "caption": "The cat is on the bed.",
                "relation": "on", "subj": "cat", "obj": "bed", "label": i % 2 == 0,
                "origin": origin, "is_gold": False, "created_at": now,
                "queue_open": open_, "queue_settled": not open_,
                "queue_votes": 0 if open_ else 3, "queue_agree": 0 if open_ else 3,
                "queue_leases": 0,
            } for i in range(n)]

        conn.execute(insert(Example.__table__), rows(SETTLED, "imported", False))  # type: ignore[attr-defined]
        conn.execute(insert(Example.__table__), rows(OPEN, "human", True))  # type: ignore[attr-defined]
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
    params = {"q_worker": worker, "q_limit": 1, "q_floor": floor, "q_study": 1,
              **room_params(StudyConfig())}
    stmt = statements_for("postgresql").regular
    state = stmt.compile(dialect=engine.dialect).construct_expanded_state(params)
    with engine.connect() as conn:
        plan = "\n".join(conn.exec_driver_sql(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + state.statement,
            dict(state.parameters),
        ).scalars())
        conn.rollback()
    main = plan.split("SubPlan", 1)[0]  # the Example scan, not its subqueries
    assert "Index Scan using ix_example_open on example" in main, plan
    assert "Sort" not in main and "Bitmap" not in main, plan
    # The first open Example is free: one row visited, none filtered out.
    assert "Rows Removed by Filter" not in main, plan
