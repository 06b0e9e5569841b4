"""`vsr platform sync|plan|apply`: the crowd-platform engine (webapp.platforms) for scripts."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from vsr_cli.common import DB_HELP, engine_for
from vsr_cli.failure import CliError

platform_app = typer.Typer(help="Crowd platforms: sync, plan, apply.", no_args_is_help=True)


class PlatformName(StrEnum):
    prolific = "prolific"
    mturk = "mturk"


PlatformOpt = Annotated[PlatformName, typer.Option(help="prolific or mturk")]
StudyOpt = Annotated[int, typer.Option(help="Platform study id (as on /admin/platform)", min=1)]
DbOpt = Annotated[str | None, typer.Option(help=DB_HELP)]
BaseUrlOpt = Annotated[
    str | None, typer.Option(help="Prolific API base URL (default: PROLIFIC_BASE_URL or the "
                                  "real API)")
]
ProductionOpt = Annotated[
    bool, typer.Option(help="MTurk: the production endpoint instead of the sandbox")
]


def _client(name: PlatformName, base_url: str | None, production: bool, log: Any) -> Any:
    from webapp.platforms.base import PlatformError

    try:
        if name is PlatformName.prolific:
            from webapp.platforms.prolific import ProlificPlatform

            return ProlificPlatform(base_url=base_url, log=log)
        from webapp.platforms.mturk import MTurkPlatform

        return MTurkPlatform(production=production)
    except PlatformError as exc:
        raise CliError(str(exc)) from None


def _run(action: str, platform: PlatformName, study_id: int, database_url: str | None,
         base_url: str | None, production: bool) -> None:
    from sqlmodel import Session

    from vsr_core.models import PlatformStudy
    from webapp.platforms import engine as eng
    from webapp.platforms.base import PlatformError

    engine = engine_for(database_url)
    with Session(engine) as session:
        study = session.get(PlatformStudy, study_id)
        if study is None or study.platform != platform.value:
            raise CliError(f"no {platform.value} study with id {study_id}")
        try:
            if action == "plan":
                added = eng.plan(session, study, eng.Rules(**study.settings.get("rules", {})))
                for a in added:
                    cents = f" {a.amount_cents}c" if a.amount_cents else ""
                    typer.echo(f"{a.kind} {a.target}{cents} {a.reason}".rstrip())
                typer.echo(f"{len(added)} new actions planned")
                return
            log = eng.CallLog(platform.value)
            client = _client(platform, base_url, production, log)
            try:
                _send(action, session, client, study)
            finally:
                session.rollback()
                log.save(session)
        except PlatformError as exc:
            raise CliError(str(exc)) from None


def _send(action: str, session: Any, client: Any, study: Any) -> None:
    from webapp.platforms import engine as eng

    if action == "sync":
        from webapp.crowd.leases import PairStrategy
        from webapp.validate.strategy import ExampleStrategy

        released = eng.sync(session, client, study, {
            "generate": PairStrategy(), "validate": ExampleStrategy()})
        typer.echo(f"synced; {released} leases released")
    else:
        counts = eng.apply(session, client, study)
        typer.echo(f"{counts['done']} done, {counts['failed']} failed")


@platform_app.command("sync")
def sync(platform: PlatformOpt, study: StudyOpt, database_url: DbOpt = None,
         base_url: BaseUrlOpt = None, production: ProductionOpt = False) -> None:
    """Fetch submissions; participants who returned or timed out give their leases back."""
    _run("sync", platform, study, database_url, base_url, production)


@platform_app.command("plan")
def plan(platform: PlatformOpt, study: StudyOpt, database_url: DbOpt = None) -> None:
    """Print and store the approve/reject/bonus actions; nothing is sent."""
    _run("plan", platform, study, database_url, None, False)


@platform_app.command("apply")
def apply(platform: PlatformOpt, study: StudyOpt, database_url: DbOpt = None,
          base_url: BaseUrlOpt = None, production: ProductionOpt = False) -> None:
    """Send every planned action once (safe to re-run after a crash)."""
    _run("apply", platform, study, database_url, base_url, production)
