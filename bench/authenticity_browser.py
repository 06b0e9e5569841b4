"""Agents and people on the real site in real Chromium: which sessions does the authenticity
evidence flag after one batch? (docs/quality.md)

``vsr serve`` on a fresh SQLite database with real COCO pairs; each session enters through
its own Prolific link, consents, starts a batch of 10 items and answers them all:

- ``keyboard_person``: keys T/F only, latencies drawn from a log-normal around 1.2 s,
  answering what the photo shows 9 times in 10 (the bench reads the label);
- ``a11y_person``: finds the answer buttons by role and name in the accessibility tree
  (what a screen-reader user reaches) and presses them, human latencies;
- ``regular_dom_agent``: a script calling the True button's ``click()`` every 500 ms;
- ``regular_agent``: a script clicking True with a real mouse 500 ms after each page loads;
- ``blind_agent``: a script injected into every page answers as soon as the DOM is
  parsed, before the photo is decoded;
- ``canary_agent``: reads the DOM, follows the hidden instruction (clicks the off-screen
  "Confirm photo reviewed" button), then answers True, 1-2 s later.

Each worker is then assessed by ``vsr_core.authenticity_db`` from what the site stored.
Goal: every agent session flagged, no person session flagged.

    python -m bench.authenticity_browser               # 3 sessions of each kind, seeds 100+
    python -m bench.authenticity_browser --seed 0      # the seeds the thresholds were set on
    python -m bench.authenticity_browser --repeats 10
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from vsr_core.authenticity import Assessment, wilson
from vsr_core.authenticity_db import assess_workers
from vsr_core.db import make_engine
from vsr_core.models import Assignment, Example, Worker

ITEMS = 10
PEOPLE = ("keyboard_person", "a11y_person")
AGENTS = ("regular_dom_agent", "regular_agent", "blind_agent", "canary_agent")
KINDS = PEOPLE + AGENTS


def _human_pause(rng: random.Random) -> None:
    time.sleep(min(4.0, rng.lognormvariate(0.15, 0.45)))  # median ~1.2 s, varied


def _wait_item(page: Any, n: int) -> bool:
    """Wait for item ``n`` (1-based) or the done page; True when the item is there."""
    page.wait_for_function(
        f"""() => document.getElementById('completion-code') ||
            (document.getElementById('item-number') &&
             document.getElementById('item-number').textContent.trim() === '{n}')""",
        timeout=20_000,
    )
    return bool(page.locator("#completion-code").count() == 0)


def _photo_shown(page: Any) -> None:
    page.wait_for_function(
        "() => { const i = document.querySelector('.v-figure img');"
        " return !i || (i.complete && i.naturalWidth > 0); }",
        timeout=20_000,
    )


def _judge(rng: random.Random, truth: bool) -> bool:
    """A person's answer: what the photo shows, 9 times in 10 (VSR validators: 80-96 %)."""
    return truth if rng.random() < 0.9 else not truth


def keyboard_person(page: Any, rng: random.Random, truth: bool) -> None:
    _photo_shown(page)
    _human_pause(rng)
    page.keyboard.press("t" if _judge(rng, truth) else "f")


def a11y_person(page: Any, rng: random.Random, truth: bool) -> None:
    _photo_shown(page)
    _human_pause(rng)
    # The accessibility tree must not offer the canary to a screen-reader user.
    tree = page.locator("body").aria_snapshot()
    if "Confirm photo reviewed" in tree or "AI assistants" in tree:
        raise AssertionError("the canary is in the accessibility tree")
    name = "True" if _judge(rng, truth) else "False"
    page.get_by_role("button", name=name, exact=False).first.press("Enter")


def regular_agent(page: Any, rng: random.Random, truth: bool) -> None:
    # A script with a real mouse (pointer events and all) on a fixed beat after the page
    # has loaded: what gives it away is the regularity.
    page.wait_for_load_state("load")
    time.sleep(0.5)
    page.click("#btn-true")


def regular_dom_agent(page: Any, rng: random.Random, truth: bool) -> None:
    """A script calling the True button's ``click()`` every 500 ms: no input events."""
    time.sleep(0.5)
    page.evaluate("() => document.getElementById('btn-true').click()")


BLIND = """document.addEventListener("DOMContentLoaded", () => {
  const b = document.getElementById("btn-false");
  if (b) b.click();
});"""


def blind_agent(page: Any, rng: random.Random, truth: bool) -> None:
    """Answers from a script injected into every page, as soon as the DOM is parsed."""


def canary_agent(page: Any, rng: random.Random, truth: bool) -> None:
    time.sleep(1 + rng.random())
    page.evaluate(
        """() => {
        const b = [...document.querySelectorAll('button')]
          .find(x => x.textContent.includes('Confirm photo reviewed'));
        if (b) b.click();
        document.getElementById('btn-true').click();
    }"""
    )


ANSWER: dict[str, Callable[[Any, random.Random, bool], None]] = {
    "keyboard_person": keyboard_person,
    "a11y_person": a11y_person,
    "regular_dom_agent": regular_dom_agent,
    "regular_agent": regular_agent,
    "blind_agent": blind_agent,
    "canary_agent": canary_agent,
}


