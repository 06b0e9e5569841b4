"""The dataset card's figures, after VSR Figures 5-7 (matplotlib, Agg backend, no display).

PNG metadata is fixed (no software version or date) so the same stats give the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FIGURES = {
    "relations": "figures/relations.png",
    "concepts": "figures/concepts.png",
    "disagreement": "figures/disagreement.png",
}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display on a server; must precede the pyplot import
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    _pyplot().close(fig)


def relation_figure(stats: dict[str, Any], path: Path, top: int = 40) -> str:
    """Figure 5: relation distribution of the validated set, top ``top`` by frequency."""
    plt = _pyplot()
    counts = sorted(
        ((v["n_validated"], rel) for rel, v in stats["relations"].items() if v["n_validated"]),
        key=lambda t: (-t[0], t[1]),
    )[:top]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.28 * len(counts) + 2), 4.2))
    ax.bar(range(len(counts)), [c for c, _ in counts], color="#4C72B0")
    ax.set_xticks(range(len(counts)), [r for _, r in counts], rotation=75, ha="right", fontsize=8)
    ax.set_ylabel("Examples")
    ax.set_title(f"Relation distribution (validated set, top {len(counts)})")
    ax.margins(x=0.01)
    _save(fig, path)
    return f"Top {len(counts)} relations of the validated set by frequency."


def concept_figure(stats: dict[str, Any], path: Path, min_count: int = 100, top: int = 40) -> str:
    """Figure 6: concept distribution, ENT1 (subj) and ENT2 (obj) counted separately.

    Like VSR, only concepts with more than ``min_count`` occurrences; on a small dataset
    (none that frequent) the ``top`` most frequent instead.
    """
    plt = _pyplot()
    rows = [(v["subj"] + v["obj"], c, v["subj"], v["obj"]) for c, v in stats["concepts"].items()]
    rows.sort(key=lambda t: (-t[0], t[1]))
    frequent = [r for r in rows if r[0] > min_count]
    shown = frequent if frequent else rows[:top]
    note = (
        f"Concepts with more than {min_count} occurrences ({len(shown)})."
        if frequent
        else f"The {len(shown)} most frequent concepts (none occurs more than {min_count} times)."
    )
    fig, ax = plt.subplots(figsize=(max(6.0, 0.28 * len(shown) + 2), 4.2))
    xs = range(len(shown))
    ax.bar(xs, [r[2] for r in shown], color="#4C72B0", label="ENT1 (subj)")
    ax.bar(
        xs, [r[3] for r in shown], bottom=[r[2] for r in shown], color="#DD8452", label="ENT2 (obj)"
    )
    ax.set_xticks(list(xs), [r[1] for r in shown], rotation=75, ha="right", fontsize=8)
    ax.set_ylabel("Occurrences")
    ax.set_title("Concept distribution (validated set)")
    ax.legend()
    ax.margins(x=0.01)
    _save(fig, path)
    return note


def disagreement_figure(stats: dict[str, Any], path: Path, min_n: int = 20) -> str:
    """Figure 7: per-relation probability that two randomly chosen annotators (the caption
    writer and the validators) disagree, over all Examples.

    Like VSR, only relations with more than ``min_n`` Examples; on a small dataset all.
    """
    plt = _pyplot()
    rows = [
        (v["disagreement"], rel, v["n_raw"])
        for rel, v in stats["relations"].items()
        if v["disagreement"] is not None
    ]
    big = [r for r in rows if r[2] > min_n]
    shown = sorted(big if big else rows, key=lambda t: (-t[0], t[1]))
    note = (
        f"Relations with more than {min_n} Examples ({len(shown)})."
        if big
        else f"All {len(shown)} relations (none has more than {min_n} Examples)."
    ) + (
        " The caption writer's label counts as one annotator's judgement, as in VSR; "
        "`stats.json` also has validators-only values (`disagreement_validators`)."
    )
    fig, ax = plt.subplots(figsize=(max(6.0, 0.22 * len(shown) + 2), 4.2))
    ax.bar(range(len(shown)), [r[0] for r in shown], color="#C44E52")
    ax.set_xticks(range(len(shown)), [r[1] for r in shown], rotation=75, ha="right", fontsize=7)
    ax.set_ylabel("P(two annotators disagree)")
    # Two lines: on one, the title runs past the edges of a narrow figure (few relations).
    ax.set_title("Per-relation disagreement\n(caption writer + validators, all Examples)")
    ax.margins(x=0.01)
    _save(fig, path)
    return note


def draw_all(stats: dict[str, Any], out_dir: Path) -> dict[str, str]:
    """Draw the three figures; returns figure name -> caption note for the card."""
    return {
        "relations": relation_figure(stats, out_dir / FIGURES["relations"]),
        "concepts": concept_figure(stats, out_dir / FIGURES["concepts"]),
        "disagreement": disagreement_figure(stats, out_dir / FIGURES["disagreement"]),
    }
