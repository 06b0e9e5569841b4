"""Admin sessions (docs/security.md, and the API docs' exposure): they end server-side, the login
throttle is shared by every server process, flash messages come only from the server,
cookies and headers under https, and request bodies are capped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.support.admins import create_owner
from tests.webapp.admin.test_admin import PASSWORD, csrf_of, login, make_admin_app
from webapp.admin.auth import create_admin


def _alice(engine: Engine) -> None:
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)


def _page(client: TestClient, cookie: str | None = None) -> int:
    headers = {"accept": "text/html"}
    if cookie is not None:
        client.cookies.set("vsr_admin", cookie, path="/admin")
    return client.get("/admin", headers=headers, follow_redirects=False).status_code


def test_logout_and_password_change_end_copied_sessions(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    _alice(engine)
    app = make_admin_app(db_url, engine, tmp_path)
    client = TestClient(app)
    token = login(client)
    copied = client.cookies["vsr_admin"]  # e.g. from a shared or stolen machine
    assert _page(TestClient(app), copied) == 200
    out = client.post("/admin/logout", data={"csrf_token": token}, follow_redirects=False)
    assert out.status_code == 303
    assert _page(TestClient(app), copied) == 303  # revoked on the server, not just deleted
    # A password change ends every session made with the old one.
    other = TestClient(app)
    login(other)
    second = other.cookies["vsr_admin"]
    assert _page(TestClient(app), second) == 200
    with Session(engine) as s:
        create_admin(s, "alice", "a brand new password", update=True)
    assert _page(TestClient(app), second) == 303


def test_login_throttle_is_shared_by_server_processes(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    """Two apps on one database stand for two `vsr serve` worker processes."""
    _alice(engine)
    one = TestClient(make_admin_app(db_url, engine, tmp_path))
    two = TestClient(make_admin_app(db_url, engine, tmp_path))

    def attempt(client: TestClient, password: str) -> int:
        form = client.get("/admin/login")
        return client.post(
            "/admin/login",
            data={"username": "alice", "password": password, "csrf_token": csrf_of(form.text)},
            follow_redirects=False,
        ).status_code

    codes = [attempt(one if k % 2 else two, "wrong-password") for k in range(5)]
    assert codes == [401] * 5
    assert attempt(one, "wrong-password") == 429
    assert attempt(two, PASSWORD) == 429  # the right password waits on both processes


def test_flash_only_from_the_server(db_url: str, engine: Engine, tmp_path: Path) -> None:
    _alice(engine)
    client = TestClient(make_admin_app(db_url, engine, tmp_path))
    login(client)
    fake = "Your session expired: log in again at evil.example"
    for page in ("/admin/workers", "/admin"):
        r = client.get(f"{page}?msg={fake.replace(' ', '+')}")
        assert r.status_code == 200 and "evil.example" not in r.text, page


def test_https_cookies_and_hsts(db_url: str, engine: Engine, tmp_path: Path) -> None:
    _alice(engine)
    https = make_admin_app(db_url, engine, tmp_path, base_url="https://vsr.example.org")
    client = TestClient(https, base_url="https://vsr.example.org")
    form = client.get("/admin/login")
    pre = [c for c in form.headers.get_list("set-cookie") if c.startswith("vsr_admin_pre=")]
    assert pre and "secure" in pre[0].lower()
    assert form.headers["strict-transport-security"].startswith("max-age=")
    plain = TestClient(make_admin_app(db_url, engine, tmp_path)).get("/admin/login")
    assert "strict-transport-security" not in plain.headers
    assert "secure" not in plain.headers["set-cookie"].lower()
    # The admin's study choice and the flash message: Secure as well under https.
    token = login(client)
    chosen = client.get("/admin?study=vsr")
    study = [c for c in chosen.headers.get_list("set-cookie") if c.startswith("vsr_admin_study=")]
    assert study and "; secure" in study[0].lower(), study
    done = client.post(
        "/admin/settings/invites", data={"csrf_token": token, "label": "x"}, follow_redirects=False
    )
    flash = [c for c in done.headers.get_list("set-cookie") if c.startswith("vsr_admin_flash=")]
    assert flash and "; secure" in flash[0].lower(), (done.status_code, flash)
    assert all(
        c.lower().count("secure") == 1 for c in client.get("/admin").headers.get_list("set-cookie")
    )


def test_bodies_are_capped_per_route(db_url: str, engine: Engine, tmp_path: Path) -> None:
    client = TestClient(make_admin_app(db_url, engine, tmp_path))
    big = b'{"assignment_id": 1, "value": true, "pad": "' + b"x" * (1 << 20) + b'"}'
    r = client.post(
        "/api/validate/votes", content=big, headers={"content-type": "application/json"}
    )
    assert r.status_code == 413 and r.text == "Request body too large."
    assert r.headers["x-content-type-options"] == "nosniff"  # refused, still with the headers
    # Over DRAIN_LIMIT the body is left unread, so the server has to drop the connection.
    assert r.headers["connection"] == "close"

    def chunks() -> Any:  # no Content-Length: counted as it arrives
        yield b"username="
        for _ in range(80):
            yield b"a" * 4096

    r = client.post(
        "/admin/login",
        content=chunks(),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 413
    r = client.post(
        "/admin/login",
        content=b"username=" + b"a" * (300 * 1024),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 413
    # Within DRAIN_LIMIT the rest is read and discarded: the connection stays usable
    # (test_fuzz_every_param checks that on a real keep-alive connection).
    assert "connection" not in r.headers
    # An ordinary small body still reaches the route (403: no CSRF token, not 413).
    assert (
        client.post("/api/validate/votes", json={"assignment_id": 1, "value": True}).status_code
        == 403
    )
    # A study's API has the API's cap, not the 64 KB of other pages: a 20 KB vote is refused.
    vote = b'{"assignment_id": "1.x", "value": true, "pad": "' + b"x" * 20_000 + b'"}'
    for path in ("/api/validate/votes", "/s/vsr/api/validate/votes"):
        r = client.post(path, content=vote, headers={"content-type": "application/json"})
        assert r.status_code == 413, (path, r.status_code)


def test_api_docs_are_off_unless_configured(db_url: str, engine: Engine, tmp_path: Path) -> None:
    off = TestClient(make_admin_app(db_url, engine, tmp_path, api_docs=False))
    for path in ("/docs", "/openapi.json", "/redoc"):
        assert off.get(path).status_code == 404, path
    on = TestClient(make_admin_app(db_url, engine, tmp_path, api_docs=True))
    assert on.get("/openapi.json").status_code == 200
