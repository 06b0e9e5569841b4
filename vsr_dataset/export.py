"""`build-dataset`: the whole export, as a library function the CLI and the dashboard call.

    summary = build_dataset(engine, Path("out"), BuildOptions(seed=0), progress=callback)
    zip_export(Path("out"), Path("out.zip"))

Layout (DESIGN.md): ``all_raw.jsonl``, ``all_validated.jsonl``, ``random/{train,dev,test}.jsonl``,
``zeroshot/{train,dev,test}.jsonl``, ``stats.json``, ``README.md`` + ``figures/*.png``,
``meta_data.csv`` (when workers have demographics) and ``mc/{split}.jsonl`` (when matching
ran). Everything is read in one transaction (a consistent snapshot), written to a staging
directory and moved into place only when complete, so a failed export leaves no half-written
files. Same database + same options = byte-identical files (no timestamps anywhere; records
and splits ordered by Example id; PNGs without metadata; zip entries with a fixed date).
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import zipfile
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import IO, Any

import orjson
from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine

from vsr_core.agreement import DEFAULT_THRESHOLD, LabelModel, aggregate_labels
from vsr_core.agreement_db import load_item_votes
from vsr_core.db import is_postgres
from vsr_core.models import Example, Vote, Worker
from vsr_core.study_context import StudyContext
from vsr_dataset.export_rows import ExportRow, gc_paused, jsonl, read_rows, worker_export_ids
from vsr_dataset.splits import (
    PARTS,
    RANDOM_RATIOS,
    ZEROSHOT_RATIOS,
    SplitItem,
    SplitUnit,
    ZeroShotSplit,
    random_split,
    zeroshot_split,
)

ALL_PARTS = ("raw", "validated", "random", "zeroshot", "stats", "card", "meta", "mc")
STREAMABLE = ("raw", "validated", *(f"{s}/{p}" for s in ("random", "zeroshot") for p in PARTS))
Progress = Callable[[str, float], None]


class ExportError(RuntimeError):
    """A user-facing export failure (bad option, existing output, a leaking split)."""


@dataclass(frozen=True)
class BuildOptions:
    threshold: Fraction = DEFAULT_THRESHOLD
    seed: int = 0
    split_unit: SplitUnit = "annotation"
    random_ratios: tuple[Fraction, ...] = RANDOM_RATIOS
    zeroshot_ratios: tuple[Fraction, ...] = ZEROSHOT_RATIOS
    only: frozenset[str] | None = None  # None: every part
    origins: tuple[str, ...] | None = None  # None: Examples of every origin
    label_model: LabelModel | None = None
    title: str = "VSR-style visual spatial reasoning dataset"
    # Also write the matching run's items that validators have not cleared, apart in
    # mc_unvalidated/ (issue 12: mc/ holds only items whose distractors were all rejected).
    unvalidated_mc: bool = False
    # The study to export (None: the default study); its slug and language go into every
    # record, and its definition (name, sha256) into stats.json and the card.
    study: StudyContext | None = None

    def wants(self, part: str) -> bool:
        return self.only is None or part in self.only

    def check(self) -> None:
        if self.only is not None:
            unknown = sorted(set(self.only) - set(ALL_PARTS))
            if unknown:
                raise ExportError(
                    f"unknown part(s) {', '.join(unknown)}: choose from {', '.join(ALL_PARTS)}"
                )
        if self.split_unit not in ("annotation", "example"):
            raise ExportError(f"split unit must be annotation or example, not {self.split_unit!r}")


@dataclass
class BuildSummary:
    out_dir: str
    files: list[str]
    n_raw: int
    n_validated: int
    splits: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Snapshot:
    rows: list[ExportRow]
    validated: list[ExportRow]
    random_parts: dict[str, list[int]] | None  # None when no part needs the splits
    zeroshot: ZeroShotSplit | None
    aggregates: dict[Hashable, tuple[bool, float]] | None
    mc: dict[str, list[bytes]]
    meta_csv: str | None
    mc_unvalidated: dict[str, list[bytes]] = field(default_factory=dict)
    mc_info: dict[str, Any] | None = None  # vsr_dataset.mc_stats.mc_summary
    study: StudyContext | None = None


def study_of(conn: Connection, options: BuildOptions) -> StudyContext:
    """The study the export is of: the options', else the default one."""
    if options.study is not None:
        return options.study
    from sqlmodel import Session

    from vsr_core.studies import StudyError, default_study

    with Session(bind=conn) as session:
        try:
            return StudyContext.of(default_study(session))
        except StudyError as exc:
            raise ExportError(str(exc)) from None


