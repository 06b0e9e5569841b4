"""The workers page and the data browser as an admin reads them (docs/dashboard.md):
workers named by their invite label, captions counted as captions (two Examples each),
implausibly fast work flagged by the study's threshold, Block asks first, thumbnails that
tell a caption's two Examples apart, a link to an Example's other half, readable times."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.support.admin_captions import DEMO_IMAGES, write_captions
from tests.support.admins import create_owner
from tests.webapp.admin.test_admin import PASSWORD, login, make_admin_app
from vsr_core.studies.settings import save_study_config


def _client(db_url: str, engine: Engine, tmp_path: Path) -> TestClient:
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
    client = TestClient(make_admin_app(db_url, engine, tmp_path, image_root=DEMO_IMAGES))
    login(client)
    return client


def _row(html: str, worker_id: int) -> str:
    m = re.search(rf'<tr class="[^"]*" data-worker="{worker_id}">(.*?)</tr>', html, re.S)
    assert m, f"no row for worker {worker_id}"
    return m.group(1)


def test_workers_named_counted_and_fast_work_flagged(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    client = _client(db_url, engine, tmp_path)
    made = write_captions(engine, 6, vote_ms=0)  # a script answering in 0.0 s per vote
    page = client.get("/admin/workers").text
    writer, validator = _row(page, made.writer_id), _row(page, made.validator_id)
    assert "Ada (lab)" in writer and "Grace (lab)" in validator
    # 6 captions (12 Examples), not 12 "Examples written"
    cells = re.findall(r'<td class="n"[^>]*>([^<]*)</td>', writer)
    assert cells[0] == "6" and 'title="12 Examples"' in writer
    assert "too fast" in validator and "too fast" not in writer
    data = client.get("/admin/api/workers.json").json()["workers"]
    by_id = {w["id"]: w for w in data}
    assert by_id[made.validator_id]["too_fast"].startswith("median 0.0 s per vote")
    assert by_id[made.writer_id]["name"] == "Ada (lab)"
    # the threshold is the study's: at 0 the flag is off
    with Session(engine) as s:
        save_study_config(s, {"fast_vote_seconds": 0.0})
    client.app.state.admin_cache.clear()  # type: ignore[attr-defined]
    assert "too fast" not in _row(client.get("/admin/workers").text, made.validator_id)
    # Block asks for confirmation first (admin.js reads data-confirm)
    assert re.search(
        rf'action="/admin/workers/{made.validator_id}/block" data-confirm="Block Grace \(lab\)\?',
        page,
    )
    worker_page = client.get(f"/admin/workers/{made.writer_id}").text
    assert "<h1>Ada (lab)" in worker_page and "12 Examples" in worker_page


def test_data_browser_thumbnails_other_half_and_times(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    client = _client(db_url, engine, tmp_path)
    made = write_captions(engine, 2, vote_ms=2500)
    first, second = made.example_ids[0], made.example_ids[1]
    page = client.get("/admin/data").text
    for ex_id in made.example_ids:
        assert f'src="/admin/examples/{ex_id}/thumb"' in page
    a, b = (
        client.get(f"/admin/examples/{first}/thumb"),
        client.get(f"/admin/examples/{second}/thumb"),
    )
    assert a.status_code == b.status_code == 200 and a.headers["content-type"] == "image/jpeg"
    assert a.content != b.content  # the two rows of one caption now look different
    from io import BytesIO

    from PIL import Image

    assert max(Image.open(BytesIO(a.content)).size) <= 160
    ex_page = client.get(f"/admin/examples/{first}").text
    assert f'class="other-half" href="/admin/examples/{second}"' in ex_page
    assert f'href="/admin/examples/{first}"' in client.get(f"/admin/examples/{second}").text
    # timestamps: a <time> with a readable UTC text (the browser shows local time), no raw ISO
    assert re.search(
        r'<time class="local" datetime="[\d\-T:+]+">\d{1,2} \w{3} \d{4}, \d\d:\d\d UTC</time>',
        ex_page,
    )
    assert not re.search(r">\d{4}-\d\d-\d\d[T ]\d\d:\d\d", ex_page)
    overview = client.get("/admin").text
    assert not re.search(r">\d{4}-\d\d-\d\dT\d\d:\d\d", overview)
