"""`vsr invite create`: invite links for in-house annotators and validators."""

from __future__ import annotations

import re
import secrets
from typing import Annotated

import typer

from vsr_cli.common import DB_HELP, STUDY_HELP, engine_for, settings_for, study_for
from vsr_cli.failure import CliError, CliUsageError

invite_app = typer.Typer(help="Invite links for in-house workers.", no_args_is_help=True)

_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{4,64}")


@invite_app.command("create")
def invite_create(
    label: Annotated[str, typer.Option(help="Who the link is for (shown to admins)")] = "",
    roles: Annotated[
        str, typer.Option(help="Comma-separated task kinds the link may do: generate, validate")
    ] = "generate,validate",
    token: Annotated[
        str | None,
        typer.Option(
            help="Use this token (4-64 of A-Z a-z 0-9 _ -) instead of a random one; "
            "an existing token with the same roles is reused"
        ),
    ] = None,
    study_slug: Annotated[str | None, typer.Option("--study", help=STUDY_HELP)] = None,
    database_url: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Create an invite link for one study and print the URLs of its tasks."""
    from sqlmodel import Session, select

    from vsr_cli.actor import cli_actor
    from vsr_core import audit
    from vsr_core.limits import LimitError, check_row
    from vsr_core.models import AdminRole, AuditKind, BatchKind, InviteToken
    from vsr_core.tables import INVITE_TOKEN

    kinds = [r.strip() for r in roles.split(",") if r.strip()]
    allowed = {k.value for k in BatchKind}
    bad = [k for k in kinds if k not in allowed]
    if bad or not kinds:
        raise CliUsageError(f"--roles takes {', '.join(sorted(allowed))}; got {roles!r}")
    if token is not None and not _TOKEN_RE.fullmatch(token):  # match() lets "x\n" through
        raise CliUsageError("--token must be 4-64 characters of A-Z a-z 0-9 _ -")
    label = label.strip()
    try:
        check_row(INVITE_TOKEN, {"label": label}, "--label")
    except LimitError as exc:
        raise CliUsageError(str(exc)) from None
    engine = engine_for(database_url)
    try:
        from vsr_core.models import AdminRole

        study = study_for(engine, study_slug, AdminRole.researcher)
        if study.archived:
            raise CliError(f"study {study.slug} is archived: it takes no new workers")
    except CliError:
        engine.dispose()
        raise
    with Session(engine) as session:
        existing = (
            session.exec(select(InviteToken).where(InviteToken.token == token)).first()
            if token
            else None
        )
        if existing is not None:
            if sorted(existing.roles) != sorted(kinds):
                raise CliError(f"token {token!r} exists with other roles {existing.roles}")
            if existing.study_id != study.id:
                raise CliError(f"token {token!r} exists for another study")
            invite = existing
        else:
            invite = InviteToken(
                token=token or secrets.token_urlsafe(18),
                label=label,
                roles=kinds,
                study_id=study.id,
            )
            session.add(invite)
            session.flush()
            # The token is a credential: the record names the invite by id and label.
            audit.record(
                session,
                cli_actor(session, study.id, AdminRole.researcher),
                AuditKind.invite_create,
                study_id=study.id,
                target=f"invite {invite.id}",
                change={"label": label, "roles": kinds},
            )
            session.commit()
            session.refresh(invite)
    engine.dispose()
    base = settings_for(database_url).base_url.rstrip("/")
    if not study.is_default:
        base += study.path_prefix
    # The links alone on stdout (for scripts); which study they open, on stderr.
    who = f" for {invite.label!r}" if invite.label else ""
    typer.echo(f"study {study.slug}: invite{who} ({', '.join(kinds)})", err=True)
    for kind in kinds:
        typer.echo(f"{kind}: {base}/start/{kind}?token={invite.token}")
