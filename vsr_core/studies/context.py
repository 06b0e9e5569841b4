"""The study a request or command works in: a small object every floor can read.

``request.state.study`` (webapp.http.study) and the CLI's ``--study`` both end here. Parsed
definitions are cached by their sha256, so a study file is parsed once per process however
many requests name it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from vsr_core.models import Study
from vsr_core.studies.definition import Language, StudyDefinition, parse_study

_PARSED: dict[str, StudyDefinition] = {}
_LOCK = threading.Lock()
_MAX_CACHED = 64


def parsed_definition(definition_hash: str, text: str, name: str = "<study>") -> StudyDefinition:
    """The parsed study file of this text, from the cache when its hash was seen before."""
    with _LOCK:
        found = _PARSED.get(definition_hash)
    if found is not None:
        return found
    parsed = parse_study(text, name)
    with _LOCK:
        if len(_PARSED) >= _MAX_CACHED:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[definition_hash] = parsed
    return parsed


@dataclass(frozen=True)
class StudyContext:
    """One stored study as the code uses it: ids for queries, the parsed definition, and the
    language this request or command speaks (the definition's default one)."""

    id: int
    slug: str
    name: str
    definition_hash: str
    definition: StudyDefinition
    language: Language
    is_default: bool = False
    archived: bool = False  # takes no new workers or batches (vsr study archive)

    @classmethod
    def of(cls, study: Study) -> StudyContext:
        assert study.id is not None
        definition = parsed_definition(study.definition_hash, study.definition, study.slug)
        return cls(
            id=study.id,
            slug=study.slug,
            name=study.name,
            definition_hash=study.definition_hash,
            definition=definition,
            language=definition.default_language,
            is_default=study.is_default,
            archived=study.archived_at is not None,
        )

    @property
    def path_prefix(self) -> str:
        """Where this study's worker pages live ("/s/<slug>")."""
        return f"/s/{self.slug}"