def definition_info(study: StudyContext) -> dict[str, Any]:
    """What stats.json and the card say about the definition that produced the data."""
    return {
        "slug": study.slug, "name": study.name, "sha256": study.definition_hash,
        "language": study.language.code,
    }


def _snapshot(conn: Connection, options: BuildOptions, progress: Progress) -> _Snapshot:
    from vsr_dataset.mc_export import mc_lines

    study = study_of(conn, options)
    origins = list(options.origins) if options.origins else None
    aggregates = None
    if options.label_model:
        progress("label model", 0.05)
        ex = Example.__table__  # type: ignore[attr-defined]
        where = [ex.c.study_id == study.id]
        if origins:
            where.append(ex.c.origin.in_(origins))
        voted = load_item_votes(conn, where=where)
        aggregates = {
            k: (a.label, a.confidence)
            for k, a in aggregate_labels(voted, options.label_model, options.seed).items()
        }
    progress("reading examples", 0.1)
    rows = read_rows(
        conn, threshold=options.threshold, origins=origins, aggregates=aggregates,
        study_id=study.id, tags={"study": study.slug, "language": study.language.code},
    )
    if not rows:
        # Most likely the wrong database: an empty dataset is never what was meant.
        which = f" of origin {', '.join(origins)}" if origins else ""
        raise ExportError(
            f"study {study.slug} has no Examples{which}: nothing to export "
            "(check --database-url, or import/collect data first)"
        )
    validated = [r for r in rows if r.kept]
    random_parts, zeroshot = None, None
    if any(options.wants(p) for p in ("random", "zeroshot", "stats", "card")):
        progress("splitting", 0.5)
        items = [SplitItem(r.id, r.group, r.subj, r.obj) for r in validated]
        random_parts = random_split(items, options.seed, options.random_ratios, options.split_unit)
        zeroshot = zeroshot_split(items, options.seed, options.zeroshot_ratios)
    mc = (
        mc_lines(conn, threshold=options.threshold, study_id=study.id)
        if options.wants("mc") else {}
    )
    mc_unvalidated = (
        mc_lines(conn, threshold=options.threshold, unvalidated=True, study_id=study.id)
        if options.wants("mc") and options.unvalidated_mc else {}
    )
    meta = _meta_csv(conn, study.id, _people(rows)) if options.wants("meta") else None
    from vsr_dataset.mc_stats import mc_summary

    mc_info = mc_summary(conn, mc, mc_unvalidated) if options.wants("mc") else None
    return _Snapshot(
        rows, validated, random_parts, zeroshot, aggregates, mc, meta, mc_unvalidated, mc_info,
        study,
    )


def _people(rows: list[ExportRow]) -> set[int]:
    """Export ids of everyone who wrote or judged one of these rows (the study's people)."""
    out: set[int] = set()
    for r in rows:
        if r.author is not None:
            out.add(r.author)
        out.update(r.true_ids)
        out.update(r.false_ids)
    return out


def _read(engine: Engine, options: BuildOptions, progress: Progress) -> _Snapshot:
    conn_opts = {"isolation_level": "REPEATABLE READ"} if is_postgres(engine) else {}
    with engine.connect() as conn:
        conn = conn.execution_options(**conn_opts) if conn_opts else conn
        with conn.begin():
            return _snapshot(conn, options, progress)


