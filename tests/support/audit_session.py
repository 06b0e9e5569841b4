"""One admin session that does every recorded action the way a lab does it: the dashboard
through HTTP (a TestClient on the real app) and the `vsr` command as a separate process, on
a real database, with real VSR release records and the fake Prolific for the platform steps.

``run`` returns, in order, the record each action must leave (``Expect``): the audit
trail's tests compare the trail with it, and bench/audit_session.py prints the trail of a
fresh database.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.support import platform_work as work
from tests.support.admin_seed import RAW, read_raw, seed
from tests.support.webapp_coco import enter
from vsr_core.models import (
    DEFAULT_STUDY_ID,
    AdminUser,
    AuditKind,
    Example,
    ImagePair,
    InviteToken,
    Job,
    LabelModelFit,
    PlatformStudy,
    Study,
    Worker,
)
from vsr_core.settings import DEMO_DATA_DIR, Settings
from vsr_core.studies.settings import load_study_config
from webapp.app import create_app

PASSWORD = "correct horse battery"
NEW_PASSWORD = "another horse battery staple"
ROOT = Path(__file__).resolve().parents[2]
ZH_FILE = ROOT / "studies" / "vsr-zh.toml"
VSR_BIN = Path(sys.executable).parent / "vsr"
BURST_ADDRESS = "198.51.100.7"
BURST_PID = "5f1e2d3c4b5a69788796"  # + 4 hex digits
ADMIN = "alice"
MEMBER = "bob"
MEMBER_PASSWORD = "bob's own long password"
CLI_ACTOR = f"cli:{getpass.getuser()}"


@dataclass
class Expect:
    """The record one action must leave: these fields equal, ``change`` a subset."""

    kind: AuditKind
    actor: str
    study_id: int | None
    target: str
    change: dict[str, Any] = field(default_factory=dict)
    via: str = "dashboard"


@dataclass
class Context:
    db_url: str
    engine: Engine
    tmp: Path
    coco_dir: Path
    vsr_dir: Path
    prolific_url: str  # the fake Prolific's API (tests.support.fake_prolific)
    prolific_token: str
    prolific_state: Any  # the fake's State: what Prolific holds
    expected: list[Expect] = field(default_factory=list)

    def expect(self, *args: Any, **kwargs: Any) -> None:
        self.expected.append(Expect(*args, **kwargs))

    def cli(self, *args: str, admin: str | None = None, **env: str) -> str:
        """`vsr ...` as a separate process on this database; ``admin``: VSR_ADMIN."""
        full = {
            **os.environ,
            "PROLIFIC_API_TOKEN": self.prolific_token,
            "PROLIFIC_BASE_URL": self.prolific_url,
            **env,
        }
        full.pop("VSR_DEBUG", None)
        full.pop("VSR_ADMIN", None)
        full.pop("VSR_ADMIN_SECRET", None)
        if admin is not None:  # proven by their password (vsr_cli.actor)
            full["VSR_ADMIN"] = admin
            full["VSR_ADMIN_SECRET"] = PASSWORD
        done = subprocess.run(
            [str(VSR_BIN), *args, "--database-url", self.db_url],
            capture_output=True,
            text=True,
            env=full,
            timeout=300,
        )
        assert done.returncode == 0, f"vsr {' '.join(args)}: {done.stderr}"
        return done.stdout


def _csrf(page: str) -> str:
    m = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert m, "no CSRF field on the page"
    return m.group(1)


def _post(client: TestClient, url: str, **data: Any) -> str:
    r = client.post(url, data=data, follow_redirects=False)
    assert r.status_code == 303, f"{url}: {r.status_code} {r.text[:500]}"
    return str(r.headers["location"])


def make_app(ctx: Context) -> Any:
    settings = Settings(
        database_url=ctx.db_url,
        secret_key="audit-session-secret-0123456789abcdef",
        image_cache_dir=ctx.tmp / "var" / "image_cache",
        base_url="http://testserver",
        data_roots=",".join(map(str, (DEMO_DATA_DIR, ctx.coco_dir, ctx.tmp))),
    )
    return create_app(settings, ctx.engine)


def run(ctx: Context) -> list[Expect]:
    """Every action, each followed by the record it must leave; returns them in order."""
    with Session(ctx.engine) as s:
        empty = s.exec(select(Worker)).first() is None
    if empty:
        seed(ctx.engine, read_raw(ctx.vsr_dir, every=400))
    _accounts_by_cli(ctx)
    app = make_app(ctx)
    client = TestClient(app)
    token = _login(ctx, client)
    _settings_and_invite(ctx, client, token)
    _workers(ctx, client, token, app)
    _examples(ctx, client, token)
    _jobs(ctx, client, token)
    ps = _platform(ctx, client, token)
    _studies_by_cli(ctx, ps)
    _members(ctx, client, token)
    _adjudication(ctx, client, token)
    _label_models(ctx, client, token)
    _exports(ctx, client)
    _post(client, "/admin/logout", csrf_token=token)
    ctx.expect(AuditKind.logout, ADMIN, None, ADMIN)
    # A new password ends every session of the old one: last.
    ctx.cli("admin", "create", "--username", ADMIN, "--update", VSR_ADMIN_PASSWORD=NEW_PASSWORD)
    ctx.expect(AuditKind.password_change, CLI_ACTOR, None, f"admin {ADMIN}", {}, "cli")
    return ctx.expected


def _accounts_by_cli(ctx: Context) -> None:
    # alice owns the default study, so she can act in it on the dashboard and at the CLI.
    ctx.cli(
        "admin",
        "create",
        "--username",
        ADMIN,
        "--study",
        "vsr",
        "--role",
        "owner",
        VSR_ADMIN_PASSWORD=PASSWORD,
    )
    with Session(ctx.engine) as s:
        alice = s.exec(select(AdminUser).where(AdminUser.username == ADMIN)).one()
        alice_id = alice.id
    ctx.expect(
        AuditKind.admin_create, CLI_ACTOR, None, f"admin {ADMIN}", {"admin_id": alice_id}, "cli"
    )
    ctx.expect(
        AuditKind.role_grant,
        CLI_ACTOR,
        DEFAULT_STUDY_ID,
        ADMIN,
        {"before": None, "after": "owner"},
        "cli",
    )


def _login(ctx: Context, client: TestClient) -> str:
    form = client.get("/admin/login")
    r = client.post(
        "/admin/login",
        data={
            "username": "mallory",
            "password": "guess-guess-guess",
            "csrf_token": _csrf(form.text),
        },
    )
    assert r.status_code == 401
    ctx.expect(
        AuditKind.login_failed,
        "mallory",
        None,
        "mallory",
        {"reason": "unknown username or wrong password"},
    )
    form = client.get("/admin/login")
    _post(
        client,
        "/admin/login",
        username=ADMIN,
        password=PASSWORD,
        csrf_token=_csrf(form.text),
        next="/admin",
    )
    ctx.expect(AuditKind.login, ADMIN, None, ADMIN)
    return _csrf(client.get("/admin/settings").text)


def _settings_and_invite(ctx: Context, client: TestClient, token: str) -> None:
    with Session(ctx.engine) as s:
        before = load_study_config(s, DEFAULT_STUDY_ID).votes_per_example
    _post(client, "/admin/settings", csrf_token=token, votes_per_example=str(before + 1))
    ctx.expect(
        AuditKind.settings_change,
        ADMIN,
        DEFAULT_STUDY_ID,
        "settings",
        {"before": {"votes_per_example": before}, "after": {"votes_per_example": before + 1}},
    )
    _post(client, "/admin/settings/invites", csrf_token=token, label="RA Jane", roles="validate")
    with Session(ctx.engine) as s:
        invite = s.exec(select(InviteToken).where(InviteToken.label == "RA Jane")).one()
    ctx.expect(
        AuditKind.invite_create,
        ADMIN,
        DEFAULT_STUDY_ID,
        f"invite {invite.id}",
        {"label": "RA Jane", "roles": ["validate"]},
    )


def _workers(ctx: Context, client: TestClient, token: str, app: Any) -> None:
    with Session(ctx.engine) as s:
        w = s.exec(
            select(Worker).where(col(Worker.blocked).is_(False)).order_by(col(Worker.id))
        ).first()
        assert w is not None and w.id is not None
        wid = w.id
    base = f"/admin/workers/{wid}"
    _post(client, f"{base}/block", csrf_token=token, reason="copied captions")
    ctx.expect(
        AuditKind.worker_block,
        ADMIN,
        DEFAULT_STUDY_ID,
        f"worker {wid}",
        {"before": {"blocked": False}, "after": {"blocked": True}, "reason": "copied captions"},
    )
    _post(client, f"{base}/unblock", csrf_token=token)
    ctx.expect(
        AuditKind.worker_unblock,
        ADMIN,
        DEFAULT_STUDY_ID,
        f"worker {wid}",
        {"before": {"blocked": True}, "after": {"blocked": False}},
    )
    _post(client, f"{base}/flag", csrf_token=token, flagged="true", reason="check again")
    ctx.expect(
        AuditKind.worker_flag,
        ADMIN,
        DEFAULT_STUDY_ID,
        f"worker {wid}",
        {"before": {"reason": "copied captions"}, "after": {"reason": "check again"}},
    )
    # Three new identities from one address: a burst on /admin/bursts, cut in one step.
    crowd = TestClient(app, client=(BURST_ADDRESS, 40000))
    for k in range(3):
        crowd.cookies.clear()
        # Prolific's own id format (24 hex digits), as a served site demands.
        pid = f"{BURST_PID}{k:04x}"
        enter(crowd, f"PROLIFIC_PID={pid}&STUDY_ID={pid}&SESSION_ID={pid}")
    assert f'data-address="{BURST_ADDRESS}"' in client.get("/admin/bursts").text
    with Session(ctx.engine) as s:
        ids = sorted(
            w.id or 0
            for w in s.exec(select(Worker).where(col(Worker.external_id).startswith(BURST_PID)))
        )
    _post(client, "/admin/bursts/cut", csrf_token=token, address=BURST_ADDRESS)
    ctx.expect(
        AuditKind.burst_cut, ADMIN, DEFAULT_STUDY_ID, BURST_ADDRESS, {"workers": ids, "hours": 24.0}
    )


def _examples(ctx: Context, client: TestClient, token: str) -> None:
    with Session(ctx.engine) as s:
        first, second = s.exec(select(Example).order_by(col(Example.id)).limit(2)).all()
        # As if written in this study: imported Examples are not served, so not re-queued.
        second.origin = "human"
        s.add(second)
        s.commit()
        gold_id, requeue_id = first.id, second.id
        votes = load_study_config(s, DEFAULT_STUDY_ID).votes_per_example
    _post(client, f"/admin/examples/{gold_id}/gold", csrf_token=token, gold="true")
    ctx.expect(
        AuditKind.gold_mark,
        ADMIN,
        DEFAULT_STUDY_ID,
        f"example {gold_id}",
        {
            "before": {"gold": False, "gold_label": None},
            "after": {"gold": True, "gold_label": True},
        },
    )
    _post(client, f"/admin/examples/{requeue_id}/requeue", csrf_token=token, extra_votes="2")
    ctx.expect(
        AuditKind.requeue,
        ADMIN,
        DEFAULT_STUDY_ID,
        f"example {requeue_id}",
        {"before": {"target_votes": votes}, "extra_votes": 2},
    )
    _post(client, "/admin/revalidation", csrf_token=token, sample="3", seed="1", round_name="web1")
    ctx.expect(
        AuditKind.revalidation_round,
        ADMIN,
        DEFAULT_STUDY_ID,
        "round web1",
        {"sample": 3, "seed": 1, "opened": 3},
    )


def _jobs(ctx: Context, client: TestClient, token: str) -> None:
    files = str(ctx.coco_dir / "annotations" / "instances_train2017_subset.json")
    _post(client, "/admin/jobs/sample", csrf_token=token, n_pairs="100000", coco_files=files)
    with Session(ctx.engine) as s:
        job = s.exec(select(Job).order_by(col(Job.id).desc())).first()
        assert job is not None
        job_id = job.id
    # The job's process is paused until the cancel has been sent: on a quiet machine a small
    # sample run finishes before the admin's next request (then the cancel is a 409).
    pid = job.params.get("_pid")
    if isinstance(pid, int):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    ctx.expect(
        AuditKind.job_start,
        ADMIN,
        DEFAULT_STUDY_ID,
        f"job {job_id}",
        {"kind": "sample", "params": {**_params(job.params), "n_pairs": 100000}},
    )
    _post(client, f"/admin/jobs/{job_id}/cancel", csrf_token=token)
    if isinstance(pid, int):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)  # it ends on the cancel's SIGTERM
    ctx.expect(
        AuditKind.job_cancel,
        ADMIN,
        DEFAULT_STUDY_ID,
        f"job {job_id}",
        {"kind": "sample", "after": {"status": "cancelled"}},
    )


def _params(params: dict[str, Any]) -> dict[str, Any]:
    """A job's parameters as the admin gave them (without the launcher's own keys)."""
    return {k: v for k, v in params.items() if not k.startswith("_")}


def _platform(ctx: Context, client: TestClient, token: str) -> int:
    form = {"platform": "prolific", "kind": "generate", "reward_cents": "900", "places": "2"}
    where = _post(client, "/admin/platform/create", csrf_token=token, expected_minutes="80", **form)
    ps = int(where.split("ps=")[1])
    with Session(ctx.engine) as s:
        row = s.get(PlatformStudy, ps)
        assert row is not None
        ext = row.external_id
    target = f"platform study {ps}"
    ctx.expect(
        AuditKind.platform_create,
        ADMIN,
        DEFAULT_STUDY_ID,
        target,
        {"platform": "prolific", "external_id": ext, "state": "draft", "reward_cents": 900},
    )
    for step, was, now in (
        ("publish", "draft", "published"),
        ("pause", "published", "paused"),
        ("resume", "paused", "published"),
    ):
        _post(client, f"/admin/platform/{ps}/{step}", csrf_token=token)
        ctx.expect(
            AuditKind.platform_step,
            ADMIN,
            DEFAULT_STUDY_ID,
            target,
            {"step": step, "before": {"state": was}, "after": {"state": now}},
        )
    # p1 wrote two kept captions, p2 nothing: an approve with a bonus, and a reject.
    with Session(ctx.engine) as s:
        p1 = work.worker(s, "p1")
        work.worker(s, "p2")
        # The batch's own size is the least work approved: two captions of two.
        b = work.batch(s, p1, work.prolific_entry(ext, "s1"), size=2)
        work.captions(s, b, work.scene(s), kept=2)
    for sub, pid in (("s1", "p1"), ("s2", "p2")):
        ctx.prolific_state.add_submission(ext, sub, pid, "AWAITING REVIEW")
    _post(client, f"/admin/platform/{ps}/sync", csrf_token=token)
    ctx.expect(
        AuditKind.platform_step,
        ADMIN,
        DEFAULT_STUDY_ID,
        target,
        {"step": "sync", "submissions": 2, "leases_released": 0},
    )
    _post(client, f"/admin/platform/{ps}/plan", csrf_token=token, bonus_cents_per_kept="20")
    ctx.expect(
        AuditKind.platform_plan,
        ADMIN,
        DEFAULT_STUDY_ID,
        target,
        {"new_actions": {"approve": 1, "reject": 1, "bonus": 1}, "bonus_cents": 40},
    )
    page = client.get(where).text
    seen = re.search(r'name="seen" value="(\w+)"', page)
    assert seen
    _post(client, f"/admin/platform/{ps}/apply", csrf_token=token, confirm="yes", seen=seen[1])
    ctx.expect(AuditKind.platform_apply, ADMIN, DEFAULT_STUDY_ID, target, {"external_id": ext})
    for kind, sub, cents in (("approve", "s1", 0), ("bonus", "s1", 40), ("reject", "s2", 0)):
        ctx.expect(
            AuditKind.platform_action,
            ADMIN,
            DEFAULT_STUDY_ID,
            f"{kind} {sub}",
            {"platform_study": ps, "action": kind, "amount_cents": cents, "state": "done"},
        )
    # The same steps at the CLI, as the study's owner (VSR_ADMIN).
    ctx.cli("platform", "pause", "--platform", "prolific", "--platform-study", str(ps), admin=ADMIN)
    ctx.expect(
        AuditKind.platform_step,
        ADMIN,
        DEFAULT_STUDY_ID,
        target,
        {"step": "pause", "after": {"state": "paused"}},
        "cli",
    )
    ctx.cli("platform", "plan", "--platform", "prolific", "--platform-study", str(ps), admin=ADMIN)
    ctx.expect(
        AuditKind.platform_plan,
        ADMIN,
        DEFAULT_STUDY_ID,
        target,
        {"new_actions": {}, "bonus_cents": 0},
        "cli",
    )
    ctx.cli("platform", "apply", "--platform", "prolific", "--platform-study", str(ps), admin=ADMIN)
    ctx.expect(AuditKind.platform_apply, ADMIN, DEFAULT_STUDY_ID, target, {}, "cli")
    return ps


def _studies_by_cli(ctx: Context, ps: int) -> None:
    # Five records of the real release (not among those seeded: every 400th) imported.
    raw = (ctx.vsr_dir / RAW).read_text(encoding="utf-8").splitlines()[1:6]
    release = ctx.tmp / "five_records.jsonl"
    release.write_text("\n".join(raw) + "\n", encoding="utf-8")
    ctx.cli("import-vsr", str(release), "-q", admin=ADMIN)
    ctx.expect(
        AuditKind.release_import,
        ADMIN,
        DEFAULT_STUDY_ID,
        release.name,
        {"records": 5},
        "cli",
    )
    coco = ctx.coco_dir / "annotations" / "instances_val2017_subset.json"
    with Session(ctx.engine) as s:
        before = {p.id for p in s.exec(select(ImagePair))}
    ctx.cli("sample", "--coco", str(coco), "--pairs", "3", "--seed", "2", admin=ADMIN)
    with Session(ctx.engine) as s:
        new = [p for p in s.exec(select(ImagePair)) if p.id not in before]
    (run_id,) = {p.sample_run for p in new}
    pairs = len(new)
    ctx.expect(
        AuditKind.sample_run,
        ADMIN,
        DEFAULT_STUDY_ID,
        f"sample run {run_id}",
        {"params": {"n_pairs": 3, "seed": 2, "coco_files": [str(coco)]}, "stored": pairs},
        "cli",
    )
    ctx.cli("study", "create", "--file", str(ZH_FILE))
    with Session(ctx.engine) as s:
        zh = s.exec(select(Study).where(Study.slug == "vsr-zh")).one()
        zh_id, first_hash = zh.id, zh.definition_hash
    ctx.expect(
        AuditKind.study_create,
        CLI_ACTOR,
        zh_id,
        "study vsr-zh",
        {"sha256": first_hash},
        "cli",
    )
    renamed = ctx.tmp / "vsr-zh-renamed.toml"
    renamed.write_text(
        ZH_FILE.read_text(encoding="utf-8").replace(
            'name = "视觉空间推理（VSR，简体中文）"', 'name = "视觉空间推理（第二版）"', 1
        ),
        encoding="utf-8",
    )
    ctx.cli("study", "update", "--file", str(renamed))
    with Session(ctx.engine) as s:
        zh = s.exec(select(Study).where(Study.slug == "vsr-zh")).one()
        new_hash = zh.definition_hash
    ctx.expect(
        AuditKind.study_update,
        CLI_ACTOR,
        zh_id,
        "study vsr-zh",
        {"version": 2, "before": {"sha256": first_hash}, "after": {"sha256": new_hash}},
        "cli",
    )
    ctx.cli("invite", "create", "--study", "vsr-zh", "--label", "RA Li", "--roles", "generate")
    with Session(ctx.engine) as s:
        invite = s.exec(select(InviteToken).where(InviteToken.label == "RA Li")).one()
    ctx.expect(
        AuditKind.invite_create,
        CLI_ACTOR,
        zh_id,
        f"invite {invite.id}",
        {"label": "RA Li", "roles": ["generate"]},
        "cli",
    )
    ctx.cli("revalidate", "--sample", "2", "--round", "cli1", admin=ADMIN)
    ctx.expect(
        AuditKind.revalidation_round,
        ADMIN,
        DEFAULT_STUDY_ID,
        "round cli1",
        {"sample": 2, "opened": 2},
        "cli",
    )
    ctx.cli("study", "archive", "vsr-zh")
    ctx.expect(
        AuditKind.study_archive,
        CLI_ACTOR,
        zh_id,
        "study vsr-zh",
        {"before": {"archived": False}, "after": {"archived": True}},
        "cli",
    )


def _members(ctx: Context, client: TestClient, token: str) -> None:
    """The Members page: a new account with a role, a role change, a removal; then the same
    by `vsr admin grant/revoke` as the study's owner."""
    _post(
        client,
        "/admin/members/create",
        csrf_token=token,
        username=MEMBER,
        password=MEMBER_PASSWORD,
        role="viewer",
    )
    with Session(ctx.engine) as s:
        member = s.exec(select(AdminUser).where(AdminUser.username == MEMBER)).one()
    ctx.expect(AuditKind.admin_create, ADMIN, None, f"admin {MEMBER}", {"admin_id": member.id})
    ctx.expect(
        AuditKind.role_grant, ADMIN, DEFAULT_STUDY_ID, MEMBER, {"before": None, "after": "viewer"}
    )
    assert f'data-username="{MEMBER}"' in client.get("/admin/members").text
    _post(client, "/admin/members/grant", csrf_token=token, username=MEMBER, role="researcher")
    ctx.expect(
        AuditKind.role_grant,
        ADMIN,
        DEFAULT_STUDY_ID,
        MEMBER,
        {"before": "viewer", "after": "researcher"},
    )
    _post(client, "/admin/members/revoke", csrf_token=token, username=MEMBER)
    ctx.expect(
        AuditKind.role_revoke,
        ADMIN,
        DEFAULT_STUDY_ID,
        MEMBER,
        {"before": "researcher", "after": None},
    )
    ctx.cli("admin", "grant", MEMBER, "--study", "vsr", "--role", "viewer", admin=ADMIN)
    ctx.expect(
        AuditKind.role_grant,
        ADMIN,
        DEFAULT_STUDY_ID,
        MEMBER,
        {"before": None, "after": "viewer"},
        "cli",
    )
    ctx.cli("admin", "revoke", MEMBER, "--study", "vsr", admin=ADMIN)
    ctx.expect(
        AuditKind.role_revoke,
        ADMIN,
        DEFAULT_STUDY_ID,
        MEMBER,
        {"before": "viewer", "after": None},
        "cli",
    )


