"""The spatial-relation vocabulary of VSR (Liu et al., TACL 2023, Table 1).

71 entries in 7 categories; "among" is listed twice (Topological and Unallocated), so there
are 70 distinct relation strings. Five are marked unused in the paper and are switched off
by default. The released data also holds "congruent", which is not in Table 1: it is
accepted on import only (``import_only``) and never offered to annotators.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

CATEGORIES: tuple[str, ...] = (
    "Adjacency",
    "Directional",
    "Orientation",
    "Projective",
    "Proximity",
    "Topological",
    "Unallocated",
)

# Table 1, in the paper's order. Entries are (category, relation).
TABLE_1: tuple[tuple[str, str], ...] = tuple(
    (cat, rel)
    for cat, rels in (
        (
            "Adjacency",
            "adjacent to, alongside, at the side of, at the right side of, "
            "at the left side of, attached to, at the back of, ahead of, against, at the edge of",
        ),
        (
            "Directional",
            "off, past, toward, down, deep down, up, away from, along, around, from, "
            "into, to, across, across from, through, down from",
        ),
        ("Orientation", "facing, facing away from, parallel to, perpendicular to"),
        (
            "Projective",
            "on top of, beneath, beside, behind, left of, right of, under, "
            "in front of, below, above, over, in the middle of",
        ),
        ("Proximity", "by, close to, near, far from, far away from"),
        (
            "Topological",
            "connected to, detached from, has as a part, part of, contains, within, "
            "at, on, in, with, surrounding, among, consists of, out of, between, inside, outside, "
            "touching",
        ),
        ("Unallocated", "beyond, next to, opposite to, after, among, enclosed by"),
    )
    for rel in rels.split(", ")
)

UNUSED: frozenset[str] = frozenset({"deep down", "up", "from", "to", "after"})
IMPORT_ONLY: frozenset[str] = frozenset({"congruent"})
# Verbs take no copula: "The oven contains the cake.", not "The oven is contains the cake."
NO_COPULA: frozenset[str] = frozenset({"contains", "has as a part", "consists of"})


@dataclass(frozen=True)
class Relation:
    name: str
    category: str  # primary category (first listing in Table 1)
    categories: tuple[str, ...]  # every category that lists it ("among" has two)
    enabled: bool  # offered to annotators by default
    import_only: bool = False

    @property
    def copula(self) -> bool:
        return self.name not in NO_COPULA


@lru_cache(maxsize=1)
def _vocabulary() -> dict[str, Relation]:
    cats: dict[str, list[str]] = {}
    for cat, rel in TABLE_1:
        cats.setdefault(rel, []).append(cat)
    vocab = {
        rel: Relation(rel, cs[0], tuple(cs), enabled=rel not in UNUSED) for rel, cs in cats.items()
    }
    for rel in IMPORT_ONLY:
        vocab[rel] = Relation(rel, "Unallocated", ("Unallocated",), enabled=False, import_only=True)
    return vocab


def all_relations(include_import_only: bool = False) -> list[Relation]:
    """Every relation of Table 1 (70 distinct names), optionally with the import-only ones."""
    return [r for r in _vocabulary().values() if include_import_only or not r.import_only]


def enabled_relations() -> list[Relation]:
    """The relations offered to annotators by default (Table 1 less the five unused)."""
    return [r for r in _vocabulary().values() if r.enabled]


def get_relation(name: str, *, allow_import_only: bool = False) -> Relation:
    """Look a relation up by name; raise ``UnknownRelationError`` with a readable message."""
    rel = _vocabulary().get(name.strip().lower())
    if rel is None or (rel.import_only and not allow_import_only):
        raise UnknownRelationError(f"unknown relation {name!r}: not one of the 71 of VSR Table 1")
    return rel


def is_known(name: str, *, allow_import_only: bool = False) -> bool:
    try:
        get_relation(name, allow_import_only=allow_import_only)
    except UnknownRelationError:
        return False
    return True


def category_of(name: str) -> str:
    return get_relation(name, allow_import_only=True).category


def relations_by_category(only_enabled: bool = True) -> dict[str, list[str]]:
    """Category -> relations in Table 1 order (``among`` under both of its categories)."""
    out: dict[str, list[str]] = {c: [] for c in CATEGORIES}
    for cat, rel in TABLE_1:
        if only_enabled and rel in UNUSED:
            continue
        out[cat].append(rel)
    return out


class UnknownRelationError(ValueError):
    pass
