"""Every admin dashboard page over HTTP, warm and cold, on a database of a given size.

Runs what an admin runs: a served app (``uvicorn webapp.app:create_server_app --factory``,
one worker, as ``vsr serve`` starts it), a login through the real form, then GET of every
page and JSON/chart endpoint with the session cookie (httpx, loopback). Pages come from
``bench.dashboard_pages``: every admin GET route and every value of every filter, sort
order and link the pages offer, generated from the app's routes and the database's data
(a page added on another branch is timed too). Deep pages are reached as a user reaches
them: page 1, then the pager's "last" link, and by bare page numbers.

- warm: median of ``--repeat`` requests after one unmeasured request (figure cache filled).
- cold: the first request for the page after a server restart: a new process, so the figure
  cache in memory, the connection pool and compiled templates are empty; the figures the
  dashboard keeps on disk (webapp/admin/cache.py) are read back, served as stale and counted
  again in the background, as after a deploy; ``--forget-figures`` deletes them before each
  restart too (a server's very first start); with ``--drop-os-cache`` (as
  root) the kernel's page cache is dropped before it too (``echo 3 > drop_caches``), so
  PostgreSQL reads what is not in its own shared_buffers from disk. PostgreSQL itself is
  not restarted (a shared server): its shared_buffers stay as they were.
- baseline: ``/healthz`` (one trivial query) through the same server, warm (median) and cold
  (the first request after a restart, before anything else), and every figure as a ratio of it.

The database is written to (an admin account, migrations): give it a copy, never a shared
one. ``--template NAME`` copies a PostgreSQL database first (CREATE DATABASE ... TEMPLATE)
into ``--database-url``'s database, which is dropped and created again.

    python bench/dashboard_scale.py --database-url postgresql+psycopg://postgres@127.0.0.1/sdash10x
    python bench/dashboard_scale.py --template scale100x \\
        --database-url postgresql+psycopg://postgres@127.0.0.1/sdash100x --drop-os-cache
    python bench/dashboard_scale.py --raw /tmp/vsr10x.jsonl      # import into a SQLite file
    python bench/dashboard_scale.py ... --only /admin/data --no-cold
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.dashboard_pages import Page, pages, read_choices  # noqa: E402
from bench.loadavg import load_note  # noqa: E402

VSR_RAW = ROOT.parent / "shared" / "vsr" / "data" / "data_files" / "all_vsr_raw_data.jsonl"
ADMIN, PASSWORD = "bench-dash", "bench-dash-password-0123"
GOAL_WARM_MS, GOAL_COLD_MS = 300.0, 500.0
# Where the served app (cwd: the checkout, default IMAGE_CACHE_DIR) keeps its figures.
FIGURES = ROOT / "var" / "image_cache" / "dashboard-figures"


# What a page says while its figure is computed in the background (webapp.admin.cache).
COMPUTING = re.compile(r"Computing (the|this|what)|counting the (matching|votes since)")
# What every page says while the start-up warm-up runs (webapp.admin.warmup).
WARMING = "figures in the background ("
PAGER_LINK = re.compile(r'<a[^>]*href="([^"]+)"[^>]*>\s*(?:[^<]*?)\b(last|next|previous|first)\b')


class Dashboard:
    def __init__(self, url: str, log: Path) -> None:
        from bench.load.server import Server, free_port

        self.server = Server(url, free_port(), 1, log)
        self.base = f"http://127.0.0.1:{self.server.port}"
        self.cookies: Any = None
        self.last_body = ""

    def start(self) -> None:
        self.server.start()  # waits for one /healthz: the process is up, no page asked yet

    def stop(self) -> None:
        self.server.stop()

    def login(self) -> None:
        import httpx

        with httpx.Client(base_url=self.base) as c:
            form = c.get("/admin/login").text
            token = re.search(r'name="csrf_token" value="([^"]+)"', form)
            if token is None:
                sys.exit("no CSRF token on /admin/login")
            r = c.post(
                "/admin/login",
                data={"username": ADMIN, "password": PASSWORD, "csrf_token": token.group(1)},
            )
            if r.status_code not in (200, 303) or not c.cookies:
                sys.exit(f"login failed: HTTP {r.status_code}")
            self.cookies = c.cookies

    def get(self, path: str) -> tuple[float, int, str]:
        import httpx

        with httpx.Client(base_url=self.base, cookies=self.cookies, timeout=120) as c:
            t0 = time.perf_counter()
            r = c.get(path)
            self.last_body = r.text
            return (time.perf_counter() - t0) * 1000, r.status_code, r.text


def pager_target(body_of: Callable[[str], str], path: str, links: str | None) -> str:
    """The URL a user reaches from ``path`` by its pager's ``links`` in turn ("last"),
    reading each page's body with ``body_of``."""
    for link in (links or "").split():
        found = {n: str(h).replace("&amp;", "&") for h, n in PAGER_LINK.findall(body_of(path))}
        if link not in found:
            return path  # a single page: no pager
        href = found[link]
        path = href if href.startswith("/") else path.split("?")[0] + href
    return path


