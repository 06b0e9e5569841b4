"""The thin database layer of matching: load kept Examples, write a MatchRun with its McItems
and (optionally) the adversarial negatives for validators, and read back surviving items.

Everything a run writes happens in the caller's one transaction, so a failure leaves no
half-written run.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import select
from sqlmodel import Session

from matching.bulk_insert import insert_rows
from matching.option_conflicts import meaning_key
from matching.pipeline import MatchResult
from matching.records import Record, Triple
from vsr_core.agreement_db import iter_item_votes, load_item_votes
from vsr_core.kept import Verdict
from vsr_core.mc_items import surviving_items as surviving_items
from vsr_core.models import DEFAULT_STUDY_ID, ExampleOrigin, MatchRun
from vsr_core.studies.settings import load_study_config
from vsr_core.tables import EXAMPLE, IMAGE, MC_ITEM
from vsr_core.types import utcnow
from vsr_core.verdicts import Verdicts, load_verdicts

# What a negative's row sets (everything else takes the column's default), and an McItem's.
NEGATIVE_COLUMNS = (
    "study_id",
    "image_id",
    "caption",
    "relation",
    "subj",
    "obj",
    "label",
    "origin",
    "parent_example_id",
    "is_gold",
)
MC_ITEM_COLUMNS = (
    "run_id",
    "query_example_id",
    "split",
    "choices",
    "relations",
    "answer_index",
    "distractor_example_ids",
    "params",
    "created_at",
)


def load_records(session: Session, study_id: int = DEFAULT_STUDY_ID) -> list[Record]:
    """Every Example of the study with its votes (kept or not: matching filters).
    Adversarial negatives come along only so that those validators judged True count as
    known true."""
    mine = EXAMPLE.c.study_id == study_id
    # Adjudications and the study's keep rule decide as on the dashboard (vsr_core.kept).
    cfg = load_study_config(session, study_id)
    verdicts = load_verdicts(session, study_id, cfg.keep_threshold, cfg.keep_rule)
    # Streamed: the (worker, value) pairs of every vote are never held all at once; equal
    # vote tuples and the few distinct concept, relation and origin names are stored once
    # (at 100x: 1.28M Records, whose repeated strings alone took hundreds of MB).
    shared: dict[Any, Any] = {}
    streamed = iter_item_votes(session, where=[mine], yield_per=50_000)
    votes = {iv.item: _once(shared, tuple(v for _, v in iv.votes)) for iv in streamed}
    stmt = (
        select(
            EXAMPLE.c.id,
            EXAMPLE.c.image_id,
            IMAGE.c.file_name,
            EXAMPLE.c.subj,
            EXAMPLE.c.relation,
            EXAMPLE.c.obj,
            EXAMPLE.c.caption,
            EXAMPLE.c.label,
            EXAMPLE.c.origin,
        )
        .select_from(EXAMPLE.join(IMAGE, IMAGE.c.id == EXAMPLE.c.image_id))
        # copies for re-validation are not more data
        .where(EXAMPLE.c.origin != "revalidation", mine)
        .order_by(EXAMPLE.c.id)
        .execution_options(yield_per=50_000)
    )
    return [
        Record(
            id=row.id,
            image=row.file_name,
            subj=_once(shared, row.subj),
            relation=_once(shared, row.relation),
            obj=_once(shared, row.obj),
            caption=row.caption,
            label=verdicts.label_of(row.id, bool(row.label)),
            votes=(example_votes := votes.pop(row.id, ())),
            image_id=row.image_id,
            origin=_once(shared, row.origin),
            settled=_settled(verdicts, row.id, bool(row.label), example_votes),
        )
        for row in session.execute(stmt)
    ]


def _settled(
    verdicts: Verdicts, example_id: int, label: bool, votes: tuple[bool, ...]
) -> bool | None:
    """Kept or not by an adjudication or the keep rule's label model; None: by the votes."""
    if example_id in verdicts.adjudications or example_id in verdicts.model_labels:
        agree = sum(1 for v in votes if v == label)
        return verdicts.of(example_id, label, agree, len(votes)) is Verdict.kept
    return None


def _once(shared: dict[Any, Any], value: Any) -> Any:
    """``value``, or the equal one seen before."""
    return shared.setdefault(value, value)


