"""Stored studies (the Study table): create from a study file, find by slug, the default.

A study's data (pairs, Examples, batches, settings, jobs, matching runs, invites, platform
studies) carries its ``study_id``; workers are shared. The default study is the one
migration 0007 made (``DEFAULT_STUDY_ID``); commands without ``--study`` work in it.
"""

from __future__ import annotations

import hashlib

from sqlmodel import Session, col, select

from vsr_core.codes import give_study_codes
from vsr_core.models import DEFAULT_STUDY_ID, Study, StudyVersion
from vsr_core.studies.context import StudyContext, parsed_definition
from vsr_core.studies.definition import default_study_path
from vsr_core.types import utcnow


class StudyError(ValueError):
    """A study cannot be found or made; the message is one line for a person."""


def definition_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def create_study(session: Session, text: str, source: str = "<study>") -> Study:
    """Validate a study file's text and store it (flushed, not committed).

    Raises ``StudyFileError`` for an invalid file and ``StudyError`` for a slug in use.
    """
    digest = definition_hash(text)
    definition = parsed_definition(digest, text, source)
    if find_study(session, definition.slug) is not None:
        raise StudyError(f"a study with slug {definition.slug!r} exists already")
    study = Study(
        slug=definition.slug,
        name=definition.name,
        definition=text,
        definition_hash=digest,
        language=definition.default_language.code,
    )
    session.add(study)
    session.flush()
    add_version(session, study, 1)
    give_study_codes(session, study.id or 0)  # its own random codes, never a fixed word
    return study


def add_version(session: Session, study: Study, version: int) -> None:
    assert study.id is not None
    session.add(
        StudyVersion(
            study_id=study.id,
            version=version,
            definition=study.definition,
            definition_hash=study.definition_hash,
        )
    )
    session.flush()


def study_of_file(session: Session, text: str, source: str = "<study>") -> tuple[Study, bool]:
    """The stored study a study file defines, made from the file when its slug is new
    (flushed, not committed); ``(study, created)``. Raises ``StudyError`` when a study with
    that slug holds another definition: its data was collected under that one."""
    digest = definition_hash(text)
    definition = parsed_definition(digest, text, source)
    found = find_study(session, definition.slug)
    if found is None:
        return create_study(session, text, source), True
    stored = parsed_definition(found.definition_hash, found.definition, found.slug)
    if found.definition_hash != digest and stored != definition:
        raise StudyError(
            f"the stored study {found.slug!r} has another definition (sha256 "
            f"{found.definition_hash[:12]}; {source} is {digest[:12]}): use --study "
            f"{found.slug} for the stored one, or store the file first with "
            f"`vsr study update --file {source}`"
        )
    return found, False


def find_study(session: Session, slug: str) -> Study | None:
    return session.exec(select(Study).where(Study.slug == slug)).first()


def list_studies(session: Session) -> list[Study]:
    return list(session.exec(select(Study).order_by(col(Study.id))))


def default_study(session: Session) -> Study:
    """The default study (made by migration 0007; ``ensure_default_study`` on a wiped one)."""
    study = session.get(Study, DEFAULT_STUDY_ID)
    if study is None:
        raise StudyError("this database has no default study; run `vsr db upgrade`")
    return study


def resolve_study(session: Session, slug: str | None) -> Study:
    """The study named by ``slug``; without one, the default study."""
    if slug is None:
        return default_study(session)
    study = find_study(session, slug)
    if study is None:
        known = ", ".join(s.slug for s in list_studies(session)) or "none"
        raise StudyError(f"no study {slug!r} (studies: {known})")
    return study


def study_context(session: Session, slug: str | None) -> StudyContext:
    return StudyContext.of(resolve_study(session, slug))


def ensure_default_study(session: Session) -> Study:
    """Put the default study back (as migration 0007 made it) if it is gone; commits.
    For databases whose tables were emptied wholesale (the test suite's fixtures)."""
    study = session.get(Study, DEFAULT_STUDY_ID)
    if study is not None:
        return study
    from vsr_core.studies.definition import parse_study

    path = default_study_path()
    text = path.read_text(encoding="utf-8")
    definition = parse_study(text, str(path))
    study = Study(
        id=DEFAULT_STUDY_ID,
        slug=definition.slug,
        name=definition.name,
        definition=text,
        definition_hash=definition_hash(text),
        language=definition.default_language.code,
        is_default=True,
        created_at=utcnow(),
    )
    session.add(study)
    session.flush()
    add_version(session, study, 1)
    give_study_codes(session, DEFAULT_STUDY_ID)
    session.commit()
    return study
