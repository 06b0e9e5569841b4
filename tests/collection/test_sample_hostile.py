"""`vsr sample` with hostile COCO records (docs/sampling.md): each is refused with one
line naming the record, exit 1, nothing stored, on SQLite and PostgreSQL; and the site never
opens a file outside the image root, nor answers 500, for rows stored before these checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.collection.test_sampler_edge import Coco, _vsr
from vsr_core.models import Image, ImagePair, Instance
from webapp.images import render as images


def _file(
    tmp_path: Path,
    image: dict[str, Any] | None = None,
    ann: dict[str, Any] | None = None,
    category: dict[str, Any] | None = None,
) -> Path:
    """Two images each with one cat and one dog (one valid pair), one record made hostile."""
    c = Coco()
    for iid in (1, 2):
        c.image(iid)
        c.ann(iid, 17, 40_000)
        c.ann(
            iid,
            18,
            40_000,
            bbox=[300, 200, 200, 200],
            segmentation=[[300, 200, 500, 200, 500, 400, 300, 400]],
        )
    c.images[0].update(image or {})
    c.anns[0].update(ann or {})
    path = c.write(tmp_path / "instances_val2017.json")
    if category:
        data = json.loads(path.read_text())
        data["categories"][0].update(category)
        path.write_text(json.dumps(data))
    return path


CASES = [
    (
        {"ann": {"segmentation": {"counts": 5, "size": [480, 640]}}},
        "annotation 1000 has a segmentation that is an RLE without valid counts",
    ),
    (
        {"ann": {"segmentation": "polygon"}},
        "annotation 1000 has a segmentation that is neither polygons nor an RLE",
    ),
    (
        {"ann": {"segmentation": [[1, 2, 3]]}},
        "annotation 1000 has a segmentation that is not a list of polygons",
    ),
    (
        {"ann": {"segmentation": [[1, 2, 3, 4, 5, float("nan")]]}},
        "annotation 1000 has a segmentation that is not a list of polygons",
    ),
    (
        {"ann": {"segmentation": {"counts": "!!", "size": [480, 640]}}},
        "annotation 1000 has a segmentation that is an RLE without valid counts",
    ),
    # pycocotools segfaults on a polygon near 4.2e8 px: the server process with it.
    (
        {"ann": {"segmentation": [[0, 0, 4.3e8, 0, 4.3e8, 4.3e8]]}},
        "annotation 1000 has a segmentation that is outside its 640x480 image",
    ),
    (
        {"ann": {"segmentation": [[10, 10, 100, 10, 100, -20]]}},
        "annotation 1000 has a segmentation that is outside its 640x480 image",
    ),
    (
        {"ann": {"bbox": [600, 10, 100, 50]}},
        "annotation 1000 has bbox [600, 10, 100, 50], outside its 640x480 image",
    ),
    ({"image": {"width": 4 * 10**8}}, "image 1 is 400000000x480 px; each side must be 1 to"),
    ({"ann": {"bbox": [1, 2]}}, "annotation 1000 has bbox [1, 2]; expected 4 numbers"),
    ({"ann": {"bbox": [1, 2, 0, 5]}}, "annotation 1000 has a bbox without a positive width"),
    ({"ann": {"area": float("inf")}}, "annotation 1000 has area inf"),
    ({"ann": {"area": 1e300}}, "annotation 1000 has area 1e+300, more than its 640x480 image"),
    ({"image": {"file_name": "/etc/hostname"}}, "image 1 has file_name '/etc/hostname'"),
    ({"image": {"file_name": "../../etc/hostname"}}, "image 1 has file_name '../../etc/hostname'"),
    ({"image": {"file_name": "a\x00.jpg"}}, "image 1 has file_name 'a\\x00.jpg'"),
    ({"image": {"file_name": "x" * 65 + ".jpg"}}, "image 1 has a file_name of 69 characters"),
    (
        {"image": {"coco_url": "javascript:alert(document.cookie)"}},
        "image 1 has coco_url 'javascript:alert(document.cookie)': only http:// and https://",
    ),
    ({"image": {"coco_url": "JaVaScRiPt://x/%0aalert(1)"}}, "image 1 has coco_url 'JaVaScRiPt:"),
    (
        {"image": {"flickr_url": "data:text/html,<script>alert(1)</script>"}},
        "image 1 has flickr_url 'data:text/html,",
    ),
    ({"image": {"coco_url": "http://x/a b.jpg"}}, "only http:// and https:// addresses"),
    ({"image": {"coco_url": 5}}, "image 1 has coco_url '5', not a text"),
    ({"category": {"name": "c" * 65}}, "category 17: name is 65 characters long; at most 64 fit"),
    ({"category": {"name": "c\x00t"}}, "category 17: name contains a NUL character"),
    ({"ann": {"id": 2**31}}, "annotation id 2147483648 is outside 1 to 2147483647"),
    ({"image": {"coco_url": "http://x/" + "u" * 300}}, "image 1: coco_url is 309 characters"),
]


def test_the_valid_file_samples(sqlite_url: str, tmp_path: Path) -> None:
    ok = _vsr("sample", "--coco", str(_file(tmp_path)), "--min-area", "1000", db=sqlite_url)
    assert ok.returncode == 0 and "stored 1 new image pairs" in ok.stdout, ok.stderr


@pytest.mark.parametrize("change, message", CASES, ids=[m[:40] for _, m in CASES])
def test_hostile_records_are_refused_in_one_line(
    db_url: str, engine: Engine, tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    path = _file(tmp_path, **change)
    out = _vsr("sample", "--coco", str(path), "--min-area", "1000", db=db_url)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert message in lines[0], lines[0]
    assert "SQL" not in lines[0] and "Traceback" not in out.stderr
    with Session(engine) as s:
        for model in (Image, Instance, ImagePair):
            assert s.exec(select(func.count()).select_from(model)).one() == 0


def test_images_outside_the_root_are_never_opened(tmp_path: Path) -> None:
    root = tmp_path / "images"
    (root / "val2017").mkdir(parents=True)
    (root / "val2017" / "ok.jpg").write_bytes(b"x")
    secret = tmp_path / "secret.txt"
    secret.write_text("not an image")
    for name in (
        str(secret),
        "../secret.txt",
        "../../" + str(secret),
        "val2017/../../secret.txt",
        "a\x00b",
    ):
        image = Image(coco_id=1, file_name=name, coco_split="val2017", width=1, height=1)
        assert images.find_source(root, image) is None, name
    image = Image(coco_id=1, file_name="ok.jpg", coco_split="val2017", width=1, height=1)
    assert images.find_source(root, image) == root / "val2017" / "ok.jpg"
    # the split itself may not point outside either
    image = Image(coco_id=1, file_name="secret.txt", coco_split="..", width=1, height=1)
    assert images.find_source(root, image) is None


def test_bad_geometry_already_stored_is_no_500(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    """A pair whose instance has an unusable segmentation (stored by an older version):
    the pair's image is a 404 and the task page still renders."""
    from tests.support.webapp_coco import client_for, make_app, make_pairs

    with Session(engine) as s:
        (pair_id,) = make_pairs(s, coco_dir, 1)
        pair = s.get(ImagePair, pair_id)
        assert pair is not None
        inst = s.get(Instance, pair.image1_a_id)
        assert inst is not None
        inst.segmentation = {"counts": 5}
        inst.bbox = [1, 2]
        s.add(inst)
        s.commit()
    app = make_app(db_url, tmp_path, image_root=coco_dir / "images")
    client = client_for(app)
    from tests.support.webapp_coco import start_prolific

    start_prolific(client, "geom")
    assert client.get("/generate").status_code == 200
    r = client.get(f"/images/pair/{pair_id}/1.jpg")
    assert r.status_code == 404, r.status_code


