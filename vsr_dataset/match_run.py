"""One adversarial matching run over the collected data, end to end: load the kept Examples
and their instance outlines, load the text models, match within build-dataset's split,
diagnose with the held-out answer-only adversaries, and save. `vsr match` and the dashboard's
matching job are both this function with different options, so the two can never drift (the
job once skipped the COCO-outline filter that keeps true distractors out)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from matching.params import SUITE_SAMPLE, MatchParams
from vsr_core.defaults import DEFAULT_STUDY_ID

if TYPE_CHECKING:  # numpy and scipy load only when a run starts
    from sqlalchemy.engine import Engine

    from matching.pipeline import MatchResult
    from vsr_core.audit import Actor

# (fraction done 0..1, what is happening) — a progress bar or a job row.
Report = Callable[[float, str], None]
# A line worth keeping on its own (how many Examples are matched, what the sweep covers),
# besides the progress: a terminal prints it above its bar.
Milestone = Callable[[str], None]


class MatchRunError(ValueError):
    """A run that cannot start or finish; the message is one line a user can act on."""


class SplitSource(StrEnum):
    """Which train/dev/test split matching runs within."""

    IMAGE = "image"  # every Example of an image in one split (matching.records.split_of)
    EXPORT = "export"  # build-dataset's random split (same seed): no mc/test truth in train
    # The VSR release's own random split (its folder imported): what build-dataset
    # --vsr-compatible writes, so the MC sets align with the release's split files.
    RELEASE = "release"


SPLIT_WORDS = {
    SplitSource.IMAGE: "every Example of an image in one part (seed {seed})",
    SplitSource.EXPORT: "build-dataset's drawn random split (seed {seed}, per annotation, "
    "70/10/20)",
    SplitSource.RELEASE: "the VSR release's own random split (build-dataset --vsr-compatible)",
}


def split_words(source: SplitSource, seed: int) -> str:
    """Which split a run matched within, in words (the report's first line)."""
    return SPLIT_WORDS[source].format(seed=seed)


@dataclass
class MatchRequest:
    params: MatchParams = field(default_factory=MatchParams)
    model: str | None = None  # sentence-transformers name or path; None: the packaged MiniLM
    similarity: str = "table"  # 'table' or a CrossEncoder NLI model name/path
    splits: SplitSource = SplitSource.EXPORT
    split_seed: int = 0
    keep_threshold: float | None = None  # None: the study setting
    sweep: list[float] = field(default_factory=list)
    study_id: int = DEFAULT_STUDY_ID  # the study whose Examples are matched
    workers: int | None = None  # processes for splits and folds; None: default_workers()
    suite_sample: int | None = SUITE_SAMPLE  # adversary suite items per side (None: all)


@dataclass
class MatchOutcome:
    result: MatchResult
    diagnostics: dict[str, Any]
    threshold: float
    queries: int
    records: int


def _quiet(fraction: float, message: str) -> None:
    return None


def _unnoted(message: str) -> None:
    return None


def default_workers() -> int:
    """One matching process per CPU core this process may use, at most 4 (on 2 cores the
    10x train split's folds finish in half the time: docs/scaling.md)."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(4, cores or 1))


# The collector while matching: young collections as usual, full ones ~100x rarer.
MATCH_GC_THRESHOLDS = (50_000, 20, 100)


def run_matching_over(
    engine: Engine,
    request: MatchRequest,
    report: Report = _quiet,
    on_step: Callable[[str], None] | None = None,
    on_milestone: Milestone = _unnoted,
) -> MatchOutcome:
    """Match the database's kept True Examples; raises MatchRunError when it cannot.

    The whole run speaks for the request's study (matching.study_scope): its relation
    semantics decide what may be a distractor, and distractors are captioned in its language."""
    from sqlmodel import Session

    from matching.study_scope import scope_for, study_scope
    from vsr_core.models import Study
    from vsr_core.studies.context import StudyContext

    with Session(engine) as session:
        study = session.get(Study, request.study_id)
        if study is None:
            raise MatchRunError(f"no study with id {request.study_id}")
        definition = StudyContext.of(study).definition
    thresholds = gc.get_threshold()
    try:
        with study_scope(scope_for(definition)):
            return _run_matching_over(engine, request, report, on_step, on_milestone)
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _run_matching_over(
    engine: Engine,
    request: MatchRequest,
    report: Report = _quiet,
    on_step: Callable[[str], None] | None = None,
    on_milestone: Milestone = _unnoted,
) -> MatchOutcome:
    from sqlmodel import Session

    from matching.diagnostics import diagnose
    from matching.diagnostics import sweep as run_sweep
    from matching.pipeline import run_matching
    from matching.records import kept_true
    from matching.relevance import RelevanceModel, load_encoder
    from matching.similarity import load_similarity
    from matching.store import load_records
    from vsr_core.studies.settings import load_study_config
    from vsr_dataset.match_geometry import load_pair_shapes
    from vsr_dataset.match_splits import (
        export_split_mapping,
        has_release_split,
        release_split_mapping,
    )
    from vsr_dataset.splits import SplitError

    if request.splits not in set(SplitSource):
        raise MatchRunError(f"splits must be image, export or release; got {request.splits!r}")
    report(0.02, "loading kept Examples")
    with Session(engine) as session:
        threshold = (
            request.keep_threshold
            if request.keep_threshold is not None
            else load_study_config(session, request.study_id).keep_threshold
        )
        records = load_records(session, request.study_id)
        geometry = load_pair_shapes(session)
    k = request.params.k
    queries = kept_true(records, threshold)
    if len(queries) < k + 1:
        raise MatchRunError(
            f"only {len(queries)} kept True Examples: need at least {k + 1} to match "
            "(import or validate data first)"
        )
    # The random split build-dataset writes, so no mc/test truth is in random/train; read
    # before the models load, so a missing release split fails at once.
    mapping: dict[int, str] | None = None
    if request.splits == SplitSource.EXPORT:
        mapping = export_split_mapping(engine, threshold, request.split_seed, request.study_id)
    elif request.splits == SplitSource.RELEASE:
        try:
            mapping = release_split_mapping(engine, threshold, request.split_seed, request.study_id)
        except SplitError as exc:
            raise MatchRunError(str(exc)) from exc
    on_milestone(f"matching within {split_words(request.splits, request.split_seed)}")
    if request.splits == SplitSource.EXPORT and has_release_split(engine, request.study_id):
        on_milestone(
            "note: this study holds the VSR release's own random split, which build-dataset "
            "--vsr-compatible writes; match with --splits release for that build"
        )
    counts = f"{len(queries)} kept True Examples (of {len(records)}); loading models ..."
    report(0.1, counts)
    on_milestone(counts)
    try:
        encoder = load_encoder(request.model)
        scorer = load_similarity(request.similarity)
    except (OSError, ValueError) as exc:
        raise MatchRunError(f"cannot load model: {' '.join(str(exc).split())[:300]}") from exc
    # The records and the model stay to the end: the collector stops walking them, and
    # full collections get rare (they went over the whole heap: ~10 % of the CPU at 10x;
    # matching makes few reference cycles). Undone by the caller, run_matching_over.
    gc.freeze()
    gc.set_threshold(*MATCH_GC_THRESHOLDS)
    relevance = RelevanceModel(encoder, seed=request.params.seed)
    report(0.3, "fitting P_rel and matching (train, dev, test)")
    try:
        result = run_matching(
            records,
            relevance,
            scorer,
            request.params,
            splits=mapping,
            split_seed=request.split_seed,
            threshold=threshold,
            on_step=on_step,
            geometry=geometry,
            workers=request.workers or default_workers(),
        )
    except ValueError as exc:
        raise MatchRunError(str(exc)) from exc
    report(0.85, "diagnostics")
    # The test items build-dataset publishes: none whose truth it writes to a train file.
    published = None
    if mapping is not None:
        from vsr_dataset.match_splits import export_train_ids

        train_ids = export_train_ids(
            engine,
            threshold,
            request.split_seed,
            request.study_id,
            release=request.splits == SplitSource.RELEASE,
        )
        published = lambda it: it.query.id not in train_ids  # noqa: E731
    diag = diagnose(result, relevance, suite_sample=request.suite_sample, published=published)
    diag["split"] = {
        "source": request.splits.value,
        "seed": request.split_seed,
        "words": split_words(request.splits, request.split_seed),
    }
    diag["false_caption_rejection_rate"] = false_caption_rejection_rate(records, threshold)
    diag["similarity"] = getattr(scorer, "name", request.similarity)
    diag["model"] = request.model or "all-MiniLM-L6-v2 (packaged)"
    if request.sweep:
        sweeping = f"sweeping h over {request.sweep}"
        report(0.9, sweeping)
        on_milestone(sweeping)
        diag["sweep"] = run_sweep(
            records,
            relevance,
            scorer,
            request.params,
            request.sweep,
            splits=mapping,
            split_seed=request.split_seed,
            threshold=threshold,
        )
    return MatchOutcome(result, diag, float(threshold), len(queries), len(records))


def save_match_run(
    engine: Engine,
    outcome: MatchOutcome,
    request: MatchRequest,
    send_negatives: bool,
    actor: Actor | None = None,
    extra: dict[str, Any] | None = None,
) -> int:
    """Write the run and its items (and, with ``send_negatives``, the distractors as False
    Examples for validation); returns the run's id. With ``actor`` (a run at the CLI; a
    dashboard job is recorded when it starts), the audit record commits with the run."""
    from matching.store import save_run
    from vsr_core.db import session_scope

    params = {
        "split_seed": request.split_seed,
        "splits": request.splits,
        "keep_threshold": outcome.threshold,
        "similarity": outcome.diagnostics["similarity"],
        "model": outcome.diagnostics["model"],
        **(extra or {}),
    }
    from vsr_core.studies.settings import load_study_config

    with session_scope(engine) as session:
        votes = load_study_config(session, request.study_id).votes_per_example
        run = save_run(
            session,
            outcome.result,
            outcome.diagnostics,
            send_negatives=send_negatives,
            extra_params=params,
            study_id=request.study_id,
            votes_per_example=votes,
        )
        assert run.id is not None
        if actor is not None:
            from dataclasses import asdict

            from vsr_core import audit
            from vsr_core.models import AuditKind

            audit.record(
                session,
                actor,
                AuditKind.match_run,
                study_id=request.study_id,
                target=f"match run {run.id}",
                change={
                    "params": {**asdict(request.params), **params},
                    "items": len(outcome.result.items),
                    "send_negatives": send_negatives,
                },
            )
        if run.diagnostics and "validation_cost" in run.diagnostics:
            outcome.diagnostics["validation_cost"] = run.diagnostics["validation_cost"]
        return run.id


def false_caption_rejection_rate(records: Any, threshold: float) -> float | None:
    """Share of the data's judged False captions (written False, not adversarial
    negatives) that validators kept as False: what a negative may expect."""
    from vsr_core.agreement import is_kept

    judged = [r for r in records if not r.label and r.origin != "adversarial" and r.votes]
    if not judged:
        return None
    return sum(is_kept(False, list(r.votes), threshold) for r in judged) / len(judged)
