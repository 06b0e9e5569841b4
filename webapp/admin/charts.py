"""Server-side SVG bar charts for the dashboard (offline: no JavaScript chart library).

Written by hand rather than with matplotlib: every chart here is a bar chart (rects, axis
ticks, rotated labels, a legend), and matplotlib took about one second per chart on this
machine, far over the 300 ms page budget, while building the SVG text takes about a
millisecond. Text is escaped; every bar has a <title> so hovering shows its exact value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

BLUE, ORANGE = "#2f5bd3", "#e08a1e"
OK, BAD, MUTED = "#1f8a4c", "#c23b3b", "#aab2c0"
FONT = 'font-family="system-ui, DejaVu Sans, sans-serif"'


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float]
    colour: str


def _nice_max(value: float) -> tuple[float, float]:
    """A round axis maximum and a tick step of 1, 2 or 5 times a power of ten (about four
    ticks), so counts get whole-number ticks."""
    if value <= 0:
        return 1.0, 0.25
    raw = value / 4
    exp = 10 ** math.floor(math.log10(raw))
    step = next(m * exp for m in (1, 2, 5, 10) if m * exp >= raw)
    return math.ceil(value / step - 1e-9) * step, step


def _fmt(v: float) -> str:
    if v == int(v):
        return f"{int(v):,}"
    return f"{v:.2f}" if abs(v) < 10 else f"{v:,.1f}"


def bar_chart(
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    stacked: bool = False,
    width: int = 900,
    height: int = 300,
    y_label: str = "",
    empty_text: str = "no data yet",
    label_every: int = 1,
    rotate: bool = True,
) -> bytes:
    """A vertical bar chart; several series are stacked or grouped side by side."""
    left, right, top = 56, 12, 28 if len(series) > 1 else 12
    bottom = 96 if rotate else 30
    plot_w, plot_h = width - left - right, height - top - bottom
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" {FONT} font-size="11">'
    ]
    n = len(labels)
    if n == 0 or not any(any(s.values) for s in series):
        out.append(
            f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="{MUTED}" '
            f'font-size="14">{escape(empty_text)}</text></svg>'
        )
        return "".join(out).encode()
    if stacked:
        peak = max(sum(s.values[i] for s in series) for i in range(n))
    else:
        peak = max(max(s.values) for s in series)
    y_max, step = _nice_max(float(peak))

    def y(v: float) -> float:
        return top + plot_h - plot_h * v / y_max

    # grid and y ticks
    k = 0.0
    while k <= y_max + 1e-9:
        out.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y(k):.1f}" y2="{y(k):.1f}" '
            f'stroke="#e5e8ee"/><text x="{left - 6}" y="{y(k) + 4:.1f}" text-anchor="end" '
            f'fill="#5b6475">{_fmt(k)}</text>'
        )
        k += step
    if y_label:
        out.append(
            f'<text transform="translate(14 {top + plot_h / 2:.0f}) rotate(-90)" '
            f'text-anchor="middle" fill="#5b6475">{escape(y_label)}</text>'
        )
    slot = plot_w / n
    bar_w = slot * 0.8 if stacked or len(series) == 1 else slot * 0.8 / len(series)
    for i, label in enumerate(labels):
        x0 = left + i * slot + slot * 0.1
        base = 0.0
        for j, s in enumerate(series):
            v = float(s.values[i])
            if stacked:
                y_top, y_bot, x = y(base + v), y(base), x0
                base += v
            else:
                y_top, y_bot, x = y(v), y(0), x0 + j * bar_w
            if v > 0:
                out.append(
                    f'<rect x="{x:.1f}" y="{y_top:.1f}" width="{max(bar_w, 0.5):.1f}" '
                    f'height="{max(y_bot - y_top, 0.5):.1f}" fill="{s.colour}">'
                    f"<title>{escape(label)}: {escape(s.name)} {_fmt(v)}</title></rect>"
                )
        if i % label_every == 0:
            cx = left + i * slot + slot / 2
            ly = top + plot_h + 12
            if rotate:
                out.append(
                    f'<text transform="translate({cx:.1f} {ly:.1f}) rotate(-55)" '
                    f'text-anchor="end" fill="#1d2330">{escape(label)}</text>'
                )
            else:
                out.append(
                    f'<text x="{cx:.1f}" y="{ly + 4:.1f}" text-anchor="middle" '
                    f'fill="#1d2330">{escape(label)}</text>'
                )
    out.append(
        f'<line x1="{left}" x2="{left + plot_w}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#5b6475"/>'
    )
    if len(series) > 1:
        lx = left
        for s in series:
            out.append(
                f'<rect x="{lx}" y="6" width="12" height="12" fill="{s.colour}"/>'
                f'<text x="{lx + 16}" y="16" fill="#1d2330">{escape(s.name)}</text>'
            )
            lx += 24 + 7 * len(s.name)
    out.append("</svg>")
    return "".join(out).encode()


def computing_chart(seconds: float, width: int = 640, height: int = 120) -> bytes:
    """The stand-in of a chart whose figures are being computed (webapp.admin.cache)."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="computing"><rect width="{width}" height="{height}" '
        f'fill="#f3f4f6"/><text x="{width // 2}" y="{height // 2}" {FONT} font-size="14" '
        f'fill="#4b5563" text-anchor="middle">Computing this chart ({seconds:.0f} s so far): '
        "reload in a moment.</text></svg>"
    ).encode()