def follow(dash: Dashboard, path: str, links: str | None) -> str:
    """The URL a user reaches from ``path`` by its pager's ``links``, over HTTP."""
    return pager_target(lambda p: dash.get(p)[2], path, links)


def drop_os_cache() -> str:
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return "dropped"
    except OSError as exc:
        return f"not dropped ({exc.strerror})"


def prepare(args: argparse.Namespace, tmp: Path) -> str:
    from migrations.runner import upgrade

    url: str = args.database_url
    if args.raw is not None:
        from bench.databases import fresh_database

        url = fresh_database(args.database_url, tmp, "sdash_bench_dash")
        t0 = time.perf_counter()
        _run(["vsr", "import-vsr", str(args.raw), "--database-url", url, "-q"])
        print(f"vsr import-vsr {args.raw.name}: {time.perf_counter() - t0:.1f} s")
    elif args.template:
        from sqlalchemy import text
        from sqlalchemy.engine import make_url

        from vsr_core.db import make_engine

        target = make_url(url).database
        admin = make_engine(make_url(url).set(database="postgres").render_as_string(False))
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)'))
            for attempt in range(60):  # the template must have no other session
                try:
                    c.execute(text(f'CREATE DATABASE "{target}" TEMPLATE "{args.template}"'))
                    break
                except Exception as exc:
                    if "being accessed" not in str(exc) or attempt == 59:
                        raise
                    time.sleep(5)
        admin.dispose()
        print(f"copied database {args.template} into {target}")
    upgrade(url)
    env = dict(os.environ, VSR_ADMIN_PASSWORD=PASSWORD)
    # The bench's admin owns the default study (an admin with no role sees nothing).
    create = ["vsr", "admin", "create", "--username", ADMIN, "--update", "--study", "vsr"]
    _run([*create, "--role", "owner", "--database-url", url], env)
    return url


def _run(cmd: list[str], env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,)) -> None:
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode not in ok:
        sys.exit(f"{' '.join(cmd[:3])} failed: {proc.stdout[-500:]}{proc.stderr[-1500:]}")


