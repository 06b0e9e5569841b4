"""The workers page's figures: per worker of the study, what they wrote and how they voted,
their pace (median seconds per answer, flagged when implausibly fast), and their names."""

from __future__ import annotations

import statistics
from typing import Any

from sqlalchemy import Float, and_, case, cast, func, or_, select, true
from sqlmodel import Session

from vsr_core.models import DEFAULT_STUDY_ID, Worker
from vsr_core.standing import study_members
from vsr_core.studies.settings import StudyConfig
from vsr_core.tables import (
    ANNOTATION,
    EXAMPLE,
    IMAGE_PAIR,
    INVITE_TOKEN,
    VOTE,
    WORKER,
    WORKER_STANDING,
)
from webapp.admin.stats.shared import invite_labels


def worker_table(
    session: Session,
    cfg: StudyConfig,
    *,
    offset: int = 0,
    limit: int | None = 100,
    order: str = "votes",
    only: int | None = None,
    study_id: int = DEFAULT_STUDY_ID,
    paced: bool = True,
) -> tuple[list[dict[str, Any]], int]:
    """Per worker of the study (``study_members``; ``only``: that worker, member or not):
    Examples written, skips, votes, agreement with the majority, gold accuracy, all counted
    over the study's work only. ``limit`` None: every worker. ``paced``: with each worker's
    median seconds per answer (``add_pace``; reads their votes, so only for one page)."""
    conn = session.connection()
    # Each Example's votes and True votes from its own counters (kept equal to the vote
    # table in the statement that stores a vote, as example_agreement reads them), not by
    # grouping every vote a second time: at 100x that grouping was 3.9 million rows.
    n = EXAMPLE.c.queue_votes
    t = case((EXAMPLE.c.label.is_(True), EXAMPLE.c.queue_agree), else_=n - EXAMPLE.c.queue_agree)
    # A vote agrees with the majority of its Example's votes; ties have no majority.
    agrees = case(
        (and_(VOTE.c.value.is_(True), 2 * t > n), 1),
        (and_(VOTE.c.value.is_(False), 2 * t < n), 1),
        else_=0,
    )
    has_majority = case((2 * t != n, 1), else_=0)
    gold_target = func.coalesce(EXAMPLE.c.gold_label, EXAMPLE.c.label)
    gold_hit = case((and_(EXAMPLE.c.is_gold.is_(True), VOTE.c.value == gold_target), 1), else_=0)
    gold_seen = case((EXAMPLE.c.is_gold.is_(True), 1), else_=0)
    here = WORKER_STANDING.alias("here")
    votes_q = (
        select(
            VOTE.c.worker_id.label("worker_id"),
            func.count().label("votes"),
            func.sum(agrees).label("agree"),
            func.sum(has_majority).label("with_majority"),
            func.sum(gold_seen).label("gold_seen"),
            func.sum(gold_hit).label("gold_hit"),
            func.max(VOTE.c.created_at).label("last_vote"),
        )
        .select_from(VOTE)
        .join(EXAMPLE, EXAMPLE.c.id == VOTE.c.example_id)
        .where(
            VOTE.c.worker_id == only if only is not None else true(), EXAMPLE.c.study_id == study_id
        )
        .group_by(VOTE.c.worker_id)
        .subquery("wv")
    )
    ann_q = (
        select(
            ANNOTATION.c.worker_id.label("worker_id"),
            func.sum(case((ANNOTATION.c.skip_reason.is_not(None), 1), else_=0)).label("skips"),
        )
        .select_from(ANNOTATION.join(IMAGE_PAIR, IMAGE_PAIR.c.id == ANNOTATION.c.pair_id))
        .where(
            IMAGE_PAIR.c.study_id == study_id,
            ANNOTATION.c.worker_id == only if only is not None else true(),
        )
        .group_by(ANNOTATION.c.worker_id)
        .subquery("wa")
    )
    # Captions written: one caption (Annotation) gives two Examples (its True and its False
    # image), so count distinct annotations; an imported Example without one is one caption.
    ex_q = (
        select(
            EXAMPLE.c.author_id.label("worker_id"),
            (
                func.count(func.distinct(EXAMPLE.c.annotation_id))
                + func.sum(case((EXAMPLE.c.annotation_id.is_(None), 1), else_=0))
            ).label("written"),
            func.count().label("examples_written"),
        )
        .where(
            EXAMPLE.c.author_id.is_not(None) if only is None else EXAMPLE.c.author_id == only,
            EXAMPLE.c.study_id == study_id,
        )
        .group_by(EXAMPLE.c.author_id)
        .subquery("we")
    )
    # In-house workers are named by their invite's label ("invite-1" tells an admin nothing).
    inv_q = invite_labels().subquery("wi")
    votes = func.coalesce(votes_q.c.votes, 0)
    captions = func.coalesce(ex_q.c.written, 0)
    agree_rate = cast(votes_q.c.agree, Float) / func.nullif(votes_q.c.with_majority, 0)
    gold_rate = cast(votes_q.c.gold_hit, Float) / func.nullif(votes_q.c.gold_seen, 0)
    order_by = {
        "votes": votes.desc(),
        "captions": captions.desc(),
        "agreement": agree_rate.asc(),
        "gold": gold_rate.asc(),
        "id": WORKER.c.id,
    }.get(order, votes.desc())
    base = (
        select(
            WORKER.c.id,
            WORKER.c.source,
            WORKER.c.external_id,
            inv_q.c.label.label("invite_label"),
            WORKER.c.roles,
            # Their standing in this study (vsr_core.standing): its own, or every study's.
            or_(WORKER.c.blocked, func.coalesce(here.c.blocked, False)).label("blocked"),
            or_(WORKER.c.flagged, func.coalesce(here.c.flagged, False)).label("flagged"),
            func.coalesce(here.c.flag_reason, WORKER.c.flag_reason).label("flag_reason"),
            captions.label("captions"),
            func.coalesce(ex_q.c.examples_written, 0).label("examples_written"),
            func.coalesce(ann_q.c.skips, 0).label("skips"),
            votes.label("votes"),
            agree_rate.label("agreement"),
            votes_q.c.gold_seen,
            gold_rate.label("gold_accuracy"),
            votes_q.c.last_vote,
        )
        .select_from(WORKER)
        .outerjoin(votes_q, votes_q.c.worker_id == WORKER.c.id)
        .outerjoin(ann_q, ann_q.c.worker_id == WORKER.c.id)
        .outerjoin(ex_q, ex_q.c.worker_id == WORKER.c.id)
        .outerjoin(inv_q, inv_q.c.worker_id == WORKER.c.id)
        .outerjoin(here, and_(here.c.worker_id == WORKER.c.id, here.c.study_id == study_id))
    )
    base = base.where(WORKER.c.id == only if only is not None else study_members(study_id))
    rows = (
        conn.execute(base.order_by(order_by, WORKER.c.id).offset(offset).limit(limit))
        .mappings()
        .all()
    )
    out = [dict(r) for r in rows]
    if only is not None:
        total = 1
    elif limit is None and offset == 0:
        total = len(out)
    else:
        total = conn.execute(
            select(func.count()).select_from(WORKER).where(study_members(study_id))
        ).scalar_one()
    for r in out:
        r["name"] = r["invite_label"] or r["external_id"]
    return (add_pace(session, cfg, out, study_id) if paced else out), int(total)


