"""`vsr match`: adversarial matching of kept Examples into multiple-choice items (matching/)."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from matching.params import Balance, MatchParams
from vsr_cli.choices import choice
from vsr_cli.common import (
    DB_HELP,
    STAGE_FORMAT,
    STUDY_HELP,
    engine_for,
    no_library_bars_off_terminal,
    progress_bar,
    study_for,
)
from vsr_cli.failure import CliError, CliUsageError
from vsr_dataset.match_run import MatchRequest, SplitSource

if TYPE_CHECKING:
    from matching.pipeline import MatchResult
    from vsr_core.audit import Actor

# Every option's default is the library's: matching.params and vsr_dataset.match_run.
PARAMS = MatchParams()
REQUEST = MatchRequest()


class Solver(StrEnum):
    """The solvers --method offers: matching.assign.Method but for ``grouped_full``, the
    one-shot LP that only tests compare column generation with."""

    AUTO = "auto"
    GROUPED = "grouped"
    DENSE = "dense"
    SPARSE = "sparse"


def _parse_sweep(text: str | None) -> list[float]:
    if not text:
        return []
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise CliUsageError(
            f"--sweep takes comma-separated numbers such as 0,0.5,1,2; got {text!r}"
        ) from None
    if not values or any(v < 0 or v != v or v == float("inf") for v in values):
        raise CliUsageError(f"--sweep values must be finite numbers >= 0; got {text!r}")
    return values


def match(
    h: float = typer.Option(PARAMS.h, "--h", help="Trade-off: weight of log(1 - P_sim) (>= 0)."),
    k: int = typer.Option(PARAMS.k, "--k", help="Distractors per query (choices = k + 1)."),
    remap: bool = typer.Option(
        PARAMS.remap,
        "--remap/--no-remap",
        help="Rewrite distractors onto the query's concepts so only the relation differs.",
    ),
    report: bool = typer.Option(False, "--report", help="Print the diagnostics."),
    sweep: str | None = typer.Option(
        None, "--sweep", help="Comma-separated h values to compare, e.g. 0,0.5,1,2."
    ),
    send_negatives: bool = typer.Option(
        True,
        "--send-negatives-to-validation/--no-send-negatives-to-validation",
        help="Add each distractor as a False Example (origin adversarial) to the validation "
        "queue (default); only items whose distractors validators reject reach mc/. Without "
        "it the items are unvalidated and build-dataset writes them only with "
        "--unvalidated-mc, apart in mc_unvalidated/.",
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        help="Sentence-transformers model for P_rel (default: packaged all-MiniLM-L6-v2, offline).",
    ),
    similarity: str = typer.Option(
        REQUEST.similarity,
        "--similarity",
        help="P_sim: 'table' (relation-semantics table) or a CrossEncoder NLI model name/path.",
    ),
    table_filter: bool = typer.Option(
        PARAMS.table_filter,
        "--table-filter/--no-table-filter",
        help="Never use distractors the relation table says the truth implies.",
    ),
    keep_threshold: float | None = typer.Option(
        None,
        "--keep-threshold",
        help="Agreement needed to keep an Example (default: study setting, 2/3).",
    ),
    seed: int = typer.Option(PARAMS.seed, "--seed", help="Seed of tie-breaking and choice order."),
    split_seed: int = typer.Option(
        REQUEST.split_seed, "--split-seed", help="Seed of the train/dev/test split."
    ),
    splits: SplitSource = typer.Option(
        REQUEST.splits,
        "--splits",
        parser=choice(SplitSource, "--splits"),
        help="'export' (default): the random split build-dataset writes (same seed), so no "
        "truth of mc/test is in random/train; 'release': the VSR release's own random split "
        "(import the release folder first), which build-dataset --vsr-compatible writes; "
        "'image': every Example of an image in one split (matching.records.split_of).",
    ),
    balance: Balance = typer.Option(
        PARAMS.balance,
        "--balance",
        parser=choice(Balance, "--balance"),
        help="(concept pair, relation) balance against answer-only models: soft (default), "
        "pair (strict: exact balance, drops queries of rare pairs) or off (VCR's weights).",
    ),
    aim: float = typer.Option(
        PARAMS.aim,
        "--aim",
        help="With --balance soft: 0 = distractors as plausible as possible "
        "(VCR), 1 = exactly as plausible as the truth (docs/matching.md).",
    ),
    backoff: float = typer.Option(
        PARAMS.backoff, "--backoff", help="With --balance soft: pseudo-count of the P_rel back-off."
    ),
    rake_rounds: int = typer.Option(
        PARAMS.rake_rounds,
        "--rake-rounds",
        help="With a balance: how often each split is matched again with "
        "every (subject/object/pair, relation) pushed towards k distractors per answer "
        "(matching/raking.py); 0 turns raking off.",
    ),
    filter_above: float = typer.Option(
        PARAMS.filter_above,
        "--filter-above",
        help="Drop items whose answer answer-only models that never "
        "saw them give at least this probability (AFLite-style, matching/filtering.py); 0: "
        "keep every matched item.",
    ),
    filter_stack_above: float = typer.Option(
        PARAMS.filter_stack_above,
        "--filter-stack-above",
        help="Then drop dev/test items whose answer a stack of "
        "those models' scores (gradient boosting, fitted on the kept train items) gives at "
        "least this share of its item; 0: no second pass.",
    ),
    method: Solver = typer.Option(
        Solver(PARAMS.method),
        "--method",
        parser=choice(Solver, "--method"),
        help="auto | grouped | dense | sparse.",
    ),
    dense_limit: int = typer.Option(
        PARAMS.dense_limit, "--dense-limit", help="Largest dense assignment."
    ),
    top_k: int = typer.Option(
        PARAMS.top_k, "--top-k", help="Candidates per row for the sparse solver."
    ),
    fold_size: int = typer.Option(
        PARAMS.fold_size,
        "--fold-size",
        help="Match a split with more queries than this fold by fold (0: never; docs/matching.md).",
    ),
    workers: int = typer.Option(
        0,
        "--workers",
        help="Processes matching splits and folds in parallel (0: one per "
        "CPU core, at most 4); the result is the same for any number.",
    ),
    suite_sample: int = typer.Option(
        REQUEST.suite_sample or 0,
        "--suite-sample",
        help="Fit the answer-only adversaries on at most this many "
        "train items and score them on at most this many test items (0: all).",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Compute and print, write nothing."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write diagnostics here."),
    study_slug: str | None = typer.Option(None, "--study", help=STUDY_HELP),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
) -> None:
    """Build multiple-choice distractors by adversarial matching (VCR section 4).

    Queries are kept True Examples; each gets K distractors from other queries' captions by
    maximum-weight bipartite matching within its split (--splits: by default the random
    train/dev/test split build-dataset writes), so a split needs at least K + 1 queries.
    """
    no_library_bars_off_terminal()
    from matching import model_libraries
    from matching.diagnostics import format_report, format_sweep
    from vsr_dataset.match_run import MatchRunError, run_matching_over, save_match_run

    try:  # before any data is read: without the [match] extra nothing can be matched
        model_libraries.check_installed()
    except model_libraries.MissingModelLibraries as exc:
        raise CliError(str(exc)) from None
    hs = _parse_sweep(sweep)
    if workers < 0 or suite_sample < 0:
        raise CliUsageError("--workers and --suite-sample must be >= 0")
    if keep_threshold is not None and not 0 < keep_threshold <= 1:
        raise CliUsageError("--keep-threshold must be in (0, 1]")
    try:
        params = MatchParams(
            h=h,
            k=k,
            remap=remap,
            table_filter=table_filter,
            seed=seed,
            balance=balance,
            aim=aim,
            backoff=backoff,
            rake_rounds=rake_rounds,
            filter_above=filter_above,
            filter_stack_above=filter_stack_above,
            method=method.value,  # mypy checks every Solver is a Method, and so does a test
            dense_limit=dense_limit,
            top_k=top_k,
            fold_size=fold_size,
        )
    except ValueError as exc:
        raise CliUsageError(str(exc)) from exc
    engine = engine_for(database_url)
    try:
        study = study_for(engine, study_slug)
        actor = _actor(engine, study.id)  # checked before the long run, used after it
    except CliError:
        engine.dispose()
        raise
    request = MatchRequest(
        params=params,
        model=model,
        similarity=similarity,
        splits=splits,
        split_seed=split_seed,
        keep_threshold=keep_threshold,
        sweep=hs,
        study_id=study.id,
        workers=workers or None,
        suite_sample=suite_sample or None,
    )
    with progress_bar(total=4, desc="matching", bar_format=STAGE_FORMAT) as bar:

        def step(name: str) -> None:
            bar.set_postfix_str(name)
            bar.update(1)

        try:
            outcome = run_matching_over(engine, request, on_step=step, on_milestone=bar.write)
        except MatchRunError as exc:
            raise CliError(f"{exc} (study {study.slug})") from exc
    diag = outcome.diagnostics
    items = len(outcome.result.items)
    if items == 0:
        raise CliError(
            f"no multiple-choice items: {why_no_items(outcome.result)}; "
            f"nothing was written (study {study.slug})"
        )
    if report:
        typer.echo(f"split: {diag['split']['words']}")
        typer.echo(format_report(diag))
    if hs:
        typer.echo(format_sweep(diag["sweep"]))
    if json_out is not None:
        json_out.write_text(json.dumps(diag, indent=2, sort_keys=True))
    if dry_run:
        typer.echo(f"dry run: {items} items not written (study {study.slug})")
        return
    run_id = save_match_run(engine, outcome, request, send_negatives, actor=actor)
    sent = " and sent their distractors to validation" if send_negatives else ""
    typer.echo(
        f"match run {run_id}: {items} multiple-choice items written{sent} (study {study.slug})"
    )
    if "validation_cost" in outcome.diagnostics:
        from matching.store import format_cost

        typer.echo(format_cost(outcome.diagnostics["validation_cost"]))


def _actor(engine: Any, study_id: int) -> Actor:
    """Who writes the run: a researcher's action (VSR_ADMIN; vsr_cli.actor)."""
    from sqlmodel import Session

    from vsr_cli.actor import cli_actor
    from vsr_core.models import AdminRole

    with Session(engine) as session:
        return cli_actor(session, study_id, AdminRole.researcher)


def why_no_items(result: MatchResult) -> str:
    """Why matching made no item, split by split: too few queries for k, or every query
    left without k distractors the relation table allows."""
    k = result.params.k
    counts = ", ".join(f"{split} has {n}" for split, n in result.queries.items())
    if all(n < k + 1 for n in result.queries.values()):
        return (
            f"kept True Examples per split: {counts}; k = {k} needs at least {k + 1} in "
            f"one split (write and validate more captions, or lower --k)"
        )
    return (
        f"kept True Examples per split: {counts}, but no query found {k} distractors "
        f"the study's relation rules allow (captions with more varied relations, or "
        f"lower --k)"
    )
