"""The facts of the datasheet (Gebru et al., *Datasheets for Datasets*) that the database
holds: platforms, batches, measured time per item, effective pay, the consent text and its
hash, and what ``meta_data.csv`` holds. The researcher's own facts (licence, ethics
approval, funding, contact, intended uses) come from the study file's ``[card]``.

Read in the export's one transaction, so the card describes exactly the data it ships with.
"""

from __future__ import annotations

import csv
import hashlib
import io
import statistics
from collections import Counter
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection
from sqlmodel import Session

from vsr_core.models import PlatformStudy
from vsr_core.studies.context import StudyContext
from vsr_core.studies.settings import DEFAULT_CONSENT, load_study_config
from vsr_core.tables import ANNOTATION, BATCH, EXAMPLE, PLATFORM_STUDY, VOTE, WORKER

NOT_STATED = "not stated"
# Columns of meta_data.csv shown with their values only when every value is shared by at
# least this many people (a small cell would single someone out).
MIN_CELL = 5
CARD_FIELDS = (
    "license",
    "creators",
    "funding",
    "ethics_approval",
    "contact",
    "version",
    "intended_uses",
    "out_of_scope_uses",
    "citation",
)


def researcher_facts(study: StudyContext) -> dict[str, str | None]:
    """The study file's ``[card]`` values (None where the file does not state one)."""
    card = study.definition.card
    return {name: getattr(card, name) for name in CARD_FIELDS}


def collection_facts(conn: Connection, study: StudyContext) -> dict[str, Any]:
    """Platforms, people by source, batches, time per item, pay and consent of the study."""
    mine = EXAMPLE.c.study_id == study.id
    voters = select(VOTE.c.worker_id).join(EXAMPLE, EXAMPLE.c.id == VOTE.c.example_id).where(mine)
    authors = select(EXAMPLE.c.author_id).where(mine, EXAMPLE.c.author_id.is_not(None))
    sources = Counter(
        src
        for (src,) in conn.execute(
            select(WORKER.c.source).where(
                WORKER.c.id.in_(voters.union(authors)),
                # an imported worker's repeated votes ("17#2") are the same person
                ~((WORKER.c.source == "imported") & WORKER.c.external_id.contains("#")),
            )
        )
    )
    batches: dict[str, dict[str, int]] = {}
    for kind, status, n in conn.execute(
        select(BATCH.c.kind, BATCH.c.status, func.count())
        .where(BATCH.c.study_id == study.id)
        .group_by(BATCH.c.kind, BATCH.c.status)
    ):
        batches.setdefault(kind, {})[status] = int(n)
    vote_ms = [
        int(ms)
        for (ms,) in conn.execute(
            select(VOTE.c.duration_ms)
            .join(EXAMPLE, EXAMPLE.c.id == VOTE.c.example_id)
            .where(mine, VOTE.c.duration_ms.is_not(None))
        )
    ]
    caption_ms = [
        int(ms)
        for (ms,) in conn.execute(
            select(ANNOTATION.c.duration_ms).where(
                ANNOTATION.c.duration_ms.is_not(None),
                ANNOTATION.c.id.in_(select(EXAMPLE.c.annotation_id).where(mine)),
            )
        )
    ]
    first, last = conn.execute(
        select(func.min(BATCH.c.created_at), func.max(BATCH.c.created_at)).where(
            BATCH.c.study_id == study.id
        )
    ).one()
    # The newest Example or vote: the date croissant.json publishes, so the same data gives
    # the same document (a wall-clock date would make two builds of it differ).
    newest = [
        conn.execute(select(func.max(EXAMPLE.c.created_at)).where(mine)).scalar(),
        conn.execute(
            select(func.max(VOTE.c.created_at))
            .join(EXAMPLE, EXAMPLE.c.id == VOTE.c.example_id)
            .where(mine)
        ).scalar(),
    ]
    newest_data = max((t for t in newest if t is not None), default=None)
    with Session(bind=conn) as session:
        config = load_study_config(session, study.id)
        pay = _pay_lines(session, study.id)
    consent = (
        study.language.texts.consent
        if config.consent_text == DEFAULT_CONSENT
        else config.consent_text
    )
    return {
        "platforms": sorted(
            {
                p
                for (p,) in conn.execute(
                    select(PLATFORM_STUDY.c.platform).where(PLATFORM_STUDY.c.study_id == study.id)
                )
            }
        ),
        "people_by_source": dict(sorted(sources.items())),
        "batches": {k: dict(sorted(v.items())) for k, v in sorted(batches.items())},
        "median_seconds_per_vote": _median_s(vote_ms),
        "median_seconds_per_caption": _median_s(caption_ms),
        "n_timed_votes": len(vote_ms),
        "n_timed_captions": len(caption_ms),
        "first_batch": first.date().isoformat() if first else None,
        "last_batch": last.date().isoformat() if last else None,
        "newest_data": newest_data.date().isoformat() if newest_data else None,
        "pay": pay,
        "consent_text": consent,
        "consent_sha256": hashlib.sha256(consent.encode()).hexdigest(),
        "batch_settings": {
            "generate": [config.generate_batch_size, config.generate_minutes],
            "validate": [config.validate_batch_size, config.validate_minutes],
        },
    }


def _median_s(ms: list[int]) -> float | None:
    return round(statistics.median(ms) / 1000, 1) if ms else None


def _pay_lines(session: Session, study_id: int) -> list[str]:
    """Effective pay of each platform study (reward over the measured time per item answered,
    ``webapp.platforms.drafts.effective_pay``)."""
    from sqlmodel import select as sql_select

    from webapp.platforms.drafts import effective_pay

    out = []
    for ps in session.exec(
        sql_select(PlatformStudy)
        .where(PlatformStudy.study_id == study_id)
        .order_by(PlatformStudy.id)  # type: ignore[arg-type]
    ):
        kind = ps.settings.get("kind", "?")
        out.append(f"{ps.platform} {kind}: {effective_pay(session, ps).line()}")
    return out


def demographics_summary(meta_csv: str | None) -> dict[str, Any]:
    """What meta_data.csv holds: its columns, how many people, and the values of a column
    only when no value is shared by fewer than MIN_CELL people."""
    if not meta_csv:
        return {"n_people": 0, "columns": {}}
    rows = list(csv.DictReader(io.StringIO(meta_csv)))
    columns: dict[str, Any] = {}
    for name in rows[0] if rows else []:
        if name == "id":
            continue
        values = Counter(r[name] for r in rows if r.get(name))
        shown = all(n >= MIN_CELL for n in values.values()) and len(values) <= 12
        columns[name] = {
            "n_given": sum(values.values()),
            "values": dict(sorted(values.items())) if shown else None,
            "n_distinct": len(values),
        }
    return {"n_people": len(rows), "columns": columns}
