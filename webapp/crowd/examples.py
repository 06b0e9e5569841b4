"""Photos for the worked examples in the instructions: real COCO images bundled in demo/.

Only the names listed here are served (never a path from the request). Each comes with its
COCO id and Flickr licence, shown under the picture as demo/SOURCE.md asks. When the demo
folder is not deployed, the instructions fall back to their text (``available``).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from sqlmodel import Session, col, select

from vsr_core.models import Image
from webapp.http.errors import PageError

router = APIRouter(tags=["instructions"])

# name -> (file under demo/coco/images, COCO id, licence as COCO names it, (width, height) as
# COCO gives them: the page reserves the photo's box, so nothing below it jumps when it loads)
EXAMPLE_PHOTOS: dict[str, tuple[str, int, str, tuple[int, int]]] = {
    "cat-under-laptop": (
        "val2017/000000174231.jpg",
        174231,
        "Flickr, Attribution-NonCommercial-ShareAlike License",
        (375, 500),
    ),
    "cat-before-laptop": (
        "val2017/000000119828.jpg",
        119828,
        "Flickr, Attribution-ShareAlike License",
        (500, 375),
    ),
}

_ROOTS = (Path(__file__).resolve().parents[2] / "demo", Path.cwd() / "demo")


def photo_path(name: str) -> Path | None:
    entry = EXAMPLE_PHOTOS.get(name)
    if entry is None:
        return None
    for root in _ROOTS:
        path = root / "coco" / "images" / entry[0]
        if path.is_file():
            return path
    return None


def in_the_pool(session: Session) -> set[int]:
    """The COCO ids of the example photos that are images of this database (pairs to
    caption, Examples to judge): showing one in the instructions would show a task's answer."""
    ids = [entry[1] for entry in EXAMPLE_PHOTOS.values()]
    return {int(i) for i in session.exec(select(Image.coco_id).where(col(Image.coco_id).in_(ids)))}


def available(session: Session | None = None) -> dict[str, dict[str, object]]:
    """The example photos this deployment can serve, for the instructions template; with a
    session, none that is part of the work (the instructions then describe it in words)."""
    taken = in_the_pool(session) if session is not None else set()
    return {
        name: {
            "src": f"/examples/{name}.jpg",
            "coco_id": coco_id,
            "licence": licence,
            "width": size[0],
            "height": size[1],
        }
        for name, (_, coco_id, licence, size) in EXAMPLE_PHOTOS.items()
        if photo_path(name) is not None and coco_id not in taken
    }


@router.get("/examples/{name}.jpg", summary="A photo of the instructions' worked examples")
def example_photo(name: str) -> FileResponse:
    path = photo_path(name)
    if path is None:
        raise PageError(404, "No such image.")
    return FileResponse(path, media_type="image/jpeg", headers={"Cache-Control": "max-age=86400"})
