"""The settings page's preview of a keep-rule switch: for each other keep rule, how many of
the study's Examples it would decide otherwise (kept -> rejected, rejected -> kept), from the
same per-Example verdicts every count uses (``example_agreement``), so the preview is exactly
what the switch then does to the counts. Adjudicated Examples never flip: an adjudication
outranks every rule."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlmodel import Session

from vsr_core import label_fit
from vsr_core.kept import model_of
from vsr_core.models import DEFAULT_STUDY_ID, KeepRule
from vsr_core.studies.settings import StudyConfig
from webapp.admin.stats.shared import example_agreement


def flip_preview(
    session: Session, cfg: StudyConfig, study_id: int = DEFAULT_STUDY_ID
) -> dict[str, dict[str, int]]:
    """rule -> {kept_now, kept_after, kept_to_rejected, rejected_to_kept, flips} for every
    keep rule other than the study's current one."""
    out: dict[str, dict[str, int]] = {}
    for rule in KeepRule:
        if rule.value == cfg.keep_rule:
            continue
        ea = example_agreement(cfg, study_id=study_id, compare_rule=rule.value)
        counts: dict[tuple[Any, Any], int] = {
            (now, after): int(n)
            for now, after, n in session.connection().execute(
                select(ea.c.verdict, ea.c.verdict_alt, func.count()).group_by(
                    ea.c.verdict, ea.c.verdict_alt
                )
            )
        }
        kept_now = sum(n for (a, _), n in counts.items() if a == "kept")
        kept_after = sum(n for (_, b), n in counts.items() if b == "kept")
        k2r = counts.get(("kept", "rejected"), 0)
        r2k = counts.get(("rejected", "kept"), 0)
        out[rule.value] = {
            "kept_now": kept_now,
            "kept_after": kept_after,
            "kept_to_rejected": k2r,
            "rejected_to_kept": r2k,
            "flips": k2r + r2k,
        }
    return out


def rule_fit(
    session: Session, cfg: StudyConfig, study_id: int = DEFAULT_STUDY_ID
) -> dict[str, Any] | None:
    """When the keep rule is a label model: its last fit and how stale it is (None under the
    agreement rule), for every page that counts kept."""
    model = model_of(cfg.keep_rule)
    if model is None:
        return None
    state = label_fit.fit_states(session, study_id)[model]
    return {
        "model": model,
        "fitted_at": state.fitted_at.isoformat(timespec="seconds") if state.fitted_at else None,
        "examples": state.examples,
        "new_votes": state.new_votes,
        "stale": state.stale,
    }
