"""What an annotator is shown for one pair: both images with the two instances marked, the
relations on offer by category, and the exact captions each choice would store."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from sqlmodel import Session

from vsr_core.caption_language import blank_caption, concept_name, render_concepts
from vsr_core.models import Image, ImagePair, Instance
from vsr_core.studies.settings import load_study_config
from webapp.generate.submission import SKIP_REASONS, offered_in
from webapp.http.study import current_study
from webapp.images import render as images
from webapp.images.signed_urls import pair_image_url


def _instances(session: Session, pair: ImagePair) -> dict[str, Instance]:
    out = {}
    for key in ("image1_a_id", "image1_b_id", "image2_a_id", "image2_b_id"):
        inst = session.get(Instance, getattr(pair, key))
        assert inst is not None
        out[key] = inst
    return out


def task_context(request: Request, session: Session, pair: ImagePair) -> dict[str, Any]:
    """Everything the task template needs to show one pair."""
    settings = request.app.state.settings
    config = load_study_config(session, pair.study_id)
    insts = _instances(session, pair)
    shown = []
    for slot in (1, 2):
        image = session.get(Image, getattr(pair, f"image{slot}_id"))
        assert image is not None
        a, b = insts[f"image{slot}_a_id"], insts[f"image{slot}_b_id"]
        shown.append(
            {
                "slot": slot,
                "image": image,
                "local": settings.image_root is not None,
                "src": pair_image_url(
                    settings.secret_key,
                    pair.id,  # type: ignore[arg-type]
                    slot,
                    request.scope.get("root_path", ""),
                )
                if settings.image_root is not None
                else image.coco_url,
                "shapes_a": images.svg_shapes(a),
                "shapes_b": images.svg_shapes(b),
            }
        )
    lang = current_study(request).language
    # The study language's vocabulary (its names, its categories, its switched-off relations
    # hidden) cut down to the run-time ``relations_enabled`` setting.
    # A relation listed under two categories ("among") is offered once, in its first one
    # (two chips for one relation look like two choices).
    groups: dict[str, list[dict[str, str]]] = {}
    for rel in offered_in(config, lang):
        groups.setdefault(rel.categories[0], []).append({"id": rel.id, "name": rel.name})
    # The exact captions vsr_core.caption_language renders, so the live preview cannot drift
    # from storage.
    captions = {
        rel["id"]: {
            "a": render_concepts(lang, pair.concept_a, rel["id"], pair.concept_b),
            "b": render_concepts(lang, pair.concept_b, rel["id"], pair.concept_a),
        }
        for rels in groups.values()
        for rel in rels
    }
    names = {"a": concept_name(lang, pair.concept_a), "b": concept_name(lang, pair.concept_b)}
    return {
        "pair": pair,
        "names": names,
        "blank_caption": blank_caption(lang, names["a"], names["b"]),
        # for the page's script, which swaps the two objects
        "blank_template": blank_caption(lang, "{first}", "{second}"),
        "shown": shown,
        "groups": groups,
        "captions": captions,
        "skip_reasons": SKIP_REASONS,
    }
