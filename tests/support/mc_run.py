"""A matching run stored as `vsr match --report` stores one, with items whose distractors no
validator has judged, over real-shaped native annotations (tests.vsr_dataset.test_export)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.vsr_dataset.test_export import seed_native
from vsr_core.models import Example, MatchRun, McItem

# The run's own figure, as `vsr match --report` stores it; no export can measure exactly this.
RUN_FIGURE: dict[str, Any] = {"name": "run_only_model", "accuracy": 0.777, "ci95": [0.7, 0.8]}
RUN_N_TEST = 9


def unvalidated_run(engine: Engine) -> int:
    """A run whose items sit in the part build-dataset's split gives their truths, as
    matching makes them (none validated: its negatives were never judged)."""
    from vsr_dataset.match_splits import export_split_mapping

    with Session(engine) as session:
        seed_native(session, n_annotations=40)
    mapping = export_split_mapping(engine, 2 / 3, 0)
    with Session(engine) as session:
        exs = [
            e for e in session.exec(select(Example).order_by(col(Example.id))) if e.id in mapping
        ]
        run = MatchRun(
            params={"h": 1.0, "k": 3},
            diagnostics={
                "chance": 0.25,
                "strongest_adversary": RUN_FIGURE["name"],
                "answer_only_adversaries": {
                    "n_test": RUN_N_TEST,
                    "strongest": RUN_FIGURE,
                    "measured_on": "mc_unvalidated",
                },
            },
        )
        session.add(run)
        session.flush()
        assert run.id is not None
        for ex in exs:
            assert ex.id is not None
            others = [e for e in exs if e.relation != ex.relation][:3]
            session.add(
                McItem(
                    run_id=run.id,
                    query_example_id=ex.id,
                    split=mapping[ex.id],
                    choices=[ex.caption] + [o.caption for o in others],
                    answer_index=0,
                    relations=[ex.relation] + [o.relation for o in others],
                    distractor_example_ids=[o.id for o in others],
                )
            )
        session.commit()
        return run.id
