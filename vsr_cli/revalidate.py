"""`vsr revalidate`: re-open a sample of an imported release for fresh votes, or report how
the fresh judgements compare with the original ones (vsr_core.revalidation)."""

from __future__ import annotations

import json

import typer

from vsr_cli.common import DB_HELP, STUDY_HELP, engine_for, study_for
from vsr_cli.failure import CliError, CliUsageError


def revalidate(
    sample: int | None = typer.Option(
        None, "--sample", min=1, help="Open this many imported Examples for fresh votes"
    ),
    seed: int = typer.Option(0, "--seed", min=0, help="Random seed of the sample"),
    relation: list[str] = typer.Option(  # noqa: B008
        [], "--relation", help="Only Examples of this relation (repeat for several)"
    ),
    votes: int | None = typer.Option(
        None, "--votes", min=1, max=50, help="Fresh votes per Example (default: the study's)"
    ),
    round_name: str | None = typer.Option(
        None,
        "--round",
        help="Name of the re-validation round (letters, digits, - or _; "
        "default: r1 for --sample, the latest round for --report)",
    ),
    show_report: bool = typer.Option(
        False, "--report", help="Print the fresh-vs-original report of the round"
    ),
    as_json: bool = typer.Option(False, "--json", help="The report as JSON"),
    study_slug: str | None = typer.Option(None, "--study", help=STUDY_HELP),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
) -> None:
    """Re-validate an imported release: --sample N opens N imported Examples (copies, so the
    imported votes stay apart) for fresh votes; --report compares fresh and original votes."""
    from sqlmodel import Session

    from vsr_cli.actor import cli_actor
    from vsr_core.models import AdminRole
    from vsr_core.revalidation import (
        RevalidationError,
        open_round,
        report,
        report_lines,
        rounds,
    )
    from vsr_core.studies.settings import load_study_config

    if sample is None and not show_report:
        raise CliUsageError("give --sample N to open a sample, or --report to see a round's report")
    engine = engine_for(database_url)
    try:
        from vsr_core.models import AdminRole

        study = study_for(engine, study_slug, AdminRole.researcher)
        if not study.is_default:
            # Imported releases and their re-validation rounds live in the default study.
            raise CliError(
                f"re-validation works on the default study's imported data, not {study.slug}"
            )
        with Session(engine) as session:
            config = load_study_config(session, study.id)
            if sample is not None:
                opened = open_round(
                    session,
                    sample=sample,
                    seed=seed,
                    config=config,
                    relations=relation,
                    votes=votes,
                    round_name=round_name or "r1",
                    actor=cli_actor(session, study.id, AdminRole.researcher),
                )
                typer.echo(f"{opened.line()} (study {study.slug})")
            if show_report:
                name = round_name or ("r1" if sample is not None else None)
                known = rounds(session)
                if not known:
                    raise CliError(
                        "no re-validation round yet: open one with `vsr revalidate --sample N`"
                    )
                if name is not None and name not in known:
                    raise CliError(f"no re-validation round {name!r} (rounds: {', '.join(known)})")
                result = report(session, config, name)
                if as_json:
                    typer.echo(json.dumps(result, indent=2))
                else:
                    for line in report_lines(result):
                        typer.echo(line)
    except RevalidationError as exc:
        raise CliError(str(exc)) from None
    finally:
        engine.dispose()
