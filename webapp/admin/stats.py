"""Dashboard figures, aggregated in SQL (GROUP BY) so pages stay fast on a full study.

Every function takes a Session (and the StudyConfig where the keep rule matters) and
returns plain dicts/lists for templates and JSON endpoints.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import Float, Table, and_, case, cast, exists, func, or_, select, true
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Subquery
from sqlmodel import Session

from vsr_core.agreement import as_fraction
from vsr_core.kept import KeptCounts, kept_counts
from vsr_core.models import (
    DEFAULT_STUDY_ID,
    Annotation,
    Assignment,
    Batch,
    Example,
    ImagePair,
    InviteToken,
    Job,
    LeaseStatus,
    MatchRun,
    McItem,
    Vote,
    Worker,
)
from vsr_core.study import StudyConfig
from vsr_core.types import utcnow

# Table objects (not the ORM classes): typed columns for SQL expressions.
ANN: Table = Annotation.__table__  # type: ignore[attr-defined]
ASG: Table = Assignment.__table__  # type: ignore[attr-defined]
BATCH: Table = Batch.__table__  # type: ignore[attr-defined]
EX: Table = Example.__table__  # type: ignore[attr-defined]
PAIR: Table = ImagePair.__table__  # type: ignore[attr-defined]
JOB: Table = Job.__table__  # type: ignore[attr-defined]
INVITE: Table = InviteToken.__table__  # type: ignore[attr-defined]
MC: Table = McItem.__table__  # type: ignore[attr-defined]
VOTE: Table = Vote.__table__  # type: ignore[attr-defined]
WORKER: Table = Worker.__table__  # type: ignore[attr-defined]

REVALIDATION = "revalidation"
PAIR_STATUSES = ("available", "leased", "annotated", "skipped", "retired")


def _conn(session: Session) -> Connection:
    return session.connection()


def study_members(study_id: int) -> Any:
    """A condition on the worker table: the worker took part in the study (a batch, a
    caption, an Example, a vote or a redeemed invite in it; imported authors and validators
    have no batch). A worker may be a member of several studies. Correlated EXISTS probes
    on the per-worker indexes stop at the first hit, so the cost grows with the number of
    workers, not of votes."""
    w = WORKER.c.id
    # "study_id + 0": SQLite would otherwise walk the whole study by its study_id index for
    # every worker instead of the worker's own rows (on the VSR release: 0.4 ms instead of
    # 32; PostgreSQL 18 ms instead of 45, a UNION of ids 38).
    return or_(
        exists().where(BATCH.c.worker_id == w, BATCH.c.study_id + 0 == study_id),
        exists().where(VOTE.c.worker_id == w, EX.c.id == VOTE.c.example_id,
                       EX.c.study_id == study_id),
        exists().where(EX.c.author_id == w, EX.c.study_id + 0 == study_id),
        exists().where(ANN.c.worker_id == w, PAIR.c.id == ANN.c.pair_id,
                       PAIR.c.study_id == study_id),
        exists().where(INVITE.c.worker_id == w, INVITE.c.study_id == study_id),
    )


def vote_counts(example_ids: Any = None) -> Subquery:
    """Per Example: number of votes ``n`` and of True votes ``t`` (optionally only for the
    Examples in ``example_ids``, a subquery)."""
    stmt = select(
        VOTE.c.example_id.label("example_id"),
        func.count().label("n"),
        func.sum(case((VOTE.c.value.is_(True), 1), else_=0)).label("t"),
    )
    if example_ids is not None:
        stmt = stmt.where(VOTE.c.example_id.in_(example_ids))
    return stmt.group_by(VOTE.c.example_id).subquery("vc")


def example_agreement(
    cfg: StudyConfig, *, with_revalidation: bool = False, where: list[Any] | None = None,
    study_id: int = DEFAULT_STUDY_ID,
) -> Subquery:
    """Per Example: votes, votes agreeing with its label, and decided / kept / unanimous flags.

    An Example is decided once the validation queue is done with it (``queue_open`` false:
    the study's adaptive rule, webapp.validate.queue) and it has at least its target number
    of votes (its own override or the study default). Kept / rejected follow
    ``vsr_core.kept``: kept when a share >= keep_threshold of the votes so far agree with its
    label (2 of 3, 3 of 4, 4 of 6; a 1-1 tie fails), rejected when it has votes and fails,
    whether or not the queue still wants more (then the decision is provisional).
    Re-validation copies (vsr_core.revalidation) are left out unless ``with_revalidation``: they
    are a study of the imported data, not more data. ``where``: conditions on Example columns;
    only those Examples' votes are counted (at 10x VSR, grouping all 390,000 votes to show one
    relation's 14,000 Examples cost most of the data page's time).
    """
    where = [EX.c.study_id == study_id, *(where or ())]  # one study's Examples only
    # Votes and agreeing votes from the Example's own counters, not by grouping the vote
    # table: every vote is counted on its Example in the same statement that stores it
    # (webapp.validate.statements.count_vote; the importer sets them too), so they are equal
    # (webapp.validate.audit checks it), and reading them is one pass over the Examples. At
    # 10x VSR, grouping 390,000 votes cost the overview ~400 ms of its ~480.
    n = EX.c.queue_votes
    agree = EX.c.queue_agree
    t = case((EX.c.label.is_(True), agree), else_=n - agree)
    target = func.coalesce(EX.c.target_votes, cfg.votes_per_example)
    # Decided = the validation queue wants no more votes for it (its adaptive rule, kept on
    # the row; imported Examples arrive settled), and it has its target number of votes.
    decided = and_(EX.c.queue_open.is_(False), n >= target, n > 0)
    # Exact integer comparison agree/n >= num/den, the same rule as vsr_core.agreement.is_kept.
    frac = as_fraction(cfg.keep_threshold)
    kept = and_(n > 0, agree * frac.denominator >= n * frac.numerator)
    return (
        select(
            EX.c.id.label("id"),
            EX.c.relation.label("relation"),
            EX.c.subj.label("subj"),
            EX.c.obj.label("obj"),
            EX.c.label.label("label"),
            EX.c.origin.label("origin"),
            EX.c.is_gold.label("is_gold"),
            n.label("n"),
            t.label("t"),
            agree.label("agree"),
            case((decided, 1), else_=0).label("decided"),
            case((kept, 1), else_=0).label("kept"),
            case((and_(n > 0, agree == n), 1), else_=0).label("unanimous"),
        )
        .select_from(EX)
        .where(true() if with_revalidation else EX.c.origin != REVALIDATION, *(where or ()))
        .subquery("ea")
    )


def data_version(session: Session) -> tuple[Any, ...]:
    """Cheap fingerprint of the tables behind the figures (cache key)."""
    conn = _conn(session)
    row = conn.execute(
        select(
            select(func.count()).select_from(VOTE).scalar_subquery(),
            select(func.max(VOTE.c.id)).scalar_subquery(),
            select(func.count()).select_from(EX).scalar_subquery(),
            select(func.max(EX.c.id)).scalar_subquery(),
            select(func.count()).select_from(ANN).scalar_subquery(),
            select(func.count()).select_from(PAIR).scalar_subquery(),
            select(func.count()).select_from(EX).where(EX.c.is_gold.is_(True)).scalar_subquery(),
        )
    ).one()
    return tuple(row)


def example_kept_counts(
    session: Session, cfg: StudyConfig, study_id: int = DEFAULT_STUDY_ID
) -> KeptCounts:
    """``vsr_core.kept.kept_counts`` over the study's Examples: one GROUP BY (agreeing votes,
    votes)."""
    return _kept_histogram(session, cfg, study_id)[0]


def _kept_histogram(
    session: Session, cfg: StudyConfig, study_id: int = DEFAULT_STUDY_ID
) -> tuple[KeptCounts, int, int]:
    """Kept counts, decided Examples and votes from one GROUP BY pass over the Examples."""
    ea = example_agreement(cfg, study_id=study_id)
    rows = [
        (int(a), int(n), int(c), int(d or 0))
        for a, n, c, d in _conn(session).execute(
            select(ea.c.agree, ea.c.n, func.count(), func.sum(ea.c.decided)).group_by(
                ea.c.agree, ea.c.n
            )
        )
    ]
    counts = kept_counts(((a, n, c) for a, n, c, _ in rows), cfg.keep_threshold)
    return counts, sum(d for *_, d in rows), sum(n * c for _, n, c, _ in rows)


def overview(
    session: Session, cfg: StudyConfig, study_id: int = DEFAULT_STUDY_ID
) -> dict[str, Any]:
    """One study's progress; the workers KPI counts the study's members (``study_members``);
    blocked and flagged are per person, across studies."""
    conn = _conn(session)
    pairs = {s: 0 for s in PAIR_STATUSES}
    for status, n in conn.execute(
        select(PAIR.c.status, func.count())
        .where(PAIR.c.study_id == study_id)
        .group_by(PAIR.c.status)
    ):
        pairs[str(status)] = int(n)
    origins = {
        str(o): int(n)
        for o, n in conn.execute(
            select(EX.c.origin, func.count())
            .where(EX.c.study_id == study_id)
            .group_by(EX.c.origin)
        )
    }
    counts, decided, votes = _kept_histogram(session, cfg, study_id)
    total = counts.examples
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
        .select_from(ASG.join(BATCH, BATCH.c.id == ASG.c.batch_id))
        .where(ASG.c.status == LeaseStatus.active, ASG.c.lease_expires_at > now,
               BATCH.c.study_id == study_id)
    ).scalar_one()
    workers = conn.execute(
        select(
            func.count(),
            func.coalesce(func.sum(case((WORKER.c.blocked.is_(True), 1), else_=0)), 0),
            func.coalesce(func.sum(case((WORKER.c.flagged.is_(True), 1), else_=0)), 0),
        ).where(study_members(study_id))
    ).one()
    skipped_annotations = conn.execute(
        select(func.count())
        .select_from(ANN.join(PAIR, PAIR.c.id == ANN.c.pair_id))
        .where(ANN.c.skip_reason.is_not(None), PAIR.c.study_id == study_id)
    ).scalar_one()
    jobs_running = conn.execute(
        select(func.count()).select_from(JOB).where(
            JOB.c.status.in_(("queued", "running")), JOB.c.study_id == study_id
        )
    ).scalar_one()
    return {
        "pairs": pairs,
        "pairs_total": sum(pairs.values()),
        "examples": total,
        "examples_by_origin": origins,
        "votes": votes,
        "decided": decided,
        "undecided": total - decided,
        "voted": counts.voted,
        "unvoted": counts.unvoted,
        "kept": counts.kept,
        "rejected": counts.rejected,
        # Kept or rejected while the queue still wants votes: the decision may still change.
        "provisional": counts.voted - decided,
        "batches_open": sum(b.get("open", 0) for b in batches.values()),
        "batches_finished": sum(b.get("completed", 0) for b in batches.values()),
        "batches": batches,
        "active_leases": int(active_leases),
        "skipped_annotations": int(skipped_annotations),
        "workers": int(workers[0]),
        "workers_blocked": int(workers[1]),
        "workers_flagged": int(workers[2]),
        "jobs_running": int(jobs_running),
        "generated_at": now.isoformat(timespec="seconds"),
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
    conn = _conn(session)
    in_study = {
        "votes": VOTE.c.example_id.in_(select(EX.c.id).where(EX.c.study_id == study_id)),
        "captions": ANN.c.pair_id.in_(select(PAIR.c.id).where(PAIR.c.study_id == study_id)),
    }
    for name, model in (("votes", VOTE), ("captions", ANN)):
        bucket = _hour_bucket(session, model.c.created_at)
        rows = conn.execute(
            select(bucket.label("h"), func.count())
            .where(model.c.created_at >= since, in_study[name])
            .group_by(bucket)
        ).all()
        got = {str(h): int(n) for h, n in rows}
        series[name] = [got.get(lbl, 0) for lbl in labels]
    return {"hours": labels, **series}


def agreement_coefficients(
    session: Session, study_id: int = DEFAULT_STUDY_ID
) -> dict[str, float | None]:
    """Fleiss' kappa and Krippendorff's alpha (nominal) of the validators' True/False votes
    over Examples with at least two votes, from SQL sums alone.

    Both have closed forms in per-Example counts (t True, f False, n = t + f):
    Fleiss (unequal rater counts, as vsr_core.agreement.fleiss_kappa): P_i = (t(t-1) + f(f-1)) /
    (n(n-1)), chance from the pooled True share. Krippendorff: alpha = 1 - (N-1) *
    sum(t f / (n-1)) / (N_T N_F). Summing in SQL avoids loading every Example into Python
    (the krippendorff package alone took ~110 ms on the VSR release); tests check both
    against vsr_core.agreement and the krippendorff package.
    """
    vc = vote_counts(
        select(EX.c.id).where(EX.c.study_id == study_id, EX.c.origin != REVALIDATION)
    )
    n, t = vc.c.n, vc.c.t
    f = n - t
    row = (
        _conn(session)
        .execute(
            select(
                func.count(),
                func.sum(t),
                func.sum(n),
                func.sum(cast(t * (t - 1) + f * (f - 1), Float) / cast(n * (n - 1), Float)),
                func.sum(cast(t * f, Float) / cast(n - 1, Float)),
            ).where(n >= 2)
        )
        .one()
    )
    items = int(row[0] or 0)
    if not items:
        return {"fleiss_kappa": None, "krippendorff_alpha": None, "rated_examples": 0}
    n_true, n_all = float(row[1]), float(row[2])
    n_false = n_all - n_true
    p_bar = float(row[3]) / items
    p_t = n_true / n_all
    p_e = p_t**2 + (1 - p_t) ** 2
    kappa = (p_bar - p_e) / (1 - p_e) if p_e < 1 else None
    alpha = 1 - (n_all - 1) * float(row[4]) / (n_true * n_false) if n_true and n_false else None
    return {"fleiss_kappa": kappa, "krippendorff_alpha": alpha, "rated_examples": items}


def quality(
    session: Session, cfg: StudyConfig, relations: list[dict[str, Any]] | None = None,
    study_id: int = DEFAULT_STUDY_ID,
) -> dict[str, Any]:
    """Dataset-level agreement figures. The counts are sums over the per-relation table
    (one GROUP BY pass over the Examples instead of one per figure), whose kept counts come
    from ``vsr_core.kept.kept_counts``."""
    rows = relation_table(session, cfg, study_id) if relations is None else relations

    def total(key: str) -> int:
        return sum(int(r[key]) for r in rows)

    counts = KeptCounts(
        total("examples"), total("voted"), total("kept"), total("rejected"), total("unanimous")
    )
    all_true, kept_true = total("true"), total("kept_true")
    return {
        "examples": counts.examples,
        "decided": total("decided"),
        "voted": counts.voted,
        "kept": counts.kept,
        "rejected": counts.rejected,
        "unanimous": counts.unanimous,
        "kept_share": counts.kept_share,
        "unanimous_share": counts.unanimous_share,
        **agreement_coefficients(session, study_id),
        "label_balance": {
            "all_true": all_true,
            "all_false": counts.examples - all_true,
            "kept_true": kept_true,
            "kept_false": counts.kept - kept_true,
        },
    }


def _disagreement(label: bool, agree: int, n: int) -> float:
    """P(two random judges disagree) for one Example: its validators plus the author's label
    (VSR Figure 7)."""
    t = (agree if label else n - agree) + int(label)
    nj = n + 1
    return 2 * t * (nj - t) / (nj * (nj - 1))


def relation_table(
    session: Session, cfg: StudyConfig, study_id: int = DEFAULT_STUDY_ID
) -> list[dict[str, Any]]:
    """Per relation: Examples, kept, True-label share, and the probability that two randomly
    chosen judges (the author's label and the validators) disagree (VSR paper, Figure 7).

    One GROUP BY (relation, label, agreeing votes, votes) in SQL -- a few hundred rows --
    and the kept counts from ``vsr_core.kept.kept_counts`` over each relation's histogram.
    """
    ea = example_agreement(cfg, study_id=study_id)
    rows = _conn(session).execute(
        select(
            ea.c.relation, ea.c.label, ea.c.agree, ea.c.n, func.count(), func.sum(ea.c.decided)
        ).group_by(ea.c.relation, ea.c.label, ea.c.agree, ea.c.n)
    )
    per: dict[str, dict[str, Any]] = {}
    for rel, label, agree, n, c, dec in rows:
        r = per.setdefault(
            str(rel), {"hist": {True: [], False: []}, "decided": 0, "dis": 0.0, "dis_n": 0}
        )
        a, n, c = int(agree), int(n), int(c)
        r["hist"][bool(label)].append((a, n, c))
        r["decided"] += int(dec or 0)
        if n > 0:
            r["dis"] += c * _disagreement(bool(label), a, n)
            r["dis_n"] += c
    from vsr_core.relations import CATEGORIES, category_of, is_known

    out = []
    for rel, r in per.items():
        cat = category_of(rel) if is_known(rel, allow_import_only=True) else "Unknown"
        both = kept_counts(r["hist"][True] + r["hist"][False], cfg.keep_threshold)
        true = kept_counts(r["hist"][True], cfg.keep_threshold)
        out.append(
            {
                "relation": rel,
                "category": cat,
                "examples": both.examples,
                "decided": r["decided"],
                "voted": both.voted,
                "kept": both.kept,
                "rejected": both.rejected,
                "unanimous": both.unanimous,
                "true": true.examples,
                "kept_true": true.kept,
                "true_share": true.examples / both.examples if both.examples else None,
                "disagreement": r["dis"] / r["dis_n"] if r["dis_n"] else None,
            }
        )
    order = {c: i for i, c in enumerate(CATEGORIES)}
    out.sort(key=lambda r: (order.get(r["category"], 99), -r["examples"], r["relation"]))
    return out


def concept_counts(
    session: Session, limit: int = 40, study_id: int = DEFAULT_STUDY_ID
) -> list[dict[str, Any]]:
    """Concepts by how often they are ENT1 (subj) and ENT2 (obj), most frequent first."""
    conn = _conn(session)
    data = and_(EX.c.origin != REVALIDATION, EX.c.study_id == study_id)
    subj: dict[str, int] = dict(
        conn.execute(select(EX.c.subj, func.count()).where(data).group_by(EX.c.subj)).all()
    )
    obj: dict[str, int] = dict(
        conn.execute(select(EX.c.obj, func.count()).where(data).group_by(EX.c.obj)).all()
    )
    names = set(subj) | set(obj)
    ranked = sorted(names, key=lambda c: (-(subj.get(c, 0) + obj.get(c, 0)), c))
    return [{"concept": c, "subj": subj.get(c, 0), "obj": obj.get(c, 0)} for c in ranked[:limit]]


FRAMES = ("intrinsic", "relative", "both")


def frame_answers(session: Session, study_id: int = DEFAULT_STUDY_ID) -> list[dict[str, Any]]:
    """Per relation, the reference frame validators said they used (the validation page asks
    for left/right and front/behind): counts and shares of intrinsic, relative and both, as
    the VSR paper's section 4.3 reports them (11 % / 84 % / 5 % on its left/right Trues).
    Only relations with at least one answer, most answered first."""
    conn = _conn(session)
    rows = conn.execute(
        select(EX.c.relation, VOTE.c.reference_frame, func.count())
        .select_from(VOTE.join(EX, EX.c.id == VOTE.c.example_id))
        .where(EX.c.study_id == study_id, EX.c.origin != REVALIDATION,
               VOTE.c.reference_frame.in_(FRAMES))
        .group_by(EX.c.relation, VOTE.c.reference_frame)
    ).all()
    by_rel: dict[str, dict[str, int]] = {}
    for relation, frame, n in rows:
        by_rel.setdefault(relation, dict.fromkeys(FRAMES, 0))[frame] = int(n)
    out = []
    for relation, counts in by_rel.items():
        total = sum(counts.values())
        out.append({"relation": relation, "answers": total, **counts,
                    **{f"{f}_share": counts[f] / total for f in FRAMES}})
    return sorted(out, key=lambda r: (-r["answers"], r["relation"]))


def worker_table(
    session: Session,
    cfg: StudyConfig,
    *,
    offset: int = 0,
    limit: int = 100,
    order: str = "votes",
    only: int | None = None,
    study_id: int = DEFAULT_STUDY_ID,
) -> tuple[list[dict[str, Any]], int]:
    """Per worker of the study (``study_members``; ``only``: that worker, member or not):
    Examples written, skips, votes, agreement with the majority, gold accuracy, all counted
    over the study's work only."""
    conn = _conn(session)
    vc = vote_counts(
        None
        if only is None
        else select(VOTE.c.example_id).where(VOTE.c.worker_id == only).scalar_subquery()
    )
    # A vote agrees with the majority of its Example's votes; ties have no majority.
    agrees = case(
        (and_(VOTE.c.value.is_(True), 2 * vc.c.t > vc.c.n), 1),
        (and_(VOTE.c.value.is_(False), 2 * vc.c.t < vc.c.n), 1),
        else_=0,
    )
    has_majority = case((2 * vc.c.t != vc.c.n, 1), else_=0)
    gold_target = func.coalesce(EX.c.gold_label, EX.c.label)
    gold_hit = case((and_(EX.c.is_gold.is_(True), VOTE.c.value == gold_target), 1), else_=0)
    gold_seen = case((EX.c.is_gold.is_(True), 1), else_=0)
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
        .join(vc, vc.c.example_id == VOTE.c.example_id)
        .join(EX, EX.c.id == VOTE.c.example_id)
        .where(VOTE.c.worker_id == only if only is not None else true(),
               EX.c.study_id == study_id)
        .group_by(VOTE.c.worker_id)
        .subquery("wv")
    )
    ann_q = (
        select(
            ANN.c.worker_id.label("worker_id"),
            func.sum(case((ANN.c.skip_reason.is_not(None), 1), else_=0)).label("skips"),
        )
        .select_from(ANN.join(PAIR, PAIR.c.id == ANN.c.pair_id))
        .where(PAIR.c.study_id == study_id)
        .group_by(ANN.c.worker_id)
        .subquery("wa")
    )
    # Captions written: one caption (Annotation) gives two Examples (its True and its False
    # image), so count distinct annotations; an imported Example without one is one caption.
    ex_q = (
        select(
            EX.c.author_id.label("worker_id"),
            (
                func.count(func.distinct(EX.c.annotation_id))
                + func.sum(case((EX.c.annotation_id.is_(None), 1), else_=0))
            ).label("written"),
            func.count().label("examples_written"),
        )
        .where(EX.c.author_id.is_not(None), EX.c.study_id == study_id)
        .group_by(EX.c.author_id)
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
            WORKER.c.blocked,
            WORKER.c.flagged,
            WORKER.c.flag_reason,
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
    )
    if only is not None:
        base, total = base.where(WORKER.c.id == only), 1
    else:
        base = base.where(study_members(study_id))
        total = conn.execute(
            select(func.count()).select_from(WORKER).where(study_members(study_id))
        ).scalar_one()
    rows = (
        conn.execute(base.order_by(order_by, WORKER.c.id).offset(offset).limit(limit))
        .mappings()
        .all()
    )
    out = [dict(r) for r in rows]
    medians = median_seconds(session, [r["id"] for r in out], study_id)
    for r in out:
        r["name"] = r["invite_label"] or r["external_id"]
        vote_s, caption_s, n_timed_votes, n_timed_captions = medians.get(
            r["id"], (None, None, 0, 0)
        )
        r["median_vote_s"], r["median_caption_s"] = vote_s, caption_s
        r["too_fast"] = too_fast(cfg, vote_s, n_timed_votes, caption_s, n_timed_captions)
    return out, int(total)


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
    import statistics

    if not worker_ids:
        return {}
    conn = _conn(session)
    out: dict[int, tuple[float | None, float | None, int, int]] = {}
    per: dict[str, dict[int, list[int]]] = {"v": {}, "a": {}}
    in_study = {  # the study's votes and captions only
        "v": VOTE.c.example_id.in_(select(EX.c.id).where(EX.c.study_id == study_id)),
        "a": ANN.c.pair_id.in_(select(PAIR.c.id).where(PAIR.c.study_id == study_id)),
    }
    for key, model in (("v", VOTE), ("a", ANN)):
        rows = conn.execute(
            select(model.c.worker_id, model.c.duration_ms).where(
                model.c.worker_id.in_(worker_ids),
                model.c.duration_ms.is_not(None),
                in_study[key],
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


def example_filters(
    cfg: StudyConfig,
    *,
    relation: str | None = None,
    concept: str | None = None,
    agreement: str | None = None,
    origin: str | None = None,
    gold: bool | None = None,
    q: str | None = None,
    study_id: int = DEFAULT_STUDY_ID,
) -> tuple[Subquery, list[Any]]:
    # Conditions on the Example itself go inside the agreement subquery, so only the matching
    # Examples' votes are grouped; conditions on the agreement apply to its rows.
    rows: list[Any] = []
    if relation:
        rows.append(EX.c.relation == relation)
    if concept:
        rows.append(or_(EX.c.subj == concept, EX.c.obj == concept))
    if origin:
        rows.append(EX.c.origin == origin)
    if gold is not None:
        rows.append(EX.c.is_gold.is_(gold))
    if q:
        rows.append(EX.c.caption.ilike(f"%{q}%"))
    ea = example_agreement(cfg, with_revalidation=True, where=rows, study_id=study_id)
    conds: list[Any] = []
    if agreement == "unanimous":
        conds.append(ea.c.unanimous == 1)
    elif agreement == "kept":
        conds.append(ea.c.kept == 1)
    elif agreement == "rejected":
        conds.append(and_(ea.c.n > 0, ea.c.kept == 0))
    elif agreement == "undecided":
        conds.append(ea.c.decided == 0)
    elif agreement == "split":
        conds.append(and_(ea.c.t > 0, ea.c.t < ea.c.n))
    return ea, conds


def browse_examples(
    session: Session, cfg: StudyConfig, *, offset: int = 0, limit: int = 50, **filters: Any
) -> tuple[list[dict[str, Any]], int]:
    ea, conds = example_filters(cfg, **filters)
    base = select(ea).join(EX, EX.c.id == ea.c.id)
    if conds:
        base = base.where(*conds)
    conn = _conn(session)
    total = conn.execute(select(func.count()).select_from(base.subquery())).scalar_one()
    rows = (
        conn.execute(
            base.add_columns(EX.c.caption, EX.c.image_id)
            .order_by(ea.c.id)
            .offset(offset)
            .limit(limit)
        )
        .mappings()
        .all()
    )
    return [dict(r) for r in rows], int(total)


def distinct_values(session: Session, study_id: int = DEFAULT_STUDY_ID) -> dict[str, list[str]]:
    conn = _conn(session)
    mine = EX.c.study_id == study_id

    def values(column: Any) -> list[str]:
        return [v for (v,) in conn.execute(select(column).where(mine).distinct().order_by(column))]

    concepts = set(values(EX.c.subj)) | set(values(EX.c.obj))
    return {"relations": values(EX.c.relation), "concepts": sorted(concepts),
            "origins": values(EX.c.origin)}


def mc_summary(session: Session, study_id: int = DEFAULT_STUDY_ID) -> dict[str, Any]:
    """The latest matching run's items, and how many of them build-dataset writes to mc/:
    those whose every distractor validators rejected (an unvalidated run: none)."""
    from vsr_core.mc_items import surviving_items
    from vsr_core.study import load_study_config

    run = MatchRun.__table__  # type: ignore[attr-defined]
    conn = _conn(session)
    latest = conn.execute(
        select(run.c.id, run.c.params).where(run.c.study_id == study_id)
        .order_by(run.c.id.desc()).limit(1)
    ).first()
    if latest is None:
        return {"mc_items": 0, "mc_run_items": 0}
    total = conn.execute(
        select(func.count()).select_from(MC).where(MC.c.run_id == latest.id)
    ).scalar_one()
    ready = 0
    if (latest.params or {}).get("negatives_sent"):
        threshold = load_study_config(session, study_id).keep_threshold
        ready = len(surviving_items(session, int(latest.id), threshold))
    return {"mc_items": ready, "mc_run_items": int(total)}


def invite_labels() -> Any:
    """(worker_id, label): the label of a worker's invite, the name the dashboard shows."""
    return (
        select(INVITE.c.worker_id.label("worker_id"), func.max(INVITE.c.label).label("label"))
        .where(INVITE.c.worker_id.is_not(None), INVITE.c.label != "")
        .group_by(INVITE.c.worker_id)
    )


def worker_names(session: Session, workers: list[Worker]) -> dict[int, str]:
    """Each worker's name as the Workers page gives it: their invite's label, else their id
    on the platform (``invite-N`` for an invite)."""
    ids = [w.id for w in workers if w.id is not None]
    labels: dict[int, str] = {}
    if ids:
        stmt = invite_labels().where(INVITE.c.worker_id.in_(ids))
        labels = {int(r.worker_id): str(r.label) for r in session.connection().execute(stmt)}
    return {w.id: labels.get(w.id, w.external_id) for w in workers if w.id is not None}


def validators_left(session: Session, example_id: int, author_id: int | None,
                    study_id: int) -> int:
    """How many of the study's workers could still vote on this Example: members whose
    roles allow validation, not blocked, not its author, who have not voted on it. 0 means
    an Example the queue still wants votes for waits for someone new to join."""
    voted = select(VOTE.c.worker_id).where(VOTE.c.example_id == example_id)
    rows = session.connection().execute(
        select(WORKER.c.id, WORKER.c.roles).where(
            study_members(study_id), WORKER.c.blocked.is_(False), WORKER.c.id.not_in(voted),
        )
    )
    return sum(1 for r in rows if r.id != author_id and (not r.roles or "validate" in r.roles))
