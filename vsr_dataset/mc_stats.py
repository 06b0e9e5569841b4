"""What stats.json and the dataset card say about ``mc/``: the latest matching run's
held-out answer-only adversaries (matching.adversaries), headline = the strongest."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from vsr_core.models import MatchRun

MATCHRUN = MatchRun.__table__  # type: ignore[attr-defined]


def mc_summary(conn: Connection, lines: dict[str, list[bytes]]) -> dict[str, Any] | None:
    """None when matching never ran; else the run, its items per split as written, and its
    adversary figures (trained on mc/train, scored on mc/test, 95 % Wilson intervals)."""
    row = conn.execute(
        select(MATCHRUN.c.id, MATCHRUN.c.params, MATCHRUN.c.diagnostics)
        .order_by(MATCHRUN.c.id.desc()).limit(1)
    ).first()
    if row is None:
        return None
    run_id, params, diag = row
    params, diag = params or {}, diag or {}
    suite = diag.get("answer_only_adversaries") or {}
    return {
        "run_id": run_id,
        "items": {split: len(v) for split, v in sorted(lines.items())},
        "k": params.get("k"),
        "splits": params.get("splits"),
        "balance": params.get("balance"),
        "chance": diag.get("chance"),
        "adversaries": suite.get("adversaries", {}),
        "adversaries_n_test": suite.get("n_test"),
        "strongest_adversary": suite.get("strongest"),
    }


def card_lines(mc: dict[str, Any]) -> list[str]:
    items = " / ".join(f"{s} {n:,}" for s, n in mc["items"].items()) or "none"
    out = [f"- `mc/`: multiple-choice items of matching run {mc['run_id']} (k = {mc['k']}, "
           f"split {mc['splits'] or 'image'}): {items}."]
    s = mc.get("strongest_adversary")
    if s:
        lo, hi = s["ci95"]
        others = ", ".join(f"{n} {a['accuracy']:.3f}" for n, a in mc["adversaries"].items())
        out.append(
            f"  Strongest answer-only adversary (sees only the options, trained on mc/train, "
            f"scored on {mc['adversaries_n_test']:,} mc/test items): {s['name']} "
            f"{s['accuracy']:.3f} (95 % CI {lo:.3f}-{hi:.3f}; chance {mc['chance']}). "
            f"All: {others}."
        )
    return out
