"""The audit after a run: no duplicate vote, nothing acknowledged lost, no Example over-served,
no self-validation, the queue's counters exact."""

from __future__ import annotations

from collections import Counter, defaultdict

from bench.load.validators import (
    Stats,
)

# --- checks -----------------------------------------------------------------------------------


def check(url: str, stats: Stats) -> list[str]:
    from sqlmodel import Session, select

    from vsr_core.agreement import is_decided
    from vsr_core.db import make_engine
    from vsr_core.models import Example, Vote
    from vsr_core.studies.settings import load_study_config
    from webapp.validate.audit import audit_counters

    problems: list[str] = []
    engine = make_engine(url)
    with Session(engine) as s:
        config = load_study_config(s)
        votes = s.exec(select(Vote)).all()
        examples = {e.id: e for e in s.exec(select(Example))}
        by_id = {v.id: v for v in votes}
        dup = Counter((v.example_id, v.worker_id) for v in votes)
        if any(n > 1 for n in dup.values()):
            problems.append(f"{sum(n > 1 for n in dup.values())} duplicate (example, worker) votes")
        lost = [
            a
            for a in stats.acked
            if a[0] not in by_id or by_id[a[0]].assignment_id != a[1] or by_id[a[0]].value != a[2]
        ]
        if lost:
            problems.append(f"{len(lost)} acknowledged votes missing or changed, e.g. {lost[:3]}")
        # Votes cast through the queue (a lease); imported history (bench.load --history) has
        # none and keeps the release's own shapes (some authors validated their own captions,
        # some Examples have six votes), which are not this run's doing.
        served = [v for v in votes if v.assignment_id is not None]
        own = [v.id for v in served if examples[v.example_id].author_id == v.worker_id]
        if own:
            problems.append(f"{len(own)} votes by the Example's own author")
        per_example: dict[int, list[Vote]] = defaultdict(list)
        for v in sorted(served, key=lambda v: v.id or 0):
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
            f"  votes in DB: {len(votes)} ({len(served)} through the queue)  "
            f"acknowledged: {len(stats.acked)}  "
            f"votes per Example: {dict(sorted(dist.items()))}"
        )
    engine.dispose()
    return problems
