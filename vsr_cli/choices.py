"""Options with fixed choices: each choice set is an Enum (Typer lists it in `--help`), and a
wrong value is one line naming the option, as every other wrong value is (vsr_cli.errors)."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import TypeVar

from vsr_cli.failure import CliUsageError

E = TypeVar("E", bound=StrEnum)


def choice(enum: type[E], option: str) -> Callable[[str], E]:
    """A Typer ``parser`` for ``option``: its text as a member of ``enum``, else
    ``--balance must be soft, pair or off; got 'maybe'``."""
    names = [member.value for member in enum]
    wanted = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]

    def parse(text: str | E) -> E:
        if isinstance(text, enum):  # Typer passes the default as it is
            return text
        try:
            return enum(text)
        except ValueError:
            raise CliUsageError(f"{option} must be {wanted}; got {text!r}") from None

    return parse
