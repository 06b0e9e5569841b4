"""The Members page in a real browser (`vsr serve` + headless Debian Chromium) at 1440x900 and
390x844: an owner gives an admin a role and creates an account with the page's own forms; the
page fits the width; a viewer is told in plain words that the page is for owners. Screenshots
in the test's tmp dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session

from tests.support.browser import launch_chromium, require_chromium, running_site, watch_errors
from vsr_core.db import make_engine
from vsr_core.models import AdminRole
from vsr_core.roles import role_in
from webapp.admin.auth import create_admin

PASSWORD = "browser-members-password"
pytestmark = pytest.mark.browser
SIZES = {"desktop": (1440, 900), "phone": (390, 844)}


@pytest.fixture
def server(sqlite_url: str, coco_dir: Path, tmp_path: Path) -> Iterator[str]:
    require_chromium()
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        create_admin(s, "olga", PASSWORD, grants={1: AdminRole.owner})
        for name in ("desktop-helper", "phone-helper"):
            create_admin(s, name, PASSWORD)
        create_admin(s, "vic", PASSWORD, grants={1: AdminRole.viewer})
    engine.dispose()
    env = {"SECRET_KEY": "browser-members-" + "k" * 32, "HF_HUB_OFFLINE": "1"}
    with running_site(sqlite_url, coco_dir / "images", tmp_path, env) as base:
        yield base


def _login(page: object, base: str, username: str) -> None:
    page.goto(base + "/admin/members")  # type: ignore[attr-defined]
    page.get_by_label("Username").fill(username)  # type: ignore[attr-defined]
    page.get_by_label("Password").fill(PASSWORD)  # type: ignore[attr-defined]
    page.get_by_role("button", name="Log in").click()  # type: ignore[attr-defined]


def test_members_page_in_chromium(server: str, sqlite_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    base = server
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with sync_playwright() as p:
        browser = launch_chromium(p)
        for size, (width, height) in SIZES.items():
            page = browser.new_page(viewport={"width": width, "height": height})
            errors = watch_errors(page)
            _login(page, base, "olga")
            expect(page.get_by_role("heading", name="Members of vsr")).to_be_visible()
            grant = page.locator("form[action='/admin/members/grant'].inline").last
            grant.get_by_label("Username").fill(f"{size}-helper")
            grant.get_by_label("Role").select_option("researcher")
            grant.get_by_role("button", name="Grant").click()
            expect(page.get_by_role("status")).to_contain_text(
                f"{size}-helper is now researcher of vsr."
            )
            row = page.locator(f"tr[data-username='{size}-helper']")
            expect(row.locator("td").nth(1)).to_have_text("researcher")
            create = page.locator("form[action='/admin/members/create']")
            create.get_by_label("Username").fill(f"{size}-new")
            create.get_by_label("Password").fill(PASSWORD)
            create.get_by_label("Role").select_option("viewer")
            create.get_by_role("button", name="Create").click()
            expect(page.get_by_role("status")).to_contain_text(f"Admin {size}-new created")
            expect(page.locator(f"tr[data-username='{size}-new'] td").nth(1)).to_have_text("viewer")
            # Nothing runs off the side: the page is as wide as the window.
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            page.screenshot(path=str(shots / f"members_{size}.png"), full_page=True)
            assert overflow <= 0, (size, overflow)
            assert errors == []
            page.close()

            viewer = browser.new_page(viewport={"width": width, "height": height})
            _login(viewer, base, "vic")
            expect(viewer.get_by_role("alert")).to_contain_text(
                "Your role in the study vsr is viewer; this needs owner."
            )
            expect(viewer.locator("a[href='/admin/members']")).to_have_count(0)
            viewer.screenshot(path=str(shots / f"members_viewer_{size}.png"), full_page=True)
            viewer.close()
        browser.close()

    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        from sqlmodel import select

        from vsr_core.models import AdminUser

        for name, role in (("desktop-helper", "researcher"), ("phone-new", "viewer")):
            user = s.exec(select(AdminUser).where(AdminUser.username == name)).one()
            assert user.id is not None
            held = role_in(s, user.id, 1)
            assert held is not None and held.value == role
    engine.dispose()