def build_dataset(
    engine: Engine,
    out_dir: Path,
    options: BuildOptions | None = None,
    *,
    progress: Progress | None = None,
    overwrite: bool = False,
) -> BuildSummary:
    """Write the export to ``out_dir`` (see the module docstring) and return a summary."""
    from vsr_dataset.card import render_card
    from vsr_dataset.figures import draw_all
    from vsr_dataset.stats import compute_stats

    options = options or BuildOptions()
    options.check()
    report = progress or (lambda stage, frac: None)
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"{out_dir} exists and is not a directory")
    if (
        options.only is None
        and out_dir.is_dir()
        and any(out_dir.iterdir())
        and not overwrite
    ):
        raise ExportError(f"{out_dir} is not empty: pass --overwrite to replace it")

    snap = _read(engine, options, report)
    stage = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    try:
        report("writing", 0.6)
        files: list[str] = []

        def write(rel: str, lines: Iterable[bytes] | bytes) -> None:
            path = stage / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("wb", buffering=1 << 20) as fh:
                if isinstance(lines, bytes):
                    fh.write(lines)
                else:
                    fh.writelines(lines)
            files.append(rel)

        by_id = {r.id: r.record for r in snap.validated}
        if options.wants("raw"):
            write("all_raw.jsonl", jsonl(r.record for r in snap.rows))
        if options.wants("validated"):
            write("all_validated.jsonl", jsonl(r.record for r in snap.validated))
        if options.wants("random") and snap.random_parts is not None:
            for p in PARTS:
                write(f"random/{p}.jsonl", jsonl(by_id[k] for k in snap.random_parts[p]))
        if options.wants("zeroshot") and snap.zeroshot is not None:
            for p in PARTS:
                write(f"zeroshot/{p}.jsonl", jsonl(by_id[k] for k in snap.zeroshot.parts[p]))
        if options.wants("mc"):
            for split, lines in sorted(snap.mc.items()):
                write(f"mc/{split}.jsonl", lines)
            for split, lines in sorted(snap.mc_unvalidated.items()):
                write(f"mc_unvalidated/{split}.jsonl", lines)
        if options.wants("meta") and snap.meta_csv is not None:
            write("meta_data.csv", snap.meta_csv.encode())
        stats: dict[str, Any] = {}
        if options.wants("stats") or options.wants("card"):
            report("statistics", 0.7)
            with gc_paused():
                stats = compute_stats(
                    snap.rows,
                    threshold=options.threshold,
                    seed=options.seed,
                    split_unit=options.split_unit,
                    random_parts=snap.random_parts,
                    zeroshot=snap.zeroshot,
                    aggregate_model=options.label_model,
                    aggregates=snap.aggregates,
                )
            if snap.mc_info is not None:
                stats["mc"] = snap.mc_info
            assert snap.study is not None
            stats["study"] = definition_info(snap.study)
        if options.wants("stats"):
            write(
                "stats.json",
                orjson.dumps(stats, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n",
            )
        if options.wants("card"):
            report("figures", 0.8)
            notes = draw_all(stats, stage)
            from vsr_dataset.figures import FIGURES

            files.extend(FIGURES.values())
            listed = sorted({*files, "README.md"})
            write("README.md", render_card(
                stats, title=options.title, figure_notes=notes, files=listed,
                mc_counts=(
                    sum(map(len, snap.mc.values())), sum(map(len, snap.mc_unvalidated.values()))
                ) if options.wants("mc") else None,
            ).encode())
        report("moving into place", 0.95)
        _move_into_place(stage, out_dir, replace_all=options.only is None)
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
    report("done", 1.0)
    return BuildSummary(
        out_dir=str(out_dir),
        files=sorted(set(files)),
        n_raw=len(snap.rows),
        n_validated=len(snap.validated),
        splits=_split_sizes(snap),
        stats=stats,
    )


def _split_sizes(snap: _Snapshot) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if snap.random_parts is not None:
        out["random"] = {p: len(ks) for p, ks in snap.random_parts.items()}
    if snap.zeroshot is not None:
        out["zeroshot"] = {p: len(ks) for p, ks in snap.zeroshot.parts.items()}
    return out


def _move_into_place(stage: Path, out_dir: Path, *, replace_all: bool) -> None:
    if replace_all:
        if out_dir.exists():
            shutil.rmtree(out_dir)
        stage.rename(out_dir)
        return
    for path in sorted(stage.rglob("*")):
        if path.is_file():
            target = out_dir / path.relative_to(stage)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)