def _adjudication(ctx: Context, client: TestClient, token: str) -> None:
    """One Example settled from its page, two from the data browser's ticks, then the first
    settlement withdrawn."""
    page = client.get("/admin/data").text
    one, *two = [int(i) for i in re.findall(r'name="ids" value="(\d+)"', page)][:3]
    assert len(two) == 2
    assert f'action="/admin/examples/{one}/adjudicate"' in client.get(f"/admin/examples/{one}").text
    reason = "the image shows the cat under the table"
    _post(
        client,
        f"/admin/examples/{one}/adjudicate",
        csrf_token=token,
        decision="false",
        reason=reason,
    )
    ctx.expect(
        AuditKind.adjudicate,
        ADMIN,
        DEFAULT_STUDY_ID,
        f"example {one}",
        {"before": None, "after": {"decision": "false"}, "reason": reason},
    )
    bulk = "two objects, no relation between them"
    _post(
        client,
        "/admin/data/adjudicate",
        csrf_token=_csrf(page),
        scope="ids",
        ids=[str(i) for i in two],
        decision="excluded",
        reason=bulk,
        next="/admin/data",
    )
    for eid in sorted(two):
        ctx.expect(
            AuditKind.adjudicate,
            ADMIN,
            DEFAULT_STUDY_ID,
            f"example {eid}",
            {"before": None, "after": {"decision": "excluded"}, "reason": bulk},
        )
    withdrawn = "settled by mistake"
    _post(
        client,
        f"/admin/examples/{one}/adjudicate",
        csrf_token=token,
        decision="withdraw",
        reason=withdrawn,
    )
    ctx.expect(
        AuditKind.adjudicate,
        ADMIN,
        DEFAULT_STUDY_ID,
        f"example {one}",
        {
            "before": {"decision": "false", "reason": reason},
            "after": None,
            "reason": withdrawn,
        },
    )


