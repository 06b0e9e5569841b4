"""`vsr sample`: sample COCO image pairs that share two concepts (see collection/)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from vsr_cli.common import DB_HELP, STUDY_HELP, engine_for, study_for
from vsr_cli.failure import CliError, CliUsageError
from vsr_core.defaults import MIN_AREA_PX

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from vsr_core.audit import Actor
    from vsr_core.studies.context import StudyContext

_STAGES = {"load": "loading COCO", "sample": "sampling pairs", "store": "storing"}


class _Bars:
    """One tqdm bar per stage, fed by the sampler's progress callback."""

    def __init__(self) -> None:
        from tqdm import tqdm

        self._tqdm = tqdm
        self.stage: str | None = None
        self.bar: object | None = None

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        if stage != self.stage:
            self.close()
            self.stage = stage
            unit = "ann" if stage == "load" else "row" if stage == "store" else "pair"
            self.bar = self._tqdm(
                desc=_STAGES.get(stage, stage),
                total=total,
                unit=unit,
                leave=False,
                mininterval=0.5,
                delay=1.0,  # only long work gets a bar
                disable=None,  # no bar when stderr is not a terminal (logs, CI)
                dynamic_ncols=True,
            )
        bar: Any = self.bar
        if bar is not None:
            bar.total = total
            bar.update(max(0, done - bar.n))  # update() keeps tqdm's rate estimate right

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()  # type: ignore[attr-defined]
            self.bar = None


def sample(
    coco: list[Path] = typer.Option(
        [],
        "--coco",
        help="COCO instances JSON (repeat for train2017 and val2017 together)",
    ),
    study_file: Path | None = typer.Option(
        None,
        "--study-file",
        help="A study definition (TOML): its sources, concept filter and sampling rule "
        "(instead of --coco, --min-area, --prefer-contrast and --concepts)",
    ),
    pairs: int = typer.Option(100, "--pairs", min=1, help="How many new image pairs to store"),
    seed: int = typer.Option(0, "--seed", help="Random seed: same files, seed, DB -> same pairs"),
    min_area: float = typer.Option(
        MIN_AREA_PX,
        "--min-area",
        min=0,
        help=f"Minimum instance area in pixels (VSR: {MIN_AREA_PX:,})",
    ),
    prefer_contrast: bool = typer.Option(
        False,
        "--prefer-contrast",
        help="Prefer image pairs whose two-object layout differs most (good contrastive tasks)",
    ),
    max_per_concept_pair: int | None = typer.Option(
        None, "--max-per-concept-pair", min=1, help="Cap on stored pairs per concept pair"
    ),
    concepts: str | None = typer.Option(
        None,
        "--concepts",
        help='Only these COCO category names, comma-separated (e.g. "cat,laptop")',
    ),
    study_slug: str | None = typer.Option(
        None,
        "--study",
        help=STUDY_HELP + "; the pairs go there, and without --coco or "
        "--study-file its stored definition gives the sources, concepts and sampling rule",
    ),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
) -> None:
    """Sample COCO 2017 image pairs that share two concepts, by the VSR rule, into the DB.

    An image is eligible for concepts A and B when it holds exactly one instance of each (a crowd region counts as several) and both have area >= --min-area.
    """  # noqa: E501 - one line, or the help text wraps badly
    from sqlalchemy.exc import OperationalError, ProgrammingError
    from sqlmodel import Session

    from collection.errors import SamplerError
    from collection.sampler import sample_into_db
    from vsr_core.models import Study

    names = [c.strip() for c in concepts.split(",")] if concepts else None
    deny: list[str] = []
    supers: list[str] = []
    share = 0.0
    if study_file is not None and (coco or concepts):
        raise CliUsageError(
            "--study-file gives the COCO files and concepts: drop --coco and --concepts"
        )
    if study_file is not None and study_slug is not None:
        raise CliUsageError("--study-file names its study (its slug): drop --study")
    if study_file is None and study_slug is None and not coco:
        raise CliUsageError("give --coco FILE (one or more), --study SLUG or --study-file FILE")
    engine = engine_for(database_url)
    try:
        if study_file is not None:
            target = _study_of_file(engine, study_file)
        else:
            target = study_for(engine, study_slug)
        if target.archived:
            raise CliError(f"study {target.slug} is archived: it takes no new pairs")
        from vsr_cli.actor import require_role
        from vsr_core.models import AdminRole

        require_role(engine, target.id, AdminRole.researcher)
    except CliError:
        engine.dispose()
        raise
    if study_file is not None or (study_slug is not None and not coco):
        study = target.definition
        if study_file is None:  # the stored definition's sources must be here too
            from vsr_core.studies.sources import missing_sources

            with Session(engine) as session:
                row = session.get(Study, target.id)
                text = row.definition if row is not None else ""
            problems = missing_sources(study, text, f"study {target.slug}")
            if problems:
                engine.dispose()
                more = f" (and {len(problems) - 1} more)" if problems[1:] else ""
                raise CliError(problems[0] + more)
        coco = [Path(s.annotations) for s in study.sources]
        names = list(study.concepts.allow) or None
        deny, supers = list(study.concepts.deny), list(study.concepts.supercategories)
        min_area = study.sampling.min_area_px
        share = study.sampling.min_area_share
        prefer_contrast = study.sampling.prefer_contrast
    try:
        actor = _actor(engine, target.id)
    except CliError:
        engine.dispose()
        raise
    bars = _Bars()
    try:
        summary = sample_into_db(
            engine,
            coco,
            pairs,
            seed=seed,
            min_area=min_area,
            prefer_contrast=prefer_contrast,
            max_per_concept_pair=max_per_concept_pair,
            concepts=names,
            progress=bars,
            deny=deny,
            supercategories=supers,
            min_area_share=share,
            study_id=target.id,
            actor=actor,
        )
    except (SamplerError, ValueError) as exc:
        raise CliError(str(exc)) from None
    except (OperationalError, ProgrammingError) as exc:
        if "no such table" in str(exc) or "does not exist" in str(exc):
            raise CliError("the database has no tables yet: run `vsr db upgrade` first") from None
        raise
    finally:
        bars.close()
        engine.dispose()
    typer.echo(f"{summary.line()} (study {target.slug})")


def _actor(engine: Engine, study_id: int) -> Actor:
    """Who samples: adding pairs to a study is a researcher's (VSR_ADMIN; vsr_cli.actor)."""
    from sqlmodel import Session

    from vsr_cli.actor import cli_actor
    from vsr_core.models import AdminRole

    with Session(engine) as session:
        return cli_actor(session, study_id, AdminRole.researcher)


def _study_of_file(engine: Engine, path: Path) -> StudyContext:
    """The study a file defines: the stored one of its slug when the definition is the same,
    else made from the file (said in a line); another definition under its slug is refused."""
    from sqlmodel import Session

    from vsr_cli.study import fail_on_missing_sources, load_or_fail, record_create
    from vsr_core.studies.context import StudyContext
    from vsr_core.studies.store import StudyError, study_of_file

    fail_on_missing_sources(path, load_or_fail(path))
    with Session(engine) as session:
        try:
            row, created = study_of_file(session, path.read_text(encoding="utf-8"), str(path))
        except StudyError as exc:
            raise CliError(str(exc)) from None
        if created:
            record_create(session, row)
        session.commit()
        context = StudyContext.of(row)
    if created:
        typer.echo(
            f"created study {context.slug} (sha256 {context.definition_hash[:12]}) from {path}"
        )
    return context
