"""The start-up warm-up: a served app computes every study's dashboard figures
(webapp.admin.figures.start_up) in one background thread, so the first visit after a
deploy or an import finds them instead of paying a recount.

It never blocks a request: a page asked for meanwhile answers with what it has (a stale
figure read back from disk, or "computing" with the warm-up's progress). It only reads
(webapp.admin.pages.reading_session: no write lock on SQLite), one figure at a time, so it
takes at most one of PostgreSQL's cores from the site. Progress goes to the log and to the
pages (``WarmUp.note``). One process per server warms up: the worker processes of one
``vsr serve --workers N`` share the figures' folder, and a lock there lets the first one in
compute while the others skip (they read its figures back from disk when asked), so a start
does not cost the database N recounts at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlmodel import col, select

from vsr_core.models import Study
from vsr_core.studies.context import StudyContext
from webapp.admin import figures
from webapp.admin.pages import app_figure_cache, reading_session, study_config
from webapp.admin.stats import data_version

log = logging.getLogger("webapp.admin.warmup")


@dataclass
class WarmUp:
    """How far the warm-up is: figures done of the total, the one being computed."""

    total: int = 0
    done: int = 0
    current: str = ""
    started: float = field(default_factory=time.monotonic)
    finished: bool = False
    thread: threading.Thread | None = None

    def note(self) -> str | None:
        """A line for the pages while it runs (None once finished)."""
        if self.finished:
            return None
        now = f": {self.current}" if self.current else ""
        return (
            f"The server started {time.monotonic() - self.started:.0f} s ago and is computing "
            f"the dashboard's figures in the background ({self.done} of {self.total or '…'} "
            f"ready{now})."
        )


def log_to_stderr() -> None:
    """The warm-up's progress in the server's log, as uvicorn writes its own lines (the
    root logger has no handler under uvicorn)."""
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def compile_templates(app: Any) -> int:
    """Compile every page template now, before the server answers: Jinja compiles one on
    its first use (10-30 ms each, ~250 ms for all), which the first visit to each page paid
    after a restart. Returns how many."""
    env = app.state.templates.env
    names = env.list_templates(filter_func=lambda name: name.endswith(".html"))
    for name in names:
        env.get_template(name)
    return len(names)


def start(app: Any) -> WarmUp:
    """Compile the templates, then begin warming ``app``'s figure cache in a daemon thread;
    the state is app.state's ``admin_warmup`` (read by the pages)."""
    compile_templates(app)
    state = WarmUp()
    app.state.admin_warmup = state
    state.thread = threading.Thread(
        target=_run, args=(app, state), name="dashboard-warmup", daemon=True
    )
    state.thread.start()
    return state


@contextlib.contextmanager
def _only_process(directory: Path | None) -> Iterator[bool]:
    """True while this process holds the server's warm-up lock (a file lock in the figures'
    folder, released by the kernel if the process dies); False when another process has it.
    No folder: every process warms its own figures."""
    if directory is None:
        yield True
        return
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "warmup.lock").open("a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(app: Any, state: WarmUp) -> None:
    cache = app_figure_cache(app)
    with _only_process(cache.directory) as mine:
        if mine:
            _warm_all(app, state)
        else:
            log.info("dashboard warm-up: another process of this server computes the figures")
            state.finished = True


def _warm_all(app: Any, state: WarmUp) -> None:
    engine = app.state.engine
    cache = app_figure_cache(app)
    try:
        plan: list[tuple[int, figures.Figure]] = []
        with reading_session(engine) as s:
            for study in s.exec(select(Study).order_by(col(Study.id))).all():
                context = StudyContext.of(study)
                cfg = study_config(s, context.id)
                plan += [(context.id, f) for f in figures.start_up(context, cfg)]
        state.total = len(plan)
        log.info("dashboard warm-up: %d figures to compute", state.total)
        for study_id, fig in plan:
            state.current = fig.label
            t0 = time.monotonic()
            try:
                with reading_session(engine) as s:
                    version = data_version(s)

                def compute(fig: figures.Figure = fig) -> Any:
                    with reading_session(engine) as own:
                        return fig.compute(own)

                computed = cache.warm((study_id, fig.name), version, compute)
            except Exception:  # one figure failing leaves the rest (and the pages) working
                log.warning("dashboard warm-up: %s failed", fig.label, exc_info=True)
                computed = False
            state.done += 1
            log.info(
                "dashboard warm-up %d/%d: %s %s in %.1f s",
                state.done,
                state.total,
                fig.label,
                "computed" if computed else "was ready",
                time.monotonic() - t0,
            )
        log.info("dashboard warm-up done in %.1f s", time.monotonic() - state.started)
    except Exception:
        log.warning("dashboard warm-up stopped", exc_info=True)
    finally:
        state.current = ""
        state.finished = True
