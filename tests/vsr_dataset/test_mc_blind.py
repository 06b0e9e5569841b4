"""The answer-only suite as the build's blind baselines (vsr_dataset.mc_blind), on MC files as
a user reads them: a signal planted in dev and test only (train says the opposite) is found
by the adversaries fitted on dev alone and by no adversary fitted on train, so the dev-fitted
ones see dev and nothing else."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from vsr_dataset.mc_blind import PREFIX, STRONGEST, add_to, suites

RELATIONS = ["on", "under", "near", "behind", "above", "below", "left of", "right of"]
PLANTED = "touching"
CONCEPTS = ["cat", "dog", "bowl", "cup", "chair", "bench", "car", "bus", "bed", "book"]


def _item(rng: random.Random, planted_is_answer: bool) -> dict[str, Any]:
    subj, obj = rng.sample(CONCEPTS, 2)
    others = rng.sample(RELATIONS, 3)
    # The planted relation is in every item: the answer in dev/test, a distractor in train.
    rels = [PLANTED, *others] if planted_is_answer else [others[0], PLANTED, *others[1:]]
    order = list(range(4))
    rng.shuffle(order)
    rels = [rels[i] for i in order]
    answer = order.index(0)
    choices = [f"The {subj} is {r} the {obj}." for r in rels]
    return {
        "image": f"{rng.randrange(10**6):012d}.jpg",
        "subj": subj,
        "obj": obj,
        "choices": choices,
        "relations": rels,
        "answer": answer,
        "answer_caption": choices[answer],
    }


def _write(root: Path, directory: str, split: str, items: list[dict[str, Any]]) -> None:
    (root / directory).mkdir(parents=True, exist_ok=True)
    (root / directory / f"{split}.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))


def test_dev_fitted_adversaries_see_dev_only(tmp_path: Path) -> None:
    rng = random.Random(7)
    _write(tmp_path, "mc_unvalidated", "train", [_item(rng, False) for _ in range(300)])
    _write(tmp_path, "mc_unvalidated", "dev", [_item(rng, True) for _ in range(80)])
    _write(tmp_path, "mc_unvalidated", "test", [_item(rng, True) for _ in range(80)])

    measured = suites(tmp_path, None, 0)
    assert set(measured) == {"mc_unvalidated"}
    test = measured["mc_unvalidated"]["test"]["adversaries"]
    # Fitted on dev alone: the planted answer is found.
    assert test["dev_fit:tfidf_pair_rel_lr"]["accuracy"] > 0.9
    assert test["dev_fit:pair_counts"]["accuracy"] > 0.9
    # Fitted on train (where the planted relation is never the answer): below chance, and
    # only its "least likely" reading finds it, as that reading is meant to.
    assert test["tfidf_pair_rel_lr"]["accuracy"] < 0.1
    assert test["tfidf_pair_rel_lr_least"]["accuracy"] > 0.9
    best = measured["mc_unvalidated"]["test"]["strongest"]
    assert best["accuracy"] == max(a["accuracy"] for a in test.values())
    # dev: the suite fitted on train, scored on dev.
    dev = measured["mc_unvalidated"]["dev"]
    assert dev["n_test"] == 80 and not any(k.startswith("dev_fit:") for k in dev["adversaries"])

    blind: dict[str, Any] = {"mc_unvalidated": {"dev": {"n": 80}, "test": {"n": 80}}}
    add_to(blind, measured)
    got = blind["mc_unvalidated"]["test"]["baselines"]
    f = got[PREFIX + "dev_fit:tfidf_pair_rel_lr"]
    assert f["n"] == 80 and f["chance"] == 0.25
    assert f["ci95"][0] <= f["accuracy"] <= f["ci95"][1] and f["ci95"][1] - f["ci95"][0] > 0
    assert got[STRONGEST]["accuracy"] == best["accuracy"]
    assert got[STRONGEST]["by_chance_alone"] == measured["mc_unvalidated"]["test"]["strongest_null"]
    assert PREFIX + "listwise_stack_gbm_least" in blind["mc_unvalidated"]["dev"]["baselines"]


def test_the_strongest_of_many_readings_has_its_chance_level(tmp_path: Path) -> None:
    """No signal anywhere (answers placed at random): the strongest of the pooled readings
    sits above 0.25 by selection alone, and strongest_null says how far."""
    import numpy as np

    from matching.adversaries import strongest_null

    rng = random.Random(3)
    for split, n in (("train", 300), ("dev", 80), ("test", 120)):
        _write(
            tmp_path, "mc_unvalidated", split, [_item(rng, rng.random() < 0.25) for _ in range(n)]
        )
    test = suites(tmp_path, None, 0)["mc_unvalidated"]["test"]
    null = test["strongest_null"]
    assert null is not None and 0.25 < null["mean"] < null["p95"] < 0.5
    # One reading alone: its chance level is the plain 1/k (within the draws' noise).
    one = {"a": np.full((200, 4), 0.25)}
    assert strongest_null(one) == {"mean": 0.25, "p95": 0.25}
    sharp = np.eye(4)[np.random.default_rng(0).integers(0, 4, 200)]
    many = {str(i): np.roll(sharp, i, axis=0) for i in range(24)}
    pooled, single = strongest_null(many), strongest_null({"0": sharp})
    assert pooled is not None and single is not None
    assert pooled["mean"] > single["mean"] + 0.03
