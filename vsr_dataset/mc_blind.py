"""The answer-only suite as blind baselines of every multiple-choice evaluation file.

For each MC set written (mc/, mc_unvalidated/, mc_zeroshot/, ...), from its files as a user
reads them (vsr_dataset.mc_stats.items_from_lines):

- ``test``: the suite fitted on the set's train items and, apart, on its dev items alone
  (``dev_fit:...``; dev is filtered like test and train is not), every model also read the
  other way (``..._least``);
- ``dev``: the suite fitted on train.

Each adversary lands in ``blind_baselines[set][split]["baselines"]`` as
``answer_only:<name>`` with its 95 % interval, plus ``answer_only_strongest`` with what
the strongest of the readings scores by chance alone (``by_chance_alone``, mean and 95th
percentile over random answers; matching.adversaries.strongest_null).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from vsr_dataset.mc_publish import MC_DIRS
from vsr_dataset.mc_stats import PACKAGED, items_from_lines

PREFIX = "answer_only:"
STRONGEST = "answer_only_strongest"


def read_set(root: Path, directory: str) -> dict[str, list[bytes]]:
    """An MC set's files as written: split -> its JSONL lines (missing splits left out)."""
    out: dict[str, list[bytes]] = {}
    for split in ("train", "dev", "test"):
        path = root / directory / f"{split}.jsonl"
        if path.is_file():
            out[split] = [ln for ln in path.read_bytes().splitlines() if ln.strip()]
    return out


def suites(
    root: Path, model: str | None, seed: int, known: dict[str, dict[str, Any]] | None = None
) -> dict[str, dict[str, dict[str, Any]]]:
    """set -> split -> the suite (matching.adversaries.run_suite's shape) on that split.
    ``known``: suites already measured on a set's test items (stats.json ``mc``), reused."""
    known = known or {}
    encoder: Any = None
    out: dict[str, dict[str, dict[str, Any]]] = {}
    with warnings.catch_warnings():
        # A small set (a zero-shot dev of 30 items) makes scikit-learn warn about its
        # size; the interval already says how little such a figure means.
        warnings.simplefilter("ignore", UserWarning)
        for directory in MC_DIRS:
            got = _suites_of(root, directory, model, seed, known, encoder)
            if got is not None:
                out[directory], encoder = got
    return out


def _suites_of(
    root: Path,
    directory: str,
    model: str | None,
    seed: int,
    known: dict[str, dict[str, Any]],
    encoder: Any,
) -> tuple[dict[str, dict[str, Any]], Any] | None:
    from matching.diagnostics import measured_suite
    from matching.relevance import load_encoder
    from vsr_dataset.mc_stats import suite_on_lines

    lines = read_set(root, directory)
    if not lines.get("test") and not lines.get("dev"):
        return None
    if encoder is None:
        encoder = load_encoder(None if not model or model.endswith(PACKAGED) else model)
    got: dict[str, dict[str, Any]] = {}
    if lines.get("test"):
        got["test"] = known.get(directory) or suite_on_lines(lines, model, seed, encoder)
    items = items_from_lines(lines)
    if items.get("train") and items.get("dev"):
        got["dev"] = measured_suite(items["train"], items["dev"], encoder, seed)
    return got, encoder


def add_to(blind: dict[str, Any], measured: dict[str, dict[str, dict[str, Any]]]) -> None:
    """Each suite's adversaries into ``blind`` (stats.json ``blind_baselines``)."""
    for directory, splits in measured.items():
        for split, suite in splits.items():
            target = blind.get(directory, {}).get(split)
            if target is None or not suite.get("adversaries"):
                continue
            n, chance = suite.get("n_test"), suite.get("chance")
            base = target.setdefault("baselines", {})
            for name, f in suite["adversaries"].items():
                base[PREFIX + name] = {**f, "n": n, "chance": chance}
            best = suite.get("strongest")
            if best:
                # What the strongest of these readings scores by chance alone (a maximum
                # sits above chance on a small set even when no reading sees anything).
                null = suite.get("strongest_null")
                base[STRONGEST] = {**best, "n": n, "chance": chance, "by_chance_alone": null}
