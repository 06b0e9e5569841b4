"""`vsr study check|show|create|update|archive|unarchive|set|list`: study definition files
(docs/studies.md) and the studies stored in the database.

`check` and `show --file` read a file only; `create`, `list` and `show SLUG` use the
database (vsr_core.studies.store).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from vsr_cli.common import DB_HELP, engine_for, study_for
from vsr_cli.failure import CliError, CliUsageError

study_app = typer.Typer(
    name="study",
    help="Study definition files (TOML; see docs/studies.md).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

FILE_HELP = "A study definition file (TOML)"


if TYPE_CHECKING:
    from sqlmodel import Session

    from vsr_core.models import Study
    from vsr_core.studies.definition import StudyDefinition


def load_or_fail(path: Path) -> StudyDefinition:
    """The study of a file, or every problem printed (one line each) and a failing exit."""
    from vsr_core.studies.definition import StudyFileError, load_study

    try:
        return load_study(path)
    except StudyFileError as exc:
        # One line per problem, each naming the file, line and field; then a failing exit.
        for problem in exc.problems[:-1]:
            typer.secho(f"error: {problem}", err=True, fg="red")
        raise CliError(exc.problems[-1]) from None


def _summary(path: Path, full: bool) -> list[str]:
    return _definition_lines(load_or_fail(path), full)


def _definition_lines(study: StudyDefinition, full: bool) -> list[str]:
    lines = [f"{study.slug}: {study.name}"]
    for src in study.sources:
        lines.append(f"  source ({src.format}): {src.annotations}")
    c, s = study.concepts, study.sampling
    lines.append(
        f"  concepts: allow {len(c.allow) or 'all'}, deny {len(c.deny)}, supercategories "
        f"{', '.join(c.supercategories) or 'all'}"
    )
    lines.append(
        f"  sampling: {s.instances_per_concept} instance per concept, area >= "
        f"{s.min_area_px:g} px and >= {s.min_area_share:.1%} of the image, prefer contrast "
        f"{'yes' if s.prefer_contrast else 'no'}"
    )
    for lang in study.languages:
        on = sum(r.enabled for r in lang.relations)
        lines.append(
            f"  language {lang.code}: template {lang.template!r}, {len(lang.relations)} "
            f"relations ({on} on), {len(lang.concepts)} concept names, "
            f"{len(lang.texts.examples)} worked examples"
        )
        if full:
            for r in lang.relations:
                state = "" if r.enabled else " (off)"
                lines.append(f"    {r.id} = {r.name} [{', '.join(r.categories)}]{state}")
    from vsr_core.relation_semantics import builtin_table, table_for_study

    sem = study.semantics
    # Which table matching will use for this study (matching.study_scope).
    table = (
        "VSR's built-in table"
        if table_for_study(study) is builtin_table()
        else "the study's own table"
    )
    lines.append(
        f"  semantics: {len(sem.equivalents)} synonym groups, {len(sem.converses)} converses, "
        f"{len(sem.symmetric)} symmetric, {len(sem.entailments)} entailments, "
        f"{len(sem.contradictions)} contradictions, {len(sem.overlaps)} overlaps "
        f"(matching uses {table})"
    )
    k = study.collection
    lines.append(
        f"  collection: {k.votes_per_example}-{k.max_votes_per_example} votes, keep at "
        f">= {k.keep_threshold:.3g}, generate {k.generate_batch_size} in "
        f"{k.generate_minutes} min, validate {k.validate_batch_size} in "
        f"{k.validate_minutes} min, gold rate {k.gold_rate:g}"
    )
    return lines


def fail_on_missing_sources(path: Path, study: StudyDefinition) -> None:
    """Every source file or folder that is not there, one line each, then a failing exit."""
    from vsr_core.studies.sources import missing_sources

    problems = missing_sources(study, path.read_text(encoding="utf-8"), str(path))
    if problems:
        for problem in problems[:-1]:
            typer.secho(f"error: {problem}", err=True, fg="red")
        raise CliError(problems[-1])


@study_app.command("check")
def check(file: Path = typer.Option(..., "--file", help=FILE_HELP)) -> None:
    """Validate a study file and that its source files exist; print one line per problem
    (file:line: field: message)."""
    study = load_or_fail(file)
    fail_on_missing_sources(file, study)
    typer.echo(f"ok: {_definition_lines(study, full=False)[0]}")


@study_app.command("show")
def show(
    slug: str | None = typer.Argument(None, help="A stored study's slug (see `vsr study list`)"),
    file: Path | None = typer.Option(None, "--file", help=FILE_HELP),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
) -> None:
    """What a study defines, every relation included: a stored study (SLUG) or a file."""
    if (slug is None) == (file is None):
        raise CliUsageError("give a stored study's SLUG or --file FILE (one of them)")
    if file is not None:
        typer.echo("\n".join(_summary(file, full=True)))
        return
    engine = engine_for(database_url)
    try:
        study = study_for(engine, slug)
        from sqlalchemy import func
        from sqlmodel import Session, select

        from vsr_core.models import Study, StudyVersion

        with Session(engine) as session:
            row = session.get(Study, study.id)
            assert row is not None
            created, archived = row.created_at, row.archived_at
            versions = session.exec(
                select(func.count()).where(StudyVersion.study_id == study.id)
            ).one()
    finally:
        engine.dispose()
    lines = [
        f"{study.slug}: {study.name}"
        + (" (default)" if study.is_default else "")
        + (f" (archived {archived:%Y-%m-%d %H:%M} UTC)" if archived else ""),
        f"  definition sha256 {study.definition_hash} (version {versions}), first stored "
        f"{created:%Y-%m-%d %H:%M} UTC",
        f"  language {study.language.code}; entry links /s/{study.slug}/start/generate and "
        f"/s/{study.slug}/start/validate",
    ]
    typer.echo("\n".join(lines + _definition_lines(study.definition, full=True)[1:]))


_T = TypeVar("_T")


def _store_file(
    file: Path,
    database_url: str | None,
    store: Callable[[Session, str, str], _T],
    study_of: Callable[[_T], Study],
    record: Callable[[Session, _T], None],
) -> tuple[_T, str, str]:
    """Validate a study file (every problem one line), then ``store(session, text, name)``
    and ``record`` it in the audit trail, in one transaction; a StudyError is one line ending
    "nothing was stored". Returns what ``store`` returned and the stored study's slug and
    hash."""
    load_or_fail(file)  # every problem of the file, one line each
    text = file.read_text(encoding="utf-8")
    from sqlmodel import Session

    from vsr_core.studies.store import StudyError

    engine = engine_for(database_url)
    try:
        with Session(engine) as session:
            try:
                done = store(session, text, str(file))
            except StudyError as exc:
                raise CliError(f"{exc}; nothing was stored") from None
            record(session, done)
            session.commit()
            study = study_of(done)
            return done, study.slug, study.definition_hash
    finally:
        engine.dispose()


@study_app.command("create")
def create(
    file: Path = typer.Option(..., "--file", help=FILE_HELP),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
) -> None:
    """Validate a study file and store it as a new study (its slug must be new). With
    VSR_ADMIN set, that admin becomes the study's owner."""
    from vsr_cli.actor import ADMIN_ENV
    from vsr_core.studies.store import create_study

    owner: list[str] = []

    def create_owned(session: Session, text: str, source: str) -> Study:
        from vsr_cli.actor import cli_actor
        from vsr_core import roles
        from vsr_core.models import AdminRole, AdminUser

        actor = cli_actor(session, None, None)  # an unknown VSR_ADMIN stores nothing
        study = create_study(session, text, source)
        # The study's record before its owner's grant: the trail reads in the order it happened.
        record_create(session, study)
        if actor.admin_id is not None:
            admin = session.get(AdminUser, actor.admin_id)
            assert admin is not None and study.id is not None
            roles.grant(session, actor, admin, study.id, AdminRole.owner)
            owner.append(admin.username)
        return study

    _, slug, digest = _store_file(
        file, database_url, create_owned, lambda study: study, lambda session, study: None
    )
    typer.echo(
        f"created study {slug} (sha256 {digest[:12]}): entry links /s/{slug}/start/generate "
        f"and /s/{slug}/start/validate; next: vsr sample --study {slug}"
    )
    if owner:
        typer.echo(f"owner: {owner[0]}")
    else:
        typer.echo(
            f"no admin holds a role in it yet: `vsr admin grant USER --study {slug} --role "
            f"owner` (or set {ADMIN_ENV} when creating it)",
            err=True,
        )


