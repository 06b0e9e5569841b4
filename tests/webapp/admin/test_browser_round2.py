"""The demo's pages in a real browser at 1440x900 and 390x844, after one person wrote a caption
and three validators split 2-1 on it (the demo's own data, scripts/demo_data.sh): the admin
top bar is one row at 1440 px, the Pipeline page's demo path stays in its card and its COCO
files are filled in, the Example page names people as the Workers page does and says when an
Example stays provisional for want of validators, the relation filter's placeholder is
whole, and the done page of an invite offers more work.

Screenshots go to the test's tmp dir; VSR_KEEP_SCREENSHOTS=/some/dir copies them out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlmodel import Session, col, select

from tests.support.browser import launch_chromium, require_chromium, running_site, watch_errors
from tests.support.webapp_coco import answer, enter, form_field, task
from vsr_core.db import make_engine
from vsr_core.models import Assignment, Example, InviteToken, LeaseStatus

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.browser


def _lease_label(db_url: str, token: str) -> bool:
    engine = make_engine(db_url)
    with Session(engine) as s:
        worker_id = s.exec(select(InviteToken.worker_id).where(InviteToken.token == token)).one()
        example_id = s.exec(
            select(Assignment.example_id).where(
                Assignment.worker_id == worker_id,
                Assignment.status == LeaseStatus.active,
                col(Assignment.example_id).is_not(None),
            )
        ).one()
        label = s.get(Example, example_id).label  # type: ignore[union-attr]
    engine.dispose()
    return bool(label)


def _split_two_to_one(base: str, db_url: str) -> None:
    """One caption; validators 1 and 2 agree with each label, validator 3 does not."""
    writer = httpx.Client(base_url=base, follow_redirects=True)
    csrf = enter(writer, "token=demo-annotator")
    writer.post("/begin/generate", data={"csrf": csrf})
    r = writer.post(
        "/generate",
        data=answer(task(writer), relation="near", duration_ms="9000"),
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    for n in (1, 2, 3):
        token = f"demo-validator-{n}"
        client = httpx.Client(base_url=base, follow_redirects=True)
        judged = 0
        for _ in range(3):  # one half of the caption per batch
            csrf = enter(client, f"token={token}", kind="validate")
            client.post("/begin/validate", data={"csrf": csrf})
            page = client.get("/validate", follow_redirects=False)
            if 'name="assignment_id"' not in page.text:
                # The other half never comes first after its sibling (back to back): with
                # nothing else on offer it waits one more (empty) batch.
                continue
            judged += 1
            agree = _lease_label(db_url, token) != (n == 3)
            fields = {k: form_field(page.text, k) for k in ("csrf", "assignment_id")}
            r = client.post(
                "/validate",
                data=fields | {"answer": str(agree).lower(), "duration_ms": "3000"},
                follow_redirects=False,
            )
            assert r.status_code == 303, r.text
        assert judged == 2, (token, judged)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, int]]:
    require_chromium()
    tmp = tmp_path_factory.mktemp("round2")
    db_url = f"sqlite:///{tmp / 'vsr_demo.db'}"
    env = {k: v for k, v in os.environ.items() if k != "VSR_DEBUG"}
    env.update(DATABASE_URL=db_url, PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    made = subprocess.run(
        ["bash", str(ROOT / "scripts/demo_data.sh")],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr
    site_env = {
        "SECRET_KEY": "round-two-" + "k" * 32,
        "HF_HUB_OFFLINE": "1",
        "IMAGE_CACHE_DIR": str(tmp / "cache"),
    }
    with running_site(db_url, ROOT / "demo/coco/images", tmp, site_env) as base:
        _split_two_to_one(base, db_url)
        engine = make_engine(db_url)
        with Session(engine) as s:
            first = s.exec(select(Example.id).order_by(col(Example.id))).first()
        engine.dispose()
        assert first is not None
        yield base, db_url, first


@pytest.mark.parametrize("size", [(1440, 900), (390, 844)], ids=["desktop", "phone"])
def test_demo_pages_in_chromium(
    demo: tuple[str, str, int], tmp_path: Path, size: tuple[int, int]
) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, _, example_id = demo
    width, height = size
    # Straight into VSR_KEEP_SCREENSHOTS when set, so a failing run leaves them too.
    shots = Path(os.environ.get("VSR_KEEP_SCREENSHOTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        errors = watch_errors(page)
        page.goto(base + "/admin/login")
        page.get_by_label("Username").fill("admin")
        page.get_by_label("Password").fill("vsr-demo-admin-2026")  # scripts/demo_data.sh
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("heading", name="Overview", exact=True)).to_be_visible()
        page.screenshot(path=str(shots / f"{width}_overview.png"))
        if width >= 1440:  # the whole top bar on one row
            tops = page.evaluate("""() => [...document.querySelectorAll(
                'header.topbar .brand, .admin-nav a, #study-switch, form.logout')]
                .map(e => Math.round(e.getBoundingClientRect().top
                                     + e.getBoundingClientRect().height / 2))""")
            assert max(tops) - min(tops) <= 4, tops

        page.goto(base + "/admin/pipeline")
        sample = page.locator('form[action="/admin/jobs/sample"]')
        files = sample.locator('textarea[name="coco_files"]')
        expect(files).to_have_value(str(ROOT / "demo/coco/annotations/instances_demo.json"))
        assert files.get_attribute("placeholder") is None
        expect(page.locator(".page-head")).to_contain_text("no multiple-choice items yet")
        code = sample.locator("code")
        code_box, card_box = code.bounding_box(), sample.bounding_box()
        assert code_box and card_box
        assert code_box["x"] + code_box["width"] <= card_box["x"] + card_box["width"] + 1
        page.screenshot(path=str(shots / f"{width}_pipeline.png"), full_page=True)

        page.goto(f"{base}/admin/examples/{example_id}")
        votes = page.locator("table.grid")
        for n in (1, 2, 3):
            expect(votes).to_contain_text(f"demo validator {n}")
        expect(page.locator("body")).not_to_contain_text("invite-")
        expect(page.locator("p.stuck")).to_contain_text("every validator in this study")
        expect(page.locator(".wanted")).to_contain_text("not decided at 3 votes")
        page.screenshot(path=str(shots / f"{width}_example.png"), full_page=True)
        for path in ("/admin", "/admin/pipeline", f"/admin/examples/{example_id}"):
            page.goto(base + path)
            assert page.evaluate("document.documentElement.scrollWidth") <= width + 1, path

        # A worker's pages: the relation filter's placeholder is whole.
        worker = context.new_page()
        worker.goto(base + "/start/generate?token=demo-annotator")
        if "/consent/" in worker.url:
            worker.get_by_role("button", name="I agree, continue").click()
        if "/instructions/" in worker.url:
            worker.locator("form.actions button").click()
        placeholder = worker.locator("#filter").get_attribute("placeholder")
        assert placeholder == 'Type to filter, e.g. "left"  (press / )', placeholder
        worker.screenshot(path=str(shots / f"{width}_generate.png"))
        # A validator who judged everything: the done page offers to look for more.
        validator = context.new_page()
        validator.goto(base + "/start/validate?token=demo-validator-1")
        if "/consent/" in validator.url:
            validator.get_by_role("button", name="I agree, continue").click()
        done = validator.get_by_role("button", name="Check for more work")
        if "/instructions/" in validator.url:
            validator.locator("form.actions button").click()
        expect(done).to_be_visible()
        expect(validator.locator("body")).not_to_contain_text("page you came from")
        validator.screenshot(path=str(shots / f"{width}_done.png"), full_page=True)
        done.click()
        expect(validator.get_by_role("button", name="Check for more work")).to_be_visible()
        assert errors == [], errors
        browser.close()