def save_run(
    session: Session,
    result: MatchResult,
    diagnostics: dict[str, Any],
    *,
    send_negatives: bool = False,
    extra_params: dict[str, Any] | None = None,
    study_id: int = DEFAULT_STUDY_ID,
    votes_per_example: int = 3,
) -> MatchRun:
    """Write the run, one McItem per complete item and, with ``send_negatives``, each
    distractor as a False Example (origin adversarial) on the query's image, which the
    validation queue then serves like any new Example. An identical negative from an
    earlier run is reused rather than duplicated."""
    params = result.params.as_dict() | (extra_params or {}) | {"negatives_sent": send_negatives}
    run = MatchRun(study_id=study_id, params=params, diagnostics=diagnostics)
    session.add(run)
    session.flush()
    assert run.id is not None

    # Negatives that say the same thing on one image (identical, synonym or converse,
    # matching.option_conflicts.meaning_key) share one Example, so one validation.
    negatives: dict[tuple[int, Triple], int] = {}
    reused: set[int] = set()
    if send_negatives:
        image_ids = sorted({it.query.image_id for it in result.items if it.query.image_id})
        for chunk in _chunks(image_ids, 500):
            found = session.execute(
                select(
                    EXAMPLE.c.id,
                    EXAMPLE.c.image_id,
                    EXAMPLE.c.subj,
                    EXAMPLE.c.relation,
                    EXAMPLE.c.obj,
                )
                .where(
                    EXAMPLE.c.origin == ExampleOrigin.adversarial.value,
                    EXAMPLE.c.image_id.in_(chunk),
                    EXAMPLE.c.study_id == study_id,
                )
                .order_by(EXAMPLE.c.id)
            )
            for r in found:
                negatives.setdefault((r.image_id, meaning_key((r.subj, r.relation, r.obj))), r.id)
        reused = set(negatives.values())
    fresh: dict[tuple[int, Triple], list[Any]] = {}  # key -> the new Example's row values
    per_item: list[list[tuple[int, Triple]]] = []
    if send_negatives:
        for it in result.items:
            if it.query.image_id is None:
                raise ValueError(f"Example {it.query.id} has no image row: cannot send negatives")
            mine = []
            for i, (caption, (s, rel, o)) in enumerate(zip(it.choices, it.triples, strict=True)):
                key = (it.query.image_id, meaning_key((s, rel, o)))
                if i == it.answer_index or key in negatives or key in fresh:
                    continue
                fresh[key] = [
                    study_id,  # the query's study
                    it.query.image_id,
                    caption,
                    rel,
                    s,
                    o,
                    False,
                    ExampleOrigin.adversarial.value,
                    it.query.id,
                    False,
                ]
                mine.append(key)
            per_item.append(mine)
        # Ids in turns (every item's first distractor, then every second, ...): the queue
        # serves in id order, and one query's distractors back to back (the same photo, the
        # same subject and object) would show a validator which captions belong together.
        order = [key for turn in itertools.zip_longest(*per_item) for key in turn if key]
        now = utcnow()
        ids = insert_rows(
            session,
            EXAMPLE,
            [*NEGATIVE_COLUMNS, "created_at"],
            ([*fresh[key], now] for key in order),
            returning_ids=True,
        )
        negatives.update(zip(order, ids, strict=True))
        del fresh, per_item, order

    item_negatives: list[list[int | None]] = []

    def item_rows() -> Iterator[list[Any]]:
        now = utcnow()
        for it in result.items:
            neg_ids: list[int | None] = [
                None
                if i == it.answer_index or not send_negatives
                else negatives[(it.query.image_id or 0, meaning_key(t))]
                for i, t in enumerate(it.triples)
            ]
            item_negatives.append(neg_ids)
            yield [
                run.id,
                it.query.id,
                it.split,
                it.choices,
                it.relations,
                it.answer_index,
                [None if i == it.answer_index else src for i, src in enumerate(it.source_ids)],
                params | {"negative_example_ids": neg_ids},
                now,
            ]

    insert_rows(session, MC_ITEM, MC_ITEM_COLUMNS, item_rows())
    if send_negatives:
        run.diagnostics = {
            **diagnostics,
            "validation_cost": validation_cost(
                session,
                item_negatives,
                diagnostics.get("false_caption_rejection_rate"),
                votes_per_example,
                reused,
                unvoted=set(negatives.values()) - reused,
            ),
        }
    session.flush()
    return run


def validation_cost(
    session: Session,
    item_negatives: Sequence[Sequence[int | None]],
    p_reject: float | None,
    votes_per_example: int,
    reused: set[int] | None = None,
    unvoted: set[int] | None = None,
) -> dict[str, Any]:
    """What validating a run's negatives costs: distinct negatives queued (``reused`` ones
    from earlier runs included), how many still lack a verdict, the votes they need, and
    the items expected to survive if validators reject each negative with probability
    ``p_reject`` (independently), per vote. ``unvoted``: ids known to have no vote yet
    (the negatives this run just inserted), which need no look-up."""
    ids = sorted({n for negs in item_negatives for n in negs if n})
    judged: set[int] = set()
    maybe_voted = [n for n in ids if n not in (unvoted or set())]
    for chunk in _chunks(maybe_voted, 500):
        for iv in load_item_votes(session, example_ids=chunk):
            if len(iv.values) >= votes_per_example:
                judged.add(int(iv.item))  # type: ignore[call-overload]
    open_ids = [n for n in ids if n not in judged]
    votes = len(open_ids) * votes_per_example
    expected = None
    if p_reject is not None:
        expected = sum(p_reject ** len({n for n in negs if n}) for negs in item_negatives)
    return {
        "items": len(item_negatives),
        "negatives": len(ids),
        "negatives_reused": len(set(ids) & (reused or set())),
        "negatives_unjudged": len(open_ids),
        "votes_per_example": votes_per_example,
        "votes_needed": votes,
        "p_reject": None if p_reject is None else round(p_reject, 4),
        "expected_items_kept": None if expected is None else round(expected, 1),
        "expected_items_per_vote": (
            None if expected is None or votes == 0 else round(expected / votes, 4)
        ),
    }


def format_cost(cost: dict[str, Any]) -> str:
    """One line for `vsr match` and the card."""
    line = (
        f"validation cost: {cost['negatives']:,} distinct negatives queued for "
        f"{cost['items']:,} items ({cost['negatives_reused']:,} shared with earlier runs; "
        f"synonyms and converses share one), {cost['votes_needed']:,} votes needed "
        f"({cost['negatives_unjudged']:,} unjudged x {cost['votes_per_example']})"
    )
    if cost.get("expected_items_kept") is not None:
        line += (
            f"; if validators reject a negative as often as the data's False captions "
            f"({cost['p_reject']:.0%}), about {cost['expected_items_kept']:,.0f} items "
            f"survive: {cost['expected_items_per_vote'] or 0:.3f} items per vote"
        )
    return line


def _chunks(seq: Sequence[int], size: int) -> list[Sequence[int]]:
    return [seq[i : i + size] for i in range(0, len(seq), size)]
