"""The data page's figures: Examples filtered by relation, concept, agreement, origin, gold
and caption text, the values those filters offer, and who could still vote on an Example."""

from __future__ import annotations

import enum
from typing import Any

from sqlalchemy import Select, and_, false, func, or_, select
from sqlalchemy.sql import Subquery
from sqlmodel import Session

from vsr_core.kept import EXCLUDED, model_of
from vsr_core.limits import INT32_MAX
from vsr_core.models import DEFAULT_STUDY_ID
from vsr_core.standing import blocked_clause, study_members
from vsr_core.studies.settings import StudyConfig
from vsr_core.tables import EXAMPLE, LABEL_MODEL_DECISION, VOTE, WORKER
from webapp.admin.stats.shared import example_agreement

AGREEMENT_FILTERS = (
    "kept",
    "rejected",
    "excluded",
    "adjudicated",
    "unanimous",
    "split",
    "undecided",
)
FLIP_RULES = ("agreement", "dawid-skene", "mace")
# The data browser's filter fields, each with its longest accepted value.
FILTER_FIELDS = {"relation": 64, "concept": 64, "agreement": 16, "origin": 16, "gold": 3, "q": 100}


def parse_filters(form: Any) -> dict[str, Any]:
    """The data browser's filters from a query or a form (the bulk adjudication repeats them),
    as ``example_filters`` takes them; ValueError in plain words on a bad value."""
    raw = {k: str(form.get(k) or "") for k in (*FILTER_FIELDS, "flips")}
    for key, most in FILTER_FIELDS.items():
        if len(raw[key]) > most:
            raise ValueError(f"the {key} filter is too long")
    if raw["agreement"] and raw["agreement"] not in AGREEMENT_FILTERS:
        raise ValueError(f"unknown agreement filter {raw['agreement']!r}")
    if raw["gold"] not in ("", "yes", "no"):
        raise ValueError("the gold filter is yes, no or empty")
    if raw["flips"] and raw["flips"] not in FLIP_RULES:
        raise ValueError(f"unknown keep rule {raw['flips']!r}")
    return {
        "relation": raw["relation"] or None,
        "concept": raw["concept"] or None,
        "agreement": raw["agreement"] or None,
        "origin": raw["origin"] or None,
        "gold": {"yes": True, "no": False}.get(raw["gold"]),
        "q": raw["q"].strip() or None,
        "flips": raw["flips"] or None,
    }


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
    flips: str | None = None,
    ids: list[int] | None = None,
    id_range: tuple[int, int] | None = None,
) -> tuple[Subquery, list[Any]]:
    # Conditions on the Example itself go inside the agreement subquery, so only the matching
    # Examples' votes are grouped; conditions on the agreement apply to its rows.
    # ``ids``: only these Examples (a page of a filter's cached matches: read by primary key).
    rows: list[Any] = [] if ids is None else [EXAMPLE.c.id.in_(ids)]
    # ``id_range``: only Examples with ids in it, both ends included (a bounded walk).
    if id_range is not None:
        rows.append(EXAMPLE.c.id.between(*id_range))
    if relation:
        rows.append(EXAMPLE.c.relation == relation)
    if concept:
        rows.append(or_(EXAMPLE.c.subj == concept, EXAMPLE.c.obj == concept))
    if origin:
        rows.append(EXAMPLE.c.origin == origin)
    if gold is not None:
        rows.append(EXAMPLE.c.is_gold.is_(gold))
    if q:
        # The admin's text literally: % and _ in it are characters, not wildcards.
        literal = q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows.append(EXAMPLE.c.caption.ilike(f"%{literal}%", escape="\\"))
    ea = example_agreement(
        cfg, with_revalidation=True, where=rows, study_id=study_id, compare_rule=flips
    )
    conds = [] if agreement is None else _agreement_conditions(ea, agreement, cfg)
    if flips is not None:  # the Examples a switch of keep rule would decide otherwise
        conds += [ea.c.verdict != ea.c.verdict_alt, *_could_flip(ea, cfg.keep_rule, flips)]
    return ea, conds


