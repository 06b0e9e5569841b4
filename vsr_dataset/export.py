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
from array import array
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, overload

import orjson
from sqlalchemy import func, select
from sqlalchemy.engine import Connection, Engine

from vsr_core.agreement import DEFAULT_THRESHOLD, LabelModel, aggregate_labels
from vsr_core.agreement_db import load_item_votes
from vsr_core.db import read_snapshot_options
from vsr_core.studies.context import StudyContext
from vsr_core.tables import EXAMPLE, VOTE, WORKER
from vsr_dataset.dictionary import (
    AUTHENTICITY_FILE,
    INSTANCES_FILE,
    QUALIFICATION_FILE,
    columns,
)
from vsr_dataset.export_rows import (
    ExportRow,
    RecordSource,
    StreamedRecords,
    gc_paused,
    jsonl,
    read_export,
    study_verdicts,
    worker_export_ids,
)
from vsr_dataset.release_splits import (
    ReleaseSplits,
    known_frames,
    load_release_splits,
    split_source,
)
from vsr_dataset.splits import (
    BINARY_ORIGINS,
    PARTS,
    RANDOM_RATIOS,
    ZEROSHOT_RATIOS,
    SplitItem,
    SplitUnit,
    ZeroShotSplit,
    binary_items,
    binary_random_split,
    check_zeroshot,
    zeroshot_split,
)

if TYPE_CHECKING:  # the card, figures and Hub modules load only when an export writes them
    from vsr_dataset.card import CardInputs
    from vsr_dataset.hub import Config, Feature
    from vsr_dataset.layout import Records
    from vsr_dataset.mc_publish import McPublished

ALL_PARTS = ("raw", "validated", "random", "zeroshot", "stats", "card", "meta", "mc")
STREAMABLE = ("raw", "validated", *(f"{s}/{p}" for s in ("random", "zeroshot") for p in PARTS))
Progress = Callable[[str, float], None]


class ExportError(RuntimeError):
    """A user-facing export failure (bad option, existing output, a leaking split)."""


