"""What one spatial caption says about another: the offline P_sim of adversarial matching.

A distractor must be *false* whenever the correct caption is true, so matching needs, for a
correct caption "The A r1 the B." and a candidate "The A r2 the B." (or "The B r2 the A."),
the probability that the candidate holds too. This module hand-writes that knowledge for the
71 relations of VSR Table 1, each entry with the reasoning next to it, and derives the rest
by closure (networkx): synonyms, converses (subj and obj swapped), one-way entailments,
contradictions and soft overlaps.

Reading of the numbers: ``p`` is P(candidate true | correct caption true), judged for VSR's
validation rule (left/right and front/behind count as True in *either* the intrinsic or the
relative frame). Equivalences and entailments give p = 1 and are never allowed as
distractors; contradictions give a small p (not 0 where reference frames can disagree);
relation pairs not mentioned get ``DEFAULT_P``.

Written by hand rather than taken from an NLI model because it must run offline and be
auditable: a validator or admin can read exactly why a distractor was (not) allowed.

``SemanticsTable`` holds one vocabulary's entries and answers by their closure: the built-in
table is one instance (``builtin_table``), a study file's ``[semantics]`` another
(``table_for_study``); the module-level functions answer by the built-in one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Literal

from vsr_core.relations import all_relations

if TYPE_CHECKING:
    from vsr_core.studies.definition import StudyDefinition

Kind = Literal["same", "equivalent", "entails", "contradicts", "overlaps", "unrelated"]
Triple = tuple[str, str, str]  # (subj, relation, obj)

# P(candidate | truth) for relation pairs the table says nothing about, with the same objects.
DEFAULT_P = 0.15
# A candidate about other objects than the truth (matching without remapping): the truth says
# nothing about it, and it mentions objects the image may not even show.
OTHER_OBJECTS_P = 0.05

# --- 1. Synonyms: with the same subj and obj, each member says what every other says. -----
EQUIVALENTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("on", "on top of"),
        "Both put ENT1 resting on ENT2; VSR annotators use them interchangeably ('on' is broader, "
        "e.g. a clock on a wall, so treating them as one only forbids more distractors).",
    ),
    (
        ("under", "beneath", "below"),
        "All three place ENT1 lower than ENT2 on the vertical; validators accept any of them for "
        "the same scene (a cat under/beneath/below a table).",
    ),
    (
        ("above", "over"),
        "Both place ENT1 higher than ENT2 on the vertical ('over' may add covering, which does not "
        "make 'above' false).",
    ),
    (
        ("in", "inside", "within", "into"),
        "All say ENT1 is contained in ENT2's region. VSR's writers use 'into' for a static "
        "'in' ('The cat is into the toilet.', 'The dog is into the toilet.').",
    ),
    (
        ("near", "close to", "by"),
        "Proximity words of the same strength: 'the bike is by the tree' means it is near it.",
    ),
    (
        ("next to", "beside", "at the side of", "adjacent to", "alongside"),
        "All say ENT1 is immediately beside ENT2 with nothing between them; VSR's 'alongside' "
        "is used for any side-by-side placement, not only lengthwise.",
    ),
    (
        ("far from", "far away from", "away from"),
        "The same proximity judgement; 'away' only intensifies. VSR's captions use 'away from' "
        "for distance ('The tv is away from the dining table.'), not for a direction of motion.",
    ),
    (
        ("in front of", "ahead of"),
        "VSR's 'ahead of' is used as 'in front of' for static objects (a car ahead of a "
        "truck in one lane is in front of it), so the two cannot tell choices apart.",
    ),
    (
        ("left of", "at the left side of"),
        "Same direction; 'at the side of' only adds closeness, which validators do not test apart.",
    ),
    (("right of", "at the right side of"), "Same direction; see left of."),
    (
        ("behind", "at the back of"),
        "'At the back of' ENT2 is behind ENT2 (in ENT2's intrinsic frame, which VSR accepts).",
    ),
    (("across from", "opposite to"), "Both say ENT1 faces ENT2 from the other side of something."),
    (
        ("has as a part", "consists of"),
        "Both say ENT2 is a component of ENT1 (a pizza consists of / has as a part the broccoli).",
    ),
)

# --- 2. Converses: "The A x the B." says the same as "The B y the A." ---------------------
CONVERSES: tuple[tuple[str, str, str], ...] = (
    (
        "above",
        "below",
        "Vertical order read from either object; gravity fixes the frame, so it is exact.",
    ),
    (
        "left of",
        "right of",
        "A left of B is B right of A in the same frame (relative or B's intrinsic one).",
    ),
    (
        "in front of",
        "behind",
        "A in front of B is B behind A in the viewer's frame; counted as converse to be safe.",
    ),
    ("contains", "inside", "A contains B exactly when B is inside A."),
    ("has as a part", "part of", "A has B as a part exactly when B is part of A."),
    ("surrounding", "enclosed by", "A surrounds B exactly when B is enclosed by A."),
)

# "A r B" holds exactly when "B r A" does.
SYMMETRIC: tuple[tuple[str, str], ...] = (
    ("near", "Distance is symmetric."),
    ("next to", "Being side by side is symmetric."),
    ("far from", "Distance is symmetric."),
    ("touching", "Contact is symmetric."),
    ("connected to", "A connection joins both objects."),
    ("detached from", "Being apart is symmetric."),
    ("parallel to", "Parallelism is symmetric."),
    ("perpendicular to", "Perpendicularity is symmetric."),
    ("across from", "Facing across a gap is symmetric."),
    ("alongside", "Two objects side by side lie alongside each other."),
)

# --- 3. One-way entailments (same subj and obj): premise true => hypothesis true. ---------
ENTAILMENTS: tuple[tuple[str, str, str], ...] = (
    ("on top of", "touching", "Resting on something means touching it."),
    ("on top of", "above", "What rests on top of ENT2 is higher than ENT2."),
    ("attached to", "connected to", "Attachment is a kind of connection."),
    ("connected to", "touching", "Connected objects (as VSR's images show them) are in contact."),
    ("against", "touching", "Leaning against something means touching it."),
    ("part of", "connected to", "A part is joined to its whole."),
    ("touching", "near", "Objects in contact are near each other."),
    ("next to", "near", "Immediately beside implies near."),
    ("at the edge of", "near", "At ENT2's edge is near ENT2."),
    ("inside", "near", "Something inside ENT2 is near ENT2."),
    ("surrounding", "near", "What surrounds ENT2 is near ENT2."),
    ("among", "near", "Among the ENT2 means near them."),
    ("out of", "outside", "Out of ENT2 means no longer inside it."),
)

# --- 4. Contradictions (same subj and obj): p = chance both are judged true anyway. -------
CONTRADICTIONS: tuple[tuple[str, str, float, str], ...] = (
    ("above", "below", 0.0, "One object cannot be both higher and lower than the other."),
    (
        "left of",
        "right of",
        0.15,
        "Opposite sides, but VSR accepts either frame: when the intrinsic and relative frames "
        "disagree both captions can be judged True, so the residual is not 0.",
    ),
    ("in front of", "behind", 0.15, "Opposite sides; the same frame caveat as left/right."),
    ("inside", "outside", 0.0, "Containment and its negation."),
    ("contains", "inside", 0.0, "A cannot both contain B and be inside B."),
    ("near", "far from", 0.0, "Opposite proximity judgements."),
    ("connected to", "detached from", 0.0, "Joined versus apart."),
    ("touching", "detached from", 0.05, "Apart objects do not touch (unless merely leaning)."),
    ("facing", "facing away from", 0.0, "Opposite orientations of ENT1."),
    ("parallel to", "perpendicular to", 0.0, "Two orientations that exclude each other."),
    ("toward", "away from", 0.0, "Opposite directions of ENT1's motion or pose."),
    ("on", "off", 0.0, "'Off' means no longer on."),
)

# --- 5. Soft overlaps (same subj and obj): often both true, so penalised, not forbidden. ---
OVERLAPS: tuple[tuple[str, str, float, str], ...] = (
    ("touching", "on", 0.4, "Much of what touches ENT2 in COCO scenes rests on it."),
    ("touching", "next to", 0.4, "Contact from the side is also 'next to'."),
    ("near", "next to", 0.5, "Near things are often directly beside each other."),
    ("near", "touching", 0.3, "Near objects sometimes touch."),
    ("above", "on", 0.5, "Higher objects are often resting on the lower one."),
    ("at", "near", 0.8, "'At' ENT2 (a person at a table) is near it, loosely."),
    ("with", "near", 0.7, "Things together are usually near."),
    ("in the middle of", "on", 0.5, "The middle of a table or bed is usually on it."),
    ("beyond", "behind", 0.7, "Beyond ENT2 from the viewer is behind it in the relative frame."),
    ("down from", "below", 0.6, "Down from ENT2 is mostly lower than it."),
    ("facing", "toward", 0.5, "Facing something often goes with moving toward it."),
    ("connected to", "attached to", 0.7, "Most connections in images are attachments."),
    ("between", "near", 0.6, "Between two things is near each of them."),
)


@dataclass(frozen=True)
class Link:
    """What a correct caption says about a candidate with the same objects."""

    kind: Kind
    p: float  # P(candidate true | correct caption true)
    reason: str


Literal_ = tuple[str, bool]  # (relation, swapped): swapped=True reads "B rel A" for (A, B)


class SemanticsTable:
    """One relation vocabulary's semantics: what a caption says about another, by closure.

    ``builtin_table()`` is the hand-written VSR table above; ``table_for_study`` builds one from
    a study file's ``[semantics]`` (relation ids; a lab's own vocabulary), so matching forbids
    and weighs distractors by the rules of the study it matches (matching.study_scope)."""

    def __init__(
        self,
        names: Sequence[str],
        equivalents: Sequence[tuple[Sequence[str], str]] = (),
        converses: Sequence[tuple[str, str, str]] = (),
        symmetric: Sequence[tuple[str, str]] = (),
        entailments: Sequence[tuple[str, str, str]] = (),
        contradictions: Sequence[tuple[str, str, float, str]] = (),
        overlaps: Sequence[tuple[str, str, float, str]] = (),
        source: str = "built-in",
    ) -> None:
        self.names: tuple[str, ...] = tuple(names)
        self.equivalents = tuple((tuple(g), r) for g, r in equivalents)
        self.converses = tuple(converses)
        self.symmetric = tuple(symmetric)
        self.entailments = tuple(entailments)
        self.contradictions = tuple(contradictions)
        self.overlaps = tuple(overlaps)
        self.source = source
        self._reach: dict[Literal_, dict[Literal_, str]] | None = None
        self._links: dict[tuple[str, str, bool], Link] = {}
        self._lower = {n.strip().lower(): n for n in self.names}

    def __repr__(self) -> str:
        return f"SemanticsTable({self.source}, {len(self.names)} relations)"

    def rules(self) -> tuple[object, ...]:
        """The entries without their reasoning: two tables with equal rules decide alike."""
        return (
            [g for g, _ in self.equivalents],
            [(x, y) for x, y, _ in self.converses],
            [x for x, _ in self.symmetric],
            [(x, y) for x, y, _ in self.entailments],
            [(x, y, p) for x, y, p, _ in self.contradictions],
            [(x, y, p) for x, y, p, _ in self.overlaps],
        )

    def _closure(self) -> dict[Literal_, dict[Literal_, str]]:
        """Entailment closure over literals; the reason of a derived edge names its steps."""
        if self._reach is not None:
            return self._reach
        import networkx as nx  # light, and only needed once per table

        graph = nx.DiGraph()
        for n in self.names:
            graph.add_node((n, False))
            graph.add_node((n, True))

        def both(a: Literal_, b: Literal_, reason: str) -> None:
            graph.add_edge(a, b, reason=reason)
            graph.add_edge(b, a, reason=reason)

        for group, reason in self.equivalents:
            for x in group:
                for y in group:
                    if x != y:
                        for sw in (False, True):
                            both((x, sw), (y, sw), f"'{x}' = '{y}': {reason}")
        for x, y, reason in self.converses:
            for sw in (False, True):
                both((x, sw), (y, not sw), f"'{x}' is the converse of '{y}': {reason}")
        for x, reason in self.symmetric:
            both((x, False), (x, True), f"'{x}' is symmetric: {reason}")
        for x, y, reason in self.entailments:
            for sw in (False, True):
                graph.add_edge((x, sw), (y, sw), reason=f"'{x}' entails '{y}': {reason}")

        reach: dict[Literal_, dict[Literal_, str]] = {}
        for node in graph.nodes:
            # Shortest paths give the most direct explanation for each derived entailment.
            paths = nx.single_source_shortest_path(graph, node)
            reach[node] = {
                tgt: "; ".join(graph.edges[a, b]["reason"] for a, b in zip(path, path[1:]))  # noqa: B905
                for tgt, path in paths.items()
                if tgt != node
            }
        self._reach = reach
        return reach

    def check(self, name: str) -> str:
        key = self._lower.get(name.strip().lower())
        if key is None:
            raise ValueError(f"unknown relation {name!r}")
        return key

    def implied_literals(self, lit: Literal_) -> dict[Literal_, str]:
        """Every literal the given one entails, itself included."""
        return {lit: "identity"} | self._closure()[lit]

    def _equivalents(self, name: str) -> set[str]:
        """Relations mutually entailing ``name`` with the same argument order."""
        reach = self._closure()
        fwd = reach[(name, False)]
        return {name} | {r for (r, sw) in fwd if not sw and (name, False) in reach[(r, False)]}

    def link(self, premise: str, hypothesis: str, swapped: bool = False) -> Link:
        """What "The A premise the B." says about "The A hypothesis the B." (``swapped``:
        about "The B hypothesis the A.")."""
        key = (premise, hypothesis, swapped)
        found = self._links.get(key)
        if found is None:
            found = self._links[key] = self._link(premise, hypothesis, swapped)
        return found

    def _link(self, premise: str, hypothesis: str, swapped: bool) -> Link:
        premise, hypothesis = self.check(premise), self.check(hypothesis)
        target: Literal_ = (hypothesis, swapped)
        if premise == hypothesis and not swapped:
            return Link("same", 1.0, "the same caption")
        fwd = self.implied_literals((premise, False))
        if target in fwd:
            back = self.implied_literals(target)
            kind: Kind = "equivalent" if (premise, False) in back else "entails"
            return Link(kind, 1.0, fwd[target])
        # A contradiction holds if something the premise entails contradicts something the
        # candidate entails; the residual chance is the smallest along such a chain.
        best: tuple[float, str] | None = None
        hyp_implied = self.implied_literals(target)
        for x, y, p, reason in self.contradictions:
            for a, b in ((x, y), (y, x)):
                for sw in (False, True):
                    if (a, sw) in fwd and (b, sw) in hyp_implied and (best is None or p < best[0]):
                        why = [s for s in (fwd[(a, sw)], hyp_implied[(b, sw)]) if s != "identity"]
                        best = (p, "; ".join([f"'{x}' contradicts '{y}': {reason}", *why]))
        if best is not None:
            return Link("contradicts", best[0], best[1])
        if not swapped:
            eq_p, eq_h = self._equivalents(premise), self._equivalents(hypothesis)
            for x, y, p, reason in self.overlaps:
                if x in eq_p and y in eq_h:
                    return Link("overlaps", p, f"'{x}' overlaps '{y}': {reason}")
        return Link("unrelated", DEFAULT_P, "the table says nothing about this pair")

    def triple_link(self, truth: Triple, candidate: Triple) -> Link:
        """``link`` for two whole captions: same objects, swapped objects, or other objects."""
        (ts, tr, to), (cs, cr, co) = truth, candidate
        if (cs, co) == (ts, to):
            return self.link(tr, cr)
        if (cs, co) == (to, ts):
            return self.link(tr, cr, swapped=True)
        return Link("unrelated", OTHER_OBJECTS_P, "the captions are about different objects")

    def sim_probability(self, truth: Triple, candidate: Triple) -> float:
        """P(candidate true | truth true) by the table."""
        return self.triple_link(truth, candidate).p

    def is_implied(self, truth: Triple, candidate: Triple) -> bool:
        """The candidate is the same as, equivalent to or entailed by the truth: never a
        distractor."""
        return self.triple_link(truth, candidate).kind in ("same", "equivalent", "entails")

    def is_equivalent(self, a: Triple, b: Triple) -> bool:
        """Two captions that say the same thing (so two such choices are duplicates)."""
        return self.triple_link(a, b).kind in ("same", "equivalent")


@cache
def builtin_table() -> SemanticsTable:
    """The hand-written VSR table over the 71 relations of vsr_core.relations."""
    return SemanticsTable(
        [r.name for r in all_relations(include_import_only=True)],
        EQUIVALENTS,
        CONVERSES,
        SYMMETRIC,
        ENTAILMENTS,
        CONTRADICTIONS,
        OVERLAPS,
    )


def table_for_study(definition: StudyDefinition) -> SemanticsTable:
    """The table matching uses for a study: the built-in one when the study's vocabulary and
    rules are VSR's (the shipped studies), else one built from its ``[semantics]`` over its
    relation ids, each entry's reason naming the study file."""
    names = [r.id for r in definition.default_language.relations]
    sem = definition.semantics
    src = f"study {definition.slug!r}"
    table = SemanticsTable(
        names,
        [(g, f"synonyms in {src}") for g in sem.equivalents],
        [(x, y, f"converses in {src}") for x, y in sem.converses],
        [(x, f"symmetric in {src}") for x in sem.symmetric],
        [(x, y, f"an entailment in {src}") for x, y in sem.entailments],
        [(x, y, p, f"a contradiction in {src}") for x, y, p in sem.contradictions],
        [(x, y, p, f"an overlap in {src}") for x, y, p in sem.overlaps],
        source=src,
    )
    builtin = builtin_table()
    if sorted(names) == sorted(builtin.names) and table.rules() == builtin.rules():
        return builtin  # same decisions, and the hand-written reasoning to show for them
    return table


