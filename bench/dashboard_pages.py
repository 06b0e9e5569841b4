"""Every admin dashboard page a user can reach, as the dashboard bench times them.

Generated, not written out: the admin router's GET routes give the paths, and the values
each filter, sort order and link offers come from where the pages take them (the agreement
filters and keep rules of ``webapp.admin.stats``, the Workers sort orders, the chart names,
the audit kinds) and, for the values that are data (relations, concepts, origins, rounds,
ids), from the database being measured (``Choices``). Deep pages are reached as a user
reaches them: the pager's "last" link (``follow``), and the bare page numbers of an old
bookmark or a typed URL. tests/webapp/admin/test_dashboard_pages.py crawls the rendered
pages and checks that this list offers every route, option and link they do.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

# A path placeholder for each route parameter, filled from ``Choices``.
PATH_PARAMS = {
    "{worker_id}": "{worker}",
    "{example_id}": "{example}",
    "{job_id}": "{job}",
    "{name}": "{chart}",
}
# Routes that are not pages (a log-in form posts; downloads of files a job wrote).
NEEDS_ROWS = {"/admin/api/jobs/{job_id}", "/admin/jobs/{job_id}/download"}


@dataclass(frozen=True)
class Page:
    """A URL to time: ``path`` may name {worker} (the busiest validator), {example} (the
    newest Example), {job} (the newest job), {data_pages} / {worker_pages} (the number of
    the last page); ``follow`` names the pager links to follow from it first, in turn
    ("last", "last previous")."""

    path: str
    follow: str | None = None
    route: str = ""


@dataclass(frozen=True)
class Choices:
    """The values a page offers that are data: read from the database being measured."""

    relations: list[str] = field(default_factory=list)
    concepts: list[str] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    rounds: list[str] = field(default_factory=list)
    studies: list[str] = field(default_factory=list)
    platform_studies: list[int] = field(default_factory=list)
    actors: list[str] = field(default_factory=list)
    has_job: bool = False


def admin_get_routes() -> list[str]:
    """Every GET route of the admin dashboard, as its path template."""
    from webapp.admin.routes import router

    return sorted(
        {p for p, methods in _walk(router) if "GET" in methods and p.startswith("/admin")}
    )


def _walk(router: Any, prefix: str = "") -> Iterator[tuple[str, set[str]]]:
    """(path, methods) of every API route, through included routers (FastAPI keeps those as
    wrappers holding the original router and its include prefix)."""
    from fastapi.routing import APIRoute

    for route in router.routes:
        if isinstance(route, APIRoute):
            yield prefix + route.path, set(route.methods or ())
        elif hasattr(route, "original_router"):
            inner = prefix + (getattr(route.include_context, "prefix", "") or "")
            yield from _walk(route.original_router, inner)


def fixed_options() -> dict[str, dict[str, tuple[str, ...]]]:
    """Per page: each query parameter the page's own controls set, with every value they
    offer that does not depend on the data (from the constants the routes check against)."""
    from webapp.admin import stats
    from webapp.admin.routes.audit import KINDS
    from webapp.admin.routes.workers import ORDERS

    audit = {"kind": KINDS, "scope": ("study", "all")}
    return {
        "/admin/data": {
            "agreement": stats.AGREEMENT_FILTERS,
            "flips": stats.FLIP_RULES,
            "gold": ("yes", "no"),
        },
        "/admin/workers": {"order": ORDERS},
        "/admin/api/workers.json": {"order": ORDERS},
        "/admin/audit": audit,
        "/admin/audit.jsonl": audit,
    }


def chart_names() -> tuple[str, ...]:
    from webapp.admin.routes.quality import CHARTS

    return CHARTS


# Bare page numbers a user may type or keep in a bookmark, besides the last page.
BARE_PAGES = (2, 20, 21, 100_000)


def pages(choices: Choices) -> list[Page]:
    """Every page a user can reach, for a database whose data values are ``choices``."""
    out: list[Page] = []
    options = fixed_options()
    for route in admin_get_routes():
        if route in NEEDS_ROWS and not choices.has_job:
            continue
        path = route
        for param, placeholder in PATH_PARAMS.items():
            path = path.replace(param, placeholder)
        if "{chart}" in path:
            out += [Page(path.replace("{chart}", c), route=route) for c in chart_names()]
            continue
        out.append(Page(path, route=route))
        for param, values in options.get(route, {}).items():
            for v in values:
                out.append(Page(_url(path, {param: v}), route=route))
                if route in ("/admin/data", "/admin/workers"):
                    out.append(Page(_url(path, {param: v}), follow="last", route=route))
    data, workers = "/admin/data", "/admin/workers"
    out += [Page(data, follow="last", route=data), Page(workers, follow="last", route=workers)]
    # The keyset pager's other links: next from the first page, previous from the last.
    out += [Page(data, follow="next", route=data), Page(data, follow="last previous", route=data)]
    for param, found in (
        ("relation", choices.relations),
        ("concept", choices.concepts),
        ("origin", choices.origins),
    ):
        for v in found:
            out += [Page(_url(data, {param: v}), route=data)]
            out += [Page(_url(data, {param: v}), follow="last", route=data)]
    out += [
        Page(_url(data, {"q": "zzzz_no_match"}), route=data),
        Page(_url(data, {"q": "zzzz_no_match", "agreement": "kept"}), route=data),
        Page(_url(data, {"q": "dog"}), follow="last", route=data),
        Page(_url(data, {"relation": "touching", "agreement": "kept"}), follow="last", route=data),
        Page(_url(data, {"agreement": "split", "concept": "person"}), route=data),
    ]
    for n in (*BARE_PAGES, "{data_pages}"):
        out.append(Page(_url(data, {"page": n}), route=data))
    out.append(Page(_url(data, {"agreement": "kept", "page": "{data_pages}"}), route=data))
    for n in (2, "{worker_pages}"):
        out.append(Page(_url(workers, {"order": "agreement", "page": n}), route=workers))
    for name in choices.rounds:
        for route in ("/admin/revalidation", "/admin/api/revalidation.json"):
            out.append(Page(_url(route, {"round": name}), route=route))
    for ps in choices.platform_studies:
        out.append(Page(_url("/admin/platform", {"ps": ps}), route="/admin/platform"))
    for actor in choices.actors:
        for route in ("/admin/audit", "/admin/audit.jsonl"):
            out.append(Page(_url(route, {"actor": actor}), route=route))
    out.append(
        Page(
            _url("/admin/audit", {"since": "2020-01-01", "until": "2030-01-01"}),
            route="/admin/audit",
        )
    )
    for slug in choices.studies:
        out.append(Page(_url("/admin", {"study": slug}), route="/admin"))
    return _unique(out)


def _url(path: str, params: dict[str, Any]) -> str:
    # Placeholders ({data_pages}) stay readable for str.format.
    return path + "?" + urlencode(params, safe="{}")


def _unique(found: list[Page]) -> list[Page]:
    seen: set[tuple[str, str | None]] = set()
    out = []
    for p in found:
        if (p.path, p.follow) not in seen:
            seen.add((p.path, p.follow))
            out.append(p)
    return out


def read_choices(session: Any, study_id: int) -> Choices:
    """The data values the pages offer, read as the pages read them."""
    from sqlalchemy import select

    from vsr_core.tables import AUDIT_EVENT, JOB, PLATFORM_STUDY, STUDY
    from webapp.admin import stats

    conn = session.connection()
    values = stats.distinct_values(session, study_id)
    from vsr_core import revalidation

    rounds = revalidation.rounds(session)
    return Choices(
        relations=values["relations"],
        concepts=values["concepts"],
        origins=values["origins"],
        rounds=rounds,
        studies=[s for (s,) in conn.execute(select(STUDY.c.slug).order_by(STUDY.c.id))],
        platform_studies=[
            i
            for (i,) in conn.execute(
                select(PLATFORM_STUDY.c.id).where(PLATFORM_STUDY.c.study_id == study_id)
            )
        ],
        actors=[
            a
            for (a,) in conn.execute(
                select(AUDIT_EVENT.c.actor).distinct().order_by(AUDIT_EVENT.c.actor).limit(5)
            )
        ],
        has_job=conn.execute(select(JOB.c.id).limit(1)).first() is not None,
    )
