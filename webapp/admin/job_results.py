"""A finished job's result as people read it: a headline, a few figures, links to the
outputs, and a warning (with its reason) when the job ran but produced nothing.

The raw result JSON stays in the Job row (and /admin/api/jobs/ID); the pipeline page shows
this instead of a JSON dump.
"""

from __future__ import annotations

from typing import Any

from vsr_core.models import Job, JobKind, JobStatus


def _n(value: Any) -> str:
    return f"{int(value):,}" if isinstance(value, int | float) else "–"


def _share(value: Any) -> str:
    return f"{100 * float(value):.1f}%" if isinstance(value, int | float) else "–"


def describe(job: Job) -> dict[str, Any] | None:
    """``{"level": "ok"|"warning", "headline", "reason", "figures": [(label, text)],
    "links": [(text, href)]}`` for a succeeded job with a result, else None."""
    result = job.result
    if job.status != JobStatus.succeeded or not isinstance(result, dict):
        return None
    if job.kind == JobKind.sample:
        return _sample(result)
    if job.kind == JobKind.match:
        return _match(result)
    if job.kind == JobKind.build:
        return _build(job, result)
    return None


def _sample(r: dict[str, Any]) -> dict[str, Any]:
    stored, requested = int(r.get("stored", 0)), int(r.get("requested", 0))
    figures = [
        ("pairs stored", f"{_n(stored)} of {_n(requested)} asked"),
        ("concept pairs", _n(r.get("concept_pairs"))),
        ("images", _n(r.get("images"))),
        ("eligible images in the files", _n(r.get("eligible_images"))),
        ("COCO images read", _n(r.get("coco_images"))),
    ]
    reason = None
    if stored < requested:
        reason = (
            f"only {_n(r.get('available'))} new pairs exist under these rules "
            f"({_n(r.get('already_stored'))} already stored from these files)"
        )
        if not r.get("eligible_images"):
            reason += "; no image has exactly one instance of two concepts above the minimum "
            reason += "area: try a smaller minimum area or more annotation files"
    return {
        "level": "warning" if stored == 0 else "ok",
        "headline": "Nothing was stored" if stored == 0 else f"Stored {_n(stored)} new image pairs",
        "reason": reason,
        "figures": figures,
        "links": [("Caption writing links", "/admin/settings")] if stored else [],
    }


def _match(r: dict[str, Any]) -> dict[str, Any]:
    d = r.get("diagnostics") or {}
    items = int(r.get("items", 0))
    run = r.get("match_run")
    return {
        "level": "warning" if items == 0 else "ok",
        "headline": f"{_n(items)} multiple-choice items (run #{run})",
        "reason": "no item was matched" if items == 0 else None,
        "figures": [
            ("chance", _share(d.get("chance"))),
            ("answer-only accuracy", _share(d.get("answer_only_accuracy"))),
            ("text-only accuracy", _share(d.get("text_only_accuracy"))),
        ],
        "links": [(f"Diagnostics of run #{run}", f"#run-{run}")] if run else [],
    }


def _build(job: Job, r: dict[str, Any]) -> dict[str, Any]:
    validated = int(r.get("validated", 0))
    size = r.get("bytes")
    return {
        "level": "warning" if validated == 0 else "ok",
        "headline": f"Dataset with {_n(validated)} validated of {_n(r.get('raw'))} Examples",
        "reason": "no Example is kept yet: collect votes first" if validated == 0 else None,
        "figures": [
            ("files", _n(len(r.get("files") or []))),
            ("kept by", str(r.get("keep_rule") or "–")),
            ("zip size", f"{float(size) / 1e6:.1f} MB" if isinstance(size, int | float) else "–"),
        ],
        "links": [(f"Download {r.get('zip', 'zip')}", f"/admin/jobs/{job.id}/download")],
    }