def record_create(session: Session, study: Study) -> None:
    """The audit record of a study made from a file (``vsr study create``, ``vsr sample
    --study-file``); no role is needed: the study is new."""
    from vsr_cli.actor import cli_actor
    from vsr_core import audit
    from vsr_core.models import AuditKind

    audit.record(
        session,
        cli_actor(session, None, None),
        AuditKind.study_create,
        study_id=study.id,
        target=f"study {study.slug}",
        change={"name": study.name, "sha256": study.definition_hash},
    )


def _record_update(session: Session, done: Any) -> None:
    """A new version is recorded (a researcher's to make); an unchanged file stores nothing."""
    if done.version == 0:
        return
    from vsr_cli.actor import cli_actor
    from vsr_core import audit
    from vsr_core.models import AdminRole, AuditKind

    study = done.study
    audit.record(
        session,
        cli_actor(session, study.id, AdminRole.researcher),
        AuditKind.study_update,
        study_id=study.id,
        target=f"study {study.slug}",
        change={
            "version": done.version,
            **audit.changed({"sha256": done.previous_hash}, {"sha256": study.definition_hash}),
        },
    )


@study_app.command("update")
def update(
    file: Path = typer.Option(..., "--file", help=FILE_HELP),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
) -> None:
    """Store a new version of a stored study's definition (the study of the file's slug);
    its data stays. Refused, with the reason, where a stored caption would no longer read:
    the first language's code or template, a relation or concept in use removed or renamed."""
    from vsr_core.studies.versions import Updated, update_study

    def update_checked(session: Session, text: str, source: str) -> Updated:
        from vsr_cli.actor import cli_actor
        from vsr_core.models import AdminRole

        done = update_study(session, text, source)
        assert done.study.id is not None
        # Checked before the commit: refused, the new version is rolled back.
        cli_actor(session, done.study.id, AdminRole.researcher)
        return done

    done, slug, digest = _store_file(
        file, database_url, update_checked, lambda u: u.study, _record_update
    )
    if done.version == 0:
        typer.echo(
            f"study {slug} unchanged: {file} is its stored definition (sha256 {digest[:12]})"
        )
    else:
        typer.echo(
            f"updated study {slug} to version {done.version} (sha256 "
            f"{done.previous_hash[:12]} -> {digest[:12]}); its data is kept"
        )


