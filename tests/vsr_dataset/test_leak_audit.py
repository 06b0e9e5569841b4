"""build-dataset's leak audit, on the CLI a user runs: a release whose records were collected
twice (the same image, caption and label from two writers) puts the answers of random/test
in random/train; the build refuses in one line, or with --allow-leaks writes and says so
first. A clean build publishes blind_baselines for every evaluation file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from vsr_dataset.leak_audit import audit, failures

RAW = "data/data_files/all_vsr_raw_data.jsonl"
N = 400


def _build(db_url: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", "from vsr_cli.main import build_dataset_main as m; m()"]
    return subprocess.run(
        [*cmd, "--out", str(out), "-q", "--database-url", db_url, *extra],
        capture_output=True,
        text=True,
    )


def _import(db_url: str, path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "vsr_cli.main", "import-vsr", str(path), "-q"]
        + ["--database-url", db_url],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_duplicated_records_fail_the_build_in_one_line(
    db_url: str, vsr_dir: Path, tmp_path: Path
) -> None:
    lines = (vsr_dir / RAW).read_text().splitlines()[:N]
    twice = []
    for line in lines:
        rec = json.loads(line)
        twice.append(json.dumps(rec))
        twice.append(json.dumps({**rec, "annotator_id": int(rec["annotator_id"]) + 1000}))
    path = tmp_path / "collected_twice.jsonl"
    path.write_text("\n".join(twice) + "\n")
    _import(db_url, path)

    out = tmp_path / "out"
    done = _build(db_url, out)
    assert done.returncode == 1
    err = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error: leak audit:"), done.stderr
    assert "lookup_image_caption:random/train.jsonl" in err[0]
    assert not out.exists() or not any(out.iterdir())  # nothing half-written

    done = _build(db_url, out, "--allow-leaks")
    assert done.returncode == 0, done.stderr
    stats = json.loads((out / "stats.json").read_text())
    assert stats["leak_audit"]["failures"] and stats["leak_audit"]["allowed"]
    card = (out / "README.md").read_text()
    head = card.split("\n## ", 1)[0]
    assert "**Warning: not a clean benchmark.**" in head and "--allow-leaks" in head


def test_a_clean_build_publishes_blind_baselines(
    db_url: str, vsr_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "raw.jsonl"
    path.write_text("\n".join((vsr_dir / RAW).read_text().splitlines()[: 2 * N]) + "\n")
    _import(db_url, path)
    out = tmp_path / "out"
    done = _build(db_url, out)
    assert done.returncode == 0, done.stderr
    stats = json.loads((out / "stats.json").read_text())
    blind = stats["blind_baselines"]
    assert set(blind) == {"random", "zeroshot"} and stats["leak_audit"]["failures"] == []
    for config in blind.values():
        assert set(config) == {"dev", "test"}
        for r in config.values():
            assert r["attacks"] and {"relation_prior", "pair_opposite"} <= set(r["baselines"])
            # Caption-only models fitted on the scheme's train file, linear and not.
            assert {"caption_tfidf_lr", "caption_tfidf_mlp"} <= set(r["baselines"])
            for f in [*r["attacks"].values(), *r["baselines"].values()]:
                assert f["ci95"][0] <= f["accuracy"] <= f["ci95"][1] and f["n"] == r["n"]
    assert "### Blind baselines and leak audit" in (out / "README.md").read_text()


def test_the_audit_catches_the_old_mc_records(tmp_path: Path) -> None:
    """The records main wrote (distractor_example_ids, answer_example_id) next to the binary
    file holding those Examples: the id join names the answer of every item."""
    examples: list[dict[str, Any]] = [
        {"example_id": i, "image": f"{i}.jpg", "caption": f"c{i}", "label": 1, "relation": r}
        for i, r in enumerate(["on", "under", "near", "behind", "left of"] * 8)
    ]
    (tmp_path / "random").mkdir()
    (tmp_path / "random" / "test.jsonl").write_text("".join(json.dumps(e) + "\n" for e in examples))
    (tmp_path / "mc").mkdir()
    items = []
    for e in examples:
        rels = [
            e["relation"],
            *(r for r in ["on", "under", "near", "behind"] if r != e["relation"]),
        ][:4]
        distractors = [x["example_id"] for x in examples if x["relation"] in rels[1:]][:3]
        items.append(
            {
                "image": e["image"],
                "choices": [f"x {r}" for r in rels],
                "relations": rels,
                "answer": 0,
                "answer_caption": "x",
                "distractor_example_ids": sorted(distractors),
            }
        )
    (tmp_path / "mc" / "test.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    blind = audit(tmp_path, ["random/test.jsonl", "mc/test.jsonl"])
    assert blind["mc"]["test"]["attacks"]["join_ids:every file"]["accuracy"] == 1.0
    assert failures(blind) == ["mc/test: join_ids:every file"]
