"""The site behind the shipped nginx config (deploy/nginx): TLS at the proxy, two `vsr serve`
replicas on one PostgreSQL. Every URL a page writes is https on the public host (or relative),
a real Chromium sees no mixed content, requests reach both replicas, and a replica killed with
SIGKILL mid-run shows no validator a 502, costs no acknowledged vote and duplicates none."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlmodel import Session, select

from bench.load import private_pg
from bench.load.audit import check
from bench.load.database import VSR_RAW, seed
from bench.load.nginx import Proxy, nginx_binary
from bench.load.private_pg import PrivatePostgres
from bench.load.validators import Stats
from migrations.runner import upgrade
from tests.support.admins import create_owner
from tests.support.browser import free_port, launch_chromium, require_chromium
from tests.support.webapp_coco import set_study
from tests.webapp.validate.test_routes import seed_examples
from vsr_core.db import make_engine
from vsr_core.models import ImagePair
from webapp.images.signed_urls import pair_image_url

PASSWORD = "correct horse battery"
SECRET = "proxy-test-" + "k" * 32
URL_ATTR = re.compile(r'(?:href|src|action|content)="([^"]*)"')
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass
class Stack:
    proxy: Proxy
    replicas: list[subprocess.Popen[bytes]]
    ports: list[int]
    db_url: str
    pair_id: int


def _replica(db_url: str, port: int, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    own = Path(sys.executable).with_name("vsr")
    vsr = str(own) if own.exists() else (shutil.which("vsr") or "vsr")
    return subprocess.Popen(
        [vsr, "serve", "--port", str(port), "--database-url", db_url],
        env={**os.environ, **env},
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # SIGKILL to the group takes the replica whole
    )


def _wait_healthy(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    for _ in range(300):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            pytest.fail("vsr serve exited: " + log.read_text())
        time.sleep(0.1)
    pytest.fail("vsr serve did not answer: " + log.read_text())


@contextmanager
def _serve(db_url: str, coco_dir: Path, tmp_path: Path, pair_id: int) -> Iterator[Stack]:
    """Two `vsr serve` replicas on ``db_url`` behind the shipped nginx config."""
    https_port, ports = free_port(), [free_port(), free_port()]
    env = {
        "SECRET_KEY": SECRET,
        "TRUSTED_PROXIES": "127.0.0.1",
        "BASE_URL": f"https://localhost:{https_port}",
        "IMAGE_ROOT": str(coco_dir / "images"),
        "IMAGE_CACHE_DIR": str(tmp_path / "image_cache"),
    }
    replicas = []
    try:
        for k, port in enumerate(ports):
            replicas.append(_replica(db_url, port, env, tmp_path / f"replica{k}.log"))
        for k, (port, proc) in enumerate(zip(ports, replicas, strict=True)):
            _wait_healthy(port, proc, tmp_path / f"replica{k}.log")
        proxy = Proxy(tmp_path / "nginx", ports, https_port, free_port())
        proxy.start()
        try:
            yield Stack(proxy, replicas, ports, db_url, pair_id)
        finally:
            proxy.stop()
    finally:
        for proc in replicas:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)


def _seed_site(db_url: str, coco_dir: Path) -> int:
    engine = make_engine(db_url)
    with Session(engine) as s:
        seed_examples(s, coco_dir, 3)
        pair_id = s.exec(select(ImagePair.id)).first()
        assert pair_id is not None
        create_owner(s, "admin", PASSWORD)
    engine.dispose()
    return pair_id


@pytest.fixture
def stack(pg_url: str, coco_dir: Path, tmp_path: Path) -> Iterator[Stack]:
    if nginx_binary() is None:
        pytest.skip("nginx is not installed (scripts/test.sh installs Debian's nginx-light)")
    if not VSR_RAW.is_file():
        pytest.skip(f"real VSR data not found at {VSR_RAW}")
    pair_id = _seed_site(pg_url, coco_dir)
    seed(pg_url, 400, 0, 0)  # real VSR captions to vote on while a replica dies
    set_study(pg_url, gold_rate=0.0)
    with _serve(pg_url, coco_dir, tmp_path, pair_id) as served:
        yield served


@pytest.fixture
def private_stack(coco_dir: Path, tmp_path: Path) -> Iterator[tuple[Stack, PrivatePostgres]]:
    """The same, over a PostgreSQL server of the test's own, which it may restart."""
    if nginx_binary() is None:
        pytest.skip("nginx is not installed (scripts/test.sh installs Debian's nginx-light)")
    if not private_pg.available():
        pytest.skip("PostgreSQL's initdb and pg_ctl are not installed")
    pg = PrivatePostgres(free_port())
    try:
        pg.start()
        url = pg.create_database("vsr")
        upgrade(url)
        pair_id = _seed_site(url, coco_dir)
        set_study(url, gold_rate=0.0)
        with _serve(url, coco_dir, tmp_path, pair_id) as served:
            yield served, pg
    finally:
        pg.stop()


