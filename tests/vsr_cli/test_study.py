"""`vsr study check|show` and `vsr sample --study-file`, through the real console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from vsr_core.models import Image, ImagePair, Instance, Study

ROOT = Path(__file__).resolve().parents[2]
VSR = ROOT / "studies" / "vsr.toml"
BIN = Path(sys.executable).parent / "vsr"


def vsr(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """The console script, run in the repository's folder (as the README's commands are)."""
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_check_and_show_the_shipped_studies(tmp_path: Path) -> None:
    for name, slug in (("vsr.toml", "vsr"), ("vsr-zh.toml", "vsr-zh")):
        r = vsr("study", "check", "--file", str(ROOT / "studies" / name))
        assert r.returncode == 0 and r.stdout.startswith(f"ok: {slug}: "), r.stderr
    r = vsr("study", "show", "--file", str(ROOT / "studies" / "vsr-zh.toml"))
    assert r.returncode == 0
    assert "71 relations (65 on)" in r.stdout and "    on = 在…上 [拓扑]" in r.stdout
    assert "(matching uses VSR's built-in table)" in r.stdout  # its rules are VSR's
    lab = tmp_path / "lab.toml"  # one converse fewer: the study's own table
    lab.write_text(VSR.read_text().replace('  ["surrounding", "enclosed by"],\n', ""))
    r = vsr("study", "show", "--file", str(lab))
    assert r.returncode == 0 and "(matching uses the study's own table)" in r.stdout, r.stderr


def test_check_reports_missing_source_files_one_line_each(tmp_path: Path) -> None:
    zh = ROOT / "studies" / "vsr-zh.toml"
    r = vsr("study", "check", "--file", str(zh), cwd=tmp_path)  # not where demo/ is
    assert r.returncode == 1 and r.stdout == "", r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    line = 1 + zh.read_text().splitlines().index(
        'annotations = "demo/coco/annotations/instances_demo.json"'
    )
    assert lines[0].startswith(
        f"error: {zh}:{line}: sources[0].annotations: no file "
        "demo/coco/annotations/instances_demo.json (looked in "
    )
    assert "run vsr in the repository's folder" in lines[0]
    lab = tmp_path / "lab.toml"
    lab.write_text(
        VSR.read_text().replace(
            "demo/coco/annotations/instances_demo.json", "coco/annotations/instances_train2017.json"
        )
    )
    r = vsr("study", "check", "--file", str(lab))
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    assert "put the COCO 2017 instance annotations (annotations_trainval2017.zip" in r.stderr


def test_the_readme_chinese_study_path_runs_as_written(db_url: str, engine: Engine) -> None:
    """README: `vsr study create --file studies/vsr-zh.toml`, then
    `vsr sample --study vsr-zh --pairs 1000 --seed 1`, in the repository's folder."""
    r = vsr("study", "create", "--file", "studies/vsr-zh.toml", "--database-url", db_url)
    assert r.returncode == 0, r.stderr
    r = vsr(
        "sample", "--study", "vsr-zh", "--pairs", "1000", "--seed", "1", "--database-url", db_url
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip().endswith("(study vsr-zh)"), r.stdout
    with Session(engine) as s:
        zh = s.exec(select(Study).where(Study.slug == "vsr-zh")).one()
        pairs = s.exec(select(ImagePair).where(ImagePair.study_id == zh.id)).all()
    assert len(pairs) >= 30  # the demo slice's pairs at the shipped minimum area


def test_check_names_field_and_line_one_line_each(tmp_path: Path) -> None:
    text = VSR.read_text().replace('slug = "vsr"', 'slug = "VSR!"')
    text = text.replace("gold_rate = 0.05", "gold_rate = 0.05\ngold_rat = 1")
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    r = vsr("study", "check", "--file", str(bad))
    lines = r.stderr.splitlines()
    assert r.returncode == 1 and r.stdout == ""
    assert lines[0].startswith(f"error: {bad}:3: slug: ")
    gold = 1 + text.splitlines().index("gold_rat = 1")
    assert lines[1] == f"error: {bad}:{gold}: collection.gold_rat: unknown key"
    assert len(lines) == 2 and "Traceback" not in r.stderr
    r = vsr("study", "check", "--file", str(tmp_path / "missing.toml"))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "cannot read" in r.stderr


def test_a_deeply_nested_file_is_one_line_naming_it(tmp_path: Path) -> None:
    """Nested arrays or inline tables deep enough to exhaust Python's recursion were a
    "maximum recursion depth exceeded" traceback; now one line naming the file, exit 1."""
    for body in (
        "x = " + "[" * 50_000 + "]" * 50_000,
        "x = " + "{a = " * 5000 + "1" + "}" * 5000,
        VSR.read_text() + "\n[extra]\nx = " + "[" * 3000 + "]" * 3000 + "\n",
    ):
        deep = tmp_path / "deep.toml"
        deep.write_text(body)
        r = vsr("study", "check", "--file", str(deep))
        assert r.returncode == 1 and "Traceback" not in r.stderr and "recursion" not in r.stderr
        assert r.stderr.splitlines() == [
            f"error: {deep}: arrays or inline tables are nested too deeply (a study file needs "
            "a few levels)"
        ], r.stderr


def test_image_root_and_image_url_are_refused_by_line(tmp_path: Path) -> None:
    """Both keys were validated and never used: a file that still has them is told so."""
    old = VSR.read_text().replace(
        'format = "coco"\n',
        'format = "coco"\nimage_url = "http://x/{file_name}"\nimage_root = "/data"\n',
        1,
    )
    path = tmp_path / "old.toml"
    path.write_text(old)
    r = vsr("study", "check", "--file", str(path))
    lines = old.splitlines()
    url, root = (
        1 + lines.index('image_url = "http://x/{file_name}"'),
        1 + lines.index('image_root = "/data"'),
    )
    assert r.returncode == 1 and sorted(r.stderr.splitlines()) == [
        f"error: {path}:{url}: sources[0].image_url: no longer read (the site finds images in "
        "the server's IMAGE_ROOT folder, else at each image's coco_url in the annotations "
        "file): remove this line",
        f"error: {path}:{root}: sources[0].image_root: no longer read (the site finds images in "
        "the server's IMAGE_ROOT folder, else at each image's coco_url in the annotations "
        "file): remove this line",
    ], r.stderr


def test_sample_with_a_study_file(
    engine: Engine, db_url: str, coco_dir: Path, tmp_path: Path
) -> None:
    val = coco_dir / "annotations" / "instances_val2017_subset.json"
    text = VSR.read_text().replace('slug = "vsr"', 'slug = "lab"')
    head, _, rest = text.partition("[concepts]")
    head = head.split("[[sources]]")[0] + (f'[[sources]]\nannotations = "{val}"\n\n')
    rest = rest.replace("deny = []", 'deny = ["dining table"]')
    rest = rest.replace("supercategories = []", 'supercategories = ["animal", "furniture"]')
    rest = rest.replace("min_area_px = 10000", "min_area_px = 2000")
    rest = rest.replace("min_area_share = 0.0", "min_area_share = 0.02")
    study = tmp_path / "lab.toml"
    study.write_text(head + "[concepts]" + rest)
    r = vsr("sample", "--study-file", str(study), "--pairs", "30", "--database-url", db_url)
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    assert first.startswith("created study lab (sha256 ") and first.endswith(f"from {study}")
    assert second.endswith("(study lab)")
    cats = {c["name"]: c["supercategory"] for c in json.loads(val.read_text())["categories"]}
    with Session(engine) as s:
        lab = s.exec(select(Study).where(Study.slug == "lab")).one()
        pairs = s.exec(select(ImagePair)).all()
        assert pairs and {p.study_id for p in pairs} == {lab.id}  # not the default study
        for p in pairs:
            assert {cats[p.concept_a], cats[p.concept_b]} <= {"animal", "furniture"}
            assert "dining table" not in (p.concept_a, p.concept_b)
        for inst in s.exec(select(Instance)):
            img = s.get(Image, inst.image_id)
            assert img is not None
            assert inst.area >= max(2000, 0.02 * img.width * img.height)
    # Again: the stored study of the same definition, nothing created.
    r = vsr("sample", "--study-file", str(study), "--pairs", "2", "--database-url", db_url)
    assert r.returncode == 0 and r.stdout.count("\n") == 1, r.stdout
    assert r.stdout.rstrip().endswith("(study lab)")
    # Another definition under a stored slug: refused in one line, nothing sampled.
    with Session(engine) as s:
        before = len(s.exec(select(ImagePair)).all())
    study.write_text(study.read_text().replace("min_area_px = 2000", "min_area_px = 3000"))
    r = vsr("sample", "--study-file", str(study), "--pairs", "2", "--database-url", db_url)
    assert r.returncode == 1 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("error: the stored study 'lab' has another definition")
    with Session(engine) as s:
        assert len(s.exec(select(ImagePair)).all()) == before
    r = vsr("sample", "--study-file", str(study), "--coco", str(val), "--database-url", db_url)
    assert r.returncode == 2 and "drop --coco" in r.stderr
    r = vsr("sample", "--database-url", db_url)
    assert r.returncode == 2 and "--study-file" in r.stderr
