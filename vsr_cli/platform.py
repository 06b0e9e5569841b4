"""`vsr platform sync|plan|apply`: the crowd-platform engine (webapp.platforms) for scripts."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vsr_cli.common import DB_HELP, STUDY_HELP, engine_for
from vsr_cli.failure import CliError

if TYPE_CHECKING:
    from vsr_core.audit import Actor

platform_app = typer.Typer(
    help="Crowd platforms: create, publish, pause, resume, sync, plan, apply, reconcile.",
    no_args_is_help=True,
)


class PlatformName(StrEnum):
    prolific = "prolific"
    mturk = "mturk"


PlatformOpt = Annotated[PlatformName, typer.Option(help="prolific or mturk")]
# A platform study (one Prolific study / MTurk HIT) is named by its id; --study names the
# site's study by slug, as on every other command, and is checked against it when given.
PlatformStudyOpt = Annotated[
    int, typer.Option("--platform-study", help="Platform study id (as on /admin/platform)", min=1)
]
SiteStudyOpt = Annotated[str | None, typer.Option("--study", help=STUDY_HELP)]
DbOpt = Annotated[str | None, typer.Option(help=DB_HELP)]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option(help="Prolific API base URL (default: PROLIFIC_BASE_URL or the real API)"),
]
ProductionOpt = Annotated[
    bool, typer.Option(help="MTurk: the production endpoint instead of the sandbox")
]
StaleOpt = Annotated[
    float,
    typer.Option(
        help="Settle actions a crash left 'sending' once they are this many "
        "minutes old (younger ones may be in flight elsewhere; at least 5)",
    ),
]


def _owner(session: Any, study_id: int) -> Actor:
    """Who acts; platform money and its plan are the study owner's (docs/dashboard.md)."""
    from vsr_cli.actor import cli_actor
    from vsr_core.models import AdminRole

    return cli_actor(session, study_id, AdminRole.owner)


def _client(name: PlatformName, base_url: str | None, production: bool, log: Any) -> Any:
    from webapp.platforms.base import PlatformError
    from webapp.platforms.clients import client_for

    try:
        return client_for(name.value, log, base_url, production or None)
    except PlatformError as exc:
        raise CliError(str(exc)) from None


def _run(
    action: str,
    platform: PlatformName,
    study_id: int,
    slug: str | None,
    database_url: str | None,
    base_url: str | None,
    production: bool,
    stale_minutes: float = 15,
) -> None:
    from sqlmodel import Session

    from webapp.platforms import engine as eng
    from webapp.platforms.base import PlatformError

    engine = engine_for(database_url)
    with Session(engine) as session:
        study = _platform_study(session, platform, study_id, slug)
        actor = _owner(session, study.study_id)
        try:
            if action == "plan":
                _plan(session, study, actor)
                return
            log = eng.CallLog(platform.value, study.id)
            client = _client(platform, base_url, production, log)
            try:
                _send(action, session, client, study, log, stale_minutes, actor)
            finally:
                session.rollback()
                log.save(session)
        except PlatformError as exc:
            raise CliError(str(exc)) from None


def _plan(session: Any, study: Any, actor: Actor) -> None:
    """Plan, then print per submission the work in its own batches and what the ledger
    credits it with (the work it is paid for), and the new actions."""
    from webapp.platforms import engine as eng
    from webapp.platforms import settlement

    rules = eng.rules_for(session, study)
    added = eng.plan(session, study, rules, actor=actor)
    subs, work = settlement.work_by_submission(session, study, None, rules.keep_threshold)
    paid = settlement.paid_for(session, study)
    for sub in subs:
        q = work[sub.id or 0].quality()
        p = paid.get(sub.id or 0)
        credit = (
            f"paid for {p['votes']} votes, {p['written']} written ({p['kept']} kept), "
            f"bonus {p['cents']}c"
            if p
            else "paid for nothing"
        )
        elsewhere = (
            f"; {q['credited_elsewhere']} units already paid elsewhere"
            if q["credited_elsewhere"]
            else ""
        )
        typer.echo(
            f"{sub.external_id} {sub.status}: {q['batches']} batches, "
            f"{q['votes']} votes, {q['written']} written ({q['kept_captions']} kept); "
            f"{credit}{elsewhere}; {settlement.money_line(p, q, sub.status)}"
        )
    _print_held(session, study, subs)
    for a in settlement.cancelled_actions(session, study):
        typer.echo(f"cancelled {a.kind} {a.target}: {(a.response or {}).get('cancelled', '')}")
    for a in added:
        cents = f" {a.amount_cents}c" if a.amount_cents else ""
        typer.echo(f"{a.kind} {a.target}{cents} {a.reason}".rstrip())
    typer.echo(f"{len(added)} new actions planned")


