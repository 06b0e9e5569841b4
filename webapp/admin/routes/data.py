"""Data: browse and search Examples; one Example with its marked image and its votes; mark
gold; re-queue for more votes."""

from __future__ import annotations

import bisect
import time
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from sqlmodel import Session, col, select

from vsr_core import adjudication
from vsr_core.limits import INT32_MAX
from vsr_core.models import Annotation, Example, Image, ImagePair, Instance, Vote, Worker
from webapp.admin import actions, figures, stats
from webapp.admin.auth import actor_of
from webapp.admin.cache import Computing
from webapp.admin.pages import (
    admin_study,
    back,
    check_admin_study,
    figure,
    figure_cache,
    render,
    study_config,
)
from webapp.admin.roles import ResearcherPostDep, ViewerDep, requires_viewer
from webapp.http.deps import SessionDep
from webapp.http.inputs import DbId

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(requires_viewer)])
PAGE = 50
# The thumbnail of an Example whose photo is neither on this server nor online (an imported
# release without IMAGE_ROOT): same size as a thumbnail, says why there is no picture.
NO_PHOTO_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="64" height="48" viewBox="0 0 64 48">'
    '<rect width="64" height="48" rx="3" fill="#e5e7eb"/>'
    '<text x="32" y="28" font-family="sans-serif" font-size="9" fill="#4b5563" '
    'text-anchor="middle">no photo</text></svg>'
)
AGREEMENTS = ("", *stats.AGREEMENT_FILTERS)
# A bare ``?page=N`` (a typed URL, an old bookmark) is read by OFFSET up to this page (at
# most 1,000 rows walked); a deeper one is sent to the keyset pages (see _bare_page_redirect).
BARE_PAGE_LIMIT = 20
# A filter matching at most this many Examples keeps their ids with its cached count and is
# paged from that list (by primary key) instead of by a keyset walk of the whole study.
FEW_MATCHES = figures.FEW_MATCHES
# While a filter's matches are being counted, a page reads at most this many of the study's
# Examples (a filter matching few of 1.28 million would otherwise walk most of them, ~1 s);
# a study this small computes its figures in the request anyway (pages.IN_REQUEST_BELOW_EXAMPLES).
WALK_WITHIN = 20_000


def _example(session: Session, example_id: int, request: Request) -> Example:
    """The Example, if it belongs to the dashboard's study (another study's is a 404 that
    says where it is)."""
    example = session.get(Example, example_id)
    if example is None:
        raise HTTPException(status_code=404, detail=f"There is no Example #{example_id}.")
    check_admin_study(request, session, f"Example #{example_id}", example.study_id)
    return example


