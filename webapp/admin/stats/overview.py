"""The overview page's figures: one study's progress (pairs, Examples, kept and rejected,
batches, leases, members, jobs) and its votes and captions per hour."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import case, func, select
from sqlmodel import Session

from vsr_core.kept import KeptCounts, kept_counts
from vsr_core.models import ACTIVE_JOB_STATUSES, DEFAULT_STUDY_ID, LeaseStatus
from vsr_core.standing import blocked_clause, flagged_clause, study_members
from vsr_core.studies.settings import StudyConfig
from vsr_core.tables import ANNOTATION, ASSIGNMENT, BATCH, EXAMPLE, IMAGE_PAIR, JOB, VOTE, WORKER
from vsr_core.types import utcnow
from webapp.admin.stats.label_models import rule_fit
from webapp.admin.stats.quality import negatives_check
from webapp.admin.stats.shared import MACHINE, example_agreement

PAIR_STATUSES = ("available", "leased", "annotated", "skipped", "retired")


def _kept_histogram(
    session: Session, cfg: StudyConfig, study_id: int = DEFAULT_STUDY_ID
) -> tuple[KeptCounts, int, int]:
    """Kept counts, decided Examples and votes from one GROUP BY pass over the Examples."""
    ea = example_agreement(cfg, study_id=study_id)
    keys = (ea.c.agree, ea.c.n, ea.c.adjudication, ea.c.model_agrees)
    rows = [
        (int(a), int(n), int(c), adj, model, int(d or 0))
        for a, n, adj, model, c, d in session.connection().execute(
            select(*keys, func.count(), func.sum(ea.c.decided)).group_by(*keys)
        )
    ]
    counts = kept_counts((row[:5] for row in rows), cfg.keep_threshold)
    return counts, sum(r[5] for r in rows), sum(r[1] * r[2] for r in rows)


def overview(
    session: Session,
    cfg: StudyConfig,
    study_id: int = DEFAULT_STUDY_ID,
    counted: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One study's progress; the workers KPI counts the study's members (``study_members``);
    blocked and flagged as this study sees them (vsr_core.standing). ``counted``:
    ``counted_figures`` computed earlier (the dashboard caches them: they read every
    Example of the study); pairs, batches, leases and jobs are always read now."""
    conn = session.connection()
    pairs = {s: 0 for s in PAIR_STATUSES}
    for status, n in conn.execute(
        select(IMAGE_PAIR.c.status, func.count())
        .where(IMAGE_PAIR.c.study_id == study_id)
        .group_by(IMAGE_PAIR.c.status)
    ):
        pairs[str(status)] = int(n)
    batches: dict[str, dict[str, int]] = {"generate": {}, "validate": {}}
    for kind, status, n in conn.execute(
        select(BATCH.c.kind, BATCH.c.status, func.count())
        .where(BATCH.c.study_id == study_id)
        .group_by(BATCH.c.kind, BATCH.c.status)
    ):
        batches.setdefault(str(kind), {})[str(status)] = int(n)
    now = utcnow()
    active_leases = conn.execute(
        select(func.count())
        .select_from(ASSIGNMENT.join(BATCH, BATCH.c.id == ASSIGNMENT.c.batch_id))
        .where(
            ASSIGNMENT.c.status == LeaseStatus.active,
            ASSIGNMENT.c.lease_expires_at > now,
            BATCH.c.study_id == study_id,
        )
    ).scalar_one()
    jobs_running = conn.execute(
        select(func.count())
        .select_from(JOB)
        .where(JOB.c.status.in_(ACTIVE_JOB_STATUSES), JOB.c.study_id == study_id)
    ).scalar_one()
    return {
        "pairs": pairs,
        "pairs_total": sum(pairs.values()),
        **(counted if counted is not None else counted_figures(session, cfg, study_id)),
        "batches_open": sum(b.get("open", 0) for b in batches.values()),
        "batches_finished": sum(b.get("completed", 0) for b in batches.values()),
        "batches": batches,
        "active_leases": int(active_leases),
        "jobs_running": int(jobs_running),
        "generated_at": now.isoformat(timespec="seconds"),
    }