@pytest.mark.parametrize(
    "args, message",
    [
        (["--label", "L" * 201], "--label: label is 201 characters long; at most 200 fit"),
        (["--token", "abcd\n"], "--token must be 4-64 characters of A-Z a-z 0-9 _ -"),
    ],
)
def test_invite_limits_are_checked_before_writing(
    db_url: str, engine: Engine, args: list[str], message: str
) -> None:
    from vsr_core.models import InviteToken

    out = _vsr("invite", "create", *args, db=db_url)
    assert out.returncode != 0
    assert out.stderr.strip().splitlines() == [f"error: {message}"], out.stderr
    assert "SQL" not in out.stderr
    with Session(engine) as s:
        assert s.exec(select(InviteToken)).all() == []


def test_limits_name_the_field_in_plain_words() -> None:
    from vsr_core.limits import LimitError, check_row
    from vsr_core.tables import INVITE_TOKEN, WORKER

    with pytest.raises(LimitError, match=r"^--label: label contains a NUL character"):
        check_row(INVITE_TOKEN, {"label": "a\x00b"}, "--label")
    with pytest.raises(LimitError, match=r"worker x: external_id is 129 characters long"):
        check_row(WORKER, {"external_id": "e" * 129}, "worker x")
    check_row(WORKER, {"external_id": "e" * 128, "id": 2**31 - 1}, "worker x")
    with pytest.raises(LimitError, match=r"id = 2147483648 is outside the range"):
        check_row(WORKER, {"id": 2**31}, "worker x")


def test_import_vsr_checks_limits_before_writing(engine: Engine, tmp_path: Path) -> None:
    """A caption whose subject is 300 characters does not fit Example.caption (300): one
    line naming the file and line, nothing imported (was a DataError quoting the INSERT on
    PostgreSQL)."""
    from tests.support.vsr_record import GOOD
    from tests.vsr_dataset.test_import_vsr import _write, counts
    from vsr_dataset.import_vsr import import_vsr_file
    from vsr_dataset.vsr_format import VsrFormatError

    caption = "The " + "x" * 300 + " is on the dining table."
    path = _write(tmp_path / "big.jsonl", [GOOD, {**GOOD, "caption": caption}])
    with pytest.raises(
        VsrFormatError,
        match=r"big.jsonl:2: caption is 328 characters long; "
        r"at most 300 fit",
    ):
        import_vsr_file(engine, path)
    assert counts(engine) == {"Example": 0, "Vote": 0, "Worker": 0, "Image": 0}


def test_geometry_a_little_outside_the_image_is_accepted(tmp_path: Path) -> None:
    """Annotation tools round and overshoot by a pixel or so: within 2 px + 1 % of the side a
    point is accepted, beyond it refused (640 x 480: x up to 648.4, y up to 486.8)."""
    from collection.errors import CocoFileError
    from collection.validate import check_bbox, check_segmentation

    path = tmp_path / "instances.json"
    near = [[-1.5, -0.5, 648.0, 0.0, 648.0, 486.5]]
    assert check_segmentation(near, 7, 640, 480, path) == near
    assert check_bbox([-2.0, 0.0, 650.0, 486.0], 7, 640, 480, path) == [-2.0, 0.0, 650.0, 486.0]
    for far in ([[0, 0, 649, 0, 649, 10]], [[0, 0, 10, 0, 10, 487.5]], [[-8.5, 0, 10, 0, 10, 9]]):
        with pytest.raises(CocoFileError, match="annotation 7 has a segmentation that is outside"):
            check_segmentation(far, 7, 640, 480, path)