def _label_models(ctx: Context, client: TestClient, token: str) -> None:
    """Fit the label models on the seeded votes (the settings page's button), switch the
    keep rule to one of them, and change the screen-out code a failed qualification check
    shows when no platform study names its own."""
    _post(client, "/admin/label-models/fit", csrf_token=token)
    with Session(ctx.engine) as s:
        fits = {f.model: f for f in s.exec(select(LabelModelFit))}
    assert set(fits) == {"dawid-skene", "mace"} and fits["mace"].votes > 0
    ctx.expect(
        AuditKind.label_fit,
        ADMIN,
        DEFAULT_STUDY_ID,
        "dawid-skene, mace",
        {"after": {m: {"examples": f.examples, "votes": f.votes} for m, f in sorted(fits.items())}},
    )
    with Session(ctx.engine) as s:
        config = load_study_config(s, DEFAULT_STUDY_ID)
    settings = client.get("/admin/settings").text
    assert 'name="keep_rule"' in settings and 'name="screenout_code"' in settings
    _post(client, "/admin/settings", csrf_token=token, keep_rule="dawid-skene")
    ctx.expect(
        AuditKind.settings_change,
        ADMIN,
        DEFAULT_STUDY_ID,
        "settings",
        {"before": {"keep_rule": config.keep_rule}, "after": {"keep_rule": "dawid-skene"}},
    )
    _post(client, "/admin/settings", csrf_token=token, screenout_code="VSRCHECKFAILED")
    ctx.expect(
        AuditKind.settings_change,
        ADMIN,
        DEFAULT_STUDY_ID,
        "settings",
        {
            "before": {"screenout_code": config.screenout_code},
            "after": {"screenout_code": "VSRCHECKFAILED"},
        },
    )


def _exports(ctx: Context, client: TestClient) -> None:
    r = client.get("/admin/audit.jsonl")
    assert r.status_code == 200 and r.text
    ctx.expect(
        AuditKind.audit_export,
        ADMIN,
        DEFAULT_STUDY_ID,
        "audit.jsonl",
        {"filters": {"studies": [DEFAULT_STUDY_ID], "kind": None, "actor": None}},
    )
    out = ctx.tmp / "audit.jsonl"
    ctx.cli("admin", "audit-export", "--out", str(out))
    ctx.expect(
        AuditKind.audit_export, CLI_ACTOR, None, str(out), {"filters": {"studies": "all"}}, "cli"
    )