def throughput_chart(hours: Sequence[str], votes: Sequence[int], captions: Sequence[int]) -> bytes:
    return bar_chart(
        [h[5:] for h in hours],  # "MM-DD HH:00"
        [Series("votes", votes, BLUE), Series("captions", captions, ORANGE)],
        stacked=True,
        height=240,
        y_label="per hour (UTC)",
        empty_text="no work in the last 48 hours",
        label_every=max(1, len(hours) // 12),
    )


def relation_chart(rows: Sequence[dict[str, Any]], top: int = 40) -> bytes:
    """Examples per relation, kept vs not (VSR paper, Figure 5)."""
    rows = sorted(rows, key=lambda r: -r["examples"])[:top]
    return bar_chart(
        [r["relation"] for r in rows],
        [
            Series("kept", [r["kept"] for r in rows], OK),
            Series("not kept / undecided", [r["examples"] - r["kept"] for r in rows], MUTED),
        ],
        stacked=True,
        y_label="Examples",
        empty_text="no Examples yet",
    )


def concept_chart(rows: Sequence[dict[str, Any]]) -> bytes:
    """How often each concept is ENT1 and ENT2 (VSR paper, Figure 6)."""
    return bar_chart(
        [r["concept"] for r in rows],
        [
            Series("as subject (ENT1)", [r["subj"] for r in rows], BLUE),
            Series("as object (ENT2)", [r["obj"] for r in rows], ORANGE),
        ],
        y_label="Examples",
        empty_text="no Examples yet",
    )


def disagreement_chart(rows: Sequence[dict[str, Any]], min_examples: int) -> bytes:
    """Per relation, the probability that two random judges disagree (VSR paper, Figure 7)."""
    rows = [r for r in rows if r["examples"] > min_examples and r["disagreement"] is not None]
    rows.sort(key=lambda r: -r["disagreement"])
    return bar_chart(
        [r["relation"] for r in rows],
        [Series("P(disagree)", [round(r["disagreement"], 3) for r in rows], BAD)],
        y_label="P(two judges disagree)",
        empty_text=f"no relation has more than {min_examples} voted Examples yet",
    )


def label_chart(balance: dict[str, int]) -> bytes:
    return bar_chart(
        ["all Examples", "kept"],
        [
            Series("label True", [balance["all_true"], balance["kept_true"]], OK),
            Series("label False", [balance["all_false"], balance["kept_false"]], BAD),
        ],
        stacked=True,
        width=320,
        height=240,
        rotate=False,
    )
