"""The study a matching run speaks for: its relation semantics and its caption language.

Set once around a whole run (``vsr_dataset.match_run``, so `vsr match --study` and the
dashboard's matching job agree) and read wherever matching decides what a distractor may be
(the table filter, P_sim, P_rel's relation vocabulary) or writes one (distractor captions, and
so the negatives sent to validators). Outside a scope: VSR's built-in table and English
captions, as before studies existed. A ContextVar, so a run in a job thread sees its own study.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from vsr_core import captions
from vsr_core.caption_language import render_concepts
from vsr_core.relation_semantics import SemanticsTable, Triple, builtin_table, table_for_study
from vsr_core.studies.definition import Language, StudyDefinition


@dataclass(frozen=True)
class StudyScope:
    table: SemanticsTable
    language: Language | None = None  # None: vsr_core.captions' English
    slug: str | None = None


_ACTIVE: ContextVar[StudyScope | None] = ContextVar("matching_study_scope", default=None)


def scope_for(definition: StudyDefinition) -> StudyScope:
    """A study's table (the built-in one when its rules are VSR's) and default language."""
    return StudyScope(table_for_study(definition), definition.default_language, definition.slug)


@contextmanager
def study_scope(scope: StudyScope) -> Iterator[StudyScope]:
    token = _ACTIVE.set(scope)
    try:
        yield scope
    finally:
        _ACTIVE.reset(token)


def active_table() -> SemanticsTable:
    scope = _ACTIVE.get()
    return builtin_table() if scope is None else scope.table


def relation_names() -> list[str]:
    """P_rel's vocabulary and the table's index order: the active study's relation ids."""
    return list(active_table().names)


def render_caption(subj: str, relation: str, obj: str) -> str:
    """A distractor's caption in the active study's template, relation and concept names."""
    scope = _ACTIVE.get()
    if scope is None or scope.language is None:
        return captions.render_caption(subj, relation, obj)
    return render_concepts(scope.language, subj, relation, obj)


def sim_probability(truth: Triple, candidate: Triple) -> float:
    return active_table().sim_probability(truth, candidate)


def is_implied(truth: Triple, candidate: Triple) -> bool:
    return active_table().is_implied(truth, candidate)


def is_equivalent(a: Triple, b: Triple) -> bool:
    return active_table().is_equivalent(a, b)