@study_app.command("archive")
def archive(
    slug: str = typer.Argument(..., help="The study's slug (see `vsr study list`)"),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
) -> None:
    """Archive a study: it takes no new workers or batches (batches already open may be
    finished), the dashboard marks it archived, and its data stays for export."""
    from sqlmodel import Session

    from vsr_cli.actor import cli_actor
    from vsr_core import audit
    from vsr_core.models import AdminRole, AuditKind
    from vsr_core.studies.store import StudyError, find_study
    from vsr_core.studies.versions import archive_study

    engine = engine_for(database_url)
    try:
        with Session(engine) as session:
            from vsr_cli.actor import cli_actor
            from vsr_core.models import AdminRole
            from vsr_core.studies.store import find_study

            found = find_study(session, slug)
            if found is not None and found.id is not None:
                cli_actor(session, found.id, AdminRole.owner)  # it ends the recruitment
            try:
                was = find_study(session, slug)
                already = was is not None and was.archived_at is not None
                study = archive_study(session, slug)
            except StudyError as exc:
                raise CliError(str(exc)) from None
            if not already:
                audit.record(
                    session,
                    cli_actor(session, study.id, AdminRole.owner),
                    AuditKind.study_archive,
                    study_id=study.id,
                    target=f"study {study.slug}",
                    change=audit.changed({"archived": False}, {"archived": True}),
                )
            session.commit()
    finally:
        engine.dispose()
    typer.echo(f"archived study {slug}: it takes no new workers or batches; its data stays")