def _could_flip(ea: Subquery, rule: str, other: str) -> list[Any]:
    """Conditions implied by ``verdict != verdict_alt`` that PostgreSQL can plan with: the
    two rules decide an Example differently only when no adjudication settles it and one of
    them reads a label model that labelled it (with no label both fall back to the
    agreement rule). Two rules that read no model never differ: a constant false, so the
    page answers without reading a row."""
    models = sorted({m for m in (model_of(rule), model_of(other)) if m is not None})
    if not models:
        return [false()]
    labelled = select(LABEL_MODEL_DECISION.c.example_id).where(
        LABEL_MODEL_DECISION.c.model.in_(models)
    )
    return [ea.c.adjudication.is_(None), ea.c.id.in_(labelled)]


def _agreement_conditions(ea: Subquery, agreement: str, cfg: StudyConfig) -> list[Any]:
    """The data page's agreement filter on ``example_agreement`` rows (unknown: no filter)."""
    c = ea.c
    if agreement == "undecided":
        # decided == 0 as one comparison with the setting (vsr_core.models.SETTLED_UP_TO).
        return [c.adjudication.is_(None), c.settled_up_to < cfg.votes_per_example]
    by_name = {
        "unanimous": c.unanimous == 1,
        "kept": c.verdict == "kept",
        "rejected": c.verdict == "rejected",
        # The verdict is excluded exactly when the adjudication says so; compared on the
        # adjudication column the filter is planned from the (small) adjudication table
        # instead of evaluating the verdict of every Example.
        "excluded": and_(c.adjudication == EXCLUDED, c.verdict == "excluded"),
        "adjudicated": c.adjudication.is_not(None),
        "split": and_(c.t > 0, c.t < c.n),
    }
    return [by_name[agreement]] if agreement in by_name else []


def browse_examples(
    session: Session, cfg: StudyConfig, *, offset: int = 0, limit: int = 50, **filters: Any
) -> tuple[list[dict[str, Any]], int]:
    """One page by OFFSET and the number of matches (the data page itself reads by keyset:
    ``browse_page``, and caches ``count_examples``)."""
    return browse_offset(session, cfg, offset, limit, **filters), count_examples(
        session, cfg, **filters
    )


def browse_offset(
    session: Session, cfg: StudyConfig, offset: int, limit: int, **filters: Any
) -> list[dict[str, Any]]:
    """One page by OFFSET: what a bare ``?page=N`` (an old bookmark) still gets."""
    return _rows(session, offset_statement(cfg, offset, limit, **filters))


def offset_statement(cfg: StudyConfig, offset: int, limit: int, **filters: Any) -> Select[Any]:
    base, ea = _browse_base(cfg, **filters)
    return base.order_by(ea.c.id).offset(offset).limit(limit)


def _browse_base(cfg: StudyConfig, **filters: Any) -> tuple[Select[Any], Subquery]:
    ea, conds = example_filters(cfg, **filters)
    base = select(ea).join(EXAMPLE, EXAMPLE.c.id == ea.c.id)
    if conds:
        base = base.where(*conds)
    return base.add_columns(EXAMPLE.c.caption, EXAMPLE.c.image_id), ea


def _rows(session: Session, stmt: Select[Any]) -> list[dict[str, Any]]:
    return [dict(r) for r in session.connection().execute(stmt).mappings().all()]


def count_examples(session: Session, cfg: StudyConfig, **filters: Any) -> int:
    """How many Examples match the filters (a pass over the study's Examples unless an index
    narrows them: the data page caches it)."""
    return int(session.connection().execute(count_statement(cfg, **filters)).scalar_one())


def count_and_few(
    session: Session, cfg: StudyConfig, few: int, **filters: Any
) -> tuple[int, list[int] | None]:
    """How many Examples match, and their ids in order when there are at most ``few``: a
    filter that selects a handful of a million Examples is then paged from this list by
    primary key, not by walking the study in search of its rows (the data page caches
    both, computed off the request)."""
    conn = session.connection()
    total = int(conn.execute(count_statement(cfg, **filters)).scalar_one())
    if total > few:
        return total, None
    ea, conds = example_filters(cfg, **filters)
    stmt = select(ea.c.id).where(*conds).order_by(ea.c.id).limit(few + 1)
    ids = [int(i) for (i,) in conn.execute(stmt)]
    return (total, ids) if len(ids) <= few else (total, None)


def count_statement(cfg: StudyConfig, **filters: Any) -> Select[Any]:
    ea, conds = example_filters(cfg, **filters)
    stmt = select(func.count()).select_from(ea)
    return stmt.where(*conds) if conds else stmt


