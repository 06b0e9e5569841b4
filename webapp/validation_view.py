"""What a validator is shown for one leased Example: the image with both instances marked, the
caption, and whether the reference-frame question applies. Never the label, origin or gold flag,
so gold items look exactly like the others."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, select

from core.models import Example, Image, ImagePair, Instance
from webapp import images

# Relations whose truth depends on the frame of reference (VSR 3.2): left/right, front/behind.
FRAME_WORDS = ("left", "right", "front", "behind", "back of")


def needs_frame_question(relation: str) -> bool:
    return any(word in relation for word in FRAME_WORDS)


def example_instances(session: Session, example: Example) -> tuple[Instance, Instance] | None:
    """The (subj, obj) instances an Example is about, or None when they cannot be told.

    Human Examples come from an annotation of an ImagePair; adversarial ones inherit their
    parent's; otherwise (imported) the image's only instance of each concept is taken, which
    is how VSR sampled its images.
    """
    source = example
    if source.annotation_id is None and source.parent_example_id is not None:
        parent = session.get(Example, source.parent_example_id)
        source = parent if parent is not None else source
    if source.annotation_id is not None:
        from core.models import Annotation

        annotation = session.get(Annotation, source.annotation_id)
        pair = session.get(ImagePair, annotation.pair_id) if annotation else None
        if pair is not None and example.image_id in (pair.image1_id, pair.image2_id):
            slot = 1 if pair.image1_id == example.image_id else 2
            a = session.get(Instance, getattr(pair, f"image{slot}_a_id"))
            b = session.get(Instance, getattr(pair, f"image{slot}_b_id"))
            if a is not None and b is not None:
                return (a, b) if pair.concept_a == example.subj else (b, a)
    found = session.exec(select(Instance).where(Instance.image_id == example.image_id)).all()
    subj = [i for i in found if i.category == example.subj]
    obj = [i for i in found if i.category == example.obj]
    if len(subj) == 1 and len(obj) == 1:
        return subj[0], obj[0]
    return None


@dataclass
class ShownItem:
    assignment_id: int
    caption: str
    subj: str
    obj: str
    relation: str
    frame_question: bool
    image: Image
    src: str | None
    local: bool  # a server-rendered marked JPEG (else COCO URL + SVG outlines)
    shapes_subj: list[str]
    shapes_obj: list[str]

    def public(self) -> dict[str, Any]:
        return {
            "assignment_id": self.assignment_id,
            "caption": self.caption,
            "subj": self.subj,
            "obj": self.obj,
            "relation": self.relation,
            "frame_question": self.frame_question,
            "image": {
                "src": self.src,
                "marked": self.local,
                "width": self.image.width,
                "height": self.image.height,
                "coco_id": self.image.coco_id,
                "shapes_subj": self.shapes_subj,
                "shapes_obj": self.shapes_obj,
            },
        }


def shown_item(
    session: Session, assignment_id: int, example: Example, image_root: Any
) -> ShownItem:
    image = session.get(Image, example.image_id)
    assert image is not None
    insts = example_instances(session, example)
    local = image_root is not None and insts is not None
    return ShownItem(
        assignment_id=assignment_id,
        caption=example.caption,
        subj=example.subj,
        obj=example.obj,
        relation=example.relation,
        frame_question=needs_frame_question(example.relation),
        image=image,
        src=f"/images/validate/{assignment_id}.jpg" if local else image.coco_url,
        local=local,
        shapes_subj=[] if local or insts is None else images.svg_shapes(insts[0]),
        shapes_obj=[] if local or insts is None else images.svg_shapes(insts[1]),
    )
