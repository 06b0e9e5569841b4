"""`vsr match`: adversarial matching of kept Examples into multiple-choice items (matching/)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from vsr_cli.common import DB_HELP, STAGE_FORMAT, engine_for, progress_bar
from vsr_cli.failure import CliError


def _parse_sweep(text: str | None) -> list[float]:
    if not text:
        return []
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise CliError(
            f"--sweep takes comma-separated numbers such as 0,0.5,1,2; got {text!r}"
        ) from None
    if not values or any(v < 0 or v != v or v == float("inf") for v in values):
        raise CliError(f"--sweep values must be finite numbers >= 0; got {text!r}")
    return values


def match(
    h: float = typer.Option(1.0, "--h", help="Trade-off: weight of log(1 - P_sim) (>= 0)."),
    k: int = typer.Option(3, "--k", help="Distractors per query (choices = k + 1)."),
    remap: bool = typer.Option(
        True, "--remap/--no-remap",
        help="Rewrite distractors onto the query's concepts so only the relation differs.",
    ),
    report: bool = typer.Option(False, "--report", help="Print the diagnostics."),
    sweep: str | None = typer.Option(
        None, "--sweep", help="Comma-separated h values to compare, e.g. 0,0.5,1,2."
    ),
    send_negatives: bool = typer.Option(
        True, "--send-negatives-to-validation/--no-send-negatives-to-validation",
        help="Add each distractor as a False Example (origin adversarial) to the validation "
        "queue (default); only items whose distractors validators reject reach mc/. Without "
        "it the items are unvalidated and build-dataset writes them only with "
        "--unvalidated-mc, apart in mc_unvalidated/.",
    ),
    model: str | None = typer.Option(
        None, "--model", help="Sentence-transformers model for P_rel (default: packaged "
        "all-MiniLM-L6-v2, offline)."
    ),
    similarity: str = typer.Option(
        "table", "--similarity",
        help="P_sim: 'table' (relation-semantics table) or a CrossEncoder NLI model name/path.",
    ),
    table_filter: bool = typer.Option(
        True, "--table-filter/--no-table-filter",
        help="Never use distractors the relation table says the truth implies.",
    ),
    keep_threshold: float | None = typer.Option(
        None, "--keep-threshold", help="Agreement needed to keep an Example (default: study "
        "setting, 2/3)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of tie-breaking and choice order."),
    split_seed: int = typer.Option(0, "--split-seed", help="Seed of the train/dev/test split."),
    splits: str = typer.Option(
        "export", "--splits",
        help="'export' (default): the random split build-dataset writes (same seed), so no "
        "truth of mc/test is in random/train; 'image': every Example of an image in one "
        "split (matching.records.split_of).",
    ),
    balance: str = typer.Option(
        "soft", "--balance",
        help="(concept pair, relation) balance against answer-only models: soft (default), "
        "pair (strict: exact balance, drops queries of rare pairs) or off (VCR's weights).",
    ),
    aim: float = typer.Option(
        0.6, "--aim", help="With --balance soft: 0 = distractors as plausible as possible "
        "(VCR), 1 = exactly as plausible as the truth (docs/matching.md).",
    ),
    backoff: float = typer.Option(
        1.0, "--backoff", help="With --balance soft: pseudo-count of the P_rel back-off."
    ),
    method: str = typer.Option("auto", "--method", help="auto | grouped | dense | sparse."),
    dense_limit: int = typer.Option(4000, "--dense-limit", help="Largest dense assignment."),
    top_k: int = typer.Option(50, "--top-k", help="Candidates per row for the sparse solver."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Compute and print, write nothing."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write diagnostics here."),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
) -> None:
    """Build multiple-choice distractors by adversarial matching (VCR section 4).

    Queries are kept True Examples; each gets K distractors from other queries' captions by
    maximum-weight bipartite matching within its split (train/dev/test keyed by image).
    """
    from sqlmodel import Session

    from matching.diagnostics import diagnose, format_report, format_sweep
    from matching.diagnostics import sweep as run_sweep
    from matching.pipeline import MatchParams, run_matching
    from matching.records import kept_true
    from matching.relevance import RelevanceModel, load_encoder
    from matching.similarity import load_similarity
    from matching.store import load_records, save_run
    from vsr_core.db import session_scope
    from vsr_core.study import load_study_config
    from vsr_dataset.match_geometry import load_pair_shapes
    from vsr_dataset.match_splits import export_split_mapping

    hs = _parse_sweep(sweep)
    if splits not in ("image", "export"):
        raise CliError(f"--splits must be image or export; got {splits!r}")
    if balance not in ("soft", "pair", "off"):
        raise CliError(f"--balance must be soft, pair or off; got {balance!r}")
    if method not in ("auto", "grouped", "dense", "sparse"):
        raise CliError(f"--method must be auto, grouped, dense or sparse; got {method!r}")
    if keep_threshold is not None and not 0 < keep_threshold <= 1:
        raise CliError("--keep-threshold must be in (0, 1]")
    try:
        params = MatchParams(
            h=h, k=k, remap=remap, table_filter=table_filter, seed=seed, balance=balance,
            aim=aim, backoff=backoff,
            method=method,  # type: ignore[arg-type]
            dense_limit=dense_limit, top_k=top_k,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from exc

    engine = engine_for(database_url)
    with Session(engine) as session:
        threshold = (
            keep_threshold if keep_threshold is not None
            else load_study_config(session).keep_threshold
        )
        records = load_records(session)
        geometry = load_pair_shapes(session)
    queries = kept_true(records, threshold)
    if len(queries) < k + 1:
        raise CliError(
            f"only {len(queries)} kept True Examples: need at least {k + 1} to match "
            "(import or validate data first)"
        )

    typer.echo(f"{len(queries)} kept True Examples (of {len(records)}); loading models ...")
    try:
        encoder = load_encoder(model)
        scorer = load_similarity(similarity)
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot load model: {' '.join(str(exc).split())[:300]}") from exc
    relevance = RelevanceModel(encoder, seed=seed)
    mapping = export_split_mapping(engine, threshold, split_seed) if splits == "export" else None
    with progress_bar(total=4, desc="matching", bar_format=STAGE_FORMAT) as bar:

        def step(name: str) -> None:
            bar.set_postfix_str(name)
            bar.update(1)

        try:
            result = run_matching(
                records, relevance, scorer, params, splits=mapping, split_seed=split_seed,
                threshold=threshold, on_step=step, geometry=geometry,
            )
        except ValueError as exc:
            raise CliError(str(exc)) from exc
    diag = diagnose(result, relevance)
    diag["similarity"] = getattr(scorer, "name", similarity)
    diag["model"] = model or "all-MiniLM-L6-v2 (packaged)"
    if hs:
        typer.echo(f"sweeping h over {hs} ...")
        diag["sweep"] = run_sweep(
            records, relevance, scorer, params, hs, splits=mapping, split_seed=split_seed,
            threshold=threshold,
        )
    if report:
        typer.echo(format_report(diag))
    if hs:
        typer.echo(format_sweep(diag["sweep"]))
    if json_out is not None:
        json_out.write_text(json.dumps(diag, indent=2, sort_keys=True))
    if dry_run:
        typer.echo(f"dry run: {len(result.items)} items not written")
        return
    extra = {"split_seed": split_seed, "splits": splits, "keep_threshold": float(threshold),
             "similarity": diag["similarity"], "model": diag["model"]}
    with session_scope(engine) as session:
        run = save_run(session, result, diag, send_negatives=send_negatives, extra_params=extra)
        run_id = run.id
    sent = " and sent their distractors to validation" if send_negatives else ""
    typer.echo(f"match run {run_id}: {len(result.items)} multiple-choice items written{sent}")
