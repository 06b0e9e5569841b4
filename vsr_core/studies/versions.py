"""Changing a stored study: a new version of its definition, and archiving it.

A study's collected captions are text in its first language, stored with relation ids and
COCO category names (docs/studies.md). A new definition may change anything those captions
do not depend on (worker texts, semantics, sampling, sources, collection defaults, new
relations or concepts, which relations are offered); it is refused, with the reason, where
a stored caption would no longer read or parse: the first language's code, template,
copula or ellipsis once captions exist, a relation in use removed or renamed, or a concept
in use renamed.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func
from sqlmodel import Session, col, select

from vsr_core.models import Example, Study, StudyVersion
from vsr_core.studies.context import parsed_definition
from vsr_core.studies.definition import StudyDefinition
from vsr_core.studies.store import StudyError, add_version, definition_hash, find_study
from vsr_core.types import utcnow


@dataclass(frozen=True)
class Updated:
    study: Study
    version: int  # 0: the file is the stored definition already; nothing was stored
    previous_hash: str


def _used(session: Session, study_id: int) -> tuple[dict[str, int], set[str]]:
    """(relation id -> Examples using it, COCO concepts in those Examples) of a study."""
    rows = session.exec(
        select(Example.relation, func.count())
        .where(Example.study_id == study_id)
        .group_by(col(Example.relation))
    ).all()
    concepts: set[str] = set()
    for subj, obj in session.exec(
        select(Example.subj, Example.obj).where(Example.study_id == study_id).distinct()
    ):
        concepts.update((subj, obj))
    return {str(r): int(n) for r, n in rows}, concepts


def update_problems(
    old: StudyDefinition, new: StudyDefinition, relations: dict[str, int], concepts: set[str]
) -> list[str]:
    """Why ``new`` cannot replace ``old`` given the captions stored (empty: it can)."""
    if not relations:
        return []
    problems = []
    a, b = old.default_language, new.default_language
    n = sum(relations.values())
    for field in ("code", "template", "copula", "ellipsis"):
        if getattr(a, field) != getattr(b, field):
            problems.append(
                f"the first language's {field} changes from {getattr(a, field)!r} to "
                f"{getattr(b, field)!r}, but {n} stored Examples are written with it"
            )
    names = {r.id: r.name for r in b.relations}
    for r in a.relations:
        used = relations.get(r.id, 0)
        if not used:
            continue
        if r.id not in names:
            problems.append(f"relation {r.id!r} is used by {used} Examples and cannot be removed")
        elif names[r.id] != r.name:
            problems.append(
                f"relation {r.id!r} is written {r.name!r} in {used} stored Examples "
                f"and cannot be renamed {names[r.id]!r}"
            )
    for concept in sorted(concepts):
        before, after = a.concepts.get(concept, concept), b.concepts.get(concept, concept)
        if before != after:
            problems.append(
                f"concept {concept!r} is written {before!r} in stored Examples and "
                f"cannot be renamed {after!r}"
            )
    return problems


def update_study(session: Session, text: str, source: str = "<study>") -> Updated:
    """Store ``text`` as the next version of the study of its slug (flushed, not committed).
    Raises ``StudyError`` (one line: every reason, '; '-joined) when it would invalidate
    collected data, or when no study has the file's slug."""
    digest = definition_hash(text)
    new = parsed_definition(digest, text, source)
    study = find_study(session, new.slug)
    if study is None:
        raise StudyError(
            f"no study {new.slug!r} to update: create it with `vsr study create --file {source}`"
        )
    assert study.id is not None
    previous = study.definition_hash
    if previous == digest:
        return Updated(study, 0, previous)
    old = parsed_definition(study.definition_hash, study.definition, study.slug)
    problems = update_problems(old, new, *_used(session, study.id))
    if problems:
        raise StudyError("; ".join(problems))
    last = session.exec(
        select(func.max(StudyVersion.version)).where(StudyVersion.study_id == study.id)
    ).one()
    study.definition, study.definition_hash = text, digest
    study.name, study.language = new.name, new.default_language.code
    session.add(study)
    version = int(last or 0) + 1
    add_version(session, study, version)
    return Updated(study, version, previous)


def archive_study(session: Session, slug: str) -> Study:
    """Archive a study (flushed, not committed): no new workers or batches; data kept."""
    study = find_study(session, slug)
    if study is None:
        raise StudyError(f"no study {slug!r}")
    if study.is_default:
        raise StudyError(
            f"{slug!r} is the default study (commands without --study work in "
            "it); it cannot be archived"
        )
    if study.archived_at is None:
        study.archived_at = utcnow()
        session.add(study)
        session.flush()
    return study


def unarchive_study(session: Session, slug: str) -> Study:
    """Undo ``archive_study`` (flushed, not committed): the study takes workers and batches
    again."""
    study = find_study(session, slug)
    if study is None:
        raise StudyError(f"no study {slug!r}")
    if study.archived_at is not None:
        study.archived_at = None
        session.add(study)
        session.flush()
    return study
