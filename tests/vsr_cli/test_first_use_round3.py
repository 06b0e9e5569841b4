"""The CLI as a new user met it the third time: a build before any validation writes nothing
and says why in one line, bad `--only`/`--origin` values exit 2 like every other bad value,
an output folder that cannot be made is named as the user gave it, `vsr match` names the
study it found too little in, `vsr --version`, and `vsr study set` changes a setting (the
demo's writing batches per day). Real console scripts in subprocesses."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.support.kept_captions import write_kept_captions
from tests.vsr_cli.test_first_use_round2 import _cli, _one_line
from vsr_core.studies.settings import load_study_config


def test_a_build_with_nothing_validated_writes_nothing(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    write_kept_captions(engine, 6, seed=1, judged=False)
    out = tmp_path / "early"
    line = _one_line(_cli("build-dataset", "--out", str(out), db_url=db_url), 1)
    assert "no Example is validated yet (12 written, none kept)" in line, line
    assert not out.exists() and not list(tmp_path.glob(".early*"))
    # The captions alone can still be written.
    r = _cli("build-dataset", "--out", str(out), "--only", "raw", db_url=db_url)
    assert r.returncode == 0, r.stderr
    assert len((out / "all_raw.jsonl").read_text().splitlines()) == 12


def test_bad_parts_and_origins_exit_2_and_outputs_are_named_as_given(db_url: str) -> None:
    line = _one_line(_cli("build-dataset", "--out", "x", "--only", "bogus", db_url=db_url), 2)
    assert line.startswith("error: --only must be one of raw, validated") and "bogus" in line
    line = _one_line(_cli("build-dataset", "--out", "x", "--origin", "robot", db_url=db_url), 2)
    assert line == "error: --origin must be one of human, adversarial, imported (got robot)"


def test_an_output_folder_that_cannot_be_made_is_named_as_given(
    engine: Engine, db_url: str
) -> None:
    write_kept_captions(engine, 6, seed=2)
    line = _one_line(_cli("build-dataset", "--out", "/proc/nope", db_url=db_url), 1)
    assert line.startswith("error: cannot write /proc/nope: ") and "partial" not in line, line


def test_match_with_too_little_names_the_study(db_url: str) -> None:
    line = _one_line(_cli("vsr", "match", "--k", "3", db_url=db_url), 1)
    assert "need at least 4 to match" in line and line.endswith("(study vsr)"), line


def test_version_and_study_set(engine: Engine, db_url: str) -> None:
    r = _cli("vsr", "--version")
    assert r.returncode == 0 and r.stdout.startswith("vsr 0."), r
    r = _cli("vsr", "study", "set", "generate_batches_per_day=0", db_url=db_url)
    assert r.returncode == 0 and r.stdout.strip() == "study vsr: generate_batches_per_day=0"
    with Session(engine) as s:
        assert load_study_config(s).generate_batches_per_day == 0
    for bad in ("generate_batches_per_day=-1", "nope=1", "generate_batches_per_day"):
        _one_line(_cli("vsr", "study", "set", bad, db_url=db_url), 2)
    _one_line(_cli("vsr", "study", "set", "--study", "zz", "gold_rate=0", db_url=db_url), 2)
    with Session(engine) as s:
        assert load_study_config(s).generate_batches_per_day == 0
