"""Server-side SVG charts (matplotlib, Agg backend): the dashboard works offline, with no
JavaScript chart library. Each function returns SVG bytes; callers cache them briefly."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

ENT_COLOURS = ("#2f5bd3", "#e08a1e")
OK, BAD, MUTED = "#1f8a4c", "#c23b3b", "#9aa3b2"


def _figure(width: float, height: float) -> Any:
    # Figure() without pyplot: no global state, safe in server threads.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    return fig


def _svg(fig: Any) -> bytes:
    import matplotlib

    buf = io.BytesIO()
    # Keep text as <text> (small files, selectable labels) instead of glyph paths.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "vsr"}):
        fig.savefig(buf, format="svg", bbox_inches="tight")
    return buf.getvalue()


def _style(ax: Any) -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(labelsize=8)
    ax.grid(axis="y", color="#e5e8ee", linewidth=0.6)
    ax.set_axisbelow(True)


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", color=MUTED, transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def throughput_chart(hours: Sequence[str], votes: Sequence[int], captions: Sequence[int]) -> bytes:
    fig = _figure(9, 2.6)
    ax = fig.add_subplot()
    _style(ax)
    x = list(range(len(hours)))
    ax.bar(x, votes, color=ENT_COLOURS[0], label="votes", width=0.8)
    ax.bar(x, captions, bottom=votes, color=ENT_COLOURS[1], label="captions", width=0.8)
    step = max(1, len(hours) // 8)
    ax.set_xticks(x[::step], [h[5:] for h in hours[::step]])
    ax.set_ylabel("items per hour (UTC)", fontsize=8)
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    if not any(votes) and not any(captions):
        ax.text(
            0.5,
            0.5,
            "no work in the last 48 hours",
            ha="center",
            va="center",
            color=MUTED,
            transform=ax.transAxes,
        )
    return _svg(fig)


def relation_chart(rows: Sequence[dict[str, Any]], top: int = 40) -> bytes:
    """Examples per relation, kept vs not (VSR paper, Figure 5)."""
    rows = sorted(rows, key=lambda r: -r["examples"])[:top]
    fig = _figure(9, 3.2)
    ax = fig.add_subplot()
    _style(ax)
    if not rows:
        _empty(ax, "no Examples yet")
        return _svg(fig)
    x = list(range(len(rows)))
    kept = [r["kept"] for r in rows]
    other = [r["examples"] - r["kept"] for r in rows]
    ax.bar(x, kept, color=OK, label="kept")
    ax.bar(x, other, bottom=kept, color=MUTED, label="not kept / undecided")
    ax.set_xticks(x, [r["relation"] for r in rows], rotation=70, ha="right", fontsize=7)
    ax.set_ylabel("Examples", fontsize=8)
    ax.legend(fontsize=8, frameon=False)
    return _svg(fig)


def concept_chart(rows: Sequence[dict[str, Any]]) -> bytes:
    """How often each concept is ENT1 and ENT2 (VSR paper, Figure 6)."""
    fig = _figure(9, 3.2)
    ax = fig.add_subplot()
    _style(ax)
    if not rows:
        _empty(ax, "no Examples yet")
        return _svg(fig)
    x = list(range(len(rows)))
    w = 0.42
    ax.bar(
        [i - w / 2 for i in x],
        [r["subj"] for r in rows],
        w,
        color=ENT_COLOURS[0],
        label="as ENT1 (subject)",
    )
    ax.bar(
        [i + w / 2 for i in x],
        [r["obj"] for r in rows],
        w,
        color=ENT_COLOURS[1],
        label="as ENT2 (object)",
    )
    ax.set_xticks(x, [r["concept"] for r in rows], rotation=70, ha="right", fontsize=7)
    ax.set_ylabel("Examples", fontsize=8)
    ax.legend(fontsize=8, frameon=False)
    return _svg(fig)


def disagreement_chart(rows: Sequence[dict[str, Any]], min_examples: int) -> bytes:
    """Per relation, the probability that two random judges disagree (VSR paper, Figure 7)."""
    rows = [r for r in rows if r["examples"] > min_examples and r["disagreement"] is not None]
    rows.sort(key=lambda r: -r["disagreement"])
    fig = _figure(9, 3.2)
    ax = fig.add_subplot()
    _style(ax)
    if not rows:
        _empty(ax, f"no relation has more than {min_examples} voted Examples yet")
        return _svg(fig)
    x = list(range(len(rows)))
    ax.bar(x, [r["disagreement"] for r in rows], color=BAD)
    ax.set_xticks(x, [r["relation"] for r in rows], rotation=70, ha="right", fontsize=7)
    ax.set_ylabel("P(two judges disagree)", fontsize=8)
    return _svg(fig)


def label_chart(balance: dict[str, int]) -> bytes:
    fig = _figure(3.2, 2.4)
    ax = fig.add_subplot()
    _style(ax)
    groups = ["all", "kept"]
    t = [balance["all_true"], balance["kept_true"]]
    f = [balance["all_false"], balance["kept_false"]]
    ax.bar([0, 1], t, 0.6, color=OK, label="label True")
    ax.bar([0, 1], f, 0.6, bottom=t, color=BAD, label="label False")
    ax.set_xticks([0, 1], groups)
    ax.legend(fontsize=7, frameon=False)
    return _svg(fig)