def _print_held(session: Any, study: Any, subs: Any) -> None:
    """The submissions held for a person's review, with the evidence (docs/quality.md)."""
    from vsr_core.authenticity import batch_line
    from vsr_core.authenticity_db import batch_assessments, held_for_review

    held = held_for_review(session, study.study_id, {s.worker_id for s in subs if s.worker_id})
    for sub in subs:
        found = held.get(sub.worker_id)
        if found is not None:
            typer.echo(
                f"held for review {sub.external_id} (worker #{sub.worker_id}, score "
                f"{found.score:.2f}): {'; '.join(found.evidence)}"
            )
            # Which batches the evidence comes from: each one's signals counted alone.
            batches = batch_assessments(session, study.study_id, sub.worker_id)
            for batch_id in sorted(batches):
                typer.echo(f"  {batch_line(batch_id, batches[batch_id])}")


def _send(
    action: str,
    session: Any,
    client: Any,
    study: Any,
    log: Any,
    stale_minutes: float,
    actor: Actor,
) -> None:
    from datetime import timedelta

    from webapp.platforms import engine as eng

    if action == "sync":
        from webapp.crowd.leases import PairStrategy
        from webapp.platforms.drafts import confirm_create

        if not confirm_create(session, client, study, actor=actor):
            raise CliError("the study's create is not confirmed on the platform yet")
        from vsr_core.models import BatchKind
        from webapp.validate.strategy import ExampleStrategy

        released = eng.sync(
            session,
            client,
            study,
            {BatchKind.generate: PairStrategy(), BatchKind.validate: ExampleStrategy()},
            log,
            actor=actor,
        )
        typer.echo(f"synced; {released} leases released")
    else:
        counts = eng.apply(
            session, client, study, timedelta(minutes=stale_minutes), log, actor=actor
        )
        extra = (
            f", {counts['unknown']} unknown (check on the platform)" if counts["unknown"] else ""
        )
        extra += (
            f", {counts['sending']} answer lost (a later apply reads the platform)"
            if counts["sending"]
            else ""
        )
        typer.echo(f"{counts['done']} done, {counts['failed']} failed{extra}")


@platform_app.command("sync")
def sync(
    platform: PlatformOpt,
    platform_study: PlatformStudyOpt,
    study: SiteStudyOpt = None,
    database_url: DbOpt = None,
    base_url: BaseUrlOpt = None,
    production: ProductionOpt = False,
) -> None:
    """Fetch submissions; participants who returned or timed out give their leases back."""
    _run("sync", platform, platform_study, study, database_url, base_url, production)


@platform_app.command("plan")
def plan(
    platform: PlatformOpt,
    platform_study: PlatformStudyOpt,
    study: SiteStudyOpt = None,
    database_url: DbOpt = None,
) -> None:
    """Print and store the approve/reject/bonus actions; nothing is sent."""
    _run("plan", platform, platform_study, study, database_url, None, False)


@platform_app.command("apply")
def apply(
    platform: PlatformOpt,
    platform_study: PlatformStudyOpt,
    study: SiteStudyOpt = None,
    database_url: DbOpt = None,
    base_url: BaseUrlOpt = None,
    production: ProductionOpt = False,
    stale_minutes: StaleOpt = 15,
) -> None:
    """Send every planned action once (safe to re-run after a crash, and beside another
    apply: each action is claimed before it is sent)."""
    from webapp.platforms.engine import MIN_STALE

    floor = MIN_STALE.total_seconds() / 60
    if not floor <= stale_minutes < 7 * 24 * 60:
        raise CliError(
            f"--stale-minutes must be at least {floor:g} (a younger claim may still be "
            f"in flight in another apply) and under a week; got {stale_minutes:g}"
        )
    _run(
        "apply", platform, platform_study, study, database_url, base_url, production, stale_minutes
    )


