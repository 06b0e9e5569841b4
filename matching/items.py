"""A multiple-choice item as matching makes it: its own module so that the adversaries and the
filter that pipeline uses can name it without importing pipeline (no import circle)."""

from __future__ import annotations

from dataclasses import dataclass, field

from matching.records import Record, Triple


@dataclass
class Item:
    """One multiple-choice item: the query's image and concepts, k+1 captions, the answer."""

    query: Record
    split: str
    choices: list[str]
    triples: list[Triple]
    answer_index: int
    # The Example whose response became each choice (the query's own at the answer).
    source_ids: list[int]
    weights: list[float] = field(default_factory=list)  # W of each distractor, round order
    round_sources: list[int] = field(default_factory=list)  # source Example per round

    @property
    def relations(self) -> list[str]:
        return [t[1] for t in self.triples]

    @property
    def distractor_triples(self) -> list[Triple]:
        return [t for i, t in enumerate(self.triples) if i != self.answer_index]
