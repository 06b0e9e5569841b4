"""The dashboard's whole-study figures, by name: each is a cache key and the function that
computes it from a Session, for a study and its config.

One source for the pages (which read them through the figure cache, webapp.admin.pages)
and for the start-up warm-up (webapp.admin.warmup), which computes the same keys in the
background before anyone asks, so the first visit after a deploy or an import finds them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from vsr_core import authenticity_db, label_fit
from vsr_core.qualification import pass_rates
from vsr_core.studies.context import StudyContext
from vsr_core.studies.settings import StudyConfig
from webapp.admin import charts, stats

# The Workers table's sort orders (the first is the page's default).
WORKER_ORDERS = ("votes", "captions", "agreement", "gold", "id")
# A data filter matching at most this many Examples keeps their ids with its cached count.
FEW_MATCHES = 2_000


@dataclass(frozen=True)
class Figure:
    """A figure's cache key (without the study, which the cache adds) and its computation."""

    name: Hashable
    compute: Callable[[Session], Any]
    label: str  # what the warm-up log and the pages call it


def overview_counts(study_id: int, cfg: StudyConfig) -> Figure:
    return Figure(
        ("overview", cfg.keep_threshold, cfg.votes_per_example),
        lambda s: stats.counted_figures(s, cfg, study_id),
        "the overview's counts",
    )


def _min_examples(total: int) -> int:
    # The paper plots relations with > 20 Examples; a young study shows every relation.
    return 20 if total >= 1000 else 0


def quality(study: StudyContext, cfg: StudyConfig) -> Figure:
    study_id = study.id

    def compute(s: Session) -> dict[str, Any]:
        relations = stats.relation_table(s, cfg, study_id)
        q = stats.quality(s, cfg, relations, study_id)
        q["relations"] = relations
        q["concepts"] = stats.concept_counts(s, study_id=study_id)
        q["frames"] = stats.frame_answers(s, study_id)
        q["negatives"] = stats.negatives_check(s, cfg, study_id)
        q["qualification"] = pass_rates(s, study_id, study.definition)
        q["min_examples"] = _min_examples(q["examples"])
        q["keep_threshold"] = cfg.keep_threshold
        q["fit"] = stats.rule_fit(s, cfg, study_id)
        q["stamp"] = time.monotonic_ns()  # identifies this computation for the charts
        return q

    return Figure(
        ("quality", cfg.keep_threshold, cfg.keep_rule, cfg.votes_per_example),
        compute,
        "the data quality figures",
    )


def worker_table(study_id: int, cfg: StudyConfig, order: str) -> Figure:
    return Figure(
        ("workers", order, cfg.gold_accuracy_threshold),
        lambda s: stats.worker_table(
            s, cfg, offset=0, limit=None, order=order, study_id=study_id, paced=False
        ),
        f"the worker table by {order}",
    )


def worker_pace(
    study_id: int, cfg: StudyConfig, order: str, page: int, rows: list[dict[str, Any]]
) -> Figure:
    return Figure(
        ("workers-paced", order, page, cfg.fast_vote_seconds, cfg.fast_caption_seconds),
        lambda s: stats.add_pace(s, cfg, rows, study_id),
        f"the pace of page {page} of the worker table by {order}",
    )


def worker_pace_of(study_id: int, cfg: StudyConfig, row: dict[str, Any]) -> Figure:
    """One worker's pace, for their page (their row of the Workers table already counted)."""
    wid = row["id"]
    return Figure(
        ("worker-paced", wid, cfg.fast_vote_seconds, cfg.fast_caption_seconds),
        lambda s: stats.add_pace(s, cfg, [row], study_id),
        f"worker #{wid}'s pace",
    )


def worker_evidence(study_id: int, worker_id: int) -> Figure:
    """A worker's authenticity evidence, whole and per batch: a pass over all their votes
    in the study (twice), ~170 ms each for the busiest at 10x."""
    return Figure(
        ("worker-evidence", worker_id),
        lambda s: (
            authenticity_db.assess_workers(s, study_id, [worker_id])[worker_id],
            authenticity_db.batch_assessments(s, study_id, worker_id),
        ),
        f"worker #{worker_id}'s authenticity evidence",
    )


def worker_totals(study_id: int, cfg: StudyConfig, worker_id: int) -> Figure:
    return Figure(
        ("worker", worker_id),
        lambda s: stats.worker_table(
            s, cfg, offset=0, limit=1, order="id", only=worker_id, study_id=study_id
        )[0],
        f"worker #{worker_id}'s totals",
    )


def throughput(study_id: int) -> Figure:
    def draw(s: Session) -> bytes:
        t = stats.throughput(s, study_id=study_id)
        return charts.throughput_chart(t["hours"], t["votes"], t["captions"])

    return Figure("throughput", draw, "the throughput chart")


def choices(study_id: int) -> Figure:
    return Figure(
        "choices", lambda s: stats.distinct_values(s, study_id), "the data filters' values"
    )


def study_votes(study_id: int) -> Figure:
    return Figure(
        "study_votes",
        lambda s: label_fit.study_vote_count(s, study_id),
        "the study's vote count",
    )


def flips(study_id: int, cfg: StudyConfig) -> Figure:
    return Figure(
        ("flips", cfg.keep_rule, cfg.keep_threshold),
        lambda s: stats.flip_preview(s, cfg, study_id),
        "what each keep rule would change",
    )


def data_matches(study_id: int, cfg: StudyConfig, params: dict[str, str]) -> Figure:
    """How many Examples a data filter matches (and their ids when they are few)."""
    filters = stats.parse_filters(params)
    shown = ", ".join(f"{k}={v}" for k, v in params.items() if v) or "no filter"
    return Figure(
        ("data-matches", cfg.keep_threshold, cfg.votes_per_example, *params.values()),
        lambda s: (
            *stats.count_and_few(s, cfg, FEW_MATCHES, study_id=study_id, **filters),
            time.time(),
        ),
        f"the data browser's count ({shown})",
    )


DATA_PARAMS = ("relation", "concept", "agreement", "origin", "gold", "q", "flips")


def data_params(**given: str) -> dict[str, str]:
    """The data page's filter parameters in their order (the cache key's order)."""
    return {k: given.get(k, "") for k in DATA_PARAMS}


def start_up(study: StudyContext, cfg: StudyConfig) -> list[Figure]:
    """What the warm-up computes for a study, most visited first: the overview, the quality
    page, the Workers table in every order, the throughput chart, the data browser's values
    and its count for every agreement filter and keep-rule flip, the settings page's figures."""
    sid = study.id
    out = [overview_counts(sid, cfg), quality(study, cfg), worker_table(sid, cfg, "votes")]
    out += [throughput(sid), choices(sid), data_matches(sid, cfg, data_params())]
    out += [study_votes(sid), flips(sid, cfg)]
    out += [worker_table(sid, cfg, o) for o in WORKER_ORDERS[1:]]
    out += [data_matches(sid, cfg, data_params(agreement=a)) for a in stats.AGREEMENT_FILTERS]
    out += [data_matches(sid, cfg, data_params(flips=r)) for r in stats.FLIP_RULES]
    out += [data_matches(sid, cfg, data_params(gold=g)) for g in ("yes", "no")]
    return out
