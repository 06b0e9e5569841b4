"""One schedule on the fake Prolific with a return, a flag and captions kept after the plan,
and the ledger and payments it leaves (Markdown), for the lead to rerun.

Three participants each write 4 captions in their own session's batch of one Prolific study
(a kept caption earns 50p). R's 4 are kept, F's 4 are kept, L's 4 are still open. Sync,
plan; then R returns the submission on Prolific (synced) and F is flagged for gold
failures; apply. Then validation keeps L's 4 captions; plan and apply again.

    python bench/platform_schedule.py                  # SQLite in a temp dir
    python bench/platform_schedule.py --database-url postgresql+psycopg://...  (an empty,
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
    from sqlalchemy import update
    from sqlmodel import Session, col, select

    from migrations.runner import upgrade
    from tests.support import platform_work as work
    from tests.support.fake_prolific import TOKEN, running
    from vsr_core.db import make_engine
    from vsr_core.models import Example, PlatformAction, PlatformLedger, PlatformStudy
    from webapp.platforms import settlement
    from webapp.platforms.engine import Rules, apply, plan, sync
    from webapp.platforms.prolific import ProlificPlatform

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--database-url", default=None)
    args = ap.parse_args()
    url = args.database_url or f"sqlite:///{tempfile.mkdtemp()}/schedule.db"
    if args.database_url is None:
        upgrade(url)
    engine = make_engine(url)
    rules = Rules(bonus_cents_per_kept=50)
    with running() as (base, state), Session(engine) as s:
        p = ProlificPlatform(base_url=base, token=TOKEN, sleep=lambda _: None)
        ext = p.create_draft(
            {
                "name": "g",
                "external_study_url": "https://x/start",
                "total_available_places": 3,
                "reward": 100,
                "estimated_completion_time": 5,
            },
            "m-schedule",
        )
        p.publish(ext)
        study = PlatformStudy(
            study_id=1,
            platform="prolific",
            external_id=ext,
            state="published",
            settings={"kind": "generate", "reward_cents": 100},
        )
        s.add(study)
        s.commit()
        scene = work.scene(s)
        open_ids: list[int] = []
        who = {}
        for pid in ("R", "F", "L"):
            w = work.worker(s, pid)
            who[pid] = w
            b = work.batch(s, w, work.prolific_entry(ext, f"s{pid}"), size=4)
            ids = work.captions(s, b, scene, kept=4)
            state.add_submission(ext, f"s{pid}", pid, "AWAITING REVIEW")
            if pid == "L":
                open_ids = ids
        s.execute(
            update(Example)
            .where(col(Example.id).in_(open_ids))
            .values(queue_settled=False, queue_votes=1, queue_agree=1)
        )
        s.commit()
        sync(s, p, study, {})
        plan(s, study, rules)
        state.submissions["sR"]["status"] = "RETURNED"
        sync(s, p, study, {})
        f = who["F"]
        f.flagged, f.flag_reason = True, "gold failures"
        s.add(f)
        s.commit()
        apply(s, p, study)
        s.execute(
            update(Example)
            .where(col(Example.id).in_(open_ids))
            .values(queue_settled=True, queue_votes=3, queue_agree=3)
        )
        s.commit()
        plan(s, study, rules)
        apply(s, p, study)
        print("| action | submission | amount | state | reason / response |\n|---|---|---|---|---|")
        for a in s.exec(select(PlatformAction).order_by(col(PlatformAction.id))):
            why = (a.response or {}).get("cancelled") or a.reason
            print(f"| {a.kind} | {a.target} | {a.amount_cents or ''} | {a.state} | {why} |")
        print("\n| ledger unit | submission | kept | cents | bonus action |\n|---|---|---|---|---|")
        for r in s.exec(select(PlatformLedger).order_by(col(PlatformLedger.id))):
            print(
                f"| {r.unit_kind} {r.unit_id} | {r.submission_id} | {r.kept} | {r.cents} | "
                f"{r.bonus_action_id} |"
            )
        subs, work_of = settlement.work_by_submission(s, study, None, rules.keep_threshold)
        money = settlement.paid_for(s, study)
        print("\n| submission | status | money |\n|---|---|---|")
        for sub in subs:
            q = work_of[sub.id or 0].quality()
            print(
                f"| {sub.external_id} | {sub.status} | "
                f"{settlement.money_line(money.get(sub.id or 0), q, sub.status)} |"
            )
        print(
            f"\nfake Prolific: transitions {state.transitions}; paid {state.paid}; "
            f"pay requests {state.count('POST', '/pay/')}"
        )


if __name__ == "__main__":
    main()
