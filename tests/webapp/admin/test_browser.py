"""An admin in a real browser: `vsr serve` + headless Debian Chromium via Playwright.

Logs in, opens every dashboard page (full-page screenshots in the test's tmp dir), opens an
Example with its marked image, blocks a worker (whose lease goes back to the pool), starts a
background build and downloads the zip when the progress bar finishes.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session, select

from tests.support.admin_seed import read_raw, seed
from tests.support.admins import create_owner
from tests.support.browser import launch_chromium, require_chromium, running_site, watch_errors
from vsr_core.captions import render_caption
from vsr_core.db import make_engine
from vsr_core.models import Example, ImagePair, Worker
from vsr_core.standing import standing
from vsr_core.studies.settings import load_study_config

PASSWORD = "browser-admin-password"
pytestmark = pytest.mark.browser


def _prepare(url: str, coco_dir: Path, vsr_dir: Path) -> dict[str, int]:
    """Real VSR records, real COCO pairs, one Example on a local COCO image, and a worker
    holding a lease."""
    from collection.sampler import sample_into_db
    from webapp.crowd import batches, leases
    from webapp.crowd.leases import PairStrategy

    engine = make_engine(url)
    seed(engine, read_raw(vsr_dir, every=20))
    files = [
        coco_dir / "annotations" / f"instances_{s}_subset.json" for s in ("val2017", "train2017")
    ]
    sample_into_db(engine, files, 6, seed=2)
    with Session(engine) as s:
        create_owner(s, "admin", PASSWORD)
        pair = s.exec(select(ImagePair)).first()
        assert pair is not None
        ex = Example(
            image_id=pair.image1_id,
            relation="near",
            subj=pair.concept_a,
            obj=pair.concept_b,
            label=True,
            origin="human",
            caption=render_caption(pair.concept_a, "near", pair.concept_b),
        )
        w = Worker(source="prolific", external_id="CARELESS-1", roles=["generate"])
        s.add(ex)
        s.add(w)
        s.commit()
        cfg = load_study_config(s)
        strategy = PairStrategy()
        batch = batches.open_or_resume(s, w, "generate", cfg, strategy)
        lease = leases.take_next(s, batch, strategy, cfg.lease_minutes)
        assert lease is not None and lease.pair_id is not None
        s.commit()
        ids = {"example": int(ex.id), "worker": int(w.id), "pair": int(lease.pair_id)}  # type: ignore[arg-type]
    engine.dispose()
    return ids


@pytest.fixture
def server(
    sqlite_url: str, coco_dir: Path, vsr_dir: Path, tmp_path: Path
) -> Iterator[tuple[str, dict[str, int]]]:
    require_chromium()
    ids = _prepare(sqlite_url, coco_dir, vsr_dir)
    env = {
        "SECRET_KEY": "browser-admin-" + "k" * 32,
        "IMAGE_CACHE_DIR": str(tmp_path / "var" / "cache"),
        "HF_HUB_OFFLINE": "1",
    }
    with running_site(sqlite_url, coco_dir / "images", tmp_path, env) as base:
        yield base, ids


def test_admin_runs_the_study_in_chromium(
    server: tuple[str, dict[str, int]], sqlite_url: str, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, ids = server
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1400, "height": 900}, accept_downloads=True)
        errors = watch_errors(page)

        # Anonymous: any admin page leads to the login form; a wrong password is refused.
        page.goto(base + "/admin/quality")
        expect(page.get_by_role("heading", name="Admin login")).to_be_visible()
        page.get_by_label("Username").fill("admin")
        page.get_by_label("Password").fill("wrong-password")
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("alert")).to_contain_text("wrong password")
        page.get_by_label("Username").fill("admin")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        expect(page).to_have_url(base + "/admin/quality")  # back where we wanted to go

        for path, heading in [
            ("/admin", "Overview"),
            ("/admin/quality", "Data quality"),
            ("/admin/workers", "Workers"),
            ("/admin/data", "Data"),
            ("/admin/settings", "Study settings"),
            ("/admin/pipeline", "Pipeline"),
        ]:
            page.goto(base + path)
            expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
            for img in page.locator("img.chart").all():  # charts really render
                expect(img).to_have_js_property("complete", True)
                assert img.evaluate("i => i.naturalWidth") > 0, img.get_attribute("src")
            name = path.strip("/").replace("/", "_") or "admin"
            page.screenshot(path=str(shots / f"{name}.png"), full_page=True)

        # The data browser: imported Examples whose photo is not on this server (and COCO's
        # server is unreachable from here) show a "no photo" tile, never a broken image; the
        # Example on a local COCO image shows its real thumbnail.
        page.goto(f"{base}/admin/data?origin=human")
        local = page.locator(f'a[href="/admin/examples/{ids["example"]}"] img.thumb')
        expect(local).to_have_js_property("complete", True)
        assert local.evaluate("i => i.naturalWidth") > 0
        page.goto(base + "/admin/data")
        page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        for _ in range(300):  # (wait_for_function evaluates a string, which the CSP forbids)
            if page.locator("img.thumb").evaluate_all("imgs => imgs.every(i => i.complete)"):
                break
            page.wait_for_timeout(100)
        page.wait_for_timeout(300)  # error events of the last images
        broken = page.locator("img.thumb").evaluate_all(
            "imgs => imgs.filter(i => i.naturalWidth === 0).map(i => i.src)"
        )
        assert broken == [], broken
        tiles = page.locator(".thumb.no-photo")
        assert tiles.count() > 0
        expect(tiles.first).to_have_text("no photo")

        # The overview's numbers refresh by themselves (fetch polling, no reload).
        page.goto(base + "/admin")
        before = page.locator('[data-key="generated_at"]').inner_text()
        expect(page.locator('[data-key="generated_at"]')).not_to_have_text(before, timeout=15000)

        # An Example with its instances marked and its votes.
        page.goto(f"{base}/admin/examples/{ids['example']}")
        image = page.locator(".example-image img")
        expect(image).to_have_js_property("complete", True)
        assert image.evaluate("i => i.naturalWidth") > 0
        expect(page.get_by_text("subject (")).to_be_visible()
        page.screenshot(path=str(shots / "example.png"), full_page=True)

        # Block a worker from their history page: their lease returns to the pool.
        page.goto(f"{base}/admin/workers/{ids['worker']}")
        expect(page.get_by_role("heading", name="Batches")).to_be_visible()
        page.get_by_placeholder("reason (optional)").fill("random answers")
        page.once("dialog", lambda dialog: dialog.accept())  # Block asks for confirmation
        page.get_by_role("button", name="Block in this study").click()
        expect(page.get_by_role("status")).to_contain_text("1 leased item(s) returned")
        expect(page.locator(".page-head")).to_contain_text("blocked")
        page.screenshot(path=str(shots / "worker_after_block.png"), full_page=True)

        # Build in the background; the progress bar finishes and the zip downloads.
        page.goto(base + "/admin/pipeline")
        page.get_by_role("button", name="Build and zip").click()
        expect(page.get_by_role("status")).to_contain_text("Started build job")
        link = page.get_by_role("link", name="Download zip")
        expect(link).to_be_visible(timeout=120_000)
        page.screenshot(path=str(shots / "pipeline_after_build.png"), full_page=True)
        with page.expect_download() as info:
            link.click()
        target = tmp_path / "download.zip"
        info.value.save_as(target)
        browser.close()
    assert not errors, errors
    names = zipfile.ZipFile(target).namelist()
    assert "random/train.jsonl" in names and "stats.json" in names and "README.md" in names

    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        worker = s.get(Worker, ids["worker"])
        assert worker is not None and standing(s, worker, 1).blocked  # in the study
        pair = s.get(ImagePair, ids["pair"])
        assert pair is not None and pair.status == "available"
    engine.dispose()
    keep = os.environ.get("VSR_KEEP_SCREENSHOTS")
    if keep:  # to look at them: VSR_KEEP_SCREENSHOTS=/some/dir pytest <this file>
        shutil.copytree(shots, keep, dirs_exist_ok=True)