@dataclass(frozen=True)
class BuildOptions:
    # None: the study's keep rule (its keep_threshold setting), as the dashboard counts.
    threshold: Fraction | None = None
    seed: int = 0
    split_unit: SplitUnit = "annotation"
    random_ratios: tuple[Fraction, ...] = RANDOM_RATIOS
    zeroshot_ratios: tuple[Fraction, ...] = ZEROSHOT_RATIOS
    only: frozenset[str] | None = None  # None: every part
    origins: tuple[str, ...] | None = None  # None: Examples of every origin
    label_model: LabelModel | None = None
    title: str = "VSR-style visual spatial reasoning dataset"
    # Also write the matching run's items that validators have not cleared, apart in
    # mc_unvalidated/ (mc/ holds only items whose distractors were all rejected).
    unvalidated_mc: bool = False
    # The study to export (None: the default study); its slug and language go into every
    # record, and its definition (name, sha256) into stats.json and the card.
    study: StudyContext | None = None
    # Kept machine-made negatives (origin adversarial) also join all_raw, all_validated and
    # the splits, each in its query's part; by default they are written apart only.
    with_negatives: bool = False
    # Each file with the VSR release's exact types (vsr_dataset.vsr_compat) instead of the
    # Hub-native ones.
    vsr_compatible: bool = False
    # Also a Parquet copy of every JSONL file of a config; the card's configs point at them.
    parquet: bool = False
    # Also instances.jsonl: the marked COCO instances with their polygons.
    polygons: bool = False
    # Write even when the leak audit finds an answer recoverable from the files (the card
    # then says so in its first lines); by default such a build fails.
    allow_leaks: bool = False
    # Also provenance/: where each multiple-choice item's distractors came from and the
    # judged negatives of its evaluation items (not for evaluation: it holds the answers).
    with_provenance: bool = False

    def wants(self, part: str) -> bool:
        return self.only is None or part in self.only

    def check(self) -> None:
        if self.only is not None:
            unknown = sorted(set(self.only) - set(ALL_PARTS))
            if unknown:
                raise ExportError(
                    f"unknown part(s) {', '.join(unknown)}: choose from {', '.join(ALL_PARTS)}"
                )
        if self.parquet and self.vsr_compatible:
            raise ExportError(
                "--parquet writes Hub-native types: it cannot be combined with --vsr-compatible"
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
    threshold: Fraction = DEFAULT_THRESHOLD
    threshold_source: str = "study"
    n_negatives: int = 0

    def keep_rule_text(self) -> str:
        """How the CLI and the dashboard say which keep rule the export used."""
        whose = "the study's setting" if self.threshold_source == "study" else "given"
        return f"keep rule {self.threshold} ({whose})"


@dataclass
class _Snapshot:
    rows: list[ExportRow]  # the binary dataset (all_raw), compact
    validated: list[ExportRow]
    source: RecordSource  # their full records, built while written
    every: list[ExportRow]  # every Example the source yields (rows and machine ones)
    random_parts: dict[str, list[int]] | None  # None when no part needs the splits
    zeroshot: ZeroShotSplit | None
    aggregates: dict[Hashable, tuple[bool, float]] | None
    mc: dict[str, list[bytes]]
    meta_csv: str | None
    mc_unvalidated: dict[str, list[bytes]] = field(default_factory=dict)
    mc_info: dict[str, Any] | None = None  # vsr_dataset.mc_stats.mc_summary
    study: StudyContext | None = None
    threshold: Fraction = DEFAULT_THRESHOLD
    threshold_source: str = "study"  # "study" (its setting) or "option" (given for this export)
    negatives: list[dict[str, Any]] = field(default_factory=list)  # judged machine negatives
    negatives_info: dict[str, Any] = field(default_factory=dict)
    mc_rejected: int = 0  # items a distractor of which validators judged true
    collection: dict[str, Any] = field(default_factory=dict)  # vsr_dataset.datasheet
    instances: list[dict[str, Any]] = field(default_factory=list)  # --polygons
    qualification_csv: str | None = None  # who passed the study's qualification check
    keep_rule: str = "agreement"  # the study's keep rule (vsr_core.kept)
    mc_published: McPublished | None = None  # every MC set and its provenance
    held_back_negatives: list[dict[str, Any]] = field(default_factory=list)  # provenance only
    authenticity_csv: str | None = None  # per-worker authenticity summary (docs/quality.md)
    release_splits: ReleaseSplits = field(default_factory=ReleaseSplits)  # --vsr-compatible
    frames_known: int = 0  # validated Examples with a reference_frame


def study_of(conn: Connection, options: BuildOptions) -> StudyContext:
    """The study the export is of: the options', else the default one."""
    if options.study is not None:
        return options.study
    from sqlmodel import Session

    from vsr_core.studies.store import StudyError, default_study

    with Session(bind=conn) as session:
        try:
            return StudyContext.of(default_study(session))
        except StudyError as exc:
            raise ExportError(str(exc)) from None


def definition_info(study: StudyContext) -> dict[str, Any]:
    """What stats.json and the card say about the definition that produced the data."""
    lang = study.language
    copula = f"({lang.copula}) " if lang.copula else ""  # "The ENT1 (is) RELATION the ENT2."
    return {
        "slug": study.slug,
        "name": study.name,
        "sha256": study.definition_hash,
        "language": lang.code,
        "template": lang.template.replace("RELATION", copula + "RELATION"),
    }


def keep_threshold_of(conn: Connection, options: BuildOptions, study: StudyContext) -> Fraction:
    """The keep rule of the export: the option's, else the study's setting."""
    if options.threshold is not None:
        return options.threshold
    from sqlmodel import Session

    from vsr_core.agreement import as_fraction
    from vsr_core.studies.settings import load_study_config

    with Session(bind=conn) as session:
        return as_fraction(load_study_config(session, study.id).keep_threshold)


def _snapshot(conn: Connection, options: BuildOptions, progress: Progress) -> _Snapshot:
    from vsr_dataset.match_splits import check_mc_truths

    study = study_of(conn, options)
    threshold = keep_threshold_of(conn, options, study)
    origins = list(options.origins) if options.origins else None
    with_negatives = options.with_negatives or "adversarial" in (origins or ())
    aggregates = None
    if options.label_model:
        progress("label model", 0.05)
        aggregates = _label_model_labels(
            conn, options.label_model, options.seed, study.id, origins, with_negatives
        )
    progress("reading examples", 0.1)
    verdicts = study_verdicts(conn, study.id, threshold)
    every, source = read_export(
        conn,
        verdicts=verdicts,
        threshold=threshold,
        origins=origins,
        aggregates=aggregates,
        study_id=study.id,
        tags={"study": study.slug, "language": study.language.code},
    )
    machine = [r for r in every if r.origin not in BINARY_ORIGINS]
    rows = every if with_negatives else [r for r in every if r.origin in BINARY_ORIGINS]
    if not rows:
        # Most likely the wrong database: an empty dataset is never what was meant.
        which = f" of origin {', '.join(origins)}" if origins else ""
        raise ExportError(
            f"study {study.slug} has no Examples{which}: nothing to export "
            "(check --database-url, or import/collect data first)"
        )
    random_parts, zeroshot = None, None
    release = ReleaseSplits()
    published: McPublished | None = None
    if any(options.wants(p) for p in ("random", "zeroshot", "stats", "card", "mc")):
        progress("splitting", 0.5)
        items = binary_items(every)
        if options.vsr_compatible:
            # The release's own parts where its split files were imported (comparable with
            # published VSR numbers); a scheme without them is drawn below.
            release = load_release_splits(conn, study.id, items)
        random_parts = release.random
        if random_parts is None:
            random_parts = binary_random_split(
                every, options.seed, options.random_ratios, options.split_unit
            )
        zeroshot = release.zeroshot or zeroshot_split(items, options.seed, options.zeroshot_ratios)
        if options.wants("mc"):
            check_mc_truths(conn, study.id, random_parts, release_parts=release.random is not None)
        # Before the negatives join: the MC sets follow the people's splits only.
        published = _mc_published(conn, options, threshold, study.id, random_parts, zeroshot)
        if with_negatives:
            random_parts, zeroshot = _with_negatives(
                every, machine, random_parts, zeroshot, published.held_back_negatives
            )
    validated = [r for r in rows if r.kept]
    # Whatever parts are written (machine_negatives.jsonl comes with --only raw too).
    from vsr_dataset.mc_export import eval_negative_ids

    held_back = (
        published.held_back_negatives
        if published is not None
        else eval_negative_ids(conn, study.id)
    )
    mc_rejected = 0
    mc: dict[str, list[bytes]] = {}
    mc_unvalidated: dict[str, list[bytes]] = {}
    if options.wants("mc") and published is not None:
        from vsr_dataset.mc_export import latest_run_id
        from vsr_dataset.mc_verdicts import count_rejected

        mc, mc_unvalidated = published.lines("mc"), published.lines("mc_unvalidated")
        mc_rejected = count_rejected(conn, latest_run_id(conn, study.id), threshold)
    meta = _meta_csv(conn, study.id, _people(every)) if options.wants("meta") else None
    qualification = _qualification_csv(conn, study) if options.wants("meta") else None
    authenticity = _authenticity_csv(conn, study.id) if options.wants("meta") else None
    from vsr_dataset.mc_stats import mc_summary

    mc_info = (
        mc_summary(conn, mc, mc_unvalidated, study_id=study.id) if options.wants("mc") else None
    )
    if mc_info is not None and published is not None:
        mc_info["sets"] = {
            d: {split: len(v) for split, v in sorted(published.lines(d).items())}
            for d in sorted(published.files)
        }
        mc_info["left_out_for_alignment"] = dict(sorted(published.left_out.items()))
    negatives, negatives_info, held_back_records = _negatives(
        source, every, machine, random_parts, with_negatives, held_back, options.seed
    )
    collection: dict[str, Any] = {}
    if options.wants("card"):
        from vsr_dataset.datasheet import collection_facts

        collection = collection_facts(conn, study)
    from vsr_dataset.export_rows import instance_shapes

    instances = (
        instance_shapes(conn, source.records(every, _ids(rows, every))) if options.polygons else []
    )
    return _Snapshot(
        rows,
        validated,
        source,
        every,
        random_parts,
        zeroshot,
        aggregates,
        mc,
        meta,
        mc_unvalidated,
        mc_info,
        study,
        threshold,
        "option" if options.threshold is not None else "study",
        negatives,
        negatives_info,
        mc_rejected,
        collection,
        instances,
        qualification,
        verdicts.rule,
        published if options.wants("mc") else None,
        held_back_records,
        authenticity_csv=authenticity,
        release_splits=release,
        frames_known=known_frames(conn, study.id, (r.id for r in validated)),
    )


def _label_model_labels(
    conn: Connection,
    model: LabelModel,
    seed: int,
    study_id: int,
    origins: list[str] | None,
    with_negatives: bool,
) -> dict[Hashable, tuple[bool, float]]:
    """Each Example's label and confidence from the votes alone (``--label-model``), over the
    Examples the export reads."""
    where = [EXAMPLE.c.study_id == study_id]
    if origins:
        where.append(EXAMPLE.c.origin.in_(origins))
    elif not with_negatives:
        where.append(EXAMPLE.c.origin.in_(sorted(BINARY_ORIGINS)))
    voted = load_item_votes(conn, where=where)
    return {k: (a.label, a.confidence) for k, a in aggregate_labels(voted, model, seed).items()}


def _mc_published(
    conn: Connection,
    options: BuildOptions,
    threshold: Fraction,
    study_id: int,
    random_parts: dict[str, list[int]],
    zeroshot: ZeroShotSplit,
) -> McPublished:
    """The multiple-choice sets aligned with the splits (vsr_dataset.mc_publish)."""
    from vsr_dataset.mc_export import eval_negative_ids, mc_rows
    from vsr_dataset.mc_publish import publish_mc

    cleared = mc_rows(conn, threshold=threshold, study_id=study_id)
    pending = mc_rows(conn, threshold=threshold, unvalidated=True, study_id=study_id)
    return publish_mc(
        cleared,
        pending,
        seed=options.seed,
        random_parts=random_parts,
        zeroshot_parts=zeroshot.parts,
        with_unvalidated=options.unvalidated_mc,
        held_back_negatives=eval_negative_ids(conn, study_id),
    )


def _with_negatives(
    every: list[ExportRow],
    machine: list[ExportRow],
    random_parts: dict[str, list[int]],
    zeroshot: ZeroShotSplit,
    held_back: frozenset[int],
) -> tuple[dict[str, list[int]], ZeroShotSplit]:
    """Kept machine negatives added to the splits of the people's Examples, each in its
    query's part (never moving a human Example); in zero-shot only when both its concepts
    belong to that part's concepts. Their own split never decides anything. Distractors of
    multiple-choice evaluation items (``held_back``) join no file: in a binary file, a
    look-up of an option would name it a distractor."""
    random_of = {k: p for p, keys in random_parts.items() for k in keys}
    zs_of = {k: p for p, keys in zeroshot.parts.items() for k in keys}
    concepts = {p: set(cs) for p, cs in zeroshot.concepts.items()}
    rnd = {p: list(keys) for p, keys in random_parts.items()}
    zs = {p: list(keys) for p, keys in zeroshot.parts.items()}
    for r in machine:
        if not r.kept or r.parent is None or r.id in held_back:
            continue
        if r.parent in random_of:
            rnd[random_of[r.parent]].append(r.id)
        part = zs_of.get(r.parent)
        if part is not None and {r.subj, r.obj} <= concepts[part]:
            zs[part].append(r.id)
    for parts in (rnd, zs):
        for keys in parts.values():
            keys.sort()
    items = binary_items(every) + [
        SplitItem(r.id, r.group, r.subj, r.obj) for r in machine if r.kept and r.id not in held_back
    ]
    check_zeroshot(items, zs)
    return rnd, ZeroShotSplit(zs, zeroshot.concepts, zeroshot.excluded)


def _negatives(
    source: RecordSource,
    every: list[ExportRow],
    machine: list[ExportRow],
    random_parts: dict[str, list[int]] | None,
    joined: bool,
    held_back: frozenset[int],
    seed: int,
) -> tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
    """The judged machine negatives, each with its query (id, random part) and the
    validators' verdict, in a seeded order; how many there are; and apart, the ones that are
    distractors of multiple-choice evaluation items (``held_back``), with their query's
    caption: provenance, written only on request."""
    import random

    judged = [r for r in machine if r.n_votes != 0]
    parents = {r.parent for r in judged if r.parent is not None}
    # Only the negatives' and their queries' full records (a streamed pass, when any).
    wanted = sorted(parents | {r.id for r in judged})
    records = {rec["example_id"]: rec for rec in source.records(every, wanted)} if wanted else {}
    random_of = {k: p for p, keys in (random_parts or {}).items() for k in keys if k in parents}
    out: list[dict[str, Any]] = []
    provenance: list[dict[str, Any]] = []
    for r in judged:
        record = {
            **records[r.id],
            "query_example_id": r.parent,
            "query_random_split": random_of.get(r.parent) if r.parent is not None else None,
            "kept": r.kept,
        }
        if r.id in held_back:
            query = records.get(r.parent) if r.parent is not None else None
            record["query_caption"] = query["caption"] if query is not None else None
            record["not_for_evaluation"] = True
            provenance.append(record)
        else:
            out.append(record)
    # Not in id order: an order is a signal a look-up could use.
    random.Random(f"{seed}/machine_negatives").shuffle(out)
    info = {
        "judged": len(out) + len(provenance),
        "written": len(out),
        "held_back_as_mc_distractors": len(provenance),
        "kept": sum(1 for r in (*out, *provenance) if r["kept"]),
        "unjudged": sum(1 for r in machine if r.n_votes == 0),
        "in_splits": joined,
    }
    return out, info, provenance


def _people(rows: list[ExportRow]) -> set[int]:
    """Export ids of everyone who wrote or judged one of these rows (the study's people)."""
    out: set[int] = set()
    for r in rows:
        if r.author is not None:
            out.add(r.author)
        out.update(r.true_ids)
        out.update(r.false_ids)
    return out


def _ids(rows: list[ExportRow], every: list[ExportRow]) -> array[int] | None:
    """The ids of ``rows`` for ``RecordSource.records`` (None: all of ``every``), 8 bytes each."""
    return None if rows is every else array("q", (r.id for r in rows))


@contextmanager
def _read(engine: Engine, options: BuildOptions, progress: Progress) -> Iterator[_Snapshot]:
    """The snapshot, its transaction open until the files are written: the full records are
    read again from it while each file is written."""
    with engine.connect() as conn:
        conn = conn.execution_options(**read_snapshot_options(engine))
        with conn.begin():
            yield _snapshot(conn, options, progress)


def build_dataset(
    engine: Engine,
    out_dir: Path,
    options: BuildOptions | None = None,
    *,
    progress: Progress | None = None,
    overwrite: bool = False,
) -> BuildSummary:
    """Write the export to ``out_dir`` (see the module docstring) and return a summary."""
    options = options or BuildOptions()
    options.check()
    report = progress or (lambda stage, frac: None)
    out_dir = Path(out_dir)
    _check_out_dir(out_dir, options, overwrite)
    stage = _Staging.next_to(out_dir)
    try:
        with _read(engine, options, report) as snap:
            _refuse_empty(snap, options)
            report("writing", 0.6)
            records = _write_parts(stage, snap, options)
            configs, features = _write_configs(stage, records, out_dir, options)
        # The transaction ends here (on SQLite it holds the write lock): statistics, figures
        # and the card read only the compact rows and the files written.
        stats: dict[str, Any] = {}
        if options.wants("stats") or options.wants("card"):
            report("statistics", 0.7)
            stats = _export_stats(snap, options)
            if options.only is None:
                report("leak audit", 0.75)
                stats.update(_leak_audit(stage, stats, options))
        if options.wants("stats"):
            stage.write(
                "stats.json",
                orjson.dumps(stats, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n",
            )
        if options.wants("card"):
            report("figures", 0.8)
            _write_card(stage, snap, options, stats, configs, features)
        report("moving into place", 0.95)
        _move_into_place(stage.root, out_dir, replace_all=options.only is None)
    finally:
        if stage.root.exists():
            shutil.rmtree(stage.root, ignore_errors=True)
    report("done", 1.0)
    return BuildSummary(
        out_dir=str(out_dir),
        files=sorted(set(stage.files)),
        n_raw=len(snap.rows),
        n_validated=len(snap.validated),
        splits=_split_sizes(snap),
        stats=stats,
        threshold=snap.threshold,
        threshold_source=snap.threshold_source,
        n_negatives=len(snap.negatives),
    )


def _leak_audit(stage: _Staging, stats: dict[str, Any], options: BuildOptions) -> dict[str, Any]:
    """``blind_baselines`` and ``leak_audit`` of stats.json (vsr_dataset.leak_audit); a
    look-up or join attack above chance fails the build unless ``allow_leaks``."""
    from vsr_dataset.leak_audit import audit, failures

    blind = audit(stage.root, stage.files)
    mc = stats.get("mc")
    if mc is not None:
        from vsr_dataset import mc_blind

        # The set stats.json `mc` measured on keeps that very suite (one figure, not two).
        known = {
            mc.get("measured_on", "mc"): {
                "adversaries": mc.get("adversaries") or {},
                "strongest": mc.get("strongest_adversary"),
                "strongest_null": mc.get("strongest_null"),
                "n_test": mc.get("adversaries_n_test"),
                "chance": mc.get("chance"),
            }
        }
        measured = mc_blind.suites(
            stage.root, mc.get("suite_model"), mc.get("suite_seed") or 0, known
        )
        mc_blind.add_to(blind, measured)
    failed = failures(blind)
    if failed and not options.allow_leaks:
        raise ExportError(
            f"leak audit: {len(failed)} look-up or join attack(s) above chance, first "
            f"{failed[0]} (stats of every attack: build with --allow-leaks, which says so "
            "in the card)"
        )
    return {"blind_baselines": blind, "leak_audit": {"failures": failed, "allowed": bool(failed)}}


def _refuse_empty(snap: _Snapshot, options: BuildOptions) -> None:
    """Nothing kept yet: the validated parts and the splits would be empty files that
    `datasets` cannot open, so nothing is written (``--only raw`` still is)."""
    if snap.validated or not any(
        options.wants(kind) for kind in ("validated", "random", "zeroshot")
    ):
        return
    raise ExportError(
        f"no Example is validated yet ({len(snap.rows):,} written, none kept): nothing "
        "written; let validators judge them first (or --only raw for the captions alone)"
    )


def _check_out_dir(out_dir: Path, options: BuildOptions, overwrite: bool) -> None:
    """Refuse an output that is a file, or a full directory a whole export would replace."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"{out_dir} exists and is not a directory")
    if options.only is None and out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        raise ExportError(f"{out_dir} is not empty: pass --overwrite to replace it")


@dataclass
class _Staging:
    """The directory an export is written to before it moves into place, and its files."""

    root: Path
    files: list[str] = field(default_factory=list)

    @classmethod
    def next_to(cls, out_dir: Path) -> _Staging:
        root = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}"
        try:
            if root.exists():
                shutil.rmtree(root)
            root.mkdir(parents=True)
        except OSError as exc:
            # The staging folder is ours: the user named out_dir.
            raise ExportError(f"cannot write {out_dir}: {exc.strerror or exc}") from None
        return cls(root)

    def write(self, rel: str, lines: Iterable[bytes] | bytes) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb", buffering=1 << 20) as fh:
            if isinstance(lines, bytes):
                fh.write(lines)
            else:
                fh.writelines(lines)
        self.files.append(rel)


def _write_parts(stage: _Staging, snap: _Snapshot, options: BuildOptions) -> dict[str, Records]:
    """The JSONL parts the options want (and meta_data.csv, instances.jsonl); returns every
    part's records, written or not (the card's features are read from them)."""
    from vsr_dataset.layout import kind_of, part_records

    source, every = snap.source, snap.every
    validated = _ids(snap.validated, every)
    records = part_records(
        raw=StreamedRecords(source, every, _ids(snap.rows, every), raw=True),
        validated=StreamedRecords(source, every, validated),
        random_parts={
            p: StreamedRecords(source, every, keys) for p, keys in snap.random_parts.items()
        }
        if snap.random_parts is not None
        else None,
        zeroshot_parts={
            p: StreamedRecords(source, every, keys) for p, keys in snap.zeroshot.parts.items()
        }
        if snap.zeroshot is not None
        else None,
        negatives=snap.negatives,
        mc_sets=snap.mc_published.files if snap.mc_published is not None else {},
        provenance=_provenance(snap) if options.with_provenance else {},
        vsr_compatible=options.vsr_compatible,
    )
    wanted = {rel: recs for rel, recs in records.items() if options.wants(kind_of(rel))}
    streamed = _write_streamed(stage, snap, wanted)
    for rel, recs in wanted.items():
        if rel in streamed:
            stage.files.append(rel)
            # Read back from the file for the card's features and the Parquet copy: a JSON
            # parse per line instead of another pass over the database.
            records[rel] = WrittenRecords(stage.root / rel, len(recs))
        else:
            stage.write(rel, jsonl(recs))
    if options.wants("meta") and snap.meta_csv is not None:
        stage.write("meta_data.csv", snap.meta_csv.encode())
    if options.wants("meta") and snap.qualification_csv is not None:
        stage.write(QUALIFICATION_FILE, snap.qualification_csv.encode())
    if options.wants("meta") and snap.authenticity_csv is not None:
        stage.write(AUTHENTICITY_FILE, snap.authenticity_csv.encode())
    if options.polygons and options.wants("raw"):
        stage.write(INSTANCES_FILE, jsonl(snap.instances))
    return records


def _provenance(snap: _Snapshot) -> dict[str, Records]:
    """provenance/ (on request): the MC items' sources and their held-back negatives."""
    from vsr_dataset.mc_publish import MC_PROVENANCE_FILE, NEGATIVES_PROVENANCE_FILE

    published = snap.mc_published
    return {
        MC_PROVENANCE_FILE: published.provenance if published is not None else [],
        NEGATIVES_PROVENANCE_FILE: snap.held_back_negatives,
    }


class WrittenRecords(Sequence[dict[str, Any]]):
    """The records of a JSONL file just written, parsed one at a time each time they are read."""

    def __init__(self, path: Path, n: int) -> None:
        self.path, self.n = path, n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[dict[str, Any]]:
        loads = orjson.loads
        with self.path.open("rb") as fh:
            for line in fh:
                yield loads(line)

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        return list(self)[i]  # never done by the export: it only iterates


def _write_streamed(stage: _Staging, snap: _Snapshot, records: dict[str, Records]) -> set[str]:
    """Write the files of records read from the database (all_raw, all_validated, the
    splits) in one pass over it, each record built once; returns their names."""
    from vsr_dataset.layout import LazyRecords

    files: list[tuple[str, StreamedRecords, Callable[[dict[str, Any]], dict[str, Any]] | None]] = []
    for rel, recs in records.items():
        if isinstance(recs, StreamedRecords):
            files.append((rel, recs, None))
        elif isinstance(recs, LazyRecords) and isinstance(recs.items, StreamedRecords):
            files.append((rel, recs.items, recs.make))  # --vsr-compatible's types
    if not files:
        return set()
    handles: list[IO[bytes]] = []
    try:
        for rel, _, _ in files:
            path = stage.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            handles.append(path.open("wb", buffering=1 << 20))
        dumps, opt = orjson.dumps, orjson.OPT_APPEND_NEWLINE
        wants = [(recs.keys, recs.raw) for _, recs, _ in files]
        makes = [make for _, _, make in files]
        for i, rec in snap.source.fan_out(snap.every, wants):
            make = makes[i]
            handles[i].write(dumps(rec if make is None else make(rec), option=opt))
    finally:
        for fh in handles:
            fh.close()
    return {rel for rel, _, _ in files}


def _write_configs(
    stage: _Staging,
    records: dict[str, Records],
    out_dir: Path,
    options: BuildOptions,
) -> tuple[list[Config], dict[str, list[Feature]] | None]:
    """The Hub configs of the JSONL files this export has (written now, or kept from an earlier
    export when only some parts are rebuilt), their features, and the Parquet copies."""
    from vsr_dataset.hub import write_parquet
    from vsr_dataset.layout import config_features, configs_of

    files = stage.files
    jsonl_files = [
        rel
        for rel in records
        if rel in files or (out_dir / rel).is_file() and options.only is not None
    ]
    configs = configs_of(jsonl_files, parquet=options.parquet)
    features = (
        None
        if options.vsr_compatible or not (options.wants("card") or options.parquet)
        else config_features(configs, records)
    )
    if options.parquet and features is not None:
        for c in configs:
            for rel in c.files.values():
                src = rel.removesuffix(".parquet") + ".jsonl"
                if src in files:
                    write_parquet(records[src], features[c.name], stage.root / rel)
                    files.append(rel)
    return configs, features


def _export_stats(snap: _Snapshot, options: BuildOptions) -> dict[str, Any]:
    """stats.json: the paper's numbers (vsr_dataset.stats) and what only the export knows."""
    from vsr_dataset.stats import compute_stats

    with gc_paused():
        stats = compute_stats(
            snap.rows,
            threshold=snap.threshold,
            seed=options.seed,
            split_unit=options.split_unit,
            random_parts=snap.random_parts,
            zeroshot=snap.zeroshot,
            aggregate_model=options.label_model,
            aggregates=snap.aggregates,
        )
    stats["threshold_source"] = snap.threshold_source
    stats["keep_rule"] = snap.keep_rule
    stats["machine_negatives"] = snap.negatives_info
    stats["n_paired"] = sum(1 for r in snap.rows if r.pair_id is not None)
    if snap.mc_info is not None:
        stats["mc"] = snap.mc_info
    assert snap.study is not None
    stats["study"] = definition_info(snap.study)
    stats["repeated_validators"] = {
        "raw": sum(1 for r in snap.rows if _repeats(r)),
        "validated": sum(1 for r in snap.validated if _repeats(r)),
    }
    stats["reference_frame_known"] = {
        "known": snap.frames_known,
        "validated": len(snap.validated),
    }
    if snap.random_parts is not None:
        stats["split_source"] = split_source(
            snap.release_splits,
            vsr_compatible=options.vsr_compatible,
            seed=options.seed,
            unit=options.split_unit,
            random_ratios=options.random_ratios,
            zeroshot_ratios=options.zeroshot_ratios,
        )
    return stats


def _repeats(row: ExportRow) -> bool:
    """Whether a record's vote lists name one validator twice (as the VSR release does)."""
    ids = row.true_ids + row.false_ids
    return len(set(ids)) < len(ids)


def _write_card(
    stage: _Staging,
    snap: _Snapshot,
    options: BuildOptions,
    stats: dict[str, Any],
    configs: list[Config],
    features: dict[str, list[Feature]] | None,
) -> None:
    """The figures, the dataset card (README.md) and croissant.json, which states its facts."""
    from vsr_dataset.card import rai_facts, render_card
    from vsr_dataset.croissant import CROISSANT_FILE, croissant
    from vsr_dataset.figures import FIGURES, draw_all

    notes = draw_all(stats, stage.root)
    stage.files.extend(FIGURES.values())
    inputs = _card_inputs(stage, snap, options, stats, configs, features, notes)
    stage.write("README.md", render_card(stats, inputs).encode())
    researcher = inputs.researcher
    doc = croissant(
        stage.root,
        title=options.title,
        description=f"{options.title}: a VSR-style visual spatial reasoning dataset "
        "(COCO images, template captions, True/False labels with every vote).",
        configs=[c for c in configs if all((stage.root / f).is_file() for f in c.files.values())],
        features=features or {},
        facts=rai_facts(stats, inputs),
        license_url=researcher["license"],
        version=researcher["version"],
        cite_as=researcher["citation"],
        creators=researcher["creators"],
        study_name=stats["study"]["name"],
        date_published=snap.collection.get("newest_data"),
    )
    stage.write(CROISSANT_FILE, orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")


def _card_inputs(
    stage: _Staging,
    snap: _Snapshot,
    options: BuildOptions,
    stats: dict[str, Any],
    configs: list[Config],
    features: dict[str, list[Feature]] | None,
    notes: dict[str, str],
) -> CardInputs:
    """Everything the card says beyond stats.json, its YAML front matter first."""
    from vsr_dataset.card import CardInputs
    from vsr_dataset.croissant import CROISSANT_FILE
    from vsr_dataset.datasheet import demographics_summary, researcher_facts
    from vsr_dataset.layout import front_matter

    assert snap.study is not None
    researcher = researcher_facts(snap.study)
    meta = front_matter(
        title=options.title,
        license_id=researcher["license"],
        language=snap.study.language.code,
        n_raw=len(snap.rows),
        origins=list(stats["origins"]),
        negatives_in_splits=snap.negatives_info.get("in_splits", False),
        configs=configs,
        features=features,
    )
    return CardInputs(
        title=options.title,
        files=sorted({*stage.files, "README.md", CROISSANT_FILE}),
        front_matter=meta,
        figure_notes=notes,
        mc_counts=(
            sum(map(len, snap.mc.values())),
            sum(map(len, snap.mc_unvalidated.values())),
            snap.mc_rejected,
        )
        if options.wants("mc")
        else None,
        collection=snap.collection,
        researcher=researcher,
        demographics=demographics_summary(snap.meta_csv),
        n_paired=stats["n_paired"],
        vsr_compatible=options.vsr_compatible,
        parquet=options.parquet,
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
    with _read(engine, options, lambda stage, frac: None) as snap:
        return _stream(snap, kind, p, fh, options)


def _stream(snap: _Snapshot, kind: str, p: str, fh: IO[bytes], options: BuildOptions) -> int:
    from vsr_dataset.vsr_compat import compatible

    source, every = snap.source, snap.every
    records: Records
    if kind == "raw":
        records = StreamedRecords(source, every, _ids(snap.rows, every), raw=True)
    elif kind == "validated":
        records = StreamedRecords(source, every, _ids(snap.validated, every))
    else:
        assert snap.random_parts is not None and snap.zeroshot is not None
        keys = snap.random_parts[p] if kind == "random" else snap.zeroshot.parts[p]
        records = StreamedRecords(source, every, keys)
    lines = compatible(records, raw=kind == "raw") if options.vsr_compatible else records
    fh.writelines(jsonl(lines))
    fh.flush()
    return len(records)


def _elsewhere(conn: Connection, study_id: int) -> set[int]:
    """Worker ids who wrote or judged an Example of another study."""
    other = EXAMPLE.c.study_id != study_id
    authors = select(EXAMPLE.c.author_id).where(other, EXAMPLE.c.author_id.is_not(None))
    voters = select(VOTE.c.worker_id).join(EXAMPLE, EXAMPLE.c.id == VOTE.c.example_id).where(other)
    return {int(w) for (w,) in conn.execute(authors.union(voters))}


def _meta_csv(conn: Connection, study_id: int, wanted: set[int]) -> str | None:
    """Demographics of the workers that have them, keyed by export id (VSR's meta_data.csv):
    the study's people (export ids ``wanted``) and those who did nothing yet, never the
    people of other studies only."""
    ids = worker_export_ids(conn)
    elsewhere = _elsewhere(conn, study_id)
    people: dict[int, dict[str, Any]] = {}
    for wid, demo in conn.execute(select(WORKER.c.id, WORKER.c.demographics).order_by(WORKER.c.id)):
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


def _qualification_csv(conn: Connection, study: StudyContext) -> str | None:
    """Who took the study's qualification check and how it ended, per worker (by export id,
    as in the records' annotator and validator ids) and task; None when nobody took it."""
    from sqlmodel import Session

    from vsr_core.qualification import outcomes
    from vsr_core.tables import QUALIFICATION_ATTEMPT

    tries: dict[tuple[int, str], int] = {}
    for wid, kind, n in conn.execute(
        select(QUALIFICATION_ATTEMPT.c.worker_id, QUALIFICATION_ATTEMPT.c.kind, func.count())
        .where(QUALIFICATION_ATTEMPT.c.study_id == study.id)
        .group_by(QUALIFICATION_ATTEMPT.c.worker_id, QUALIFICATION_ATTEMPT.c.kind)
    ):
        tries[(int(wid), str(kind))] = int(n)
    if not tries:
        return None
    with Session(bind=conn) as session:
        found = outcomes(session, study.id, study.definition)
    ids = worker_export_ids(conn)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns(QUALIFICATION_FILE))
    rows = sorted((ids[wid], kind, n, str(found[wid][kind])) for (wid, kind), n in tries.items())
    for export_id, kind, n, outcome in rows:
        writer.writerow([export_id, kind, n, int(outcome == "passed"), outcome])
    return buf.getvalue()


# The columns after worker_id, score and flags, as the data dictionary lists them.
AUTHENTICITY_COLUMNS = tuple(columns(AUTHENTICITY_FILE)[3:])


def _authenticity_csv(conn: Connection, study_id: int) -> str | None:
    """Per worker who answered on this site's pages (the study has item signals), their
    authenticity summary under the export id; None when no page measured anything."""
    from sqlmodel import Session

    from vsr_core.authenticity_db import assess_workers
    from vsr_core.tables import ITEM_SIGNAL

    who = [
        int(w)
        for (w,) in conn.execute(
            select(ITEM_SIGNAL.c.worker_id).where(ITEM_SIGNAL.c.study_id == study_id).distinct()
        )
    ]
    if not who:
        return None
    with Session(bind=conn) as session:
        found = assess_workers(session, study_id, who)
    ids = worker_export_ids(conn)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns(AUTHENTICITY_FILE))
    for wid in sorted(found, key=ids.__getitem__):
        a = found[wid]
        cells = [_cell(a.summary.get(c)) for c in AUTHENTICITY_COLUMNS]
        writer.writerow([ids[wid], a.score, " ".join(map(str, a.flags)), *cells])
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