def describe(url: str) -> tuple[str, dict[str, Any], list[Page]]:
    """'N Examples, M votes', the values of the page list's placeholders and the page list."""
    from sqlalchemy import func, select
    from sqlmodel import Session

    from vsr_core.db import make_engine
    from vsr_core.models import DEFAULT_STUDY_ID
    from vsr_core.tables import EXAMPLE, JOB, VOTE, WORKER

    engine = make_engine(url)
    with engine.connect() as c:
        n_ex = c.execute(select(func.count()).select_from(EXAMPLE)).scalar_one()
        n_votes = c.execute(select(func.count()).select_from(VOTE)).scalar_one()
        example = c.execute(select(func.max(EXAMPLE.c.id))).scalar_one()
        worker = c.execute(
            select(VOTE.c.worker_id)
            .group_by(VOTE.c.worker_id)
            .order_by(func.count().desc())
            .limit(1)
        ).scalar_one()
        job = c.execute(select(func.max(JOB.c.id))).scalar_one()
        n_workers = c.execute(select(func.count()).select_from(WORKER)).scalar_one()
    with Session(engine) as s:
        choices = read_choices(s, DEFAULT_STUDY_ID)
    engine.dispose()
    values = {
        "worker": worker,
        "example": example,
        "job": job,
        "data_pages": max(1, -(-n_ex // 50)),
        "worker_pages": max(1, -(-n_workers // 50)),
    }
    what = f"{engine.dialect.name}, {n_ex:,} Examples, {n_votes:,} votes"
    return what, values, pages(choices)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--database-url", default=None, help="a database this bench may write to")
    ap.add_argument("--template", default=None, help="PostgreSQL database to copy first")
    ap.add_argument("--raw", type=Path, default=None, help="VSR JSONL to import first")
    ap.add_argument("--label", default="", help="size label printed with each row (e.g. 100x)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-cold", action="store_true")
    ap.add_argument("--drop-os-cache", action="store_true", help="before each cold request")
    ap.add_argument(
        "--forget-figures", action="store_true", help="delete the kept figures before each restart"
    )
    ap.add_argument("--only", nargs="*", default=None, help="paths starting with these")
    ap.add_argument(
        "--cold-shapes",
        action="store_true",
        help="cold: one page of each shape (route, parameter names, pager link) only",
    )
    args = ap.parse_args()
    if args.database_url is None and args.raw is None:
        ap.error("give --database-url (a copy to write to) or --raw")
    load_start = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="sdash-dash-"))
    url = prepare(args, tmp)
    what, values, listed = describe(url)
    if args.only:
        listed = [p for p in listed if any(p.path.startswith(o) for o in args.only)]
    dash = Dashboard(url, tmp / "server.log")
    print(f"database: {what}; load average at start {load_start}")
    dash.start()
    try:
        dash.login()
        # Resolve each page's URL (following pager links) on a server we then restart.
        targets: list[tuple[str, str]] = []
        for p in listed:
            path = p.path.format(**values)
            label = path + (f" -> {p.follow}" if p.follow else "")
            targets.append((label, follow(dash, path, p.follow)))
            if p.follow:
                print(f"  {label} = {targets[-1][1]}")
        # Warm = after the start-up warm-up has computed the figures (its progress is on
        # every page while it runs); how long it took is printed.
        t0 = time.perf_counter()
        while WARMING in dash.get("/admin")[2] and time.perf_counter() - t0 < 1800:
            time.sleep(2)
        print(f"start-up warm-up finished {time.perf_counter() - t0:.0f} s after the login")
        warm_base = _warm(dash, "/healthz", args.repeat)
        warm: dict[str, tuple[float, int]] = {}
        for label, url_ in targets:
            warm[label] = (_warm(dash, url_, args.repeat), dash.get(url_)[1])
        cold: dict[str, float] = {}
        computing: list[str] = []
        cold_base, os_cache = float("nan"), "not dropped"
        if not args.no_cold:
            forget = FIGURES if args.forget_figures else None
            cold_base, os_cache = _cold(dash, "/healthz", args.drop_os_cache, forget)
            shapes: set[tuple[Any, ...]] = set()
            for label, url_ in targets:
                if args.cold_shapes:
                    shape = _shape(label)
                    if shape in shapes:
                        continue
                    shapes.add(shape)
                cold[label], os_cache = _cold(dash, url_, args.drop_os_cache, forget)
                note = " (answered: computing)" if COMPUTING.search(dash.last_body) else ""
                computing += [label] if note else []
                print(f"  cold {label}: {cold[label]:.0f} ms{note}", file=sys.stderr, flush=True)
    finally:
        dash.stop()
    print(
        f"\n{'page':60s} {'status':>6s} {'warm ms':>8s} {'x base':>7s} "
        f"{'cold ms':>8s} {'x base':>7s}  {args.label}"
    )
    print(
        f"{'/healthz (baseline)':60s} {200:6d} {warm_base:8.1f} {1:7.1f} {cold_base:8.1f} {1:7.1f}"
    )
    worst_warm = worst_cold = 0.0
    for label, _ in targets:
        ms, status = warm[label]
        c = cold.get(label, float("nan"))
        if status == 200:
            worst_warm = max(worst_warm, ms)
            worst_cold = max(worst_cold, c) if c == c else worst_cold
        flag = ""
        if status == 200 and (ms >= GOAL_WARM_MS or c >= GOAL_COLD_MS):
            flag = "  <-- over goal"
        elif status != 200:
            flag = "  (not on this branch)" if status == 404 else f"  (HTTP {status})"
        print(
            f"{label[:60]:60s} {status:6d} {ms:8.1f} {ms / warm_base:7.1f} "
            f"{c:8.1f} {c / cold_base:7.1f}{flag}"
        )
    print(
        f"slowest: warm {worst_warm:.1f} ms (goal < {GOAL_WARM_MS:g}), cold {worst_cold:.1f} ms "
        f"(goal < {GOAL_COLD_MS:g}); cold = first request after a server restart, kept "
        f"figures {'deleted' if args.forget_figures else 'read back'}, OS page "
        f"cache {os_cache}, PostgreSQL shared_buffers not cleared"
    )
    if computing:
        print(f"{len(computing)} cold pages answered at once that a figure was computing")
    print(load_note(load_start))
    return 0


# Parameters whose values are data or an audit filter's (one of each is enough cold: the
# same statement with another value); the others choose a branch of the handler.
DATA_VALUES = {"relation", "concept", "origin", "q", "actor", "round", "ps", "study"}
DATA_VALUES |= {"since", "until", "kind", "scope"}


def _shape(label: str) -> tuple[Any, ...]:
    """A page up to its values: its path (ids as one), its parameter names, its pager link.
    A restart per page takes seconds; one page of each shape is every handler and branch."""
    url, _, follow = label.partition(" -> ")
    parts = urlsplit(url)
    q = parse_qsl(parts.query)
    path = re.sub(r"/\d+(?=/|$)", "/{id}", parts.path)
    return path, follow, tuple(sorted({(k, "*" if k in DATA_VALUES else v) for k, v in q}))


def _warm(dash: Dashboard, path: str, repeat: int) -> float:
    dash.get(path)
    return statistics.median(dash.get(path)[0] for _ in range(repeat))


def _cold(dash: Dashboard, path: str, drop: bool, forget: Path | None) -> tuple[float, str]:
    dash.stop()
    if forget is not None:
        shutil.rmtree(forget, ignore_errors=True)
    state = drop_os_cache() if drop else "not dropped"
    dash.start()
    return dash.get(path)[0], state


if __name__ == "__main__":
    sys.exit(main())
