"""How fast the admin dashboard answers with the full VSR release imported.

Imports the real raw VSR file (12,809 Examples, ~39,000 votes) into a fresh database (the
project's importer, ``vsr_dataset.import_vsr``), logs in as an admin, and times every
dashboard page and JSON/chart endpoint in-process (FastAPI TestClient, so no network in
the figures). Each figure is the median of N requests after one warm-up request, printed
in milliseconds and as a ratio against ``/healthz`` (a trivial request) measured in the
same run. Target: every page < 300 ms.

    python bench/dashboard.py                      # SQLite file in a temp dir
    python bench/dashboard.py --database-url postgresql+psycopg://postgres@127.0.0.1/postgres
                                                   # (its own database vsr_bench_dashboard there)
    python bench/dashboard.py --repeat 15 --cold   # --cold: clear the figure cache first
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.databases import drop_database, fresh_database  # noqa: E402

VSR_RAW = ROOT.parent / "shared" / "vsr" / "data" / "data_files" / "all_vsr_raw_data.jsonl"
PAGES = [
    "/admin",
    "/admin/api/overview.json",
    "/admin/charts/throughput.svg",
    "/admin/quality",
    "/admin/api/quality.json",
    "/admin/charts/relations.svg",
    "/admin/charts/concepts.svg",
    "/admin/charts/disagreement.svg",
    "/admin/charts/labels.svg",
    "/admin/workers",
    "/admin/workers?order=agreement",
    "/admin/workers/{worker}",
    "/admin/data",
    "/admin/data?relation=touching&agreement=kept",
    "/admin/data?q=dog&page=3",
    "/admin/data?agreement=split&concept=person",
    "/admin/examples/{example}",
    "/admin/settings",
    "/admin/pipeline",
    "/admin/revalidation",
    "/admin/api/revalidation.json",
]


def _import(engine: object, path: Path) -> str:
    t0 = time.perf_counter()
    try:
        from vsr_dataset.import_vsr import import_vsr_file

        result = import_vsr_file(engine, path)  # type: ignore[arg-type]
        how = f"vsr_dataset.import_vsr: {result.line()}"
    except ImportError:
        from tests.support.admin_seed import read_raw, seed

        records = read_raw(path.parents[2])
        seed(engine, records)  # type: ignore[arg-type]
        how = f"tests.support.admin_seed (importer not available): {len(records)} records"
    return f"{how} in {time.perf_counter() - t0:.1f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--database-url", default=None)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument(
        "--cold", action="store_true", help="clear the figure cache before each request"
    )
    ap.add_argument(
        "--raw",
        type=Path,
        default=VSR_RAW,
        help="VSR raw JSONL to import (bench/gen10x.py writes a 10x one)",
    )
    args = ap.parse_args()

    from fastapi.testclient import TestClient
    from sqlalchemy import func
    from sqlmodel import Session, col, select

    from vsr_core.db import make_engine
    from vsr_core.models import DEFAULT_STUDY_ID, AdminRole, Example, Vote
    from vsr_core.settings import Settings
    from webapp.admin.auth import create_admin
    from webapp.app import create_app

    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        url = fresh_database(args.database_url, tmp, "vsr_bench_dashboard")
        engine = make_engine(url)
        print(_import(engine, args.raw))
        with Session(engine) as s:
            n_ex = s.exec(select(func.count()).select_from(Example)).one()
            n_votes = s.exec(select(func.count()).select_from(Vote)).one()
            example = s.exec(select(func.max(Example.id))).one()
            worker = s.exec(
                select(Vote.worker_id).group_by(col(Vote.worker_id)).order_by(func.count().desc())
            ).first()
            # Owner of the default study, where the release is imported (docs/dashboard.md).
            create_admin(s, "bench", "bench-password", grants={DEFAULT_STUDY_ID: AdminRole.owner})
        # A re-validation round of 1,000 imported Examples, so its report has work to do.
        from vsr_core.revalidation import open_round
        from vsr_core.studies.settings import StudyConfig

        with Session(engine) as s:
            print(open_round(s, sample=1000, seed=0, config=StudyConfig()).line())
        print(f"database: {engine.dialect.name}, {n_ex} Examples, {n_votes} votes")
        settings = Settings(
            database_url=url,
            secret_key="bench-secret-key-0123456789abcdef",
            image_cache_dir=tmp / "var" / "cache",
        )
        app = create_app(settings, engine)
        client = TestClient(app)
        form = client.get("/admin/login").text
        token = re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)  # type: ignore[union-attr]
        r = client.post(
            "/admin/login",
            data={"username": "bench", "password": "bench-password", "csrf_token": token},
            follow_redirects=False,
        )
        assert r.status_code == 303, r.text

        def timed(path: str) -> float:
            times = []
            client.get(path)  # warm-up (and fills the cache unless --cold)
            for _ in range(args.repeat):
                if args.cold and hasattr(app.state, "admin_cache"):
                    app.state.admin_cache.clear()
                t0 = time.perf_counter()
                resp = client.get(path)
                times.append(time.perf_counter() - t0)
                assert resp.status_code == 200, (path, resp.status_code, resp.text[:200])
            return statistics.median(times) * 1000

        base = timed("/healthz")
        print(f"{'page':48s} {'median ms':>10s} {'x /healthz':>11s}")
        print(f"{'/healthz (baseline)':48s} {base:10.1f} {1.0:11.1f}")
        worst = 0.0
        for page in PAGES:
            path = page.format(worker=worker, example=example)
            ms = timed(path)
            worst = max(worst, ms)
            flag = "" if ms < 300 else "  <-- over 300 ms"
            print(f"{path:48s} {ms:10.1f} {ms / base:11.1f}{flag}")
        cache = "cleared before each request" if args.cold else "warm"
        print(f"slowest page: {worst:.1f} ms (target < 300 ms; figure cache {cache})")
        engine.dispose()
        drop_database(url)


if __name__ == "__main__":
    main()
