"""The study file's [qualification] through `vsr study check` and `vsr study update` (the
real console script): a good section passes, each mistake is one line naming its field and
line, and a stored study with collected captions takes a check added by an update."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.support.qualification import QUALIFICATION, study_text
from tests.vsr_cli.test_study import vsr
from vsr_core.models import Study, StudyVersion
from vsr_core.studies.definition import parse_study


def test_a_good_qualification_passes_check(tmp_path: Path) -> None:
    good = tmp_path / "lab.toml"
    good.write_text(study_text(QUALIFICATION))
    r = vsr("study", "check", "--file", str(good))
    assert r.returncode == 0 and r.stdout.startswith("ok: lab: "), r.stderr
    task = parse_study(good.read_text()).qualification.for_kind("generate")
    assert task is not None and task.attempts == 2  # Prolific's two tries, by default
    assert (task.needed(3), task.needed(2)) == (3, 2)  # pass_count, capped at what is shown
    validate = parse_study(good.read_text()).qualification.for_kind("validate")
    assert validate is not None and validate.needed(2) == 2


def _check(tmp_path: Path, section: str) -> tuple[list[str], str]:
    path = tmp_path / "bad.toml"
    text = study_text(section)
    path.write_text(text)
    r = vsr("study", "check", "--file", str(path))
    assert r.returncode == 1 and r.stdout == "" and "Traceback" not in r.stderr
    return r.stderr.splitlines(), text


def test_each_mistake_is_one_line_with_field_and_line(tmp_path: Path) -> None:
    lines, text = _check(
        tmp_path,
        """
[qualification.generate]
items = ["examples", "photos"]
count = 0
attempts = 9
colour = "red"

[qualification.annotate]
items = ["gold"]
""",
    )
    at = {line: n for n, line in enumerate(text.splitlines(), 1)}
    items, count = at['items = ["examples", "photos"]'], at["count = 0"]
    tries, colour = at["attempts = 9"], at['colour = "red"']
    annotate = at["[qualification.annotate]"]
    name = str(tmp_path / "bad.toml")
    assert lines == [
        f"error: {name}:{items}: qualification.generate.items[1]: "
        "Input should be 'examples' or 'gold'",
        f"error: {name}:{count}: qualification.generate.count: "
        "Input should be greater than or equal to 1",
        f"error: {name}:{tries}: qualification.generate.attempts: "
        "Input should be less than or equal to 5",
        f"error: {name}:{colour}: qualification.generate.colour: unknown key",
        f"error: {name}:{annotate}: qualification.annotate: unknown key",
    ]


def test_threshold_and_count_are_checked_against_each_other(tmp_path: Path) -> None:
    lines, _ = _check(
        tmp_path,
        """
[qualification.validate]
items = ["examples"]
count = 4
pass_count = 5
""",
    )
    assert [line.split(": ", 3)[2:] for line in lines] == [
        ["qualification.validate.pass_count", "is more than count (4)"],
        [
            "qualification.validate.count",
            "is more than the 3 worked examples of the first language",
        ],
    ]
    for section, words in (
        ('items = ["gold"]\ncount = 5\n', "give one of pass_fraction or pass_count"),
        ('items = ["gold"]\ncount = 5\npass_count = 2\npass_fraction = 0.5\n', "give one of"),
        ('items = ["gold", "gold"]\ncount = 5\npass_count = 2\n', "names an item source twice"),
        ("items = []\ncount = 5\npass_count = 2\n", "at least 1 item"),
        ('items = ["gold"]\ncount = 5\npass_fraction = 1.5\n', "less than or equal to 1"),
    ):
        lines, _ = _check(tmp_path, "[qualification.generate]\n" + section)
        assert len(lines) == 1 and words in lines[0], lines


def test_an_update_may_add_a_check_to_a_study_with_data(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    """A check is no part of how stored captions read (docs/studies.md, "Changing a stored
    study"): adding one to a sampled study is a new version; removing it, another."""
    plain, checked = tmp_path / "plain.toml", tmp_path / "checked.toml"
    plain.write_text(study_text(""))
    checked.write_text(study_text(QUALIFICATION))
    assert vsr("study", "create", "--file", str(plain), "--database-url", db_url).returncode == 0
    r = vsr("sample", "--study", "lab", "--pairs", "2", "--database-url", db_url)
    assert r.returncode == 0, r.stderr
    r = vsr("study", "update", "--file", str(checked), "--database-url", db_url)
    assert r.returncode == 0, r.stderr
    r = vsr("study", "update", "--file", str(plain), "--database-url", db_url)
    assert r.returncode == 0, r.stderr
    with Session(engine) as s:
        study = s.exec(select(Study).where(Study.slug == "lab")).one()
        versions = s.exec(select(StudyVersion).where(StudyVersion.study_id == study.id)).all()
        assert len(versions) == 3
        assert parse_study(versions[1].definition).qualification.for_kind("generate")
        assert parse_study(study.definition).qualification.for_kind("generate") is None
