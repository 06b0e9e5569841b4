"""`build-dataset` / `vsr build`: export JSONL splits, stats and a dataset card."""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from vsr_cli.common import DB_HELP, STAGE_FORMAT, STUDY_HELP, engine_for, progress_bar, study_for
from vsr_cli.failure import CliError, CliUsageError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from vsr_core.audit import Actor
    from vsr_dataset.export import BuildOptions, BuildSummary


def build(
    out: str = typer.Option(
        ..., "--out", "-o", help="Output directory, or '-' to stream one JSONL part to stdout."
    ),
    only: list[str] = typer.Option(  # noqa: B008
        [],
        "--only",
        help="Write only these parts (repeatable): raw, validated, random, zeroshot, stats, "
        "card, meta, mc. With --out -: one of raw, validated, random/train, zeroshot/test, ...",
    ),
    threshold: str | None = typer.Option(
        None,
        "--threshold",
        help="Keep rule: share of votes that must agree (2/3, 0.75, ...). Default: the "
        "study's keep_threshold setting (what the dashboard counts).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the random and zero-shot splits."),
    split_unit: str = typer.Option(
        "annotation",
        "--split-unit",
        help="annotation: keep the True/False halves of one annotation in one part; "
        "example: split per Example (as the VSR release).",
    ),
    random_ratios: str = typer.Option("70/10/20", "--random-ratios"),
    zeroshot_ratios: str = typer.Option("50/20/30", "--zeroshot-ratios"),
    origin: list[str] = typer.Option(  # noqa: B008
        [], "--origin", help="Only Examples of these origins (human, adversarial, imported)."
    ),
    label_model: str | None = typer.Option(
        None,
        "--label-model",
        help="Add a model-based label from the votes: majority, dawid-skene or mace.",
    ),
    title: str = typer.Option("VSR-style visual spatial reasoning dataset", "--title"),
    unvalidated_mc: bool = typer.Option(
        False,
        "--unvalidated-mc",
        help="Also write the matching items validators have not cleared, apart in "
        "mc_unvalidated/ (marked in each line and in the card); mc/ always holds only items "
        "whose every distractor validators rejected.",
    ),
    with_provenance: bool = typer.Option(
        False,
        "--with-provenance",
        help="Also write provenance/: the Examples each multiple-choice item's distractors "
        "came from and the judged negatives of its dev/test items. It holds the answers: "
        "not for evaluation (the card and the configs say so).",
    ),
    allow_leaks: bool = typer.Option(
        False,
        "--allow-leaks",
        help="Write the export even when its leak audit finds an evaluation answer "
        "recoverable from the other files (the card then says so in its first lines).",
    ),
    with_negatives: bool = typer.Option(
        False,
        "--with-negatives",
        help="Also put the machine-made negatives validators kept as False into all_raw, "
        "all_validated and the splits, each in its query's part (by default they are "
        "written apart, in machine_negatives.jsonl).",
    ),
    vsr_compatible: bool = typer.Option(
        False,
        "--vsr-compatible",
        help="Write each file with the VSR release's exact types (vote lists as strings in "
        "the split files, reference_frame as numbers) instead of the Hub-native ones, and "
        "the release's own splits where its split files were imported (else drawn, and "
        "the card says so).",
    ),
    parquet: bool = typer.Option(
        False,
        "--parquet",
        help="Also write a Parquet copy of every JSONL part (the card's "
        "configs then point at them).",
    ),
    polygons: bool = typer.Option(
        False,
        "--polygons",
        help="Also write instances.jsonl: the marked COCO instances "
        "(by the records' subj_instance_id/obj_instance_id) with their polygons.",
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace a non-empty --out."),
    zip_to: Path | None = typer.Option(None, "--zip", help="Also write the export as a zip."),
    study_slug: str | None = typer.Option(None, "--study", help=STUDY_HELP),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Export the dataset: JSONL splits, stats.json and a dataset card with figures."""
    from dataclasses import replace
    from fractions import Fraction

    from vsr_core.agreement import as_fraction
    from vsr_dataset.export import BuildOptions, ExportError, stream_part, zip_export
    from vsr_dataset.splits import SplitError, parse_ratios

    frac = None
    if threshold is not None:
        try:
            frac = as_fraction(Fraction(threshold) if "/" in threshold else float(threshold))
        except (ValueError, ZeroDivisionError):
            # Python's own words ("could not convert string to float") name no option.
            raise CliUsageError(
                f"--threshold must be a share of votes above 0 and at most 1, such as 2/3 or "
                f"0.75 (got {threshold})"
            ) from None
    if split_unit not in ("annotation", "example"):
        raise CliUsageError("--split-unit must be annotation or example")
    from vsr_core.models import ExampleOrigin
    from vsr_dataset.export import ALL_PARTS

    origins = [o.value for o in ExampleOrigin if o is not ExampleOrigin.revalidation]
    for value in origin:
        if value not in origins:
            raise CliUsageError(f"--origin must be one of {', '.join(origins)} (got {value})")
    for part in only if out != "-" else ():
        if part not in ALL_PARTS:
            raise CliUsageError(f"--only must be one of {', '.join(ALL_PARTS)} (got {part})")
    if label_model not in (None, "majority", "dawid-skene", "mace"):
        raise CliUsageError("--label-model must be majority, dawid-skene or mace")
    try:
        rr, zr = parse_ratios(random_ratios), parse_ratios(zeroshot_ratios)
    except ValueError as exc:
        raise CliUsageError(str(exc)) from None
    options = BuildOptions(
        threshold=frac,
        seed=seed,
        split_unit=split_unit,  # type: ignore[arg-type]
        random_ratios=rr,
        zeroshot_ratios=zr,
        only=frozenset(only) if only and out != "-" else None,
        origins=tuple(origin) or None,
        label_model=label_model,  # type: ignore[arg-type]
        title=title,
        unvalidated_mc=unvalidated_mc,
        with_negatives=with_negatives,
        with_provenance=with_provenance,
        allow_leaks=allow_leaks,
        vsr_compatible=vsr_compatible,
        parquet=parquet,
        polygons=polygons,
    )
    engine = engine_for(database_url)
    try:
        from vsr_cli.actor import require_role
        from vsr_core import audit
        from vsr_core.models import AdminRole

        # Reading the study's data: a VSR_ADMIN needs at least viewer.
        study = study_for(engine, study_slug, AdminRole.viewer)
        options = replace(options, study=study)
        actor = require_role(engine, study.id, AdminRole.viewer)
        if out == "-":
            if len(only) > 1:
                raise CliUsageError("--out - streams one JSONL part: give at most one --only")
            part = only[0] if only else "raw"
            sink = HashingWriter(sys.stdout.buffer)
            try:
                stream_part(engine, part, sink, options)  # type: ignore[arg-type]
            except BrokenPipeError:
                # `build-dataset --out - | head`: the reader left; that is not an error.
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            record_export(engine, actor, study.id, "-", {f"{part} (stdout)": sink.hexdigest()})
            return
        summary = _build_with_progress(engine, Path(out), options, overwrite, quiet)
        files = audit.digests(Path(out))
        if zip_to is not None:
            zip_export(Path(out), zip_to)
            files[str(zip_to)] = audit.sha256_of(Path(zip_to))
        record_export(engine, actor, study.id, str(out), files)
    except (ExportError, SplitError) as exc:
        raise CliError(str(exc)) from None
    finally:
        engine.dispose()
    sp = summary.splits
    msg = (
        f"wrote {out}: {summary.n_raw:,} raw, {summary.n_validated:,} validated "
        f"({summary.keep_rule_text()})"
    )
    if "random" in sp:
        msg += ", random " + "/".join(f"{sp['random'][p]:,}" for p in ("train", "dev", "test"))
    if "zeroshot" in sp:
        msg += ", zero-shot " + "/".join(f"{sp['zeroshot'][p]:,}" for p in ("train", "dev", "test"))
    if summary.n_negatives:
        where = "also in the splits" if with_negatives else "apart"
        msg += f", {summary.n_negatives:,} judged machine negatives ({where})"
    if options.study is not None:
        msg += f" (study {options.study.slug})"
    typer.echo(msg)
    mc_line = mc_figure_line(summary.stats.get("mc"))
    if mc_line:
        typer.echo(mc_line)


class HashingWriter:
    """A binary stream that passes every write on and keeps the SHA-256 of what went by."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._digest = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self._digest.update(data)
        return int(self._inner.write(data))

    def writelines(self, lines: Iterable[bytes]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._inner.flush()

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


def record_export(
    engine: Any, actor: Actor, study_id: int, target: str, files: dict[str, str]
) -> None:
    """Every export is in the audit trail: who, which study, each file's SHA-256."""
    from vsr_core import audit
    from vsr_core.models import AuditKind

    audit.record_now(
        engine,
        actor,
        AuditKind.dataset_export,
        study_id=study_id,
        target=target,
        change={"via": "build-dataset", "files": files},
    )


def mc_figure_line(mc: Any) -> str | None:
    """The exported items' strongest answer-only adversary, as stats.json has it (the
    dashboard sends people who build here for this figure)."""
    if not isinstance(mc, dict):
        return None
    best = mc.get("strongest_adversary")
    where = mc.get("measured_on", "mc")
    if not best:
        # The adversaries train on train items and are scored on test items.
        counts = mc.get("items_unvalidated" if where == "mc_unvalidated" else "items") or {}
        missing = [p for p in ("train", "test") if not counts.get(p)]
        held = ", ".join(f"{n:,} {p}" for p, n in counts.items() if n) or "no items"
        why = f"no {' and no '.join(missing)} items" if missing else "too few items"
        return f"multiple-choice: no adversary figure ({where}/ has {why}: {held})"
    lo, hi = best["ci95"]
    note = " (not validated)" if where == "mc_unvalidated" else ""
    return (
        f"multiple-choice: strongest answer-only adversary {best['name']} "
        f"{best['accuracy']:.3f} (95 % CI {lo:.3f}-{hi:.3f}) on the "
        f"{mc.get('adversaries_n_test') or 0:,} test items of {where}/{note}; "
        f"in stats.json under mc"
    )


def _build_with_progress(
    engine: Engine, out: Path, options: BuildOptions, overwrite: bool, quiet: bool
) -> BuildSummary:
    from vsr_dataset.export import build_dataset

    with progress_bar(quiet=quiet, total=100, desc="build-dataset", bar_format=STAGE_FORMAT) as bar:

        def progress(stage: str, frac: float) -> None:
            bar.set_postfix_str(stage)
            bar.update(max(0, round(frac * 100) - bar.n))

        return build_dataset(engine, out, options, progress=progress, overwrite=overwrite)