class Direction(enum.Enum):
    """Where a keyset page lies: after an id, before an id, or the last page."""

    AFTER = "after"
    BEFORE = "before"
    LAST = "last"


def browse_page(
    session: Session,
    cfg: StudyConfig,
    *,
    direction: Direction = Direction.AFTER,
    key: int = 0,
    limit: int = 50,
    **filters: Any,
) -> tuple[list[dict[str, Any]], bool]:
    """One page of matching Examples in id order by keyset: those after ``key`` (the first
    page: key 0), those just before ``key``, or the last ``limit``. The cost is that of
    the page, however deep, not of the rows before it (OFFSET walked them all). Also says
    whether there are more rows beyond the page in its direction (one extra row is read)."""
    rows = _rows(session, page_statement(cfg, direction, key, limit, **filters))
    more = len(rows) > limit
    rows = rows[:limit]
    if direction is not Direction.AFTER:
        rows.reverse()
    return rows, more


def page_statement(
    cfg: StudyConfig, direction: Direction, key: int, limit: int, **filters: Any
) -> Select[Any]:
    """``browse_page``'s statement: the page's rows and one more."""
    base, ea = _browse_base(cfg, **filters)
    if direction is Direction.AFTER:
        stmt = base.where(ea.c.id > key).order_by(ea.c.id)
    elif direction is Direction.BEFORE:
        stmt = base.where(ea.c.id < key).order_by(ea.c.id.desc())
    else:
        stmt = base.order_by(ea.c.id.desc())
    return stmt.limit(limit + 1)


def window_edge(
    session: Session, direction: Direction, key: int, within: int, study_id: int
) -> int | None:
    """The id of the ``within``-th of the study's Examples from ``key`` in ``direction``
    (after it, before it, or from the end), None when there are fewer: the far end of a
    bounded walk, read from the primary key (``within`` rows, whatever the filters)."""
    mine = EXAMPLE.c.study_id == study_id
    if direction is Direction.AFTER:
        stmt = select(EXAMPLE.c.id).where(mine, EXAMPLE.c.id > key).order_by(EXAMPLE.c.id)
    elif direction is Direction.BEFORE:
        stmt = select(EXAMPLE.c.id).where(mine, EXAMPLE.c.id < key).order_by(EXAMPLE.c.id.desc())
    else:
        stmt = select(EXAMPLE.c.id).where(mine).order_by(EXAMPLE.c.id.desc())
    edge = session.connection().execute(stmt.offset(within - 1).limit(1)).scalar()
    return None if edge is None else int(edge)


def bounded_range(direction: Direction, key: int, edge: int | None) -> tuple[int, int]:
    """The ids a bounded walk may read: from ``key`` (exclusive) to ``edge`` (inclusive);
    no edge: to the end of the study in that direction."""
    if direction is Direction.AFTER:
        return key, INT32_MAX if edge is None else edge
    if direction is Direction.BEFORE:
        return 0 if edge is None else edge, key
    return 0 if edge is None else edge, INT32_MAX


def distinct_values(session: Session, study_id: int = DEFAULT_STUDY_ID) -> dict[str, list[str]]:
    conn = session.connection()
    mine = EXAMPLE.c.study_id == study_id

    def values(column: Any) -> list[str]:
        return [v for (v,) in conn.execute(select(column).where(mine).distinct().order_by(column))]

    concepts = set(values(EXAMPLE.c.subj)) | set(values(EXAMPLE.c.obj))
    return {
        "relations": values(EXAMPLE.c.relation),
        "concepts": sorted(concepts),
        "origins": values(EXAMPLE.c.origin),
    }


def validators_left(session: Session, example_id: int, author_id: int | None, study_id: int) -> int:
    """How many of the study's workers could still vote on this Example: members whose
    roles allow validation, not blocked, not its author, who have not voted on it. 0 means
    an Example the queue still wants votes for waits for someone new to join."""
    voted = select(VOTE.c.worker_id).where(VOTE.c.example_id == example_id)
    rows = session.connection().execute(
        select(WORKER.c.id, WORKER.c.roles).where(
            study_members(study_id),
            ~blocked_clause(WORKER.c.id, study_id, WORKER.c.blocked),
            WORKER.c.id.not_in(voted),
        )
    )
    return sum(1 for r in rows if r.id != author_id and (not r.roles or "validate" in r.roles))
