"""The CLI as a new user met it the second time: a bad value is one line naming the option
with exit 2 on every command, `vsr match` says why it made no item (and fails) and keeps
Hugging Face's bars off a log, `vsr revalidate --report` without a round fails plainly, and
every command that acts on a study names it. Real console scripts in subprocesses."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.support.kept_captions import write_kept_captions
from vsr_core import audit
from vsr_core.models import DEFAULT_STUDY_ID, MatchRun, McItem

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, db_url: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "VSR_DEBUG")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", COLUMNS="80")
    if db_url:
        env["DATABASE_URL"] = db_url
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=ROOT,
    )


def _one_line(r: subprocess.CompletedProcess[str], code: int) -> str:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "\r" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def test_a_threshold_that_is_no_number_names_the_option() -> None:
    line = _one_line(_cli("build-dataset", "--out", "x", "--threshold", "abc"), 2)
    assert line == (
        "error: --threshold must be a share of votes above 0 and at most 1, such "
        "as 2/3 or 0.75 (got abc)"
    )


def test_every_bad_value_exits_2_as_click_usage_errors_do() -> None:
    cases = [
        ("vsr", "sample", "--pairs", "0", "--coco", "x.json"),  # click's own check
        ("vsr", "sample", "--pairs", "3"),  # no source
        ("vsr", "match", "--splits", "folds"),
        ("vsr", "match", "--balance", "maybe"),
        ("vsr", "match", "--sweep", "a,b"),
        ("vsr", "match", "--keep-threshold", "2"),
        ("vsr", "match", "--k", "0"),
        ("build-dataset", "--out", "x", "--split-unit", "pair"),
        ("build-dataset", "--out", "x", "--random-ratios", "70/30"),
        ("vsr", "invite", "create", "--roles", "admin"),
        ("vsr", "revalidate"),
        ("vsr", "serve", "--image-root", "/no/such/folder"),
        ("vsr", "study", "show"),
        ("vsr", "sample", "--study-file", "studies/vsr.toml", "--study", "vsr"),
    ]
    for args in cases:
        _one_line(_cli(*args), 2)


def test_match_help_describes_the_split_it_uses() -> None:
    r = _cli("vsr", "match", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "keyed by image" not in text
    assert "split build-dataset writes" in text and "at least K + 1 queries" in text


def test_match_says_why_it_made_no_item_and_fails(db_url: str, engine: Engine) -> None:
    assert _cli("vsr", "db", "upgrade", db_url=db_url).returncode == 0
    write_kept_captions(engine, 4, seed=1)  # the README's old "four or more"
    r = _cli("vsr", "match", "--k", "3", db_url=db_url)
    line = _one_line(r, 1)  # the model loaded, but no bar reached the log
    assert line.startswith(
        "error: no multiple-choice items: kept True Examples per split: train has "
    ), line
    assert "k = 3 needs at least 4 in one split" in line
    assert line.endswith("nothing was written (study vsr)"), line
    with Session(engine) as s:
        assert s.exec(select(McItem)).all() == [] and s.exec(select(MatchRun)).all() == []


def test_match_names_the_study_and_writes_no_library_bars(db_url: str, engine: Engine) -> None:
    assert _cli("vsr", "db", "upgrade", db_url=db_url).returncode == 0
    write_kept_captions(engine, 16, seed=1)
    r = _cli("vsr", "match", "--k", "3", "--no-send-negatives-to-validation", db_url=db_url)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr  # no "Loading weights" bar: stderr is not a terminal
    assert r.stdout.rstrip().endswith("multiple-choice items written (study vsr)"), r.stdout
    # The run is in the audit trail, with its parameters, by the machine's operator.
    (record,) = [e for e in audit.stream(engine) if e["kind"] == "match_run"]
    assert record["actor"].startswith("cli:") and record["via"] == "cli"
    assert record["study_id"] == DEFAULT_STUDY_ID
    run = re.search(r"match run (\d+):", r.stdout)
    assert run is not None and record["target"] == f"match run {run[1]}"
    assert record["change"]["params"]["k"] == 3 and record["change"]["items"] > 0
    assert record["change"]["send_negatives"] is False


def test_revalidate_report_without_a_round_fails_plainly(db_url: str) -> None:
    assert _cli("vsr", "db", "upgrade", db_url=db_url).returncode == 0
    line = _one_line(_cli("vsr", "revalidate", "--report", db_url=db_url), 1)
    assert line == "error: no re-validation round yet: open one with `vsr revalidate --sample N`"


def test_invite_names_its_study(db_url: str) -> None:
    assert _cli("vsr", "db", "upgrade", db_url=db_url).returncode == 0
    r = _cli("vsr", "invite", "create", "--label", "lab", "--roles", "validate", db_url=db_url)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "study vsr: invite for 'lab' (validate)\n"
    assert r.stdout.startswith("validate: http") and r.stdout.count("\n") == 1
