"""What goes into which file of an export, and the configs that describe them.

``part_records`` turns a snapshot into file -> records (each file written with the
default Hub-native types or, with ``--vsr-compatible``, the release's); ``configs_of`` names
the ``datasets`` config of each group of files; ``front_matter`` is the card's YAML.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, overload

import orjson

from vsr_dataset.dictionary import NEGATIVES_FILE
from vsr_dataset.hub import Config, Feature, front_matter_configs, infer_features
from vsr_dataset.mc_publish import (
    MC_DIRS,
    MC_PROVENANCE_FILE,
    NEGATIVES_PROVENANCE_FILE,
    PROVENANCE_DIR,
)
from vsr_dataset.splits import PARTS
from vsr_dataset.vsr_compat import compatible_record

CONFIG_DESCRIPTIONS = {
    "random": "random 70/10/20 split of the validated Examples (grouped by annotation)",
    "zeroshot": "zero-shot split: concepts of each part occur in no other part",
    "validated": "every validated Example (kept by the keep rule)",
    "raw": "every Example written by people, with every vote in full",
    "mc": "multiple-choice items whose every distractor validators judged False, "
    "aligned with the random split",
    "mc_unvalidated": "multiple-choice items with a distractor nobody has judged yet, "
    "aligned with the random split",
    "mc_zeroshot": "multiple-choice items whose every distractor validators judged False, "
    "aligned with the zero-shot split",
    "mc_zeroshot_unvalidated": "multiple-choice items with a distractor nobody has judged yet, "
    "aligned with the zero-shot split",
    "provenance": "NOT FOR EVALUATION: where each multiple-choice item's distractors came from "
    "and its judged negatives; it holds the answers",
    "machine_negatives": "machine-made False captions validators judged, with their query",
}


Records = Sequence[dict[str, Any]]


class LazyRecords(Sequence[dict[str, Any]]):
    """``make`` applied to each item of ``items`` when read, never kept: a file's records
    exist one at a time while it is written (at 100x VSR, 1.3 million records), however
    often they are read (the JSONL file, the card's features, the Parquet copy)."""

    def __init__(self, items: Sequence[Any], make: Callable[[Any], dict[str, Any]]) -> None:
        self.items, self.make = items, make

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return [self.make(x) for x in self.items[i]]
        return self.make(self.items[i])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return map(self.make, self.items)


def part_records(
    *,
    raw: Records,
    validated: Records,
    random_parts: Mapping[str, Records] | None,
    zeroshot_parts: Mapping[str, Records] | None,
    negatives: Records,
    mc_sets: Mapping[str, Mapping[str, Sequence[bytes]]],
    provenance: Mapping[str, Records],
    vsr_compatible: bool,
) -> dict[str, Records]:
    """File (relative path) -> its records, in writing order."""

    def fix(records: Records, *, is_raw: bool) -> Records:
        if vsr_compatible:
            return LazyRecords(records, lambda rec: compatible_record(rec, raw=is_raw))
        return records

    out: dict[str, Records] = {
        "all_raw.jsonl": fix(raw, is_raw=True),
        "all_validated.jsonl": fix(validated, is_raw=False),
    }
    for name, parts in (("random", random_parts), ("zeroshot", zeroshot_parts)):
        if parts is not None:
            for p in PARTS:
                out[f"{name}/{p}.jsonl"] = fix(parts[p], is_raw=False)
    for name, lines_of in sorted(mc_sets.items()):
        for split, lines in sorted(lines_of.items()):
            out[f"{name}/{split}.jsonl"] = [orjson.loads(ln) for ln in lines]
    if negatives:
        out[NEGATIVES_FILE] = fix(negatives, is_raw=False)
    for rel, recs in sorted(provenance.items()):
        if recs:
            out[rel] = recs
    return out


def kind_of(rel: str) -> str:
    """Which ``--only`` part writes this file."""
    head = rel.split("/", 1)[0]
    return {
        "all_raw.jsonl": "raw",
        "all_validated.jsonl": "validated",
        NEGATIVES_FILE: "raw",
        "mc_unvalidated": "mc",
        "mc_zeroshot": "mc",
        "mc_zeroshot_unvalidated": "mc",
        PROVENANCE_DIR: "mc",
    }.get(head, head)


def configs_of(files: Sequence[str], *, parquet: bool) -> list[Config]:
    """One config per part present in ``files`` (JSONL paths), pointing at the JSONL files
    or, with ``parquet``, at their Parquet copies."""

    def path(rel: str) -> str:
        return rel.removesuffix(".jsonl") + ".parquet" if parquet else rel

    present = set(files)
    out: list[Config] = []
    for name in ("random", "zeroshot"):
        if all(f"{name}/{p}.jsonl" in present for p in PARTS):
            out.append(
                Config(
                    name, {p: path(f"{name}/{p}.jsonl") for p in PARTS}, CONFIG_DESCRIPTIONS[name]
                )
            )
    for name, rel in (
        ("validated", "all_validated.jsonl"),
        ("raw", "all_raw.jsonl"),
        ("machine_negatives", NEGATIVES_FILE),
    ):
        if rel in present:
            out.append(Config(name, {"train": path(rel)}, CONFIG_DESCRIPTIONS[name]))
    for name in MC_DIRS:
        splits = [p for p in PARTS if f"{name}/{p}.jsonl" in present]
        if splits:
            out.append(
                Config(
                    name, {p: path(f"{name}/{p}.jsonl") for p in splits}, CONFIG_DESCRIPTIONS[name]
                )
            )
    prov = [rel for rel in (MC_PROVENANCE_FILE, NEGATIVES_PROVENANCE_FILE) if rel in present]
    for rel in prov:
        name = "provenance_" + rel.rsplit("/", 1)[1].removesuffix(".jsonl")
        out.append(Config(name, {"train": path(rel)}, CONFIG_DESCRIPTIONS["provenance"]))
    return out


def config_features(
    configs: Sequence[Config], records: Mapping[str, Sequence[dict[str, Any]]]
) -> dict[str, list[Feature]]:
    """Each config's features, inferred from all its files' records together."""
    out: dict[str, list[Feature]] = {}
    for c in configs:
        # Read as they come, never collected: a file's records may be streamed (one at a time).
        recs = (
            r
            for rel in c.files.values()
            for r in records.get(rel.removesuffix(".parquet").removesuffix(".jsonl") + ".jsonl", [])
        )
        out[c.name] = infer_features(recs)
    return out


def size_category(n: int) -> str:
    for limit, name in (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
    ):
        if n < limit:
            return name
    return "1M<n<10M"


def front_matter(
    *,
    title: str,
    license_id: str | None,
    language: str,
    n_raw: int,
    origins: Sequence[str],
    negatives_in_splits: bool,
    configs: Sequence[Config],
    features: Mapping[str, list[Feature]] | None,
) -> dict[str, Any]:
    """The card's YAML front matter (the Hub's dataset card metadata)."""
    yaml_configs, info = front_matter_configs(configs, features or {}, default="random")
    sources = ["extended|coco"]
    if "imported" in origins:
        sources.append("extended|vsr")
    meta: dict[str, Any] = {
        "pretty_name": title,
        "license": license_id or "unknown",
        "language": [language.split("-", 1)[0]],
        "multilinguality": "monolingual",
        "task_categories": ["visual-question-answering"],
        "size_categories": [size_category(n_raw)],
        "annotations_creators": ["crowdsourced"],
        "language_creators": ["crowdsourced", "machine-generated"]
        if negatives_in_splits
        else ["crowdsourced"],
        "source_datasets": sources,
        "tags": ["spatial-reasoning", "vision-language", "coco", "vsr"],
        "configs": yaml_configs,
    }
    if features is not None:
        meta["dataset_info"] = info
    return meta
