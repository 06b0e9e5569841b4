"""The multiple-choice benchmark on the README's path, as a benchmark user reads it: the raw
VSR release file -> `vsr import-vsr` -> `vsr match --split-seed 0 --report` ->
`build-dataset --seed 0 --unvalidated-mc`, every step the installed CLI. The attacks below
are written apart from the exporter: they read only the files a user downloads."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import spearmanr

# About 90 s of CPU on a quiet machine (import, matching, a full build); a shared busy one
# needs more than the default 600 s.
pytestmark = pytest.mark.timeout(1800)

RAW = "data/data_files/all_vsr_raw_data.jsonl"
SEED = 0
CHANCE = 0.25
EVAL = ("dev", "test")
TRAIN_FILES = ("random/train.jsonl", "zeroshot/train.jsonl")


def _is_key(field: str) -> bool:
    """The fields that hold the answer, named as such (answer, answer_caption, ...)."""
    return field.startswith("answer")


def _bin(name: str) -> str:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else name


def _run(*args: str) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(args, capture_output=True, text=True, env=env)
    assert done.returncode == 0, f"{args}: {done.stderr[-2000:]}"


@pytest.fixture(scope="module")
def export(vsr_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("mc_user_path")
    url = f"sqlite:///{tmp / 'vsr.db'}"
    _run(_bin("vsr"), "db", "upgrade", "--database-url", url)
    _run(_bin("vsr"), "import-vsr", str(vsr_dir / RAW), "-q", "--database-url", url)
    _run(_bin("vsr"), "match", "--split-seed", str(SEED), "--report", "--database-url", url)
    out = tmp / "out"
    _run(
        _bin("build-dataset"),
        *("--seed", str(SEED), "--unvalidated-mc", "-q", "--out", str(out)),
        *("--database-url", url),
    )
    yield out
    shutil.rmtree(tmp, ignore_errors=True)


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _mc_eval_files(out: Path) -> list[Path]:
    files = [f for d in sorted(out.glob("mc*")) for f in sorted(d.glob("*.jsonl"))]
    return [f for f in files if f.stem in EVAL]


def _other_files(out: Path, mc_file: Path) -> list[Path]:
    return [f for f in sorted(out.rglob("*.jsonl")) if f != mc_file]


def _upper95(n: int) -> float:
    """Chance plus 1.96 standard errors of a 4-way guess over n items."""
    return CHANCE + 1.96 * math.sqrt(CHANCE * (1 - CHANCE) / n)


def _ints(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [x for v in value for x in _ints(v)]
    return []


def test_the_readme_path_writes_mc_evaluation_files(export: Path) -> None:
    files = _mc_eval_files(export)
    assert export / "mc_unvalidated" / "test.jsonl" in files
    assert sum(len(_read(f)) for f in files if f.stem == "test") >= 300


def test_no_mc_record_names_an_example_whose_relation_gives_the_answer(export: Path) -> None:
    """Finding 1: every integer a record carries outside the answer fields, looked up as an
    example_id in every other file; the relations of the Examples found are dropped from
    the options, and a guess among the rest is scored."""
    for mc_file in _mc_eval_files(export):
        relation_of: dict[int, str] = {}
        for other in _other_files(export, mc_file):
            for rec in _read(other):
                if "example_id" in rec and "relation" in rec:
                    relation_of[rec["example_id"]] = rec["relation"]
        records = _read(mc_file)
        score = 0.0
        for rec in records:
            named = {
                relation_of[i]
                for k, v in rec.items()
                if not _is_key(k)
                for i in _ints(v)
                if i in relation_of
            }
            left = [j for j, r in enumerate(rec["relations"]) if r not in named] or list(
                range(len(rec["choices"]))
            )
            score += (1 / len(left)) if rec["answer"] in left else 0.0
        acc = score / len(records)
        assert acc <= _upper95(len(records)), f"{mc_file}: join on ids answers {acc:.3f}"


def test_no_mc_truth_of_dev_or_test_is_in_a_train_file(export: Path) -> None:
    """Finding 2: an option found in a binary train file with label True is taken as the
    answer (one found with label False is dropped); no truth may be there at all."""
    label_of: dict[tuple[str, str], int] = {}
    for rel in TRAIN_FILES:
        for rec in _read(export / rel):
            label_of[(rec["image"], rec["caption"])] = int(rec["label"])
    for mc_file in _mc_eval_files(export):
        records = _read(mc_file)
        in_train = sum(1 for r in records if (r["image"], r["answer_caption"]) in label_of)
        assert in_train == 0, f"{mc_file}: {in_train} truths in a train file"
        score = 0.0
        for rec in records:
            found = [label_of.get((rec["image"], c)) for c in rec["choices"]]
            true = [j for j, v in enumerate(found) if v == 1]
            left = true or [j for j, v in enumerate(found) if v != 0] or list(range(len(found)))
            score += (1 / len(left)) if rec["answer"] in left else 0.0
        acc = score / len(records)
        assert acc <= _upper95(len(records)), f"{mc_file}: train look-up {acc:.3f}"


def test_mc_files_are_not_in_the_order_of_an_id(export: Path) -> None:
    """The answer's position in all_raw (its Example id order) must not follow the file."""
    position = {
        (r["image"], r["caption"]): i for i, r in enumerate(_read(export / "all_raw.jsonl"))
    }
    for mc_file in _mc_eval_files(export):
        records = _read(mc_file)
        if len(records) < 30:
            continue
        order = [position[(r["image"], r["answer_caption"])] for r in records]
        rho = spearmanr(range(len(order)), order).statistic
        assert abs(rho) < 0.2, f"{mc_file}: record order follows the truths' ids (rho {rho:.2f})"


def test_a_zero_shot_mc_set_follows_the_zero_shot_split(export: Path) -> None:
    train_concepts = {
        c for r in _read(export / "zeroshot" / "train.jsonl") for c in (r["subj"], r["obj"])
    }
    zs_test = {(r["image"], r["caption"]) for r in _read(export / "zeroshot" / "test.jsonl")}
    records = _read(export / "mc_zeroshot_unvalidated" / "test.jsonl")
    assert records
    for rec in records:
        assert (rec["image"], rec["answer_caption"]) in zs_test
        assert not {rec["subj"], rec["obj"]} & train_concepts
    card = (export / "README.md").read_text()
    assert "mc_zeroshot_unvalidated/" in card


def test_stats_publish_blind_baselines_and_no_attack_above_chance(export: Path) -> None:
    stats = json.loads((export / "stats.json").read_text())
    blind = stats["blind_baselines"]
    assert stats["leak_audit"]["failures"] == []
    for f in _mc_eval_files(export):
        result = blind[f.parent.name][f.stem]
        assert result["n"] == len(_read(f)) and result["attacks"]["join_ids:every file"]
    test = blind["mc_unvalidated"]["test"]["baselines"]["answer_only_strongest"]
    assert test["accuracy"] <= 0.30  # the MC target, at this split seed