@study_app.command("unarchive")
def unarchive(
    slug: str = typer.Argument(..., help="The study's slug (see `vsr study list`)"),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
) -> None:
    """Undo `vsr study archive`: the study takes new workers and batches again."""
    from sqlmodel import Session

    from vsr_cli.actor import cli_actor
    from vsr_core import audit
    from vsr_core.models import AdminRole, AuditKind
    from vsr_core.studies.store import StudyError, find_study
    from vsr_core.studies.versions import unarchive_study

    engine = engine_for(database_url)
    try:
        with Session(engine) as session:
            found = find_study(session, slug)
            if found is None or found.id is None:
                raise CliUsageError(f"no study {slug!r} (see `vsr study list`)")
            actor = cli_actor(session, found.id, AdminRole.owner)  # it reopens recruitment
            was_archived = found.archived_at is not None
            try:
                study = unarchive_study(session, slug)
            except StudyError as exc:
                raise CliError(str(exc)) from None
            if was_archived:
                audit.record(
                    session,
                    actor,
                    AuditKind.study_archive,
                    study_id=study.id,
                    target=f"study {study.slug}",
                    change=audit.changed({"archived": True}, {"archived": False}),
                )
            session.commit()
    finally:
        engine.dispose()
    state = "reopened" if was_archived else "was not archived"
    typer.echo(f"study {slug} {state}: it takes new workers and batches")


@study_app.command("set")
def set_(
    assignments: list[str] = typer.Argument(
        ..., help="KEY=VALUE, e.g. generate_batches_per_day=0 (the dashboard's settings)"
    ),
    study: str | None = typer.Option(None, "--study", help="The study's slug (default: vsr)"),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
) -> None:
    """Change a study's run-time settings, as the dashboard's settings page does (a
    researcher's to change; recorded in the audit trail)."""
    from pydantic import ValidationError
    from sqlmodel import Session

    from vsr_cli.actor import cli_actor
    from vsr_core.models import AdminRole
    from vsr_core.studies.settings import StudyConfig, save_study_config

    changes: dict[str, Any] = {}
    for item in assignments:
        key, sep, value = item.partition("=")
        if not sep or key not in StudyConfig.model_fields:
            known = ", ".join(sorted(StudyConfig.model_fields))
            raise CliUsageError(f"{item!r} is not KEY=VALUE with a study setting as KEY ({known})")
        changes[key] = value
    engine = engine_for(database_url)
    try:
        found = study_for(engine, study)
        with Session(engine) as session:
            actor = cli_actor(session, found.id, AdminRole.researcher)
            try:
                config = save_study_config(session, changes, found.id, actor=actor)
            except ValidationError as exc:
                first = exc.errors()[0]
                raise CliUsageError(
                    f"{first['loc'][0]}: {first['msg']} (got {first.get('input')!r})"
                ) from None
            except ValueError as exc:
                raise CliUsageError(str(exc)) from None
    finally:
        engine.dispose()
    shown = ", ".join(f"{k}={getattr(config, k)!r}" for k in changes)
    typer.echo(f"study {found.slug}: {shown}")


@study_app.command("list")
def list_(
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
) -> None:
    """The stored studies: slug, language, pairs, Examples, definition hash, name."""
    from sqlalchemy import func
    from sqlmodel import Session, select

    from vsr_core.models import Example, ImagePair
    from vsr_core.studies.store import list_studies

    engine = engine_for(database_url)
    try:
        with Session(engine) as session:
            rows = []
            for study in list_studies(session):
                pairs = session.exec(
                    select(func.count()).where(ImagePair.study_id == study.id)
                ).one()
                examples = session.exec(
                    select(func.count()).where(Example.study_id == study.id)
                ).one()
                mark = "*" if study.is_default else " "
                state = " (archived)" if study.archived_at is not None else ""
                rows.append(
                    f"{mark} {study.slug:<20} {study.language:<8} {pairs:>8} pairs "
                    f"{examples:>8} examples  {study.definition_hash[:12]}  {study.name}{state}"
                )
    finally:
        engine.dispose()
    typer.echo("\n".join(rows))