def add_pace(
    session: Session, cfg: StudyConfig, rows: list[dict[str, Any]], study_id: int
) -> list[dict[str, Any]]:
    """Copies of ``rows`` (one page of ``worker_table``) with each worker's median seconds per
    vote and per caption, and why that pace is implausible (``too_fast``), if it is."""
    out = [dict(r) for r in rows]
    medians = median_seconds(session, [r["id"] for r in out], study_id)
    for r in out:
        vote_s, caption_s, n_timed_votes, n_timed_captions = medians.get(
            r["id"], (None, None, 0, 0)
        )
        r["median_vote_s"], r["median_caption_s"] = vote_s, caption_s
        r["too_fast"] = too_fast(cfg, vote_s, n_timed_votes, caption_s, n_timed_captions)
    return out


# Fewer timed answers than this say nothing about a worker's pace.
FAST_MIN_ANSWERS = 5


def too_fast(
    cfg: StudyConfig,
    vote_s: float | None,
    n_votes: int,
    caption_s: float | None,
    n_captions: int,
) -> str | None:
    """Why a worker's pace is implausible (median below the study's threshold), or None."""
    reasons = []
    if n_votes >= FAST_MIN_ANSWERS and vote_s is not None and vote_s < cfg.fast_vote_seconds:
        reasons.append(f"median {vote_s:.1f} s per vote (< {cfg.fast_vote_seconds:g} s)")
    slow_enough = caption_s is None or caption_s >= cfg.fast_caption_seconds
    if n_captions >= FAST_MIN_ANSWERS and not slow_enough:
        reasons.append(f"median {caption_s:.1f} s per caption (< {cfg.fast_caption_seconds:g} s)")
    return "; ".join(reasons) or None


