"""`vsr study create|list|show SLUG` and `--study` on `vsr sample`, through the real console
script on both backends: the Chinese study beside the default one, sampled from real COCO."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.vsr_cli.test_study import ROOT, vsr
from vsr_core.models import ImagePair, Study

ZH = ROOT / "studies" / "vsr-zh.toml"


def zh_on_the_subset(coco_dir: Path, tmp_path: Path) -> Path:
    """studies/vsr-zh.toml with the real COCO val subset as its only source (the shipped
    file names the full COCO files) and a smaller minimum area, so the subset has pairs."""
    text = ZH.read_text(encoding="utf-8")
    head, _, rest = text.partition("[concepts]")
    val = coco_dir / "annotations" / "instances_val2017_subset.json"
    head = head.split("[[sources]]")[0] + (f'[[sources]]\nannotations = "{val}"\n\n')
    rest = rest.replace("min_area_px = 10000", "min_area_px = 5000")
    path = tmp_path / "vsr-zh.toml"
    path.write_text(head + "[concepts]" + rest, encoding="utf-8")
    return path


def test_create_list_show_and_sample_a_second_study(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    study_file = zh_on_the_subset(coco_dir, tmp_path)
    r = vsr("study", "create", "--file", str(study_file), "--database-url", db_url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("created study vsr-zh (sha256 ")
    assert "/s/vsr-zh/start/validate" in r.stdout

    again = vsr("study", "create", "--file", str(study_file), "--database-url", db_url)
    assert again.returncode == 1 and again.stdout == ""
    assert again.stderr == (
        "error: a study with slug 'vsr-zh' exists already; nothing was stored\n"
    )

    listed = vsr("study", "list", "--database-url", db_url)
    assert listed.returncode == 0, listed.stderr
    rows = listed.stdout.splitlines()
    assert rows[0].startswith("* vsr ") and rows[1].startswith("  vsr-zh ")
    assert "zh-Hans" in rows[1]

    shown = vsr("study", "show", "vsr-zh", "--database-url", db_url)
    assert shown.returncode == 0, shown.stderr
    with Session(engine) as s:
        stored = s.exec(select(Study).where(Study.slug == "vsr-zh")).one()
        assert stored.definition == study_file.read_text(encoding="utf-8")
        assert stored.language == "zh-Hans" and not stored.is_default
    assert f"definition sha256 {stored.definition_hash}" in shown.stdout
    assert "    on = 在…上 [拓扑]" in shown.stdout

    sampled = vsr("sample", "--study", "vsr-zh", "--pairs", "5", "--database-url", db_url)
    assert sampled.returncode == 0, sampled.stderr
    assert "(study vsr-zh)" in sampled.stdout
    with Session(engine) as s:
        pairs = s.exec(select(ImagePair)).all()
        assert len(pairs) == 5 and {p.study_id for p in pairs} == {stored.id}

    invite = vsr(
        "invite", "create", "--study", "vsr-zh", "--roles", "validate", "--database-url", db_url
    )
    assert invite.returncode == 0, invite.stderr
    assert invite.stdout.startswith("validate: http")
    assert "/s/vsr-zh/start/validate?token=" in invite.stdout

    # The same pairs may be drawn for the default study: its own rows, the zh ones untouched.
    val = coco_dir / "annotations" / "instances_val2017_subset.json"
    default = vsr(
        "sample", "--coco", str(val), "--min-area", "5000", "--pairs", "5", "--database-url", db_url
    )
    assert default.returncode == 0, default.stderr
    with Session(engine) as s:
        by_study = {p.study_id for p in s.exec(select(ImagePair))}
        assert by_study == {1, stored.id}
        assert len(s.exec(select(ImagePair).where(ImagePair.study_id == stored.id)).all()) == 5


def test_unknown_study_is_one_line_and_exit_2(db_url: str) -> None:
    for args in (("sample", "--study", "nope", "--pairs", "1"), ("study", "show", "nope")):
        r = vsr(*args, "--database-url", db_url)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr == "error: no study 'nope' (studies: vsr)\n", r.stderr