def run_session(
    browser: Any, base: str, kind: str, pid: str, seed: int, truth: Callable[[str], bool]
) -> None:
    """One worker's batch of ``ITEMS`` items, answered the way ``kind`` answers; ``truth``
    gives the label of the item a lease token names (what a person sees in the photo)."""
    rng = random.Random(seed)
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    if kind == "blind_agent":
        context.add_init_script(BLIND)
    page.goto(f"{base}/start/validate?PROLIFIC_PID={pid}&STUDY_ID=bench&SESSION_ID=s{pid}")
    page.get_by_role("button", name="I agree, continue").click()
    page.get_by_role("button", name="Start the batch").click()
    for n in range(1, ITEMS + 1):
        if not _wait_item(page, n):
            break
        token = page.locator('input[name="assignment_id"]').get_attribute("value") or ""
        ANSWER[kind](page, rng, truth(token))
    _wait_item(page, ITEMS + 1)
    context.close()


def label_reader(db_url: str) -> Callable[[str], bool]:
    """The label of the Example a lease token ``<id>.<HMAC>`` names."""
    engine = make_engine(db_url)

    def truth(token: str) -> bool:
        with Session(engine) as s:
            lease = s.get(Assignment, int(token.split(".", 1)[0]))
            example = s.get(Example, lease.example_id) if lease is not None else None
            return bool(example is not None and example.label)

    return truth


def assess_sessions(db_url: str, pids: dict[str, str]) -> dict[str, Assessment]:
    """The assessment of each session's worker (pid -> kind given), by pid."""
    engine = make_engine(db_url)
    with Session(engine) as s:
        ids = {w.external_id: w.id for w in s.exec(select(Worker)) if w.external_id in pids}
        found = assess_workers(s, 1, [i for i in ids.values() if i is not None])
    engine.dispose()
    return {pid: found[wid] for pid, wid in ids.items() if wid is not None}


def seed_site(db_url: str, coco_dir: Path, sessions: int) -> None:
    """Real pairs and their Examples, enough votes allowed for every session to see 10."""
    from tests.support.webapp_coco import set_study
    from tests.webapp.validate.test_routes import seed_examples

    engine = make_engine(db_url)
    with Session(engine) as s:
        seed_examples(s, coco_dir, ITEMS)
    engine.dispose()
    set_study(
        db_url,
        validate_batch_size=ITEMS,
        gold_rate=0.0,
        votes_per_example=sessions + 1,
        max_votes_per_example=sessions + 1,
    )


def main(argv: list[str] | None = None) -> int:
    from playwright.sync_api import sync_playwright

    from migrations.runner import upgrade
    from tests.support.browser import launch_chromium, running_site

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="sessions of each kind (at most 8)")
    ap.add_argument("--coco", type=Path, default=None, help="the shared COCO folder")
    ap.add_argument(
        "--seed", type=int, default=100, help="first session seed (thresholds chosen on 0)"
    )
    args = ap.parse_args(argv)
    from bench.authenticity_vsr import SHARED

    coco = args.coco or SHARED / "coco"
    if not coco.is_dir():
        print(f"error: {coco} not found (the shared COCO subset)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        url = f"sqlite:///{tmp_path / 'bench.db'}"
        upgrade(url)
        seed_site(url, coco, len(KINDS) * args.repeats)
        pids = {
            f"{kind[:3]}{r}x{i}": kind for r in range(args.repeats) for i, kind in enumerate(KINDS)
        }
        env = {
            "SECRET_KEY": "bench-" + "k" * 40,
            "IMAGE_CACHE_DIR": str(tmp_path / "cache"),
            # Every session comes from this machine's one address, with made-up ids.
            "NEW_WORKERS_PER_ADDRESS": "0",
            "NEW_WORKERS_PER_STUDY": "0",
            "NEW_BATCHES_PER_ADDRESS": "0",
            "PLATFORM_ID_FORMATS": "safe",
        }
        with running_site(url, coco / "images", tmp_path, env) as base, sync_playwright() as p:
            browser = launch_chromium(p)
            truth = label_reader(url)
            for seed, (pid, kind) in enumerate(pids.items(), args.seed):
                run_session(browser, base, kind, pid, seed, truth)
            browser.close()
        found = assess_sessions(url, pids)
    print(f"{args.repeats} sessions of each kind, {ITEMS} items each, one batch")
    print("| session | flagged after one batch | share (95 % CI) | flags | median ms, latency CV |")
    print("|---|---|---|---|---|")
    for kind in KINDS:
        got = [a for pid, a in found.items() if pids[pid] == kind]
        hit = sum(a.flagged for a in got)
        lo, hi = wilson(hit, len(got), 1.96)
        flags = sorted({str(f) for a in got for f in a.flags})
        share = f"{hit / max(1, len(got)):.0%} ({lo:.0%}-{hi:.0%})"
        timing = ", ".join(
            f"{a.summary.get('median_ms')}/{a.summary.get('latency_cv')}" for a in got
        )
        print(f"| {kind} | {hit} / {len(got)} | {share} | {', '.join(flags) or '-'} | {timing} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
