"""The card's figures keep their titles inside the picture, however few relations there are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vsr_dataset import figures


def _stats(n_relations: int) -> dict[str, Any]:
    names = ["left of", "on", "under", "near", "behind", "in front of", "above", "below"]
    return {
        "relations": {
            names[i]: {"disagreement": 0.1 * (i + 1), "n_raw": 30} for i in range(n_relations)
        }
    }


@pytest.mark.parametrize("n_relations", [1, 3, 8])
def test_disagreement_title_fits_the_figure(
    n_relations: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[float, float, float]] = []
    save = figures._save

    def measuring_save(fig: Any, path: Path) -> None:
        fig.tight_layout()
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            box = ax.title.get_window_extent(renderer)
            seen.append((box.x0, box.x1, fig.bbox.width))
        save(fig, path)

    monkeypatch.setattr(figures, "_save", measuring_save)
    figures.disagreement_figure(_stats(n_relations), tmp_path / "d.png")
    assert (tmp_path / "d.png").is_file()
    ((x0, x1, width),) = seen
    assert x0 >= 0 and x1 <= width, (x0, x1, width)
