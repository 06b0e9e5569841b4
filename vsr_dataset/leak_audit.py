"""The leak audit build-dataset runs on the files it has just written, before they move into
place: what a benchmark user can score on each evaluation file without looking at an image.

- **Look-up and join attacks** (they must stay at chance; one above chance beyond its 95 %
  interval fails the build): each evaluation file's items looked up by (image, caption) in
  the files a model may be trained on (multiple choice: every ``*/train.jsonl`` of both
  split schemes and ``machine_negatives.jsonl``; binary: the train files of its own scheme
  and ``machine_negatives.jsonl``, since random and zero-shot are independent splits, as in
  the VSR release), and for multiple choice every integer a record carries outside its
  answer fields joined as an ``example_id`` with every other file (the relation of an
  Example it names is dropped from the options). ``all_raw.jsonl``/``all_validated.jsonl``
  hold every binary record by design and ``provenance/`` holds the answers (not for
  evaluation): they are joined on ids, never looked up.
- **Blind baselines** (reported, never failing): the same look-ups by caption alone (the
  same words on another image: a caption prior); binary, the label prior of the train
  file's relation and of its concept pair, and the pair-opposite rule (the other half of a
  caption pair is in train: predict the opposite label) and caption-only models fitted on
  that train file (vsr_dataset.caption_baselines); multiple choice, the answer-only suite
  (vsr_dataset.mc_blind, added by the build).

Each figure is an accuracy with its Wilson 95 % interval over the evaluation file's items,
an unanswerable item scored at chance (a coin flip, or a guess among the options left).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import orjson

from vsr_core.agreement import wilson_interval
from vsr_dataset import caption_baselines
from vsr_dataset.caption_baselines import CaptionModels

EVAL_PARTS = ("dev", "test")
JOIN_ONLY = ("all_raw.jsonl", "all_validated.jsonl")
NOT_FOR_EVALUATION = "provenance/"


@dataclass(frozen=True)
class Figure:
    accuracy: float
    ci95: tuple[float, float]
    n: int
    chance: float

    @property
    def above_chance(self) -> bool:
        return self.ci95[0] > self.chance

    def as_dict(self) -> dict[str, Any]:
        return {
            "accuracy": round(self.accuracy, 4),
            "ci95": [round(self.ci95[0], 4), round(self.ci95[1], 4)],
            "n": self.n,
            "chance": self.chance,
        }


def _figure(scores: list[float], chance: float) -> Figure:
    n = len(scores)
    hits = sum(scores)
    lo, hi = wilson_interval(round(hits), n)
    return Figure(hits / n if n else chance, (lo, hi), n, chance)


def _read(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as fh:
        for line in fh:
            yield orjson.loads(line)


def _is_mc(rel: str) -> bool:
    return rel.startswith("mc")


def _is_eval(rel: str) -> bool:
    return Path(rel).stem in EVAL_PARTS and "/" in rel and not rel.startswith(NOT_FOR_EVALUATION)


def _is_train_like(rel: str) -> bool:
    return rel.endswith("/train.jsonl") or rel == "machine_negatives.jsonl"


def _ints(value: Any) -> Iterable[int]:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _ints(v)


def _guess(answer: Any, left: list[Any]) -> float:
    return 1 / len(left) if answer in left else 0.0


def audit(root: Path, files: Iterable[str]) -> dict[str, Any]:
    """``blind_baselines`` of stats.json: config -> split -> {"attacks", "baselines"}."""
    jsonl = sorted(f for f in files if f.endswith(".jsonl"))
    labelled: dict[str, dict[tuple[str, str], int]] = {}  # train-like file -> (image, caption)
    by_caption: dict[str, dict[str, int]] = {}
    relation_of: dict[int, str] = {}
    for rel in jsonl:
        if rel.startswith(NOT_FOR_EVALUATION):
            continue
        train_like = _is_train_like(rel)
        pairs: dict[tuple[str, str], int] = {}
        for rec in _read(root / rel):
            if "example_id" in rec and "relation" in rec:
                relation_of[int(rec["example_id"])] = rec["relation"]
            if not train_like:
                continue
            if "caption" in rec:
                pairs[(rec["image"], rec["caption"])] = int(rec["label"])
            elif "choices" in rec:  # an MC train item: its answer True, the rest False
                for j, c in enumerate(rec["choices"]):
                    pairs[(rec["image"], c)] = int(j == rec["answer"])
        if train_like:
            labelled[rel] = pairs
            captions: dict[str, int] = {}
            for (_, caption), label in pairs.items():
                captions[caption] = label
            by_caption[rel] = captions
    out: dict[str, Any] = {}
    fitted: dict[Path, CaptionModels | None] = {}  # each train file's models, fitted once
    for rel in jsonl:
        if not _is_eval(rel):
            continue
        config, split = rel.split("/")[0], Path(rel).stem
        records = list(_read(root / rel))
        if not records:
            continue
        if _is_mc(rel):
            result = _mc(records, labelled, by_caption, relation_of)
        else:
            scheme_train = f"{config}/train.jsonl"
            result = _binary(records, labelled, by_caption, root / scheme_train, fitted)
        out.setdefault(config, {})[split] = result
    return out


def _lookups(
    n_choices: int,
    keys: list[tuple[str, str]],
    table: dict[Any, int],
    caption_only: bool,
) -> list[int | None]:
    return [table.get(k[1] if caption_only else k) for k in keys[:n_choices]]


def _mc(
    records: list[dict[str, Any]],
    labelled: dict[str, dict[tuple[str, str], int]],
    by_caption: dict[str, dict[str, int]],
    relation_of: dict[int, str],
) -> dict[str, Any]:
    chance = 1 / len(records[0]["choices"])
    attacks: dict[str, Figure] = {}
    baselines: dict[str, Figure] = {}
    for rel, table in labelled.items():
        looks: list[tuple[str, dict[Any, int]]] = [
            ("image_caption", cast("dict[Any, int]", table)),
            ("caption", cast("dict[Any, int]", by_caption[rel])),
        ]
        for how, tab in looks:
            scores = []
            for rec in records:
                found = [
                    tab.get(c if how == "caption" else (rec["image"], c)) for c in rec["choices"]
                ]
                true = [j for j, v in enumerate(found) if v == 1]
                left = true or [j for j, v in enumerate(found) if v != 0] or list(range(len(found)))
                scores.append(_guess(rec["answer"], left))
            # The same words on another image are a caption prior, not the item itself.
            kind = attacks if how == "image_caption" else baselines
            kind[f"lookup_{how}:{rel}"] = _figure(scores, chance)
    scores = []
    for rec in records:
        named = {
            relation_of[i]
            for k, v in rec.items()
            if not k.startswith("answer")
            for i in _ints(v)
            if i in relation_of
        }
        left = [j for j, r in enumerate(rec["relations"]) if r not in named]
        scores.append(_guess(rec["answer"], left or list(range(len(rec["choices"])))))
    attacks["join_ids:every file"] = _figure(scores, chance)
    return {
        "chance": chance,
        "n": len(records),
        "attacks": {k: v.as_dict() for k, v in attacks.items()},
        "baselines": {k: v.as_dict() for k, v in baselines.items()},
        "above_chance": sorted(k for k, v in attacks.items() if v.above_chance),
    }


def _binary(
    records: list[dict[str, Any]],
    labelled: dict[str, dict[tuple[str, str], int]],
    by_caption: dict[str, dict[str, int]],
    scheme_train: Path,
    fitted: dict[Path, CaptionModels | None],
) -> dict[str, Any]:
    attacks: dict[str, Figure] = {}
    baselines = _binary_baselines(records, scheme_train, fitted)
    for rel, table in labelled.items():
        if rel != "machine_negatives.jsonl" and _scheme(rel) != scheme_train.parent.name:
            # A train file of the other split scheme holds these Examples by design (random
            # and zero-shot are independent splits, as in the VSR release).
            continue
        looks: list[tuple[str, dict[Any, int]]] = [
            ("image_caption", cast("dict[Any, int]", table)),
            ("caption", cast("dict[Any, int]", by_caption[rel])),
        ]
        for how, tab in looks:
            scores = []
            for rec in records:
                v = tab.get(rec["caption"] if how == "caption" else (rec["image"], rec["caption"]))
                scores.append(0.5 if v is None else float(v == int(rec["label"])))
            kind = attacks if how == "image_caption" else baselines
            kind[f"lookup_{how}:{rel}"] = _figure(scores, 0.5)
    return {
        "chance": 0.5,
        "n": len(records),
        "attacks": {k: v.as_dict() for k, v in attacks.items()},
        "baselines": {k: v.as_dict() for k, v in baselines.items()},
        "above_chance": sorted(k for k, v in attacks.items() if v.above_chance),
    }


def _scheme(rel: str) -> str:
    """The split scheme a file follows: random (random/, mc/, mc_unvalidated/) or zeroshot."""
    return "zeroshot" if "zeroshot" in rel.split("/")[0] else "random"


def _binary_baselines(
    records: list[dict[str, Any]],
    train_path: Path,
    fitted: dict[Path, CaptionModels | None],
) -> dict[str, Figure]:
    if not train_path.is_file():
        return {}
    captions: list[str] = []
    labels: list[int] = []
    rel_votes: dict[str, Counter[int]] = defaultdict(Counter)
    pair_votes: dict[tuple[str, str], Counter[int]] = defaultdict(Counter)
    label_of_id: dict[int, int] = {}
    overall: Counter[int] = Counter()
    for rec in _read(train_path):
        label = int(rec["label"])
        rel_votes[rec["relation"]][label] += 1
        pair_votes[(rec["subj"], rec["obj"])][label] += 1
        overall[label] += 1
        captions.append(rec["caption"])
        labels.append(label)
        if "example_id" in rec:
            label_of_id[int(rec["example_id"])] = label
    fallback = overall.most_common(1)[0][0] if overall else 1

    def prior(c: Counter[int] | None) -> int:
        return c.most_common(1)[0][0] if c else fallback

    rel_scores, pair_scores, opposite = [], [], []
    for rec in records:
        label = int(rec["label"])
        rel_scores.append(float(prior(rel_votes.get(rec["relation"])) == label))
        pair_scores.append(float(prior(pair_votes.get((rec["subj"], rec["obj"]))) == label))
        other = rec.get("pair_example_id")
        seen = label_of_id.get(other) if isinstance(other, int) else None
        opposite.append(0.5 if seen is None else float(1 - seen == label))
    out = {
        "relation_prior": _figure(rel_scores, 0.5),
        "concept_pair_prior": _figure(pair_scores, 0.5),
        "pair_opposite": _figure(opposite, 0.5),
    }
    if train_path not in fitted:
        fitted[train_path] = caption_baselines.fit(captions, labels)
    models = fitted[train_path]
    if models is not None:
        truth = [int(rec["label"]) for rec in records]
        for name, pred in models.predict([rec["caption"] for rec in records]).items():
            out[name] = _figure([float(p == t) for p, t in zip(pred, truth, strict=True)], 0.5)
    return out


def failures(blind: dict[str, Any]) -> list[str]:
    """Every look-up or join attack above chance beyond its interval, as 'file: attack'."""
    return [
        f"{config}/{split}: {name}"
        for config, splits in sorted(blind.items())
        for split, result in sorted(splits.items())
        for name in result.get("above_chance", [])
    ]