# The module-level functions answer by the built-in table (VSR's vocabulary).


def implied_literals(lit: Literal_) -> dict[Literal_, str]:
    """Every literal the given one entails, itself included (built-in table)."""
    return builtin_table().implied_literals(lit)


def link(premise: str, hypothesis: str, swapped: bool = False) -> Link:
    """``SemanticsTable.link`` of the built-in table."""
    return builtin_table().link(premise, hypothesis, swapped)


def triple_link(truth: Triple, candidate: Triple) -> Link:
    return builtin_table().triple_link(truth, candidate)


def sim_probability(truth: Triple, candidate: Triple) -> float:
    """P(candidate true | truth true) by the built-in table."""
    return builtin_table().sim_probability(truth, candidate)


def is_implied(truth: Triple, candidate: Triple) -> bool:
    """The candidate is the same as, equivalent to or entailed by the truth: never a distractor."""
    return builtin_table().is_implied(truth, candidate)


def is_equivalent(a: Triple, b: Triple) -> bool:
    """Two captions that say the same thing (so two such choices are duplicates)."""
    return builtin_table().is_equivalent(a, b)


def table_entries() -> list[tuple[str, str, str, str]]:
    """Every hand-written entry as (kind, relation a, relation b, reasoning), for docs and tests."""
    out: list[tuple[str, str, str, str]] = []
    for group, reason in EQUIVALENTS:
        out += [("equivalent", group[0], other, reason) for other in group[1:]]
    out += [("converse", x, y, r) for x, y, r in CONVERSES]
    out += [("symmetric", x, x, r) for x, r in SYMMETRIC]
    out += [("entails", x, y, r) for x, y, r in ENTAILMENTS]
    out += [("contradicts", x, y, r) for x, y, _, r in CONTRADICTIONS]
    out += [("overlaps", x, y, r) for x, y, _, r in OVERLAPS]
    return out
