"""The data page's figures: Examples filtered by relation, concept, agreement, origin, gold
and caption text, the values those filters offer, and who could still vote on an Example."""

from __future__ import annotations

import enum
from typing import Any

from sqlalchemy import Select, and_, func, or_, select
from sqlalchemy.sql import Subquery
from sqlmodel import Session

from vsr_core.models import DEFAULT_STUDY_ID
from vsr_core.standing import blocked_clause, study_members
from vsr_core.studies.settings import StudyConfig
from vsr_core.tables import EXAMPLE, VOTE, WORKER
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
) -> tuple[Subquery, list[Any]]:
    # Conditions on the Example itself go inside the agreement subquery, so only the matching
    # Examples' votes are grouped; conditions on the agreement apply to its rows.
    rows: list[Any] = []
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
        conds.append(ea.c.verdict != ea.c.verdict_alt)
    return ea, conds


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
        "excluded": c.verdict == "excluded",
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
    base, ea = _browse_base(cfg, **filters)
    return _rows(session, base.order_by(ea.c.id).offset(offset).limit(limit))


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
    ea, conds = example_filters(cfg, **filters)
    stmt = select(func.count()).select_from(ea)
    if conds:
        stmt = stmt.where(*conds)
    return int(session.connection().execute(stmt).scalar_one())


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
    base, ea = _browse_base(cfg, **filters)
    if direction is Direction.AFTER:
        stmt = base.where(ea.c.id > key).order_by(ea.c.id)
    elif direction is Direction.BEFORE:
        stmt = base.where(ea.c.id < key).order_by(ea.c.id.desc())
    else:
        stmt = base.order_by(ea.c.id.desc())
    rows = _rows(session, stmt.limit(limit + 1))
    more = len(rows) > limit
    rows = rows[:limit]
    if direction is not Direction.AFTER:
        rows.reverse()
    return rows, more


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
