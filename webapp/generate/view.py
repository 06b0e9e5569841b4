"""What an annotator is shown for one pair: both images with the two instances marked, the
relations on offer by category, and the exact captions each choice would store."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from sqlmodel import Session

from vsr_core.captions import render_caption
from vsr_core.models import Image, ImagePair, Instance
from vsr_core.relations import relations_by_category
from vsr_core.study import load_study_config
from webapp.generate.submission import SKIP_REASONS, allowed_relations
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
                "src": pair_image_url(settings.secret_key, pair.id, slot)  # type: ignore[arg-type]
                if settings.image_root is not None
                else image.coco_url,
                "shapes_a": images.svg_shapes(a),
                "shapes_b": images.svg_shapes(b),
            }
        )
    allowed = set(allowed_relations(config))
    # Table 1 lists a few relations ("among") under two categories: offer each once, in the
    # first category that has it (two chips for one relation look like two choices).
    groups: dict[str, list[str]] = {}
    offered: set[str] = set()
    for cat, rels in relations_by_category(only_enabled=False).items():
        chosen = [r for r in rels if r in allowed and r not in offered]
        offered.update(chosen)
        if chosen:
            groups[cat] = chosen
    # The exact captions vsr_core.captions renders, so the live preview cannot drift from storage.
    captions = {
        rel: {
            "a": render_caption(pair.concept_a, rel, pair.concept_b),
            "b": render_caption(pair.concept_b, rel, pair.concept_a),
        }
        for rel in sorted(allowed)
    }
    return {
        "pair": pair,
        "shown": shown,
        "groups": groups,
        "captions": captions,
        "skip_reasons": SKIP_REASONS,
    }
