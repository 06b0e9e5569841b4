"""One admin session that does every recorded action, against a fresh SQLite database, then
prints the audit trail it left (docs/dashboard.md, "Audit trail").

The dashboard is driven over HTTP (a TestClient on the real app: login, settings, invites,
workers, bursts, gold, re-queue, re-validation, a job started and cancelled, a Prolific study
created, published, paused, resumed, synced, planned and applied against the fake Prolific,
members and their roles, adjudications, a label-model fit and a keep-rule switch), and the
`vsr` command as separate processes (admin accounts and roles, studies, invites,
re-validation, platform steps, the export). The session itself is tests/support/
audit_session.py, which the audit trail's tests check record by record.

    python bench/audit_session.py                 # a table of the trail
    python bench/audit_session.py --jsonl out.jsonl   # and the `vsr admin audit-export` file

Needs the real data beside the checkout (../shared: vsr/ and coco/).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jsonl", type=Path, help="Also copy the CLI's JSONL export here")
    args = ap.parse_args()
    # The `vsr` processes run this checkout's code, as the app in this process does.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from sqlmodel import Session

    from migrations.runner import upgrade
    from tests.support.audit_session import Context, run
    from tests.support.fake_prolific import TOKEN, running
    from vsr_core import audit
    from vsr_core.db import make_engine
    from vsr_core.models import AuditKind
    from vsr_core.studies.store import list_studies

    tmp = Path(tempfile.mkdtemp(prefix="audit-session-"))
    url = f"sqlite:///{tmp}/audit.db"
    upgrade(url)
    engine = make_engine(url)
    try:
        with running() as (prolific_url, state):
            os.environ["PROLIFIC_API_TOKEN"] = TOKEN
            os.environ["PROLIFIC_BASE_URL"] = prolific_url
            ctx = Context(
                url, engine, tmp, SHARED / "coco", SHARED / "vsr", prolific_url, TOKEN, state
            )
            expected = run(ctx)
        rows = list(audit.stream(engine))
        with Session(engine) as s:
            slugs = {st.id: st.slug for st in list_studies(s)}
        print(f"audit trail of one session on a fresh SQLite database ({len(rows)} records)")
        print(f"{'#':>3}  {'time (UTC)':19}  {'actor':18}  {'study':8}  {'kind':18}  target")
        for r in rows:
            who = r["actor"] + (" (cli)" if r["via"] == "cli" else "")
            study = slugs.get(r["study_id"], "-") if r["study_id"] is not None else "-"
            print(
                f"{r['id']:>3}  {r['at'][:19].replace('T', ' ')}  {who:18}  {study:8}  "
                f"{r['kind']:18}  {r['target']}"
            )
            change = json.dumps(r["change"], ensure_ascii=False)
            print(f"{'':5}{change if len(change) <= 160 else change[:159] + '…'}")
        seen = {r["kind"] for r in rows}
        print(f"kinds recorded: {len(seen)} of {len(AuditKind)}")
        missing = [k.value for k in AuditKind if k.value not in seen]
        # `vsr match` loads the matching models; tests/vsr_cli/test_first_use_round2.py runs
        # it and checks its record.
        print(f"not in this session: {', '.join(missing) or 'none'}")
        same = len(rows) == len(expected) and all(
            r["kind"] == e.kind.value and r["actor"] == e.actor and r["target"] == e.target
            for r, e in zip(rows, expected, strict=True)
        )
        print(f"every action left exactly its expected record: {'yes' if same else 'NO'}")
        if args.jsonl is not None:
            shutil.copyfile(tmp / "audit.jsonl", args.jsonl)
            print(f"the CLI's JSONL export: {args.jsonl}")
    finally:
        engine.dispose()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
