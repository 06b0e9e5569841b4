"""`vsr label-models`: fit Dawid-Skene and MACE on a study's votes (the cache the keep rule and
the dashboard read, vsr_core.label_fit) and preview what switching the keep rule would change."""

from __future__ import annotations

import json

import typer

from vsr_cli.common import DB_HELP, STUDY_HELP, engine_for, study_for
from vsr_cli.failure import CliError

label_models_app = typer.Typer(
    help="Label models (Dawid-Skene, MACE) as the study's keep rule: fit them, preview a switch.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@label_models_app.command("fit")
def fit(
    model: list[str] = typer.Option(  # noqa: B008
        [], "--model", help="dawid-skene or mace (repeat; default: both)"
    ),
    seed: int = typer.Option(0, "--seed", min=0, help="Random seed of MACE's restarts"),
    study_slug: str | None = typer.Option(None, "--study", help=STUDY_HELP),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
) -> None:
    """Fit the label models on the study's votes now and replace their cached decisions (run
    it after votes arrive; the dashboard shows how many votes the last fit has not seen)."""
    from sqlmodel import Session

    from vsr_cli.actor import cli_actor
    from vsr_core.label_fit import MODELS, LabelFitError, fit_study
    from vsr_core.models import AdminRole

    engine = engine_for(database_url)
    study = study_for(engine, study_slug)
    with Session(engine) as session:
        # Refitting changes the counts under a label-model keep rule: a researcher's act.
        actor = cli_actor(session, study.id, AdminRole.researcher)
        try:
            fits = fit_study(session, study.id, model or MODELS, seed, actor=actor)
        except LabelFitError as exc:
            raise CliError(str(exc)) from None
    for f in fits:
        typer.echo(
            f"{f.model}: labelled {f.examples:,} Examples, rated {f.workers:,} validators "
            f"from {f.votes:,} votes in {f.seconds:.1f} s (study {study.slug})"
        )


@label_models_app.command("preview")
def preview(
    as_json: bool = typer.Option(False, "--json", help="As JSON"),
    study_slug: str | None = typer.Option(None, "--study", help=STUDY_HELP),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
) -> None:
    """How many Examples each other keep rule would decide otherwise than the study's current
    one (the settings page's preview), from the last fit."""
    from sqlmodel import Session

    from vsr_core.label_fit import fit_states
    from vsr_core.studies.settings import load_study_config
    from webapp.admin.stats.label_models import flip_preview

    engine = engine_for(database_url)
    study = study_for(engine, study_slug)
    with Session(engine) as session:
        cfg = load_study_config(session, study.id)
        flips = flip_preview(session, cfg, study.id)
        states = fit_states(session, study.id)
    if as_json:
        typer.echo(json.dumps({"study": study.slug, "keep_rule": cfg.keep_rule, "preview": flips}))
        return
    typer.echo(f"study {study.slug}: keep rule now {cfg.keep_rule}")
    for rule, p in flips.items():
        state = states.get(rule)
        note = ""
        if state is not None:
            note = (
                " (never fitted: run `vsr label-models fit`)"
                if not state.fitted
                else f" (fit stale: {state.new_votes:,} votes since)"
                if state.stale
                else ""
            )
        typer.echo(
            f"  {rule}: kept {p['kept_now']:,} -> {p['kept_after']:,}; "
            f"{p['kept_to_rejected']:,} kept -> rejected, "
            f"{p['rejected_to_kept']:,} rejected -> kept{note}"
        )
