"""Security headers (webapp.http.security): a page's script nonce is the one its policy
allows, a fresh one per page; JSON answers get the plain headers and no policy."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.webapp_coco import client_for, make_app

SCRIPT_NONCE = re.compile(r'<script nonce="([^"]+)"')


def test_page_nonce_matches_its_policy_and_json_has_none(db_url: str, tmp_path: Path) -> None:
    client = client_for(make_app(db_url, tmp_path))
    nonces = []
    for _ in range(2):
        page = client.get("/validate")  # no session: the error page, which runs a script
        assert page.headers["content-type"].startswith("text/html")
        found = SCRIPT_NONCE.search(page.text)
        assert found is not None, page.text[:500]
        policy = page.headers["Content-Security-Policy"]
        assert f"'nonce-{found.group(1)}'" in policy
        nonces.append(found.group(1))
    assert nonces[0] != nonces[1] and len(nonces[0]) >= 20
    api = client.get("/healthz")
    assert api.status_code == 200
    assert "Content-Security-Policy" not in api.headers
    assert api.headers["X-Content-Type-Options"] == "nosniff"
