"""What every dashboard page's figures stand on: the tables, the study's members, per-Example
vote counts and agreement (with the keep rule of ``vsr_core.kept``), the labels workers are
named by, and the cache key of the figures."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, and_, case, func, literal_column, null, or_, select, true
from sqlalchemy.sql import Subquery
from sqlmodel import Session

from vsr_core.kept import kept_clause, model_of, verdict_clause
from vsr_core.models import (
    DEFAULT_STUDY_ID,
)
from vsr_core.models import SETTLED_UP_TO as SETTLED_UP_TO_SQL
from vsr_core.studies.settings import StudyConfig
from vsr_core.tables import (
    ADJUDICATION,
    ANNOTATION,
    EXAMPLE,
    IMAGE_PAIR,
    INVITE_TOKEN,
    LABEL_MODEL_DECISION,
    LABEL_MODEL_FIT,
    VOTE,
)

REVALIDATION = "revalidation"
# Machine-made negatives (vsr match's distractors sent to validators): counted apart, as the
# export writes them apart (machine_negatives.jsonl), so every kept count, kappa and
# relation table here is of the same Examples as stats.json and the card.
MACHINE = "adversarial"


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


def _model_agrees(rule: str, name: str) -> tuple[Any, Any]:
    """(join target, 0/1 column): whether the keep rule's label model labelled the Example as
    its label at the last fit (NULL: not fitted, or the agreement rule)."""
    model = model_of(rule)
    if model is None:
        return None, None
    lmd = LABEL_MODEL_DECISION.alias(name)
    agrees = case((lmd.c.label.is_(None), None), (lmd.c.label == EXAMPLE.c.label, 1), else_=0)
    return (lmd, and_(lmd.c.example_id == EXAMPLE.c.id, lmd.c.model == model)), agrees


def example_agreement(
    cfg: StudyConfig,
    *,
    with_revalidation: bool = False,
    with_negatives: bool = False,
    where: list[Any] | None = None,
    study_id: int = DEFAULT_STUDY_ID,
    compare_rule: str | None = None,
) -> Subquery:
    """Per Example: votes, votes agreeing with its label, its adjudication, and decided / kept /
    unanimous flags and its verdict (kept, rejected, excluded, unvoted).

    An Example is decided once the validation queue is done with it (``queue_open`` false:
    the study's adaptive rule, webapp.validate.queue) and it has at least its target number
    of votes (its own override or the study default), or once it is adjudicated. Kept /
    rejected / excluded follow ``vsr_core.kept``: an adjudication first; else, when the
    study's keep rule is a label model, the model's cached label; else kept when a share >=
    keep_threshold of the votes so far agree with its label (2 of 3, 3 of 4, 4 of 6; a 1-1
    tie fails), rejected when it has votes and fails, whether or not the queue still wants
    more (then the decision is provisional). ``compare_rule``: also the verdict under that
    keep rule (``verdict_alt``), for the preview of a switch.
    Re-validation copies (vsr_core.revalidation) are left out unless ``with_revalidation``: they
    are a study of the imported data, not more data; so are machine-made negatives unless
    ``with_negatives`` (``MACHINE``: the export keeps them apart too). ``where``: conditions
    on Example columns; only those Examples' votes are counted (at 10x VSR, grouping all
    390,000 votes to show one relation's 14,000 Examples cost most of the data page's time).
    """
    where = [EXAMPLE.c.study_id == study_id, *(where or ())]  # one study's Examples only
    # Votes and agreeing votes from the Example's own counters, not by grouping the vote
    # table: every vote is counted on its Example in the same statement that stores it
    # (webapp.validate.statements.count_vote; the importer sets them too), so they are equal
    # (webapp.validate.audit checks it), and reading them is one pass over the Examples. At
    # 10x VSR, grouping 390,000 votes cost the overview ~400 ms of its ~480.
    n = EXAMPLE.c.queue_votes
    agree = EXAMPLE.c.queue_agree
    t = case((EXAMPLE.c.label.is_(True), agree), else_=n - agree)
    target = func.coalesce(EXAMPLE.c.target_votes, cfg.votes_per_example)
    adj = ADJUDICATION.c.decision
    # Decided = the validation queue wants no more votes for it (its adaptive rule, kept on
    # the row; imported Examples arrive settled), and it has its target number of votes; or
    # an admin settled it.
    decided = or_(adj.is_not(None), and_(EXAMPLE.c.queue_open.is_(False), n >= target, n > 0))
    source: Any = EXAMPLE.outerjoin(ADJUDICATION, ADJUDICATION.c.example_id == EXAMPLE.c.id)
    join, model_agrees = _model_agrees(cfg.keep_rule, "lmd")
    if join is not None:
        source = source.outerjoin(*join)
    rule = {"adjudication": adj, "model_agrees": model_agrees}
    kept = kept_clause(agree, n, cfg.keep_threshold, **rule)
    final = case((adj == "true", True), (adj == "false", False), else_=EXAMPLE.c.label)
    columns = [
        EXAMPLE.c.id.label("id"),
        EXAMPLE.c.relation.label("relation"),
        EXAMPLE.c.subj.label("subj"),
        EXAMPLE.c.obj.label("obj"),
        EXAMPLE.c.label.label("label"),
        final.label("final_label"),
        EXAMPLE.c.origin.label("origin"),
        EXAMPLE.c.is_gold.label("is_gold"),
        n.label("n"),
        t.label("t"),
        agree.label("agree"),
        adj.label("adjudication"),
        model_agrees.label("model_agrees")
        if model_agrees is not None
        else null().label("model_agrees"),
        case((decided, 1), else_=0).label("decided"),
        # The same test as "decided" without the adjudication, in the form the "undecided"
        # filter uses: undecided = settled_up_to < votes_per_example and no adjudication.
        literal_column(f"({SETTLED_UP_TO_SQL})", Integer).label("settled_up_to"),
        case((kept, 1), else_=0).label("kept"),
        verdict_clause(agree, n, cfg.keep_threshold, **rule).label("verdict"),
        case((and_(n > 0, agree == n), 1), else_=0).label("unanimous"),
    ]
    if compare_rule is not None:
        alt_join, alt_agrees = _model_agrees(compare_rule, "lmd_alt")
        if alt_join is not None:
            source = source.outerjoin(*alt_join)
        columns.append(
            verdict_clause(
                agree, n, cfg.keep_threshold, adjudication=adj, model_agrees=alt_agrees
            ).label("verdict_alt")
        )
    return (
        select(*columns)
        .select_from(source)
        .where(
            true() if with_revalidation else EXAMPLE.c.origin != REVALIDATION,
            true() if with_negatives else EXAMPLE.c.origin != MACHINE,
            *(where or ()),
        )
        .subquery("ea")
    )


def data_version(session: Session) -> tuple[Any, ...]:
    """Cheap fingerprint of the tables behind the figures (cache key): the newest id of each
    (every vote, Example, caption and pair is a new row; a vote also updates its Example's
    counters) and the number of gold Examples (an index lookup). Not row counts: counting
    3.9 million votes cost ~0.4 s at 100x on every dashboard request. Rows are never
    deleted by the pipeline; the admin actions that change rows in place clear the cache,
    and the cache's TTL bounds anything else."""
    conn = session.connection()
    row = conn.execute(
        select(
            select(func.max(VOTE.c.id)).scalar_subquery(),
            select(func.max(EXAMPLE.c.id)).scalar_subquery(),
            select(func.max(ANNOTATION.c.id)).scalar_subquery(),
            select(func.max(IMAGE_PAIR.c.id)).scalar_subquery(),
            select(func.count())
            .select_from(EXAMPLE)
            .where(EXAMPLE.c.is_gold.is_(True))
            .scalar_subquery(),
            # Adjudications and label-model fits change verdicts without a new vote.
            select(func.count()).select_from(ADJUDICATION).scalar_subquery(),
            select(func.max(ADJUDICATION.c.at)).scalar_subquery(),
            select(func.max(LABEL_MODEL_FIT.c.fitted_at)).scalar_subquery(),
        )
    ).one()
    return tuple(row)


def invite_labels() -> Any:
    """(worker_id, label): the label of a worker's invite, the name the dashboard shows."""
    return (
        select(
            INVITE_TOKEN.c.worker_id.label("worker_id"),
            func.max(INVITE_TOKEN.c.label).label("label"),
        )
        .where(INVITE_TOKEN.c.worker_id.is_not(None), INVITE_TOKEN.c.label != "")
        .group_by(INVITE_TOKEN.c.worker_id)
    )