def stream_part(
    engine: Engine, part: str, fh: IO[bytes], options: BuildOptions | None = None
) -> int:
    """Write one JSONL part (raw, validated, random/train, zeroshot/dev, ...) to ``fh``."""
    if part not in STREAMABLE:
        raise ExportError(f"cannot stream {part!r}: choose one of {', '.join(STREAMABLE)}")
    options = options or BuildOptions()
    kind, _, p = part.partition("/")
    options = BuildOptions(**{**options.__dict__, "only": frozenset({kind})})
    snap = _read(engine, options, lambda stage, frac: None)
    if kind == "raw":
        records = [r.record for r in snap.rows]
    elif kind == "validated":
        records = [r.record for r in snap.validated]
    else:
        assert snap.random_parts is not None and snap.zeroshot is not None
        by_id = {r.id: r.record for r in snap.validated}
        keys = snap.random_parts[p] if kind == "random" else snap.zeroshot.parts[p]
        records = [by_id[k] for k in keys]
    fh.writelines(jsonl(records))
    fh.flush()
    return len(records)


def _elsewhere(conn: Connection, study_id: int) -> set[int]:
    """Worker ids who wrote or judged an Example of another study."""
    ex = Example.__table__  # type: ignore[attr-defined]
    vote = Vote.__table__  # type: ignore[attr-defined]
    other = ex.c.study_id != study_id
    authors = select(ex.c.author_id).where(other, ex.c.author_id.is_not(None))
    voters = select(vote.c.worker_id).join(ex, ex.c.id == vote.c.example_id).where(other)
    return {int(w) for (w,) in conn.execute(authors.union(voters))}


def _meta_csv(conn: Connection, study_id: int, wanted: set[int]) -> str | None:
    """Demographics of the workers that have them, keyed by export id (VSR's meta_data.csv):
    the study's people (export ids ``wanted``) and those who did nothing yet, never the
    people of other studies only."""
    ids = worker_export_ids(conn)
    elsewhere = _elsewhere(conn, study_id)
    w = Worker.__table__  # type: ignore[attr-defined]
    people: dict[int, dict[str, Any]] = {}
    for wid, demo in conn.execute(select(w.c.id, w.c.demographics).order_by(w.c.id)):
        if ids[wid] not in wanted and wid in elsewhere:
            continue
        if isinstance(demo, dict) and demo:
            people.setdefault(ids[wid], demo)
    if not people:
        return None
    columns: list[str] = []
    for pid in sorted(people):
        for key in people[pid]:
            if key not in columns:
                columns.append(key)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["id", *columns])
    for pid in sorted(people):
        writer.writerow([pid, *(_cell(people[pid].get(c)) for c in columns)])
    return buf.getvalue()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def zip_export(out_dir: Path, zip_path: Path) -> Path:
    """Zip an export directory deterministically (sorted entries, fixed timestamps)."""
    out_dir, zip_path = Path(out_dir), Path(zip_path)
    if not out_dir.is_dir():
        raise ExportError(f"{out_dir} is not a directory")
    tmp = zip_path.with_name(f".{zip_path.name}.partial-{os.getpid()}")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(p for p in out_dir.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(str(path.relative_to(out_dir)), date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, path.read_bytes())
    os.replace(tmp, zip_path)
    return zip_path