KindOpt = Annotated[str, typer.Option(help="generate or validate")]


def _platform_study(session: Any, platform: PlatformName, study_id: int, slug: str | None) -> Any:
    """The platform study with this id on this platform; with --study, also of that study."""
    from vsr_core.models import PlatformStudy

    row = session.get(PlatformStudy, study_id)
    if row is None or row.platform != platform.value:
        raise CliError(f"no {platform.value} study with id {study_id}")
    if slug is not None and row.study_id != _site_study(session, slug).id:
        raise CliError(f"{platform.value} study {study_id} does not belong to study {slug!r}")
    _owner(session, row.study_id)  # every platform command moves or commits money
    return row


def _site_study(session: Any, slug: str | None) -> Any:
    from vsr_core.studies.store import StudyError, resolve_study

    try:
        return resolve_study(session, slug)
    except StudyError:
        raise CliError(f"no study {slug!r} (see `vsr study list`)") from None


@platform_app.command("create")
def create(
    platform: PlatformOpt,
    reward_cents: Annotated[
        int, typer.Option(help="Reward per participant, in pence/cents", min=1)
    ],
    places: Annotated[int, typer.Option(help="Prolific places / MTurk assignments", min=1)],
    kind: KindOpt = "generate",
    study: SiteStudyOpt = None,
    title: Annotated[str, typer.Option(help="Title shown to participants")] = "",
    expected_minutes: Annotated[
        int | None,
        typer.Option(
            help="The expected minutes per batch, stated by you: the pay "
            "check uses it instead of measured times (needed to "
            "publish before 5 workers were measured)",
            min=1,
        ),
    ] = None,
    qualifications: Annotated[
        str, typer.Option(help="MTurk QualificationRequirements as a JSON list")
    ] = "[]",
    screenout_qualification: Annotated[
        str | None,
        typer.Option(
            help="MTurk: a qualification type id the HIT requires not to exist; a worker who "
            "fails the study's qualification check is given it"
        ),
    ] = None,
    site_url: Annotated[
        str | None, typer.Option(help="Public site URL (default: BASE_URL)")
    ] = None,
    database_url: DbOpt = None,
    base_url: BaseUrlOpt = None,
    production: ProductionOpt = False,
) -> None:
    """Create the platform study from the study settings (Prolific: a draft; MTurk: the HIT,
    live at once). Prints its id for publish/sync/plan/apply and the effective pay."""
    import json

    from sqlmodel import Session

    from vsr_core.settings import get_settings
    from webapp.platforms import drafts
    from webapp.platforms.base import PlatformError
    from webapp.platforms.engine import CallLog

    try:
        quals = json.loads(qualifications)
        if not isinstance(quals, list):
            raise ValueError
    except ValueError:
        raise CliError("--qualifications must be a JSON list") from None
    with Session(engine_for(database_url)) as session:
        site_study = _site_study(session, study)
        actor = _owner(session, site_study.id)
        log = CallLog(platform.value)
        try:
            settings = drafts.new_settings(
                session,
                site_study,
                platform.value,
                kind,
                reward_cents=reward_cents,
                places=places,
                base_url=site_url or get_settings().base_url,
                title=title,
                estimated_minutes=expected_minutes,
                qualifications=quals,
                screenout_qualification=screenout_qualification,
            )
            client = _client(platform, base_url, production, log)
            row = drafts.create(
                session, client, site_study, settings, on_row=log.name_study, actor=actor
            )
        except PlatformError as exc:
            raise CliError(str(exc)) from None
        finally:
            session.rollback()
            log.save(session)
        typer.echo(f"created {platform.value} study {row.id} ({row.external_id}, {row.state})")
        typer.echo(f"entry URL: {settings['url']}")
        typer.echo(drafts.effective_pay(session, row).line())