def counted_figures(
    session: Session, cfg: StudyConfig, study_id: int = DEFAULT_STUDY_ID
) -> dict[str, Any]:
    """The overview's figures that read every Example (or worker) of the study: Examples by
    origin, votes, decided, kept and rejected, members, skipped captions; and when."""
    conn = session.connection()
    origins = {
        str(o): int(n)
        for o, n in conn.execute(
            select(EXAMPLE.c.origin, func.count())
            .where(EXAMPLE.c.study_id == study_id)
            .group_by(EXAMPLE.c.origin)
        )
    }
    counts, decided, votes = _kept_histogram(session, cfg, study_id)
    total = counts.examples
    workers = conn.execute(
        select(
            func.count(),
            func.coalesce(
                func.sum(
                    case((blocked_clause(WORKER.c.id, study_id, WORKER.c.blocked), 1), else_=0)
                ),
                0,
            ),
            func.coalesce(
                func.sum(
                    case((flagged_clause(WORKER.c.id, study_id, WORKER.c.flagged), 1), else_=0)
                ),
                0,
            ),
        ).where(study_members(study_id))
    ).one()
    skipped_annotations = conn.execute(
        select(func.count())
        .select_from(ANNOTATION.join(IMAGE_PAIR, IMAGE_PAIR.c.id == ANNOTATION.c.pair_id))
        .where(ANNOTATION.c.skip_reason.is_not(None), IMAGE_PAIR.c.study_id == study_id)
    ).scalar_one()
    return {
        "examples": total,
        "examples_by_origin": origins,
        "votes": votes,
        "decided": decided,
        "undecided": total - decided,
        "voted": counts.voted,
        "unvoted": counts.unvoted,
        "kept": counts.kept,
        "rejected": counts.rejected,
        "excluded": counts.excluded,
        "adjudicated": counts.adjudicated,
        "by_model": counts.by_model,
        "keep_rule": cfg.keep_rule,
        "fit": rule_fit(session, cfg, study_id),
        # Kept or rejected while the queue still wants votes: the decision may still change.
        "provisional": max(0, counts.judged - decided),
        "skipped_annotations": int(skipped_annotations),
        # Counted apart from every figure above, as the export writes them apart.
        "machine_negatives": negatives_check(session, cfg, study_id)["machine"]
        if origins.get(MACHINE)
        else {"examples": 0, "voted": 0, "rejected": 0, "rate": None},
        "workers": int(workers[0]),
        "workers_blocked": int(workers[1]),
        "workers_flagged": int(workers[2]),
        "counted_at": utcnow().isoformat(timespec="seconds"),
    }


def _hour_bucket(session: Session, column: Any) -> Any:
    if session.get_bind().dialect.name == "postgresql":
        return func.to_char(func.date_trunc("hour", column), "YYYY-MM-DD HH24:00")
    return func.strftime("%Y-%m-%d %H:00", column)


def throughput(
    session: Session, hours: int = 48, study_id: int = DEFAULT_STUDY_ID
) -> dict[str, Any]:
    """The study's votes and captions per hour over the last ``hours`` hours (UTC)."""
    now = utcnow()
    since = (now - timedelta(hours=hours - 1)).replace(minute=0, second=0, microsecond=0)
    labels = [(since + timedelta(hours=i)).strftime("%Y-%m-%d %H:00") for i in range(hours)]
    series: dict[str, list[int]] = {}
    conn = session.connection()
    in_study = {
        "votes": VOTE.c.example_id.in_(select(EXAMPLE.c.id).where(EXAMPLE.c.study_id == study_id)),
        "captions": ANNOTATION.c.pair_id.in_(
            select(IMAGE_PAIR.c.id).where(IMAGE_PAIR.c.study_id == study_id)
        ),
    }
    for name, model in (("votes", VOTE), ("captions", ANNOTATION)):
        bucket = _hour_bucket(session, model.c.created_at)
        rows = conn.execute(
            select(bucket.label("h"), func.count())
            .where(model.c.created_at >= since, in_study[name])
            .group_by(bucket)
        ).all()
        got = {str(h): int(n) for h, n in rows}
        series[name] = [got.get(lbl, 0) for lbl in labels]
    return {"hours": labels, **series}
