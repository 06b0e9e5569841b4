"""Multiple choice on the VSR release's own splits, as a user runs it: `vsr import-vsr` of the
release folder -> `vsr match` -> `build-dataset --vsr-compatible --unvalidated-mc`. Matching
on the export's drawn split makes the build refuse (its MC parts are not the release's);
`vsr match --splits release` matches within the release's parts, and then no MC dev/test
truth or distractor source is in any binary train file. On a fifth of the real release
(every image whose number is a multiple of 5, every file of the folder cut alike) so both
backends run in minutes; the whole release is in docs/dataset.md. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Two matching runs and two builds per backend; a shared busy machine needs more than 600 s.
pytestmark = pytest.mark.timeout(1800)

EVAL = ("dev", "test")
TRAIN_FILES = ("random/train.jsonl", "zeroshot/train.jsonl")
SUBSET = 5  # keep the images whose COCO number is a multiple of this


def _kept(image: str) -> bool:
    return int(Path(image).stem) % SUBSET == 0


def _subset(vsr_dir: Path, root: Path) -> Path:
    """The release folder with only the kept images' records in each of its files."""
    for src in sorted((vsr_dir / "data").rglob("*.jsonl")):
        dst = root / src.relative_to(vsr_dir)
        dst.parent.mkdir(parents=True, exist_ok=True)
        lines = [ln for ln in src.read_text().splitlines() if _kept(json.loads(ln)["image"])]
        dst.write_text("".join(ln + "\n" for ln in lines))
    meta = vsr_dir / "data" / "data_files" / "meta_data.csv"
    shutil.copy(meta, root / meta.relative_to(vsr_dir))
    return root


def _vsr(*args: str, db_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("VSR_ADMIN", None)
    return subprocess.run(
        [sys.executable, "-c", "from vsr_cli.main import main; main()", *args]
        + ["--database-url", db_url],
        capture_output=True,
        text=True,
        env=env,
    )


def _ok(*args: str, db_url: str) -> str:
    done = _vsr(*args, db_url=db_url)
    assert done.returncode == 0, f"{args}: {done.stderr[-2000:]}"
    return done.stdout


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _pairs(path: Path, *, true_only: bool = False) -> set[tuple[str, str]]:
    return {
        (r["image"], r["caption"]) for r in _read(path) if not true_only or int(r["label"]) == 1
    }


MATCH = ("match", "--suite-sample", "300", "--no-send-negatives-to-validation")
BUILD = ("build", "--vsr-compatible", "--unvalidated-mc", "-q")


def test_mc_follows_the_release_split_it_is_written_beside(
    db_url: str, vsr_dir: Path, tmp_path: Path
) -> None:
    release = _subset(vsr_dir, tmp_path / "release")
    _ok("import-vsr", str(release), "-q", db_url=db_url)

    # Matched on the export's drawn split: the release's parts would move its truths.
    _ok(*MATCH, db_url=db_url)
    refused = _vsr(*BUILD, "--out", str(tmp_path / "refused"), db_url=db_url)
    assert refused.returncode != 0
    error = refused.stderr.strip()
    assert len(error.splitlines()) == 1 and "Traceback" not in error
    assert "`vsr match --splits release`" in error
    assert not (tmp_path / "refused").exists()

    said = _ok(*MATCH, "--splits", "release", "--report", db_url=db_url)
    assert "split: the VSR release's own random split" in said
    out = tmp_path / "out"
    _ok(*BUILD, "--with-provenance", "--out", str(out), db_url=db_url)

    splits = release / "data" / "splits"
    mc_dirs = sorted(d.name for d in out.glob("mc*") if d.is_dir())
    assert {"mc_unvalidated", "mc_zeroshot_unvalidated"} <= set(mc_dirs)
    in_train: set[tuple[str, str]] = set()
    for rel in TRAIN_FILES:
        in_train |= _pairs(out / rel)
    for name in mc_dirs:
        scheme = "zeroshot" if name.startswith("mc_zeroshot") else "random"
        for part in ("train", *EVAL):
            path = out / name / f"{part}.jsonl"
            if not path.exists():
                continue
            truths = {(r["image"], r["answer_caption"]) for r in _read(path)}
            # Each item sits in the part of the release's file that holds its truth.
            assert truths <= _pairs(splits / scheme / f"{part}.jsonl", true_only=True), (
                f"{name}/{part}: a truth outside the release's {scheme}/{part}"
            )
            if part in EVAL:
                assert truths, f"{name}/{part} is empty"
                leaked = truths & in_train
                assert not leaked, f"{name}/{part}: {len(leaked)} truths in a train file"

    # Nor is any distractor of a dev/test item made from an Example of a train file.
    pair_of = {r["example_id"]: (r["image"], r["caption"]) for r in _read(out / "all_raw.jsonl")}
    evaluated = [p for p in _read(out / "provenance" / "mc_items.jsonl") if p["split"] in EVAL]
    assert evaluated
    sourced = [
        p["item_id"]
        for p in evaluated
        if any(pair_of[d] in in_train for d in p["distractor_example_ids"])
    ]
    assert not sourced, f"{len(sourced)} dev/test items have a distractor source in train"

    stats = json.loads((out / "stats.json").read_text())
    assert stats["split_source"]["random"]["source"] == "release"
    assert stats["leak_audit"]["failures"] == []
    assert stats["blind_baselines"]["mc_unvalidated"]["test"]["n"] == len(
        _read(out / "mc_unvalidated" / "test.jsonl")
    )
    card = (out / "README.md").read_text()
    assert "follow the random split, here the VSR release's own" in card
    assert "placed by the zero-shot split, here the VSR release's own" in card


def test_release_split_without_an_imported_release_is_one_line(
    db_url: str, vsr_dir: Path, tmp_path: Path
) -> None:
    raw = _subset(vsr_dir, tmp_path / "release") / "data" / "data_files"
    _ok("import-vsr", str(raw / "all_vsr_raw_data.jsonl"), "-q", db_url=db_url)
    done = _vsr(*MATCH, "--splits", "release", db_url=db_url)
    assert done.returncode != 0
    error = done.stderr.strip()
    assert len(error.splitlines()) == 1 and "Traceback" not in error
    assert "no split of a VSR release was imported" in error