def _client(stack: Stack) -> httpx.Client:
    return httpx.Client(base_url=stack.proxy.base, verify=False, timeout=10)


def _enter(c: httpx.Client, pid: str) -> str:
    r = c.get(f"/start/validate?PROLIFIC_PID={pid}&STUDY_ID=st1&SESSION_ID={pid}")
    assert r.status_code == 303, r.text[:300]
    csrf = CSRF.search(c.get("/consent/validate").text)
    assert csrf
    c.post("/consent/validate", data={"decision": "agree", "csrf": csrf.group(1)})
    c.post("/begin/validate", data={"csrf": csrf.group(1)})
    c.headers["X-CSRF-Token"] = csrf.group(1)
    return csrf.group(1)


def _assert_urls_right(html: str, public: str, page: str) -> None:
    assert "http://" not in html.replace("http://www.w3.org", ""), f"{page} names http://"
    for url in URL_ATTR.findall(html):
        if "://" in url:
            assert url.startswith(public + "/") or url == public, f"{page}: {url}"


def test_every_url_is_https_on_the_public_host(stack: Stack) -> None:
    public = stack.proxy.base
    with _client(stack) as c:
        # Plain http on nginx's port 80 is sent to the https site.
        r = c.get(f"http://localhost:{stack.proxy.http_port}/validate?x=1")
        assert r.status_code == 301 and r.headers["location"] == public + "/validate?x=1"
        _enter(c, "urlcheck01")
        pages = ["/", "/validate", "/admin/login"]
        for path in pages:
            r = c.get(path)
            assert r.status_code == 200, (path, r.status_code)
            _assert_urls_right(r.text, public, path)
        # Redirects name the public https host too (or are relative).
    with _client(stack) as anonymous:
        r = anonymous.get("/admin", headers={"Accept": "text/html"})
        assert r.status_code in (302, 303, 307)
        loc = r.headers["location"]
        assert loc.startswith("/") or loc.startswith(public + "/"), loc
    with _client(stack) as c:
        _enter(c, "urlcheck02")
        # The validator's image is private to its lease: proxied, never kept by nginx.
        src = c.get("/api/validate/item").json()["item"]["image"]["src"]
        assert "://" not in src or src.startswith(public)
        assert c.get(src).status_code == 200 and c.get(src).headers.get("x-cache-status") is None
        # A pair's signed image is checked by a replica once, then served from nginx's cache;
        # a forged signature is refused and never cached.
        signed = pair_image_url(SECRET, stack.pair_id, 1)
        first, second = c.get(signed), c.get(signed)
        assert first.status_code == second.status_code == 200
        assert first.headers["x-cache-status"] == "MISS"
        assert second.headers["x-cache-status"] == "HIT" and second.content == first.content
        forged = re.sub(r"s=[0-9a-f]+", "s=" + "0" * 32, signed)
        assert [c.get(forged).status_code for _ in range(2)] == [404, 404]
        assert c.get("/static/site.css").status_code == 200
    # nginx writes a request's log line after it has sent the answer: wait for it.
    static_lines: list[str] = []
    for _ in range(100):
        log = (stack.proxy.prefix / "access.log").read_text()
        static_lines = [line for line in log.splitlines() if "/static/site.css" in line]
        if static_lines:
            break
        time.sleep(0.05)
    assert static_lines and all("upstream=-" in line for line in static_lines)
    # The client's own X-Forwarded-For is replaced by the address nginx saw.
    conf = (stack.proxy.prefix / "vsr.conf").read_text()
    assert re.search(r"^\s*proxy_set_header X-Forwarded-For \$remote_addr;", conf, re.M)
    # ... and a POST is never resent to a second replica (it may have been committed), but
    # for a vote, which the app records once per lease (test_a_vote_whose_replica_dies...).
    retry = re.findall(r"^\s*proxy_next_upstream [^;]*;", conf, re.M)
    assert retry[0] == "    proxy_next_upstream error timeout;"
    resent = re.findall(r"location ([^{]*)\{[^}]*non_idempotent", conf)
    assert resent == ["~ ^(/s/[a-z0-9-]+)?/api/validate/votes$ "], resent