@router.get("/data", include_in_schema=False)
def data_page(
    request: Request,
    admin: ViewerDep,
    session: SessionDep,
    relation: Annotated[str, Query(max_length=64)] = "",
    concept: Annotated[str, Query(max_length=64)] = "",
    agreement: Annotated[str, Query(pattern="^(" + "|".join(stats.AGREEMENT_FILTERS) + ")?$")] = "",
    origin: Annotated[str, Query(max_length=16)] = "",
    gold: Annotated[str, Query(pattern="^(yes|no)?$")] = "",
    q: Annotated[str, Query(max_length=100)] = "",
    flips: Annotated[str, Query(pattern="^(" + "|".join(stats.FLIP_RULES) + ")?$")] = "",
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
    after: Annotated[int | None, Query(ge=0, le=INT32_MAX)] = None,
    before: Annotated[int | None, Query(ge=1, le=INT32_MAX)] = None,
    last: Annotated[str, Query(pattern="^1?$")] = "",
) -> Response:
    # Pages are read by keyset: the pager's links carry the id the page starts after (or
    # ends before), so the last page costs what the first does; ``page`` only labels it.
    if sum(x is not None for x in (after, before, last or None)) > 1:
        raise HTTPException(
            status_code=400,
            detail="A data page link has one of after, before or last, not several.",
        )
    study_id = admin_study(request).id
    cfg = study_config(session, study_id)
    params = {
        "relation": relation,
        "concept": concept,
        "agreement": agreement,
        "origin": origin,
        "gold": gold,
        "q": q,
        "flips": flips,
    }
    filters = stats.parse_filters(params)
    # Counting a filter no one asked for yet is a pass over the study: on a large study in
    # the background; meanwhile the rows are read by keyset and the page says "counting".
    counted = figure(
        request,
        session,
        figures.data_matches(study_id, cfg, figures.data_params(**params)),
        pending=Computing,
    )
    computing = counted if isinstance(counted, Computing) else None
    total, few, counted_at = (0, None, time.time()) if isinstance(counted, Computing) else counted
    pages = max(1, -(-total // PAGE))
    keep = urlencode({k: v for k, v in params.items() if v})
    # While the matches are counted, every read is a bounded walk (see _walk): a bare page
    # number past the first would be an OFFSET walk, so it is the first page meanwhile.
    bounded = computing is not None
    bare = after is None and before is None and not last
    if bare and (page > BARE_PAGE_LIMIT or (bounded and page > 1)):
        return _bare_page_redirect(keep, page, None if computing else pages)
    rows: list[dict[str, Any]] = []
    has_prev = has_next = False
    edge: int | None = None  # where a bounded walk stopped short of a full page
    if few is not None:
        # A filter that selects a few Examples (none included): its page from the cached
        # list of matches, read by primary key, never a walk of the study in search of them.
        chosen, page, has_prev, has_next = _page_of_few(few, page, after, before, bool(last))
        if chosen:
            rows, _ = stats.browse_page(
                session, cfg, limit=PAGE, study_id=study_id, ids=chosen, **filters
            )
    elif before is not None:
        rows, has_prev, edge = _walk(
            session, cfg, stats.Direction.BEFORE, before, PAGE, study_id, filters, bounded
        )
        has_next, page = True, page if has_prev else 1
    elif last:
        rows, has_prev, edge = _walk(
            session,
            cfg,
            stats.Direction.LAST,
            0,
            (total - (pages - 1) * PAGE or PAGE) if computing is None else PAGE,
            study_id,
            filters,
            bounded,
        )
        page = pages if computing is None else max(page, 2 if has_prev else 1)
    elif after is not None or page == 1:
        rows, has_next, edge = _walk(
            session, cfg, stats.Direction.AFTER, after or 0, PAGE, study_id, filters, bounded
        )
        # Is anything before this page? (After inserts or a hand-made link, ``page`` may not
        # say: one keyset probe does; while counting, that probe could walk to the start.)
        has_prev = bool(after) and (
            bounded or _any_before(session, cfg, rows, after or 0, study_id, filters)
        )
        page = page if has_prev else 1
    else:  # a bare ?page=N up to BARE_PAGE_LIMIT (an old bookmark): read by OFFSET, once
        rows = stats.browse_offset(
            session, cfg, (page - 1) * PAGE, PAGE + 1, study_id=study_id, **filters
        )
        has_next, has_prev, rows = len(rows) > PAGE, True, rows[:PAGE]
    choices = figure(
        request,
        session,
        figures.choices(study_id),
        # Until the study's values are read (four DISTINCT scans): the filter's own values.
        pending=lambda _: {
            "relations": [relation] if relation else [],
            "concepts": [concept] if concept else [],
            "origins": [origin] if origin else [],
        },
    )
    links = _pager_links(keep, rows, page, pages, has_prev, has_next, edge)
    return render(
        request,
        admin,
        "data.html",
        "data",
        rows=rows,
        total=total,
        computing=computing,
        walked=WALK_WITHIN if edge is not None else None,
        counted_ago=max(0, round(time.time() - counted_at)),
        page=page,
        pages=max(pages, page),
        links=links,
        params=params,
        choices=choices,
        agreements=AGREEMENTS,
        cfg=cfg,
        max_reason=adjudication.MAX_REASON,
        query=urlencode({k: v for k, v in params.items() if v}),
    )


def _page_of_few(
    ids: list[int], page: int, after: int | None, before: int | None, last: bool
) -> tuple[list[int], int, bool, bool]:
    """The page's ids from a filter's cached matches, as the keyset pager would read them:
    (ids, page number, has previous, has next)."""
    pages = max(1, -(-len(ids) // PAGE))
    if before is not None:
        end = bisect.bisect_left(ids, before)
        start = max(0, end - PAGE)
        return ids[start:end], (page if start > 0 else 1), start > 0, True
    if last:
        start = (pages - 1) * PAGE
        return ids[start:], pages, start > 0, False
    if after is not None or page == 1:
        start = bisect.bisect_right(ids, after or 0)
        end = start + PAGE
        return ids[start:end], (page if start > 0 else 1), start > 0, end < len(ids)
    start = (page - 1) * PAGE  # a bare page number up to BARE_PAGE_LIMIT
    return ids[start : start + PAGE], page, True, start + PAGE < len(ids)


def _bare_page_redirect(keep: str, page: int, pages: int | None) -> Response:
    """A bare page number beyond BARE_PAGE_LIMIT: reading it by OFFSET would walk every
    matching row before it (586 ms of PostgreSQL at 1.28 million Examples). At or past the
    last page it is the last page (the keyset pager reads it from the end); before it, the
    nearer end of the keyset pages, with a word on why (the first while the matches are
    being counted: ``pages`` None)."""
    base = "/admin/data?" + (keep + "&" if keep else "")
    if pages is None:
        return back(
            base.rstrip("?&"),
            f"Page {page} is not read by its number while the "
            "matches are being counted: this is the first page.",
        )
    if page >= pages:
        return RedirectResponse(f"{base}last=1&page={pages}", status_code=303)
    near_end = pages - page < page
    target = f"{base}last=1&page={pages}" if near_end else base.rstrip("?&")
    return back(
        target,
        f"Page {page} is not read by its number (the pages are read from the first or "
        f"the last page, with the pager): this is the {'last' if near_end else 'first'} of "
        f"{pages} pages.",
    )


def data_statements(
    session: Session, cfg: Any, filters: dict[str, Any], page: int, study_id: int
) -> list[tuple[str, Any]]:
    """The statements the data page runs for these filters once its count is cached, named
    (for bench.dashboard_explain): the cached figure itself (computed off the request, when
    data changes), then the first and last page, or the bare page number's OFFSET read."""
    total, few = stats.count_and_few(session, cfg, FEW_MATCHES, study_id=study_id, **filters)
    out: list[tuple[str, Any]] = [
        ("count (cached)", stats.count_statement(cfg, study_id=study_id, **filters))
    ]
    if few is not None:
        for name, chosen in (("first page", few[:PAGE]), ("last page", few[-PAGE:])):
            if chosen:
                stmt = stats.page_statement(
                    cfg, stats.Direction.AFTER, 0, PAGE, study_id=study_id, ids=chosen, **filters
                )
                out.append((name + " (cached matches)", stmt))
        return out
    if page == 1:
        for name, direction in (
            ("first page", stats.Direction.AFTER),
            ("last page", stats.Direction.LAST),
        ):
            stmt = stats.page_statement(cfg, direction, 0, PAGE, study_id=study_id, **filters)
            out.append((name, stmt))
    elif page <= BARE_PAGE_LIMIT:
        stmt = stats.offset_statement(
            cfg, (page - 1) * PAGE, PAGE + 1, study_id=study_id, **filters
        )
        out.append((f"bare page {page}", stmt))
    return out


def _walk(
    session: Session,
    cfg: Any,
    direction: stats.Direction,
    key: int,
    limit: int,
    study_id: int,
    filters: dict[str, Any],
    bounded: bool,
) -> tuple[list[dict[str, Any]], bool, int | None]:
    """A keyset page: (rows, more in its direction, edge). Bounded, it reads only the next
    WALK_WITHIN Examples of the study; when they hold less than a page and the study goes
    on, ``edge`` is the last id read (the pager goes on from there) and ``more`` is true."""
    if not bounded:
        rows, more = stats.browse_page(
            session, cfg, direction=direction, key=key, limit=limit, study_id=study_id, **filters
        )
        return rows, more, None
    end = stats.window_edge(session, direction, key, WALK_WITHIN, study_id)
    rows, more = stats.browse_page(
        session,
        cfg,
        direction=direction,
        key=key,
        limit=limit,
        study_id=study_id,
        id_range=stats.bounded_range(direction, key, end),
        **filters,
    )
    cut = not more and end is not None
    return rows, more or cut, end if cut else None


def _any_before(
    session: Session,
    cfg: Any,
    rows: list[dict[str, Any]],
    after: int,
    study_id: int,
    filters: dict[str, Any],
) -> bool:
    key = rows[0]["id"] if rows else min(after + 1, INT32_MAX)  # within the id column
    _, more = stats.browse_page(
        session,
        cfg,
        direction=stats.Direction.BEFORE,
        key=key,
        limit=0,
        study_id=study_id,
        **filters,
    )
    return more


def _pager_links(
    keep: str,
    rows: list[dict[str, Any]],
    page: int,
    pages: int,
    has_prev: bool,
    has_next: bool,
    edge: int | None = None,
) -> dict[str, str]:
    """The keyset pager's hrefs: first, previous, next, last (those that lead somewhere).
    ``edge``: where a bounded walk stopped (its side's link goes on from there)."""
    base = "/admin/data?" + (keep + "&" if keep else "")
    links: dict[str, str] = {}
    if has_prev:
        links["first"] = base.rstrip("?&")
        # An empty page (past the end) still leads back: before what it was after.
        start = rows[0]["id"] if rows else INT32_MAX
        if edge is not None and (not rows or edge < start):
            start = edge
        links["previous"] = f"{base}before={start}&page={max(1, page - 1)}"
    if has_next:
        end = rows[-1]["id"] if rows else 0  # an empty page before the start: from the start
        if edge is not None and edge > end:
            end = edge
        links["next"] = f"{base}after={end}&page={page + 1}"
        links["last"] = f"{base}last=1&page={max(pages, page + 1)}"
    return links


def _votes_wanted(is_open: bool, votes: int, target: int, maximum: int) -> str:
    """What the validation queue still asks of an Example, in the words of its rule: the
    target first; a split at the target gets more votes, up to the maximum."""
    if not is_open:
        return f"decided (target {target} votes)"
    if votes < target:
        return f"wants {target} votes"
    return f"not decided at {votes} votes: the queue asks for more, up to {maximum}"


@router.get("/examples/{example_id}", include_in_schema=False)
def example_page(
    example_id: DbId,
    request: Request,
    admin: ViewerDep,
    session: SessionDep,
    msg: str | None = None,
) -> Response:
    example = _example(session, example_id, request)
    image = session.get(Image, example.image_id)
    votes = session.exec(
        select(Vote, Worker)
        .join(Worker, col(Worker.id) == Vote.worker_id)
        .where(Vote.example_id == example_id)
        .order_by(col(Vote.id))
    ).all()
    author = session.get(Worker, example.author_id) if example.author_id else None
    # The other half of its caption: the same annotation's Example on the other image.
    other_half = (
        session.exec(
            select(Example).where(
                Example.annotation_id == example.annotation_id, Example.id != example.id
            )
        ).first()
        if example.annotation_id is not None
        else None
    )
    names = stats.worker_names(session, [w for _, w in votes] + ([author] if author else []))
    n = len(votes)
    agree = sum(1 for v, _ in votes if v.value == example.label)
    cfg = study_config(session, admin_study(request).id)
    assert example.id is not None
    target = example.target_votes or cfg.votes_per_example
    wanted = _votes_wanted(
        bool(example.queue_open), n, target, max(target, cfg.max_votes_per_example)
    )
    stuck = (
        bool(example.queue_open and not example.is_gold)
        and stats.validators_left(session, example.id, example.author_id, example.study_id) == 0
    )
    return render(
        request,
        admin,
        "example.html",
        "data",
        ex=example,
        image=image,
        votes=votes,
        author=author,
        other_half=other_half,
        names=names,
        stuck=stuck,
        wanted=wanted,
        n=n,
        agree=agree,
        cfg=cfg,
        msg=msg,
        marks=_marks(session, example) is not None,
        settled=adjudication.current(session, example.id),
        max_reason=adjudication.MAX_REASON,
    )


def _marks(session: Session, example: Example) -> tuple[Instance, Instance] | None:
    """The subject and object instances on the Example's image, when they are known: from the
    annotated pair, else the image's only instance of each concept."""
    if example.annotation_id is not None:
        ann = session.get(Annotation, example.annotation_id)
        pair = session.get(ImagePair, ann.pair_id) if ann else None
        if pair is not None:
            if pair.image1_id == example.image_id:
                ids = {pair.concept_a: pair.image1_a_id, pair.concept_b: pair.image1_b_id}
            else:
                ids = {pair.concept_a: pair.image2_a_id, pair.concept_b: pair.image2_b_id}
            s, o = ids.get(example.subj), ids.get(example.obj)
            if s is not None and o is not None:
                a, b = session.get(Instance, s), session.get(Instance, o)
                if a is not None and b is not None:
                    return a, b
    found: dict[str, list[Instance]] = {}
    for inst in session.exec(
        select(Instance).where(
            Instance.image_id == example.image_id,
            col(Instance.category).in_((example.subj, example.obj)),
        )
    ):
        found.setdefault(inst.category, []).append(inst)
    s_list, o_list = found.get(example.subj, []), found.get(example.obj, [])
    if len(s_list) == 1 and len(o_list) == 1 and example.subj != example.obj:
        return s_list[0], o_list[0]
    return None


@router.get("/examples/{example_id}/image", include_in_schema=False)
def example_image(example_id: DbId, request: Request, session: SessionDep) -> Response:
    """The photo with the subject (red) and object (blue) marked, when the file is local."""
    return _image(example_id, request, session, thumb=False)


@router.get("/examples/{example_id}/thumb", include_in_schema=False)
def example_thumb(example_id: DbId, request: Request, session: SessionDep) -> Response:
    """The marked photo as a small thumbnail for the data browser (cached; a day's cache)."""
    response = _image(example_id, request, session, thumb=True)
    response.headers["Cache-Control"] = "private, max-age=86400"
    return response


def _image(example_id: int, request: Request, session: Session, *, thumb: bool) -> Response:
    from webapp.admin.thumbs import thumbnail
    from webapp.images import render as images

    example = _example(session, example_id, request)
    image = session.get(Image, example.image_id)
    if image is None:
        raise HTTPException(status_code=404, detail="This Example has no image row.")
    settings = request.app.state.settings
    if settings.image_root is not None:
        marks = _marks(session, example)
        if marks is not None:
            path = images.render_marked(
                settings.image_root, settings.image_cache_dir, image, marks[0], marks[1]
            )
        else:
            path = images.find_source(settings.image_root, image)
        if path is not None:
            if thumb:
                path = thumbnail(path, settings.image_cache_dir)
            return FileResponse(path, media_type="image/jpeg")
    if image.coco_url:
        return RedirectResponse(image.coco_url, status_code=307)
    if thumb:  # a grey "no photo" tile, not a broken-image icon, in the data browser's table
        return Response(NO_PHOTO_SVG, media_type="image/svg+xml")
    raise HTTPException(status_code=404, detail="The image file is not on this server.")


@router.post("/examples/{example_id}/gold", include_in_schema=False)
def mark_gold(
    example_id: DbId,
    request: Request,
    admin: ResearcherPostDep,
    session: SessionDep,
    gold: Annotated[str, Form(pattern="^(true|false|off)$")],
) -> Response:
    example = _example(session, example_id, request)
    if gold == "off":
        actions.set_gold(session, example, False, None, actor=actor_of(admin))
        message = "No longer gold."
    else:
        actions.set_gold(session, example, True, gold == "true", actor=actor_of(admin))
        message = f"Marked as gold with the answer {gold.capitalize()}."
    figure_cache(request).clear()
    return back(f"/admin/examples/{example_id}", message)


@router.post("/examples/{example_id}/requeue", include_in_schema=False)
def requeue(
    example_id: DbId,
    request: Request,
    admin: ResearcherPostDep,
    session: SessionDep,
    extra_votes: Annotated[int, Form(ge=1, le=20)] = 2,
) -> Response:
    example = _example(session, example_id, request)
    try:
        config = study_config(session, example.study_id)
        target = actions.requeue(session, example, extra_votes, config, actor=actor_of(admin))
    except actions.NotVotableError as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None
    figure_cache(request).clear()
    return back(f"/admin/examples/{example_id}", f"Re-queued: now wants {target} votes.")
