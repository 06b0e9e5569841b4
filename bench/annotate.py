"""How fast the annotation site serves a worker, and how leasing scales with concurrent workers.

Three figures, each a ratio against a baseline measured in the same run:

1. one task round trip (GET /generate + POST the answer, in-process TestClient) against
   GET /healthz (a trivial request): the site's own cost per annotated pair;
2. a marked image from the disk cache against its first (Pillow + pycocotools) render;
3. leases per second with T threads taking pairs at once (FOR UPDATE SKIP LOCKED on
   PostgreSQL, BEGIN IMMEDIATE on SQLite) against the same with one thread.

Pairs come from the real COCO val2017 subset in ../shared/coco (the relaxed test rule of
tests/support/webapp_coco.py), replicated to get enough pairs for the lease figure.

    python bench/annotate.py                                   # SQLite in a temp dir
    python bench/annotate.py --pg-admin-url postgresql+psycopg://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
COCO = ROOT.parent / "shared" / "coco"


def _median_ms(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _fresh_db(pg_admin_url: str | None, tmp: Path) -> tuple[str, str | None]:
    """A new migrated database: a SQLite file, or a throw-away PostgreSQL database."""
    import uuid

    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from migrations.runner import upgrade
    from vsr_core.db import make_engine

    if pg_admin_url is None:
        url, name = f"sqlite:///{tmp / 'bench.db'}", None
    else:
        name = f"vsr_bench_{uuid.uuid4().hex[:8]}"
        admin = make_engine(pg_admin_url).execution_options(isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        url = make_url(pg_admin_url).set(database=name).render_as_string(hide_password=False)
    upgrade(url)
    return url, name


def _drop(pg_admin_url: str, name: str) -> None:
    from sqlalchemy import text

    from vsr_core.db import make_engine

    admin = make_engine(pg_admin_url).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _copies(session, n: int) -> int:  # type: ignore[no-untyped-def]
    """Replicate the real pairs (same images/instances, new run labels) to n pairs."""
    from sqlmodel import select

    from vsr_core.models import ImagePair

    base = list(session.exec(select(ImagePair)))
    made = len(base)
    k = 0
    while made < n:
        src = base[k % len(base)]
        # uq_pair is (image1, image2, concept_a, concept_b): swap the images every other round
        r = k // len(base)
        i1, i2 = (src.image1_id, src.image2_id)
        a1, b1, a2, b2 = src.image1_a_id, src.image1_b_id, src.image2_a_id, src.image2_b_id
        if r % 2 == 0:
            i1, i2, a1, b1, a2, b2 = i2, i1, a2, b2, a1, b1
        pair = ImagePair(
            concept_a=src.concept_a,
            concept_b=f"{src.concept_b}#{r}",
            image1_id=i1,
            image1_a_id=a1,
            image1_b_id=b1,
            image2_id=i2,
            image2_a_id=a2,
            image2_b_id=b2,
        )
        session.add(pair)
        made += 1
        k += 1
    session.commit()
    return made


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--pg-admin-url",
        default=None,
        help="PostgreSQL server URL; a throw-away database is created there and dropped",
    )
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--leases", type=int, default=400, help="pairs leased per lease run")
    args = ap.parse_args()

    from sqlmodel import Session

    from tests.support.webapp_coco import (
        answer,
        client_for,
        make_app,
        make_pairs,
        set_study,
        start_prolific,
        task,
    )
    from vsr_core.db import make_engine, session_scope
    from vsr_core.models import Batch, Worker
    from vsr_core.studies.settings import StudyConfig
    from webapp.crowd import batches
    from webapp.crowd.leases import PairStrategy, take_next
    from webapp.images import render as images

    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        url, pg_name = _fresh_db(args.pg_admin_url, tmp)
        engine = make_engine(url)
        with Session(engine) as s:
            make_pairs(s, COCO)
            total = _copies(s, args.repeat + 5 + 2 * args.leases)
        set_study(url, generate_batch_size=10_000)
        print(f"database: {engine.dialect.name}; {total} pairs from real COCO val2017 records")

        # 1. task round trip vs /healthz
        client = client_for(make_app(url, tmp, image_root=COCO / "images"))
        start_prolific(client, "bench")
        health = _median_ms(lambda: client.get("/healthz"), args.repeat)

        def round_trip() -> None:
            fields = task(client)
            r = client.post("/generate", data=answer(fields), follow_redirects=False)
            assert r.status_code == 303

        trip = _median_ms(round_trip, args.repeat)
        print(
            f"task round trip (GET page + POST answer): {trip:.1f} ms; /healthz {health:.2f} ms;"
            f" ratio {trip / health:.1f}x"
        )

        # 2. marked image: cached vs first render
        from vsr_core.models import Image, ImagePair, Instance

        with Session(engine) as s:
            pair = s.get(ImagePair, 1)
            assert pair is not None
            img, a, b = (
                s.get(Image, pair.image1_id),
                s.get(Instance, pair.image1_a_id),
                s.get(Instance, pair.image1_b_id),
            )
        cache = tmp / "render_cache"
        colds = []
        for _ in range(5):
            for f in cache.glob("*"):
                f.unlink()
            t0 = time.perf_counter()
            images.render_marked(COCO / "images", cache, img, a, b)  # type: ignore[arg-type]
            colds.append((time.perf_counter() - t0) * 1000)
        cold = statistics.median(colds)
        warm = _median_ms(
            lambda: images.render_marked(COCO / "images", cache, img, a, b),  # type: ignore[arg-type]
            args.repeat,
        )
        print(
            f"marked image: first render {cold:.1f} ms, cached {warm:.3f} ms;"
            f" ratio {cold / warm:.0f}x"
        )

        # 3. leases/s: T threads vs 1 thread
        strategy, config = PairStrategy(), StudyConfig(generate_batch_size=10_000)

        def open_batches(n: int, tag: str) -> list[int]:
            with session_scope(engine) as s:
                out = []
                for i in range(n):
                    w = Worker(source="prolific", external_id=f"{tag}{i}")
                    s.add(w)
                    s.flush()
                    out.append(batches.open_or_resume(s, w, "generate", config, strategy).id)
                return out  # type: ignore[return-value]

        def lease_run(n_threads: int, tag: str) -> float:
            ids = open_batches(n_threads, tag)
            per = args.leases // n_threads
            barrier = threading.Barrier(n_threads)
            got: list[int] = []
            lock = threading.Lock()

            def work(batch_id: int) -> None:
                barrier.wait()
                for _ in range(per):
                    with Session(engine) as s:
                        batch = s.get(Batch, batch_id)
                        assert batch is not None
                        lease = take_next(s, batch, strategy, 10)
                        assert lease is not None and lease.pair_id is not None
                        # finish at once so the next call leases a new pair
                        from webapp.crowd.leases import finish

                        finish(s, lease)
                        s.commit()
                        with lock:
                            got.append(lease.pair_id)

            threads = [threading.Thread(target=work, args=(b,)) for b in ids]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.perf_counter() - t0
            assert len(got) == len(set(got)) == per * n_threads, "a pair was leased twice"
            return len(got) / elapsed

        one = lease_run(1, "solo")
        many = lease_run(args.threads, "crowd")
        print(
            f"leases/s: {args.threads} threads {many:.0f}, 1 thread {one:.0f};"
            f" ratio {many / one:.2f}x (no pair leased twice)"
        )
        engine.dispose()
        if pg_name is not None:
            _drop(args.pg_admin_url, pg_name)


if __name__ == "__main__":
    main()