@pytest.mark.browser
def test_chromium_through_the_proxy_sees_no_mixed_content(stack: Stack) -> None:
    require_chromium()
    from playwright.sync_api import sync_playwright

    base = stack.proxy.base
    messages: list[str] = []
    with sync_playwright() as p:
        browser = launch_chromium(p)
        context = browser.new_context(ignore_https_errors=True)  # the test's self-signed cert
        page = context.new_page()
        page.on("console", lambda m: messages.append(f"{m.type}: {m.text}"))
        page.on("requestfailed", lambda r: messages.append(f"failed: {r.url} {r.failure}"))
        page.goto(base + "/start/validate?PROLIFIC_PID=browser01&STUDY_ID=st1&SESSION_ID=b1")
        page.get_by_role("button", name="I agree, continue").click()
        page.get_by_role("button", name=re.compile("Start the batch")).click()
        page.locator("#btn-true").wait_for()
        assert page.evaluate("location.protocol") == "https:"
        assert page.evaluate("document.styleSheets.length") >= 1
        page.locator("#btn-true").click()
        page.wait_for_load_state("networkidle")  # the next item's image, before leaving
        page.goto(base + "/admin/login")
        page.get_by_label("Username").fill("admin")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name=re.compile("Log in|Sign in", re.I)).click()
        page.wait_for_url(re.compile(r"/admin"))
        for path in ("/admin", "/admin/quality"):
            page.goto(base + path)
            assert page.url.startswith(base)
            sheets = page.evaluate("[...document.styleSheets].map(s => s.href || '')")
            assert all(h.startswith(base) or not h for h in sheets), sheets
        browser.close()
    # ERR_ABORTED: the page itself dropped a load (the next item replacing an image); a
    # blocked http:// resource is reported as "Mixed Content" and fails otherwise.
    bad = [
        m
        for m in messages
        if "Mixed Content" in m
        or "insecure" in m.lower()
        or (m.startswith("failed:") and not m.endswith("net::ERR_ABORTED"))
    ]
    assert not bad, bad


def test_access_logs_hold_no_participant_ids_or_tokens(stack: Stack) -> None:
    """nginx's log and uvicorn's (each replica's) name the path, never a study link's
    participant ids, an invite token or an image signature (webapp/http/access_log.py)."""
    pid, session_id, invite = (
        "5f0c3a9e1b2d4c6e8a0b1c2d",
        "aa11bb22cc33dd44ee55ff66",
        "inv1te-S3cret",
    )
    secrets_sent = [pid, session_id, invite]
    with _client(stack) as c:
        c.get(f"/start/validate?PROLIFIC_PID={pid}&STUDY_ID=st-log&SESSION_ID={session_id}")
        c.get(f"/start/validate?token={invite}")
        c.get("/admin/login?page=2&next=%2Fadmin%3Fq%3D" + invite)
    logs: dict[str, str] = {}
    for _ in range(100):  # both servers write a line after the answer has gone
        logs = {"nginx": (stack.proxy.prefix / "access.log").read_text()}
        for k in range(len(stack.replicas)):
            logs[f"replica{k}"] = (stack.proxy.prefix.parent / f"replica{k}.log").read_text()
        replicas = "".join(v for n, v in logs.items() if n != "nginx")
        # every request's line, in nginx's log and a replica's, not only the first two
        if all(
            log.count("/start/validate") >= 2 and "/admin/login" in log
            for log in (logs["nginx"], replicas)
        ):
            break
        time.sleep(0.05)
    replicas = "".join(v for n, v in logs.items() if n != "nginx")
    assert logs["nginx"].count("/start/validate") >= 2 and "/admin/login" in logs["nginx"]
    assert "PROLIFIC_PID=REDACTED&STUDY_ID=REDACTED&SESSION_ID=REDACTED" in replicas, replicas
    assert "token=REDACTED" in replicas and "page=2&next=REDACTED" in replicas
    for name, text in logs.items():
        for value in secrets_sent:
            assert value not in text, (name, value)


