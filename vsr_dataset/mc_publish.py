"""Which multiple-choice items go into which file, and what each public record may say.

A benchmark user reads every file of an export, so an MC evaluation record must not give
its answer away together with any other file:

- **No key outside the key fields.** A public record has the image, the concepts, the
  choices with their relations, and the key (``answer``, ``answer_caption``). The Examples
  the distractors were made from, the truth's Example id and the machine-made negatives'
  ids are provenance: they are written only on request (``--with-provenance``), to
  ``provenance/``, which the card and the Hub configs mark as not for evaluation.
- **Aligned with every split written beside it.** One MC set per split scheme: ``mc/``
  follows the random split (matching ran within it), ``mc_zeroshot/`` the zero-shot split
  (its dev/test concepts occur in no zero-shot train record). No dev/test item of either
  has its truth in ``random/train`` or ``zeroshot/train``; items that would are left out
  and counted.
- **Shuffled by the seed.** Each file's records are in a seeded random order and numbered
  in that order (``item_id``), never sorted by an id.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson

from vsr_dataset.mc_export import McRow
from vsr_dataset.splits import PARTS

PROVENANCE_DIR = "provenance"
MC_PROVENANCE_FILE = f"{PROVENANCE_DIR}/mc_items.jsonl"
NEGATIVES_PROVENANCE_FILE = f"{PROVENANCE_DIR}/machine_negatives.jsonl"
EVAL_PARTS = ("dev", "test")
# The fields of a public record that hold the answer (everything else must not).
KEY_FIELDS = ("answer", "answer_caption")


class McScheme(StrEnum):
    random = "random"
    zeroshot = "zeroshot"


def mc_dir(scheme: McScheme, *, validated: bool) -> str:
    """The folder of an MC set: mc/, mc_unvalidated/, mc_zeroshot/, mc_zeroshot_unvalidated/."""
    base = "mc" if scheme is McScheme.random else f"mc_{scheme.value}"
    return base if validated else f"{base}_unvalidated"


MC_DIRS = tuple(mc_dir(s, validated=v) for s in McScheme for v in (True, False))


@dataclass
class McPublished:
    files: dict[str, dict[str, list[bytes]]] = field(default_factory=dict)  # dir -> split -> lines
    provenance: list[dict[str, Any]] = field(default_factory=list)
    # Negatives of the run's dev/test items: they are distractors of evaluation items, so
    # they never reach machine_negatives.jsonl nor (with --with-negatives) a binary file.
    held_back_negatives: frozenset[int] = frozenset()
    # dir -> evaluation items left out because their truth is in a binary train file.
    left_out: dict[str, int] = field(default_factory=dict)

    def lines(self, directory: str) -> dict[str, list[bytes]]:
        return self.files.get(directory, {})


def publish_mc(
    cleared: Sequence[McRow],
    pending: Sequence[McRow],
    *,
    seed: int,
    random_parts: Mapping[str, Iterable[int]],
    zeroshot_parts: Mapping[str, Iterable[int]],
    with_unvalidated: bool,
    held_back_negatives: frozenset[int],
) -> McPublished:
    """The MC files of an export (see the module docstring). ``cleared``: items whose every
    distractor validators rejected; ``pending``: items with an unjudged distractor (written
    only ``with_unvalidated``); ``held_back_negatives``: the negatives of the run's dev/test
    items (``mc_export.eval_negative_ids``)."""
    train_ids = set(random_parts.get("train", ())) | set(zeroshot_parts.get("train", ()))
    zeroshot_of = {k: p for p, keys in zeroshot_parts.items() for k in keys}
    out = McPublished(held_back_negatives=held_back_negatives)
    sets: list[tuple[Sequence[McRow], bool]] = [(cleared, True)]
    if with_unvalidated:
        sets.append((pending, False))
    for rows, validated in sets:
        for scheme in McScheme:
            directory = mc_dir(scheme, validated=validated)
            by_split: dict[str, list[McRow]] = {}
            for row in rows:
                split = (
                    row.split
                    if scheme is McScheme.random
                    else zeroshot_of.get(row.query_example_id)
                )
                if split is None:
                    continue
                if split in EVAL_PARTS and _touches(row, train_ids):
                    out.left_out[directory] = out.left_out.get(directory, 0) + 1
                    continue
                by_split.setdefault(split, []).append(row)
            for split in PARTS:
                if split in by_split:
                    _write_split(out, directory, split, by_split[split], seed, validated)
    return out


def _touches(row: McRow, train_ids: set[int]) -> bool:
    """Whether the item's truth is in a binary train file (there, with label True, a look-up
    of the options names the answer). A distractor's source Example gives only its relation
    (the distractor is remapped onto the query's image and concepts) and its id is
    provenance, so its part decides nothing: requiring all three sources out of
    zeroshot/train too would keep about 4 % of the items."""
    return row.query_example_id in train_ids


def _write_split(
    out: McPublished, directory: str, split: str, rows: list[McRow], seed: int, validated: bool
) -> None:
    ordered = sorted(rows, key=lambda r: r.query_example_id)
    # A string seed hashes the same in every process (random.seed uses sha512 for str).
    random.Random(f"{seed}/{directory}/{split}").shuffle(ordered)
    lines: list[bytes] = []
    for i, row in enumerate(ordered):
        item_id = f"{split}-{i:05d}"
        record: dict[str, Any] = {
            "item_id": item_id,
            "image": row.image,
            "image_link": row.image_link,
            "subj": row.subj,
            "obj": row.obj,
            "choices": list(row.choices),
            "relations": list(row.relations),
            "split": split,
            "answer": row.answer,
            "answer_caption": row.answer_caption,
            "run_id": row.run_id,
        }
        if not validated:
            record["validated"] = False
        lines.append(orjson.dumps(record) + b"\n")
        out.provenance.append(
            {
                "config": directory,
                "item_id": item_id,
                "split": split,
                "answer_example_id": row.query_example_id,
                "distractor_example_ids": list(row.distractor_example_ids),
                "negative_example_ids": list(row.negative_example_ids),
                "run_id": row.run_id,
                "not_for_evaluation": True,
            }
        )
    out.files.setdefault(directory, {})[split] = lines