def median_seconds(
    session: Session, worker_ids: list[int], study_id: int = DEFAULT_STUDY_ID
) -> dict[int, tuple[float | None, float | None, int, int]]:
    """Median seconds per vote and per caption for these workers, and how many timed votes
    and captions they are taken over.

    Medians are not portable SQL (SQLite has no percentile function), so the durations of one
    page of workers are fetched and the medians taken in Python.
    """
    if not worker_ids:
        return {}
    conn = session.connection()
    out: dict[int, tuple[float | None, float | None, int, int]] = {}
    per: dict[str, dict[int, list[int]]] = {"v": {}, "a": {}}
    # The study's votes and captions only, by a join from these workers' rows: an IN over
    # the study's Example ids made PostgreSQL hash all 1.28 million of them at 100x.
    in_study = {
        "v": (VOTE.join(EXAMPLE, EXAMPLE.c.id == VOTE.c.example_id), EXAMPLE.c.study_id),
        "a": (
            ANNOTATION.join(IMAGE_PAIR, IMAGE_PAIR.c.id == ANNOTATION.c.pair_id),
            IMAGE_PAIR.c.study_id,
        ),
    }
    for key, model in (("v", VOTE), ("a", ANNOTATION)):
        joined, study_col = in_study[key]
        rows = conn.execute(
            select(model.c.worker_id, model.c.duration_ms)
            .select_from(joined)
            .where(
                model.c.worker_id.in_(worker_ids),
                model.c.duration_ms.is_not(None),
                study_col == study_id,
            )
        )
        for wid, ms in rows:
            per[key].setdefault(int(wid), []).append(int(ms))
    for wid in worker_ids:
        v = per["v"].get(wid)
        a = per["a"].get(wid)
        out[wid] = (
            statistics.median(v) / 1000 if v else None,
            statistics.median(a) / 1000 if a else None,
            len(v or ()),
            len(a or ()),
        )
    return out


def worker_names(session: Session, workers: list[Worker]) -> dict[int, str]:
    """Each worker's name as the Workers page gives it: their invite's label, else their id
    on the platform (``invite-N`` for an invite)."""
    ids = [w.id for w in workers if w.id is not None]
    labels: dict[int, str] = {}
    if ids:
        stmt = invite_labels().where(INVITE_TOKEN.c.worker_id.in_(ids))
        labels = {int(r.worker_id): str(r.label) for r in session.connection().execute(stmt)}
    return {w.id: labels.get(w.id, w.external_id) for w in workers if w.id is not None}