def _dying_replica() -> tuple[int, list[bytes], threading.Event]:
    """A replica that dies under every request: it reads the request, then its socket is
    closed unanswered, as the kernel does for a SIGKILLed process (counted per request)."""
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.settimeout(0.2)
    seen: list[bytes] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            conn.settimeout(2)
            with suppress(OSError):
                seen.append(conn.recv(65536).split(b"\r\n", 1)[0])
            conn.close()
        sock.close()

    threading.Thread(target=run, daemon=True).start()
    return sock.getsockname()[1], seen, stop


def test_a_vote_whose_replica_dies_is_resent_not_a_502(stack: Stack, tmp_path: Path) -> None:
    """Through the shipped config over a replica that dies under each request and a live one:
    every vote is answered by the live replica (no 502), and stored once. Without
    ``non_idempotent`` on the vote location, each vote sent to the dying replica was a 502."""
    port, seen, stop = _dying_replica()
    proxy = Proxy(tmp_path / "nginx", [port, stack.ports[1]], free_port(), free_port())
    proxy.start()
    stats = Stats()
    codes: list[int] = []
    try:
        with _client(stack) as c:
            # Entry and items through the site's usual proxy (its form POSTs are not resent);
            # the votes, with the same cookies (host localhost, any port), through the proxy
            # whose first replica dies: so the requests it balances are votes only.
            _enter(c, "dyingreplica1")
            for _ in range(12):
                r = _send(c, "GET", "/api/validate/item", None, stats)
                item = r.json()["item"]
                if item is None:
                    break
                body = {"assignment_id": item["assignment_id"], "value": True, "duration_ms": 900}
                r = c.post(proxy.base + "/api/validate/votes", json=body)
                codes.append(r.status_code)
                if r.status_code in (200, 201):
                    out = r.json()
                    stats.acked.append(
                        (out["vote_id"], int(item["assignment_id"].split(".")[0]), out["value"])
                    )
    finally:
        proxy.stop()
        stop.set()
    votes_at_dying = [line for line in seen if line.startswith(b"POST ")]
    assert votes_at_dying, seen  # the dying replica was given votes...
    assert codes and all(code in (200, 201) for code in codes), codes  # ...and none was lost
    assert not check(stack.db_url, stats)  # each acknowledged vote stored once


VALIDATORS = 6  # at once, so votes are in flight on the replica when it dies


def test_requests_spread_and_a_killed_replica_loses_no_vote(stack: Stack) -> None:
    stats = Stats()
    stop = threading.Event()
    failures: list[str] = []

    def validate(k: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            with _client(stack) as c:
                _enter(c, f"faults{k}x{n:04d}")
                while not stop.is_set():
                    r = _send(c, "GET", "/api/validate/item", None, stats)
                    item = r.json()["item"]
                    if item is None:
                        break
                    body = {
                        "assignment_id": item["assignment_id"],
                        "value": n % 2 == 0,
                        "duration_ms": 2000,
                    }
                    r = _send(c, "POST", "/api/validate/votes", body, stats)
                    if r.status_code not in (200, 201):
                        failures.append(f"vote {r.status_code}: {r.text[:200]}")
                        continue
                    out = r.json()
                    stats.acked.append(
                        (out["vote_id"], int(item["assignment_id"].split(".")[0]), out["value"])
                    )
                    stats.rt_stamps.append(time.monotonic())
                    if out["finished"]:
                        break

    workers = [threading.Thread(target=validate, args=(k,)) for k in range(VALIDATORS)]
    for worker in workers:
        worker.start()

    def running() -> bool:
        return any(w.is_alive() for w in workers)

    try:
        # Counted, not timed: the shared machine may be slow, the test must not be flaky.
        _until(lambda: len(stats.acked) >= 10 or not running())
        before = len(stats.acked)
        os.killpg(stack.replicas[0].pid, signal.SIGKILL)
        killed_at = time.monotonic()
        stack.replicas[0].wait()
        _until(lambda: sum(t > killed_at for t in stats.rt_stamps) >= 20 or not running())
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=30)
    assert not failures, failures[:3]
    # nginx resends what the dead replica did not answer (the vote API is idempotent), so
    # the validators never see its death: not one 502, and no request the proxy dropped.
    bad_gateway = {k: n for k, n in stats.errors.items() if k.endswith(" 502")}
    assert not bad_gateway and stats.retries == 0, (bad_gateway, stats.retries)
    after_kill = sum(t > killed_at for t in stats.rt_stamps)
    assert before >= 10 and after_kill >= 10, (before, after_kill)
    seen = Counter(u.rsplit(":", 1)[-1] for u in stack.proxy.upstreams_seen() if u != "-")
    assert all(seen[str(p)] > 0 for p in stack.ports), seen  # both replicas served
    problems = check(stack.db_url, stats)
    assert not problems, problems


