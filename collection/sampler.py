"""The sampler's entry point: COCO files in, new ImagePairs in the database, a summary out.

``sample_into_db`` is what both ``vsr sample`` and the admin dashboard call. It is
import-light (no torch, no web code) and reports progress through a callback.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from collection.coco import CocoIndex, ProgressFn, load_coco
from collection.errors import UnknownCategoryError
from collection.pairs import sample_pairs
from collection.store import existing_pair_keys, store_pairs
from vsr_core.audit import Actor
from vsr_core.defaults import MIN_AREA_PX
from vsr_core.models import DEFAULT_STUDY_ID
from vsr_core.types import utcnow


@dataclass
class SampleSummary:
    run_id: str
    requested: int
    stored: int
    available: int  # new pairs the rules allowed before this run (after cap and exclusions)
    already_stored: int  # pairs of these files already in the database before the run
    skipped: int  # drawn but stored meanwhile by another run
    concepts: int  # distinct concepts in the pairs stored now
    concept_pairs: int
    images: int  # distinct images in the pairs stored now
    instances: int
    eligible_images: int
    eligible_concept_pairs: int
    coco_images: int
    coco_annotations: int
    lvis_set_aside: int = 0  # images set aside where LVIS marks a category not exhaustive
    files: list[str] = field(default_factory=list)

    @property
    def short(self) -> bool:
        """True when fewer pairs were stored than requested."""
        return self.stored < self.requested

    def line(self) -> str:
        text = (
            f"stored {self.stored} new image pairs ({self.concept_pairs} concept pairs, "
            f"{self.concepts} concepts, {self.images} images) from {self.coco_images} COCO "
            f"images / {self.coco_annotations} annotations; run {self.run_id}"
        )
        if self.short:
            text += (
                f"; only {self.available} new pairs exist under these rules "
                f"({self.requested} asked, {self.already_stored} already stored)"
            )
        if self.lvis_set_aside:
            text += (
                f"; {self.lvis_set_aside} images set aside where a category is not "
                "exhaustively annotated (LVIS)"
            )
        if self.skipped:
            text += f"; {self.skipped} were stored meanwhile by another run"
        return text

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _filtered(
    index: CocoIndex,
    allow: Collection[str] | None,
    deny: Collection[str],
    supercategories: Collection[str],
) -> list[str]:
    """A study's concept filter as category names: allow (all if empty), within the
    supercategories (all if empty), less deny. Unknown names are errors, as with allow."""
    from collection.pairs import resolve_concepts

    resolve_concepts(index, deny)  # an unknown denied name is a typo worth reporting
    supers = set(supercategories)
    unknown = supers - set(index.supercategories.values())
    if unknown:
        raise UnknownCategoryError(f"unknown supercategory {sorted(unknown)[0]!r}")
    ids = resolve_concepts(index, allow) or set(index.categories)
    names = [
        index.categories[c]
        for c in sorted(ids)
        if (not supers or index.supercategories.get(c) in supers)
        and index.categories[c] not in set(deny)
    ]
    if not names:
        raise UnknownCategoryError("the concept filter leaves no category")
    return names


def sample_into_db(
    engine: Engine,
    coco_files: Sequence[str | Path],
    n_pairs: int,
    seed: int = 0,
    min_area: float = MIN_AREA_PX,
    prefer_contrast: bool = False,
    max_per_concept_pair: int | None = None,
    concepts: Collection[str] | None = None,
    progress: ProgressFn | None = None,
    deny: Collection[str] = (),
    supercategories: Collection[str] = (),
    min_area_share: float = 0.0,
    study_id: int = DEFAULT_STUDY_ID,
    actor: Actor | None = None,
) -> SampleSummary:
    """Load the COCO files, draw up to ``n_pairs`` new pairs and store them in the study
    (pairs the study has already are not drawn again; other studies' do not count).

    Raises ``collection.errors.SamplerError`` subclasses (one-line messages) for missing or
    malformed files and unknown category names, ``ValueError`` for bad numbers. With
    ``actor`` (a run at the CLI; a dashboard job is recorded when it starts), the audit
    record of the run commits with its pairs.
    """
    if n_pairs < 1:
        raise ValueError("the number of pairs must be at least 1")
    if min_area < 0:
        raise ValueError("the minimum area must not be negative")
    if not 0 <= min_area_share < 1:
        raise ValueError("the minimum area share must be in [0, 1)")
    index = load_coco(
        coco_files, min_area=min_area, progress=progress, min_area_share=min_area_share
    )
    if deny or supercategories:
        concepts = _filtered(index, concepts, deny, supercategories)
    existing = existing_pair_keys(engine, study_id)
    result = sample_pairs(
        index,
        n_pairs,
        seed=seed,
        prefer_contrast=prefer_contrast,
        max_per_concept_pair=max_per_concept_pair,
        concepts=concepts,
        exclude=existing,
        progress=progress,
    )
    run_id = f"{utcnow():%Y%m%dT%H%M%SZ}-s{seed}-{secrets.token_hex(3)}"
    params = {
        "coco_files": [str(f) for f in coco_files],
        "n_pairs": n_pairs,
        "seed": seed,
        "min_area": min_area,
        "prefer_contrast": prefer_contrast,
        "max_per_concept_pair": max_per_concept_pair,
        "concepts": sorted(concepts) if concepts is not None else None,
    }
    stored = store_pairs(
        engine,
        index,
        result.pairs,
        run_id,
        progress=progress,
        study_id=study_id,
        actor=actor,
        params=params,
    )
    kept = result.pairs
    already = sum(1 for (a, b, i1, i2) in existing if i1 in index.eligible and i2 in index.eligible)
    return SampleSummary(
        run_id=run_id,
        requested=n_pairs,
        stored=stored.stored,
        available=result.available,
        already_stored=already,
        skipped=stored.skipped,
        concepts=len({p.concept_a for p in kept} | {p.concept_b for p in kept}),
        concept_pairs=len({(p.concept_a, p.concept_b) for p in kept}),
        images=stored.images,
        instances=stored.instances,
        eligible_images=result.eligible_images,
        eligible_concept_pairs=result.eligible_concept_pairs,
        coco_images=index.n_images,
        coco_annotations=index.n_annotations,
        lvis_set_aside=index.lvis_set_aside,
        files=[str(f) for f in coco_files],
    )
