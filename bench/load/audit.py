"""The audit after a run: no duplicate vote, nothing acknowledged lost, no Example over-served,
no self-validation, the queue's counters exact.

Only this run's votes (those cast through a lease) and their Examples are read into Python;
the checks over whole tables run in the database. On a 100x history (3.9 million votes,
1.3 million Examples) loading every row as an ORM object was most of the bench's 9.4 GB.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from bench.load.validators import (
    Stats,
)

# --- checks -----------------------------------------------------------------------------------


def check(url: str, stats: Stats) -> list[str]:
    from sqlalchemy import func
    from sqlalchemy import select as sa_select
    from sqlmodel import Session, col

    from vsr_core.agreement import is_decided
    from vsr_core.db import make_engine
    from vsr_core.models import Vote
    from vsr_core.studies.settings import load_study_config
    from webapp.validate.audit import audit_counters

    problems: list[str] = []
    engine = make_engine(url)
    with Session(engine) as s:
        config = load_study_config(s)
        total = s.execute(sa_select(func.count()).select_from(Vote)).scalar_one()
        duplicated = s.execute(
            sa_select(func.count()).select_from(
                sa_select(col(Vote.example_id))
                .group_by(col(Vote.example_id), col(Vote.worker_id))
                .having(func.count() > 1)
                .subquery()
            )
        ).scalar_one()
        if duplicated:
            problems.append(f"{duplicated} duplicate (example, worker) votes")
        # Votes cast through the queue (a lease); imported history (bench.load --history) has
        # none and keeps the release's own shapes (some authors validated their own captions,
        # some Examples have six votes), which are not this run's doing.
        served = s.execute(
            sa_select(
                col(Vote.id),
                col(Vote.example_id),
                col(Vote.worker_id),
                col(Vote.value),
                col(Vote.assignment_id),
            )
            .where(col(Vote.assignment_id).is_not(None))
            .order_by(col(Vote.id))
        ).all()
        by_id = {v.id: v for v in served}
        lost = [
            a
            for a in stats.acked
            if a[0] not in by_id or by_id[a[0]].assignment_id != a[1] or by_id[a[0]].value != a[2]
        ]
        if lost:
            problems.append(f"{len(lost)} acknowledged votes missing or changed, e.g. {lost[:3]}")
        examples = _examples(s, {v.example_id for v in served})
        own = [v.id for v in served if examples[v.example_id].author_id == v.worker_id]
        if own:
            problems.append(f"{len(own)} votes by the Example's own author")
        per_example: dict[int, list[Any]] = defaultdict(list)
        for v in served:  # in id order
            per_example[v.example_id].append(v)
        over = 0
        for ex_id, vs in per_example.items():
            ex = examples[ex_id]
            if ex.is_gold:
                continue
            target = ex.target_votes or config.votes_per_example
            maximum = max(target, config.max_votes_per_example)
            if len(vs) > maximum:
                over += 1
            elif len(vs) > target:
                first = vs[:target]
                agree = sum(v.value == ex.label for v in first)
                if is_decided(
                    agree,
                    target,
                    max_votes=maximum,
                    min_votes=target,
                    threshold=config.keep_threshold,
                    method=config.decide_method,  # type: ignore[arg-type]
                    confidence=config.decide_confidence,
                ):
                    over += 1
        if over:
            problems.append(f"{over} Examples over-served")
        mismatches = audit_counters(s)
        if mismatches:
            problems.append(f"{len(mismatches)} queue counter mismatches, e.g. {mismatches[:3]}")
        dist = Counter(len(vs) for ex_id, vs in per_example.items() if not examples[ex_id].is_gold)
        print(
            f"  votes in DB: {total} ({len(served)} through the queue)  "
            f"acknowledged: {len(stats.acked)}  "
            f"votes per Example: {dict(sorted(dist.items()))}"
        )
    engine.dispose()
    return problems


def _examples(session: Any, ids: set[int]) -> dict[int, Any]:
    """The columns the checks read of these Examples, in chunks of bounded size."""
    from sqlalchemy import select as sa_select
    from sqlmodel import col

    from vsr_core.models import Example

    wanted = sorted(ids)
    out: dict[int, Any] = {}
    for k in range(0, len(wanted), 5000):
        rows = session.execute(
            sa_select(
                col(Example.id),
                col(Example.author_id),
                col(Example.is_gold),
                col(Example.target_votes),
                col(Example.label),
            ).where(col(Example.id).in_(wanted[k : k + 5000]))
        ).all()
        out.update((r.id, r) for r in rows)
    return out