def _until(done: Any, limit: float = 40.0) -> None:
    deadline = time.monotonic() + limit
    while not done() and time.monotonic() < deadline:
        time.sleep(0.1)


def _send(c: httpx.Client, method: str, path: str, body: Any, stats: Stats) -> httpx.Response:
    """One API call, resent while the proxy answers 502/503 (a replica died under a request
    nginx may not resend itself: a POST). Both vote API calls are idempotent."""
    for _ in range(100):
        try:
            r = c.request(method, path, json=body)
        except httpx.TransportError:
            stats.retries += 1
            time.sleep(0.05)
            continue
        if r.status_code in (502, 503, 504):
            stats.errors[f"{method} {path} {r.status_code}"] += 1
            time.sleep(0.05)
            continue
        return r
    raise AssertionError(f"{method} {path}: no answer through the proxy")


def test_the_proxy_names_no_version_and_answers_only_its_own_host(stack: Stack) -> None:
    with _client(stack) as c:
        r = c.get("/static/site.css")
        assert r.status_code == 200 and r.headers["server"] == "nginx"  # no version
        assert r.headers["strict-transport-security"].startswith("max-age=")
        assert r.headers["x-content-type-options"] == "nosniff"
        missing = c.get("/static/no-such-file.css")
        assert missing.status_code == 404 and "nginx/" not in missing.text
        assert c.get("/healthz").status_code == 200  # the site's own name and port
        # Another Host over the site's TLS: closed without an answer (444).
        with pytest.raises(httpx.RemoteProtocolError):
            c.get("/healthz", headers={"Host": "evil.example"})
    with httpx.Client(verify=False, timeout=10) as plain:
        r = plain.get(f"http://localhost:{stack.proxy.http_port}/x")
        assert r.status_code == 301 and r.headers["location"].startswith(stack.proxy.base)
        with pytest.raises(httpx.RemoteProtocolError):
            plain.get(
                f"http://localhost:{stack.proxy.http_port}/x", headers={"Host": "evil.example"}
            )
    # A TLS client that names another host (SNI) is refused in the handshake.
    import socket
    import ssl

    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", stack.proxy.https_port), timeout=10) as raw,
        pytest.raises(ssl.SSLError),
    ):
        ctx.wrap_socket(raw, server_hostname="evil.example").close()


def test_a_database_restart_gives_503_with_retry_after_not_502(
    private_stack: tuple[Stack, PrivatePostgres],
) -> None:
    """PostgreSQL restarted (`pg_ctl restart -m immediate`) under clients on keep-alive
    connections through nginx: while it is away they get 503 with Retry-After from the app,
    never a 502 from nginx (before: both replicas taken out, "no live upstreams")."""
    stack, pg = private_stack
    seen: list[tuple[float, int, str | None]] = []
    failures: list[str] = []
    stop = threading.Event()

    def client(k: int) -> None:
        with _client(stack) as c:
            _enter(c, f"restart{k:02d}")
            while not stop.is_set():
                for path in ("/api/validate/item", "/healthz"):
                    try:
                        r = c.get(path)
                    except httpx.TransportError as exc:
                        failures.append(f"{path}: {exc!r}")
                        continue
                    seen.append((time.monotonic(), r.status_code, r.headers.get("retry-after")))
                time.sleep(0.01)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    try:
        _until(lambda: len(seen) >= 50)
        for _ in range(3):  # until the clients met the database away at least once
            pg.restart()
            back = time.monotonic()
            _until(lambda since=back: sum(t > since + 1.0 for t, _, _ in seen) >= 50)
            if any(status == 503 for _, status, _ in seen):
                break
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    codes = Counter(status for _, status, _ in seen)
    assert not failures, failures[:3]
    # 409: a validator whose batch has no item left (three pairs to share); the app's answer.
    assert set(codes) <= {200, 409, 503}, codes
    assert codes[503] > 0, codes
    assert all(retry == "2" for _, status, retry in seen if status == 503)
    assert all(status in (200, 409) for t, status, _ in seen if t > back + 1.0), codes
