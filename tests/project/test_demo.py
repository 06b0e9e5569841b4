"""The demo walked end to end by one person with only the links it prints: sample -> caption
-> validate (three validators, one browser) -> keep -> match -> build, on the real COCO slice
in demo/ and the database the demo names. The site runs as the demo starts it (`vsr serve`,
a real server) on a port other than 8000, set the one way the README gives (PORT), and every
link the demo, the CLI and the dashboard print must lead there; the pages are driven over
HTTP (the browser tests cover the same pages in Chromium); the commands run as the
walk-through prints them."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from sqlmodel import Session, col, select

from tests.support.fake_prolific import TOKEN, running
from tests.support.serving import wait_healthy
from tests.support.webapp_coco import answer, enter, form_field, task
from vsr_core.db import make_engine
from vsr_core.models import Assignment, Example, InviteToken, LeaseStatus, McItem, Vote

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RELATIONS = [
    "left of",
    "right of",
    "behind",
    "in front of",
    "far from",
    "facing",
    "above",
    "inside",
    "at the edge of",
    "attached to",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    assert port != 8000
    return port


def _env(db_url: str, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VSR_DEBUG", "BASE_URL")}
    env.update(
        DATABASE_URL=db_url,
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PORT=str(port),
        SECRET_KEY="demo-walk-" + "s" * 40,
        IMAGE_ROOT=str(ROOT / "demo/coco/images"),
    )
    return env


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    assert r.returncode == 0, (cmd, r.stdout, r.stderr)
    return r.stdout


@contextmanager
def _site(env: dict[str, str], cwd: Path, site: str) -> Iterator[None]:
    """`vsr serve` as scripts/demo.sh starts it (the port from PORT)."""
    log = (cwd / "serve.log").open("w")
    proc = subprocess.Popen(
        [str(BIN / "vsr"), "serve", "--host", "127.0.0.1"],
        env=env,
        cwd=cwd,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_healthy(proc, site, why_not=lambda: (cwd / "serve.log").read_text())
        yield
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def _label_of_open_lease(db_url: str, token: str) -> bool:
    """What this validator sees is true: the label of the Example leased to them now."""
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


def test_one_person_walks_the_demo_to_a_dataset_on_another_port(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'vsr_demo.db'}"
    port = _free_port()
    site = f"http://127.0.0.1:{port}"
    env = _env(db_url, port)
    link_re = re.compile(re.escape(site) + r"/start/(generate|validate)\?token=[\w-]+")
    out = _run(["bash", str(ROOT / "scripts/demo_data.sh")], env, tmp_path)
    links = link_re.findall(out)
    full = [m.group(0) for m in link_re.finditer(out)]
    assert len(full) == len(set(full)), out  # every link printed once
    assert links.count("generate") == 1 and links.count("validate") >= 3, out
    assert ":8000" not in out and f"Demo site: {site}" in out and f"{site}/admin" in out
    assert f"database: {db_url}" in out
    # Step 4's second terminal: only what the banner exports, and its links name the site.
    (exports,) = re.findall(r"export (DATABASE_URL=\S+ BASE_URL=\S+)", out)
    second = {k: v for k, v in env.items() if k not in ("PORT", "DATABASE_URL")}
    second |= dict(pair.split("=", 1) for pair in exports.split())
    assert second["DATABASE_URL"] == db_url
    link = _run(["vsr", "invite", "create", "--label", "second terminal"], second, tmp_path)
    assert f"{site}/start/" in link and ":8000" not in link, link
    # The README's "Several studies" block, as written, in that terminal.
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Several studies on one server") :]
    start = section.index("```bash\n") + 8
    block = section[start : section.index("\n```", start)]
    assert "vsr study create" in block
    studies = _run(["bash", "-euo", "pipefail", "-c", block], second, ROOT)
    assert "owner: admin" in studies and f"{site}/s/vsr-zh/start/" in studies, studies
    assert "vsr match" in out and "build-dataset --out" in out
    # Running the demo again changes nothing and still prints each link once: with nothing
    # changed its steps are skipped; without the stamp they run and store nothing new.
    again = _run(["bash", str(ROOT / "scripts/demo_data.sh")], env, tmp_path)
    assert link_re.findall(again) == links and "demo data already in place" in again, again
    (tmp_path / "vsr_demo.db.demo-stamp").unlink()
    again = _run(["bash", str(ROOT / "scripts/demo_data.sh")], env, tmp_path)
    assert link_re.findall(again) == links and "stored 0 new image pairs" in again, again
    # The CLI's links follow the port too.
    invite = _run(
        ["vsr", "invite", "create", "--label", "extra", "--roles", "validate"], env, tmp_path
    )
    assert invite.startswith(f"validate: {site}/start/validate?token="), invite
    with running() as (prolific_url, _):
        created = _run(
            [
                "vsr",
                "platform",
                "create",
                "--platform",
                "prolific",
                "--reward-cents",
                "900",
                "--places",
                "3",
            ],
            env | {"PROLIFIC_API_TOKEN": TOKEN, "PROLIFIC_BASE_URL": prolific_url},
            tmp_path,
        )
    assert f"entry URL: {site}/start/generate?PROLIFIC_PID=" in created, created

    with _site(env, tmp_path, site):
        # A second site on the same port: one line naming it, before uvicorn starts.
        busy = subprocess.run(
            [str(BIN / "vsr"), "serve"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        assert busy.returncode == 1 and busy.stdout == "", busy
        (line,) = busy.stderr.strip().splitlines()
        assert line.startswith(f"error: port {port} on 127.0.0.1 is not free"), line
        free = re.search(r"PORT=(\d+)", line) or re.search(r"--port (\d+)", line)
        assert free is not None and int(free.group(1)) != port, line
        # scripts/demo.sh says so first, before installing anything, in under 2 s.
        started = time.monotonic()
        demo = subprocess.run(
            ["bash", str(ROOT / "scripts/demo.sh")],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        took = time.monotonic() - started
        assert demo.returncode == 1 and "==>" not in demo.stdout, demo
        (line,) = demo.stderr.strip().splitlines()
        assert line.startswith(f"error: port {port} on 127.0.0.1 is not free"), line
        assert "bash scripts/demo.sh uses" in line and took < 2, (line, took)
        walk(tmp_path, db_url, env, site, full)


def walk(tmp_path: Path, db_url: str, env: dict[str, str], site: str, full: list[str]) -> None:
    # The dashboard's entry links name the port the site runs on.
    admin = httpx.Client(base_url=site, follow_redirects=True)
    form = admin.get("/admin/login").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', form)
    assert token is not None
    r = admin.post(
        "/admin/login",
        data={
            "username": "admin",
            "password": "vsr-demo-admin-2026",
            "csrf_token": token.group(1),
            "next": "/admin",
        },
    )
    assert r.status_code in (200, 303), r.text
    settings_page = admin.get("/admin/settings").text
    # The README's second study is the demo admin's to open (its block set VSR_ADMIN).
    assert admin.get("/admin?study=vsr-zh").status_code == 200
    # The switcher keeps the choice: back to the demo's study for the pages below.
    assert admin.get("/admin?study=vsr").status_code == 200
    assert f"{site}/start/validate" in settings_page and ":8000" not in settings_page

    # One browser for every link, as one person would.
    browser = httpx.Client(base_url=site, follow_redirects=True)
    annotator = next(u for u in full if "/generate?" in u)
    assert annotator.startswith(site)
    csrf = enter(browser, urlsplit(annotator).query)
    assert browser.post("/begin/generate", data={"csrf": csrf}).status_code == 200
    for n, relation in enumerate(RELATIONS):
        if n == 4:
            # "Finish now", then the done page's "Check for more work": a second batch opens
            # (the demo's writing batches are not limited to one a day).
            browser.post("/finish/generate", data={"csrf": csrf})
            done = browser.get("/done/generate").text
            assert 'id="more-work"' in done and "You finished early" in done, done
            page = browser.post("/begin/generate", data={"csrf": csrf})
            assert page.status_code == 200 and urlsplit(str(page.url)).path == "/generate"
        r = browser.post(
            "/generate",
            data=answer(task(browser), relation=relation, duration_ms="9000"),
            follow_redirects=False,
        )
        assert r.status_code == 303, r.text

    def validate_everything() -> tuple[int, list[list[int]]]:
        """Each validator link in turn, batch after batch, until a batch offers nothing: the
        two halves of a caption never come in one batch, so a person reopens the link once,
        when told they judged everything available. Returns the votes cast and, per
        validator, the sizes of the batches that served something; each batch's counter
        ("Item 1 of N") must be reached."""
        cast, sizes = 0, []
        for link in (u for u in full if "/validate?" in u):
            assert link.startswith(site)
            token = urlsplit(link).query.removeprefix("token=")
            served: list[int] = []
            while True:
                csrf = enter(browser, urlsplit(link).query, kind="validate")
                browser.post("/begin/validate", data={"csrf": csrf})
                in_batch, of = 0, None
                while True:
                    page = browser.get("/validate", follow_redirects=False)
                    if page.status_code != 200 or 'name="assignment_id"' not in page.text:
                        break  # judged everything there is
                    counter = re.search(r'id="item-number">(\d+)</strong> of (\d+)', page.text)
                    assert counter and int(counter.group(1)) == in_batch + 1, page.text
                    assert of in (None, int(counter.group(2)))
                    of = int(counter.group(2))
                    fields = {k: form_field(page.text, k) for k in ("csrf", "assignment_id")}
                    value = "true" if _label_of_open_lease(db_url, token) else "false"
                    r = browser.post(
                        "/validate",
                        data=fields | {"answer": value, "duration_ms": "3000"},
                        follow_redirects=False,
                    )
                    assert r.status_code == 303, r.text
                    in_batch += 1
                if in_batch == 0:
                    break
                assert in_batch == of, (in_batch, of)  # the counter was reached
                done = browser.get("/done/validate").text
                assert "Check for more work" in done and "page you came from" not in done
                served.append(in_batch)
            cast += sum(served)
            sizes.append(served)
        return cast, sizes

    votes, sizes = validate_everything()
    assert votes == 3 * 2 * len(RELATIONS)  # every Example has its three votes
    # One half of every caption, then (one reopen) the other halves.
    assert sizes == [[len(RELATIONS), len(RELATIONS)]] * 3, sizes

    engine = make_engine(db_url)
    with Session(engine) as s:
        assert len(s.exec(select(Example)).all()) == 2 * len(RELATIONS)
        assert len(s.exec(select(Vote)).all()) == votes
    engine.dispose()

    # Step 4 of the walk-through, as printed, in the demo's folder.
    report = _run([str(BIN / "vsr"), "match", "--k", "3", "--report"], env, tmp_path)
    assert f"{len(RELATIONS)} kept True Examples" in report and "multiple-choice items" in report
    # The distractors go to the validators (by default), who reject them; only then do the
    # items reach mc/.
    distractors, sizes = validate_everything()
    engine = make_engine(db_url)
    with Session(engine) as s:
        machine = s.exec(select(Example).where(Example.origin == "adversarial")).all()
    engine.dispose()
    # Every validator judges every distractor; a query's distractors share its photo, so
    # they come in batches of their own (one "Check for more work" each).
    assert machine and distractors == 3 * len(machine), sizes
    photos = Counter(e.image_id for e in machine)
    assert all(len(batches) >= max(photos.values()) for batches in sizes), sizes
    done = _run([str(BIN / "build-dataset"), "--out", "demo-dataset"], env, tmp_path)
    assert "validated" in done, done
    export = tmp_path / "demo-dataset"
    # Every caption's two Examples; the adversarial negatives validators judged are written
    # apart (machine_negatives.jsonl), not in the binary parts.
    validated = [
        json.loads(line) for line in (export / "all_validated.jsonl").read_text().splitlines()
    ]
    kept = [r for r in validated if r["origin"] == "human"]
    assert len(kept) == len(validated) == 2 * len(RELATIONS)
    assert (export / "machine_negatives.jsonl").read_text().strip()
    assert {r["relation"] for r in kept} == set(RELATIONS)
    mc = [
        line for f in sorted((export / "mc").glob("*.jsonl")) for line in f.read_text().splitlines()
    ]
    # No mc truth moves: each sits in the random part of its mc part.
    random_part = {
        (rec["image"], rec["caption"]): p
        for p in ("train", "dev", "test")
        for rec in map(json.loads, (export / "random" / f"{p}.jsonl").read_text().splitlines())
    }
    for line in mc:
        item = json.loads(line)
        assert random_part[(item["image"], item["answer_caption"])] == item["split"], item
    # Every item is in mc/ but dev/test ones whose truth is in zeroshot/train.
    left_out = json.loads((export / "stats.json").read_text())["mc"]["left_out_for_alignment"]
    engine = make_engine(db_url)
    with Session(engine) as s:
        assert len(mc) + left_out.get("mc", 0) == len(s.exec(select(McItem)).all()) > 0
    engine.dispose()
    # One count everywhere: the overview, the quality page and stats.json count the same
    # Examples (people's captions), and the judged machine negatives apart, alike.
    stats = json.loads((export / "stats.json").read_text())

    def figures() -> tuple[dict[str, Any], dict[str, Any]]:
        return (
            admin.get("/admin/api/overview.json").json(),
            admin.get("/admin/api/quality.json").json(),
        )

    expected = {
        "examples": stats["n_raw"],
        "kept": stats["n_validated"],
        "rejected": stats["n_rejected"],
        "voted": stats["n_with_votes"],
    }

    def counts(figure: dict[str, Any]) -> dict[str, Any]:
        return {key: figure.get(key) for key in expected}

    # The dashboard recounts in the background after new votes: wait for the recount.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        overview, quality = figures()
        if counts(overview) == counts(quality) == expected:
            break
        time.sleep(1)
    assert counts(overview) == expected and counts(quality) == expected, (overview, quality)
    assert quality["fleiss_kappa"] == pytest.approx(stats["fleiss_kappa"]["raw"])
    machine, negatives = overview["machine_negatives"], stats["machine_negatives"]
    assert machine["voted"] == negatives["judged"] > 0 and machine["rejected"] == negatives["kept"]
    assert machine["examples"] == negatives["judged"] + negatives["unjudged"]
    assert quality["negatives"]["machine"] == machine
    assert "Machine-made negatives vs people" in admin.get("/admin/quality").text
    # The Pipeline page counts what mc/ holds before the export's split alignment.
    ready = len(mc) + left_out.get("mc", 0)
    assert f"ready for mc/: {ready} of" in admin.get("/admin/pipeline").text
    assert not (tmp_path / "vsr.db").exists()  # nothing fell back to the default database
