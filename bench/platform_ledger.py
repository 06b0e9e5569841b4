"""A scripted run through three Prolific studies on the fake Prolific, and the settlement
ledger it leaves (a Markdown table), for the lead to rerun.

One worker P writes 4 captions (8 Examples: 6 kept, 2 not) in study A from session sA, then
submits the completion code of study B (generate; no batch) and of study C (validate; a batch
opened from session sC with 2 votes). Worker R votes 3 times in C. Every study is synced,
planned (a kept caption earns 50p, a vote 2p) and applied; the pay request of A answers after
the client gave up (the fake's slow mode), so it is sent once and left 'unknown'.

    python bench/platform_ledger.py                  # SQLite in a temp dir
    python bench/platform_ledger.py --database-url postgresql+psycopg://...  (an empty,
                                                      migrated database)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from sqlmodel import Session, col, select

    from migrations.runner import upgrade
    from tests.support import platform_work as work
    from tests.support.fake_prolific import TOKEN, running
    from vsr_core.db import make_engine
    from vsr_core.models import PlatformAction, PlatformLedger, PlatformStudy, PlatformSubmission
    from webapp.platforms.engine import Rules, apply, plan, sync
    from webapp.platforms.prolific import ProlificPlatform

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--database-url", default=None)
    args = ap.parse_args()
    url = args.database_url or f"sqlite:///{tempfile.mkdtemp()}/ledger.db"
    upgrade(url)
    engine = make_engine(url)
    with running() as (base, state), Session(engine) as s:
        p = ProlificPlatform(base_url=base, token=TOKEN, timeout=0.3, sleep=lambda _: None)
        rows = {}
        for name, kind in (("A", "generate"), ("B", "generate"), ("C", "validate")):
            ext = p.create_draft(
                {
                    "name": name,
                    "external_study_url": "https://x/",
                    "total_available_places": 5,
                    "reward": 100,
                    "estimated_completion_time": 5,
                },
                f"m{name}",
            )
            p.publish(ext)
            rows[name] = PlatformStudy(
                platform="prolific",
                external_id=ext,
                state="published",
                settings={"kind": kind, "reward_cents": 100},
            )
            s.add(rows[name])
        s.commit()
        scene = work.scene(s)
        who, other = work.worker(s, "P"), work.worker(s, "R")
        work.captions(
            s,
            work.batch(s, who, work.prolific_entry(rows["A"].external_id, "sA")),
            scene,
            kept=6,
            not_kept=2,
        )
        work.votes(
            s,
            work.batch(s, who, work.prolific_entry(rows["C"].external_id, "sC"), kind="validate"),
            scene,
            2,
        )
        work.votes(
            s,
            work.batch(s, other, work.prolific_entry(rows["C"].external_id, "rC"), kind="validate"),
            scene,
            3,
        )
        for name, sub, pid in (
            ("A", "sA", "P"),
            ("B", "sB", "P"),
            ("C", "sC", "P"),
            ("C", "rC", "R"),
        ):
            state.add_submission(rows[name].external_id, sub, pid, "AWAITING REVIEW")
        rules = Rules(min_items=1, bonus_cents_per_kept=50, bonus_cents_per_vote=2)
        state.slow, state.slow_paths = 0.6, ("/pay/",)
        for name in "ABC":
            state.slow = 0.6 if name == "A" else 0.0
            sync(s, p, rows[name], {})
            plan(s, rows[name], rules)
            counts = apply(s, p, rows[name])
            print(f"study {name}: {counts}")
        names = {r.id: n for n, r in rows.items()}
        subs = {x.id: x.external_id for x in s.exec(select(PlatformSubmission))}
        actions = {a.id: a for a in s.exec(select(PlatformAction))}
        print("\n| # | platform study | submission | unit | kept | batch | cents | paid by |")
        print("|---|---|---|---|---|---|---|---|")
        for r in s.exec(select(PlatformLedger).order_by(col(PlatformLedger.id))):
            a = actions.get(r.bonus_action_id or 0)
            paid_by = f"bonus #{a.id} ({a.state})" if a else "reward (approve)"
            print(
                f"| {r.id} | {names[r.platform_study_id]} | {subs[r.submission_id]} | "
                f"{r.unit_kind} {r.unit_id} | {'yes' if r.kept else 'no'} | {r.batch_id} | "
                f"{r.cents} | {paid_by} |"
            )
        print("\n| action | study | submission | amount | state |")
        print("|---|---|---|---|---|")
        for a in sorted(actions.values(), key=lambda a: a.id or 0):
            print(
                f"| {a.kind} | {names[a.platform_study_id]} | {a.target} | "
                f"{a.amount_cents or ''} | {a.state} |"
            )
        print(f"\nfake Prolific paid: {state.paid}; pay requests: {state.count('POST', '/pay/')}")
        print(f"transitions: {sorted(state.transitions)}")


if __name__ == "__main__":
    main()
