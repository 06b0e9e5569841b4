"""`vsr study check|show --file F`: validate and summarise a study definition (docs/studies.md).

Nothing here touches the database; storing studies comes with multi-study scoping.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from vsr_cli.failure import CliError

study_app = typer.Typer(
    name="study",
    help="Study definition files (TOML; see docs/studies.md).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

FILE_HELP = "A study definition file (TOML)"


if TYPE_CHECKING:
    from vsr_core.study_file import StudyDefinition


def load_or_fail(path: Path) -> StudyDefinition:
    """The study of a file, or every problem printed (one line each) and a failing exit."""
    from vsr_core.study_file import StudyFileError, load_study

    try:
        return load_study(path)
    except StudyFileError as exc:
        # One line per problem, each naming the file, line and field; then a failing exit.
        for problem in exc.problems[:-1]:
            typer.secho(f"error: {problem}", err=True, fg="red")
        raise CliError(exc.problems[-1]) from None


def _summary(path: Path, full: bool) -> list[str]:
    study = load_or_fail(path)
    lines = [f"{study.slug}: {study.name}"]
    for src in study.sources:
        where = src.image_root or src.image_url
        lines.append(f"  source ({src.format}): {src.annotations} -> images at {where}")
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
    sem = study.semantics
    lines.append(
        f"  semantics: {len(sem.equivalents)} synonym groups, {len(sem.converses)} converses, "
        f"{len(sem.symmetric)} symmetric, {len(sem.entailments)} entailments, "
        f"{len(sem.contradictions)} contradictions, {len(sem.overlaps)} overlaps"
    )
    k = study.collection
    lines.append(
        f"  collection: {k.votes_per_example}-{k.max_votes_per_example} votes, keep at "
        f">= {k.keep_threshold:.3g}, generate {k.generate_batch_size} in "
        f"{k.generate_minutes} min, validate {k.validate_batch_size} in "
        f"{k.validate_minutes} min, gold rate {k.gold_rate:g}"
    )
    return lines


@study_app.command("check")
def check(file: Path = typer.Option(..., "--file", help=FILE_HELP)) -> None:
    """Validate a study file; print one line per problem (file:line: field: message)."""
    lines = _summary(file, full=False)
    typer.echo(f"ok: {lines[0]}")


@study_app.command("show")
def show(file: Path = typer.Option(..., "--file", help=FILE_HELP)) -> None:
    """Validate a study file and print what it defines, every relation included."""
    typer.echo("\n".join(_summary(file, full=True)))