def _transition(
    action: str,
    platform: PlatformName,
    study_id: int,
    slug: str | None,
    database_url: str | None,
    base_url: str | None,
    production: bool,
) -> None:
    from sqlmodel import Session

    from webapp.platforms import drafts
    from webapp.platforms.base import PlatformError
    from webapp.platforms.engine import CallLog

    with Session(engine_for(database_url)) as session:
        row = _platform_study(session, platform, study_id, slug)
        actor = _owner(session, row.study_id)
        log = CallLog(platform.value, row.id)
        try:
            drafts.check_step(row, action)
            if action == "publish":
                # Refused before any client (or token) is needed.
                drafts.check_pay(drafts.effective_pay(session, row))
                client = _client(platform, base_url, production, log)
                typer.echo(drafts.publish(session, client, row, actor=actor).line())
            else:
                step = drafts.pause if action == "pause" else drafts.resume
                step(session, _client(platform, base_url, production, log), row, actor=actor)
            typer.echo(f"{platform.value} study {study_id}: {row.state}")
        except PlatformError as exc:
            raise CliError(str(exc)) from None
        finally:
            session.rollback()
            log.save(session)


@platform_app.command("publish")
def publish(
    platform: PlatformOpt,
    platform_study: PlatformStudyOpt,
    study: SiteStudyOpt = None,
    database_url: DbOpt = None,
    base_url: BaseUrlOpt = None,
    production: ProductionOpt = False,
) -> None:
    """Publish a draft, unless the effective hourly pay is below the platform's minimum."""
    _transition("publish", platform, platform_study, study, database_url, base_url, production)


@platform_app.command("resume")
def resume(
    platform: PlatformOpt,
    platform_study: PlatformStudyOpt,
    study: SiteStudyOpt = None,
    database_url: DbOpt = None,
    base_url: BaseUrlOpt = None,
    production: ProductionOpt = False,
) -> None:
    """Take a paused study back to live (Prolific: START; MTurk: the HIT expires later)."""
    _transition("resume", platform, platform_study, study, database_url, base_url, production)


@platform_app.command("pause")
def pause(
    platform: PlatformOpt,
    platform_study: PlatformStudyOpt,
    study: SiteStudyOpt = None,
    database_url: DbOpt = None,
    base_url: BaseUrlOpt = None,
    production: ProductionOpt = False,
) -> None:
    """Pause the study (MTurk: expire the HIT)."""
    _transition("pause", platform, platform_study, study, database_url, base_url, production)


@platform_app.command("override-minutes")
def override_minutes(
    platform: PlatformOpt,
    platform_study: PlatformStudyOpt,
    minutes: Annotated[
        int, typer.Option(help="The minutes per batch you state, shorter than measured")
    ],
    reason: Annotated[str, typer.Option(help="Why the measurement does not apply (audited)")],
    study: SiteStudyOpt = None,
    database_url: DbOpt = None,
) -> None:
    """Owner only: state a duration shorter than the measured one for a draft; recorded in
    the audit trail and shown in its pay line (publishing then uses it)."""
    from sqlmodel import Session

    from webapp.platforms import drafts
    from webapp.platforms.base import PlatformError

    with Session(engine_for(database_url)) as session:
        row = _platform_study(session, platform, platform_study, study)
        actor = _owner(session, row.study_id)
        try:
            typer.echo(drafts.override_minutes(session, row, minutes, reason, actor).line())
        except PlatformError as exc:
            raise CliError(str(exc)) from None


@platform_app.command("reconcile")
def reconcile(
    platform: PlatformOpt,
    platform_study: PlatformStudyOpt,
    study: SiteStudyOpt = None,
    database_url: DbOpt = None,
    base_url: BaseUrlOpt = None,
    production: ProductionOpt = False,
) -> None:
    """Compare the ledger with what the platform reports (submissions; MTurk: every bonus
    of the HIT): one line per mismatch, and a non-zero exit when there is any."""
    from sqlmodel import Session

    from webapp.platforms.base import PlatformError
    from webapp.platforms.engine import CallLog
    from webapp.platforms.reconcile import reconcile as compare

    with Session(engine_for(database_url)) as session:
        row = _platform_study(session, platform, platform_study, study)
        log = CallLog(platform.value, row.id)
        try:
            mismatches = compare(session, _client(platform, base_url, production, log), row)
        except PlatformError as exc:
            raise CliError(str(exc)) from None
        finally:
            session.rollback()
            log.save(session)
    for line in mismatches:
        typer.echo(line)
    if mismatches:
        raise CliError(f"{len(mismatches)} mismatches between the ledger and {platform.value}")
    typer.echo(f"the ledger agrees with {platform.value}")
