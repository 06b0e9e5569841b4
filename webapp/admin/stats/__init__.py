"""Dashboard figures, aggregated in SQL (GROUP BY) so pages stay fast on a full study.

One module per dashboard page, as ``webapp.admin.routes`` is split: ``overview``, ``quality``,
``workers``, ``data`` and ``pipeline``; what they share (tables, study members, per-Example
agreement) is in ``shared``. Every function takes a Session (and the StudyConfig where the keep
rule matters) and returns plain dicts/lists for templates and JSON endpoints. The names are
re-exported here, so callers write ``stats.overview(...)`` whichever module holds it.
"""

from __future__ import annotations

from vsr_core.standing import study_members
from webapp.admin.stats.data import (
    AGREEMENT_FILTERS,
    FLIP_RULES,
    Direction,
    bounded_range,
    browse_examples,
    browse_offset,
    browse_page,
    count_and_few,
    count_examples,
    count_statement,
    distinct_values,
    example_filters,
    offset_statement,
    page_statement,
    parse_filters,
    validators_left,
    window_edge,
)
from webapp.admin.stats.label_models import flip_preview, rule_fit
from webapp.admin.stats.overview import (
    PAIR_STATUSES,
    counted_figures,
    overview,
    throughput,
)
from webapp.admin.stats.pipeline import mc_summary
from webapp.admin.stats.quality import (
    FRAMES,
    agreement_coefficients,
    concept_counts,
    frame_answers,
    negatives_check,
    quality,
    relation_table,
)
from webapp.admin.stats.shared import (
    REVALIDATION,
    data_version,
    example_agreement,
    invite_labels,
    vote_counts,
)
from webapp.admin.stats.workers import (
    FAST_MIN_ANSWERS,
    add_pace,
    median_seconds,
    too_fast,
    worker_names,
    worker_table,
)

__all__ = [
    "counted_figures",
    "add_pace",
    "FAST_MIN_ANSWERS",
    "FRAMES",
    "PAIR_STATUSES",
    "REVALIDATION",
    "agreement_coefficients",
    "Direction",
    "browse_examples",
    "browse_offset",
    "bounded_range",
    "browse_page",
    "window_edge",
    "count_examples",
    "count_and_few",
    "count_statement",
    "offset_statement",
    "page_statement",
    "concept_counts",
    "data_version",
    "flip_preview",
    "rule_fit",
    "distinct_values",
    "example_agreement",
    "example_filters",
    "parse_filters",
    "AGREEMENT_FILTERS",
    "FLIP_RULES",
    "frame_answers",
    "invite_labels",
    "median_seconds",
    "mc_summary",
    "negatives_check",
    "overview",
    "quality",
    "relation_table",
    "study_members",
    "throughput",
    "too_fast",
    "validators_left",
    "vote_counts",
    "worker_names",
    "worker_table",
]
