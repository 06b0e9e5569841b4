"""Test data for the annotation-site tests: real COCO 2017 records turned into ImagePairs.

The sampler in collection/ is written separately; this small helper only needs a handful of
real pairs, so it uses a relaxed version of the VSR rule (each concept exactly once, not a
crowd, area >= 5,000 px instead of 30,000) to get enough pairs out of the 188-image subset.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter, defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlmodel import Session

from vsr_core.models import Image, ImagePair, Instance

MIN_AREA = 5_000


@lru_cache(maxsize=2)
def _load(path: str) -> dict[str, Any]:
    return json.loads(Path(path).read_text())  # type: ignore[no-any-return]


def candidate_pairs(coco_dir: Path, split: str = "val2017") -> list[tuple[str, str, Any, Any]]:
    """(concept_a, concept_b, (img, ann_a, ann_b), (img, ann_a, ann_b)) from real records."""
    data = _load(str(coco_dir / "annotations" / f"instances_{split}_subset.json"))
    cats = {c["id"]: c["name"] for c in data["categories"]}
    images = {i["id"]: i for i in data["images"]}
    by_image: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for ann in data["annotations"]:
        by_image[ann["image_id"]].append(ann)
    groups: dict[tuple[str, str], list[tuple[Any, Any, Any]]] = defaultdict(list)
    for image_id in sorted(by_image):
        anns = by_image[image_id]
        counts = Counter(cats[a["category_id"]] for a in anns)
        single = {
            cats[a["category_id"]]: a
            for a in anns
            if counts[cats[a["category_id"]]] == 1 and not a["iscrowd"] and a["area"] >= MIN_AREA
        }
        for ca, cb in itertools.combinations(sorted(single), 2):
            groups[(ca, cb)].append((images[image_id], single[ca], single[cb]))
    out = []
    for (ca, cb), members in sorted(groups.items()):
        for first, second in itertools.combinations(members, 2):
            out.append((ca, cb, first, second))
    return out


def _image(session: Session, rec: dict[str, Any], split: str) -> Image:
    from sqlmodel import select

    found = session.exec(select(Image).where(Image.coco_id == rec["id"])).first()
    if found is not None:
        return found
    image = Image(
        coco_id=rec["id"],
        file_name=rec["file_name"],
        coco_split=split,
        width=rec["width"],
        height=rec["height"],
        coco_url=rec.get("coco_url"),
        flickr_url=rec.get("flickr_url"),
        license_id=rec.get("license"),
    )
    session.add(image)
    session.flush()
    return image


def _instance(session: Session, ann: dict[str, Any], image: Image, name: str) -> Instance:
    from sqlmodel import select

    found = session.exec(select(Instance).where(Instance.coco_ann_id == ann["id"])).first()
    if found is not None:
        return found
    inst = Instance(
        coco_ann_id=ann["id"],
        image_id=_id(image),
        category_id=ann["category_id"],
        category=name,
        bbox=ann["bbox"],
        area=ann["area"],
        iscrowd=bool(ann["iscrowd"]),
        segmentation=ann["segmentation"],
    )
    session.add(inst)
    session.flush()
    return inst


def _id(row: Image | Instance) -> int:
    assert row.id is not None
    return row.id


def make_pairs(session: Session, coco_dir: Path, n: int | None = None) -> list[int]:
    """Insert up to ``n`` real pairs (with their images and instances); returns pair ids."""
    ids = []
    for ca, cb, first, second in candidate_pairs(coco_dir)[:n]:
        parts = []
        for img_rec, ann_a, ann_b in (first, second):
            image = _image(session, img_rec, "val2017")
            inst_a = _instance(session, ann_a, image, ca)
            inst_b = _instance(session, ann_b, image, cb)
            parts.append((_id(image), _id(inst_a), _id(inst_b)))
        (i1, a1, b1), (i2, a2, b2) = parts
        pair = ImagePair(
            concept_a=ca,
            concept_b=cb,
            image1_id=i1,
            image1_a_id=a1,
            image1_b_id=b1,
            image2_id=i2,
            image2_a_id=a2,
            image2_b_id=b2,
            sample_run="test",
        )
        session.add(pair)
        session.flush()
        assert pair.id is not None
        ids.append(pair.id)
    session.commit()
    return ids


# --- driving the site in tests -------------------------------------------------------------

CSRF_RE = re.compile(r'name="csrf" value="([^"]+)"')
FIELD_RE = r'name="{name}" value="([^"]*)"'


def make_app(db_url: str, tmp_path: Path, image_root: Path | None = None, **extra: Any) -> Any:
    from vsr_core.db import make_engine
    from vsr_core.settings import Settings
    from webapp.app import create_app

    settings = Settings(
        database_url=db_url,
        secret_key="test-secret-" + "x" * 32,
        image_root=image_root,
        image_cache_dir=tmp_path / "image_cache",
        **extra,
    )
    return create_app(settings, make_engine(db_url))


def client_for(app: Any) -> Any:
    from fastapi.testclient import TestClient

    return TestClient(app, raise_server_exceptions=False)


def form_field(html: str, name: str) -> str:
    m = re.search(FIELD_RE.format(name=re.escape(name)), html)
    assert m, f"no field {name!r} in page"
    return m.group(1)


def enter(client: Any, query: str, kind: str = "generate") -> str:
    """Follow a study link through consent; returns the CSRF token of the session."""
    r = client.get(f"/start/{kind}?{query}", follow_redirects=False)
    assert r.status_code == 303, r.text
    page = client.get(f"/consent/{kind}")
    assert page.status_code == 200, page.text
    csrf = form_field(page.text, "csrf")
    r = client.post(
        f"/consent/{kind}", data={"decision": "agree", "csrf": csrf}, follow_redirects=False
    )
    assert r.headers["location"] == f"/instructions/{kind}"
    # What the site's own scripts send with every JSON API call (webapp.http.api_guard).
    client.headers["X-CSRF-Token"] = csrf
    return csrf


def begin(client: Any, csrf: str, kind: str = "generate") -> Any:
    return client.post(f"/begin/{kind}", data={"csrf": csrf}, follow_redirects=False)


def start_prolific(client: Any, pid: str, session_id: str = "sess1") -> str:
    csrf = enter(client, f"PROLIFIC_PID={pid}&STUDY_ID=study1&SESSION_ID={session_id}")
    r = begin(client, csrf)
    assert r.status_code == 303 and r.headers["location"] == "/generate", r.text
    return csrf


def lease_id_of(token: str) -> int:
    """The database id in a lease token ("<id>.<signature>", webapp.crowd.lease_tokens), for
    checking rows; the site itself only ever takes the whole token back."""
    return int(token.split(".", 1)[0])


def task(client: Any) -> dict[str, str]:
    """Open the task page and return its hidden fields (assignment_id, client_token, csrf)."""
    page = client.get("/generate", follow_redirects=False)
    assert page.status_code == 200, (page.status_code, page.headers.get("location"))
    return {k: form_field(page.text, k) for k in ("assignment_id", "client_token", "csrf")}


def answer(fields: dict[str, str], **overrides: str) -> dict[str, str]:
    data = dict(fields, action="submit", relation="on top of", ent1="a", true_image="1")
    data.update(overrides)
    return data


def set_study(db_url: str, **changes: Any) -> None:
    from vsr_core.db import make_engine
    from vsr_core.studies.settings import save_study_config

    engine = make_engine(db_url)
    with Session(engine) as session:
        save_study_config(session, changes)
    engine.dispose()
