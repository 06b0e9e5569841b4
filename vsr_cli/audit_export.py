"""`vsr admin audit-export`: the audit trail as JSONL (one record a line, oldest first), to
stdout or a file; the export itself is recorded (docs/dashboard.md, "Audit trail")."""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vsr_cli.common import DB_HELP, engine_for, study_for
from vsr_cli.failure import CliError, CliUsageError

if TYPE_CHECKING:
    from vsr_core.models import AuditKind

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _day(text: str | None, option: str) -> datetime | None:
    if text is None:
        return None
    try:
        if not _DATE.fullmatch(text):
            raise ValueError
        return datetime.combine(date.fromisoformat(text), time(), tzinfo=UTC)
    except ValueError:
        raise CliUsageError(f"{option} takes a date as YYYY-MM-DD, not {text!r}") from None


def _kind(text: str | None) -> AuditKind | None:
    from vsr_core.models import AuditKind

    if text is None:
        return None
    try:
        return AuditKind(text)
    except ValueError:
        known = ", ".join(k.value for k in AuditKind)
        raise CliUsageError(f"--kind takes one of {known}; got {text!r}") from None


def audit_export(
    study: Annotated[
        str | None, typer.Option("--study", help="Only this study's records (default: all)")
    ] = None,
    actor: Annotated[str | None, typer.Option(help="Only this actor's records")] = None,
    kind: Annotated[str | None, typer.Option(help="Only records of this kind (e.g. login)")] = None,
    since: Annotated[str | None, typer.Option(help="From this day on, YYYY-MM-DD (UTC)")] = None,
    until: Annotated[
        str | None, typer.Option(help="Up to and including this day, YYYY-MM-DD (UTC)")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write to this file (default: stdout)")
    ] = None,
    database_url: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Export the audit trail as JSONL: one record per line, oldest first."""
    from sqlmodel import Session

    from vsr_cli.actor import cli_actor
    from vsr_core import audit
    from vsr_core.models import AdminRole, AuditKind

    start, end = _day(since, "--since"), _day(until, "--until")
    if actor is not None and not 1 <= len(actor.strip()) <= 128:
        raise CliUsageError("--actor takes a name of 1 to 128 characters")
    if out is not None and not out.parent.is_dir():
        raise CliError(f"cannot write {out}: the folder {out.parent} does not exist")
    engine = engine_for(database_url)
    try:
        study_id = study_for(engine, study).id if study is not None else None
        where = audit.Filter(
            actor=actor.strip() if actor else None,
            kind=_kind(kind),
            study_ids=(study_id,) if study_id is not None else None,
            unscoped=study_id is None,
            since=start,
            until=end + timedelta(days=1) if end is not None else None,
        )
        with Session(engine) as session:
            who = cli_actor(session, study_id, AdminRole.viewer)
            # Recorded before the first line is written: reading the trail out is an action.
            audit.record(
                session,
                who,
                AuditKind.audit_export,
                study_id=study_id,
                target=str(out) if out is not None else "stdout",
                change={"filters": where.described()},
            )
            session.commit()
        rows = audit.stream(engine, where=where)
        if out is None:
            for row in rows:
                typer.echo(json.dumps(row, ensure_ascii=False))
            return
        # Written beside the target and renamed: a failure leaves no half-written file.
        part = out.with_name(out.name + ".part")
        count = 0
        try:
            with part.open("w", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                    count += 1
            os.replace(part, out)
        except OSError as exc:
            part.unlink(missing_ok=True)
            raise CliError(f"cannot write {out}: {exc.strerror or exc}") from None
        typer.echo(f"{count} audit records written to {out}", err=True)
    finally:
        engine.dispose()
