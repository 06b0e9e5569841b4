"""Every CLI failure as one line in plain words: which option, what is wanted, what was given.

Typer (0.29) checks option values with pydantic and raises click-style usage errors whose
text is pydantic's ("Input should be greater than or equal to 1") and whose class name the
old handler printed; a database failure arrived as SQLAlchemy's class name and SQL. This
module turns each into the sentence a person needs, e.g.
``--pairs must be at least 1 (got 0)``.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Sequence
from typing import Any

import typer

from vsr_cli.common import db_reason

# pydantic's wording -> ours (the pydantic message follows "Input should be ").
_BOUNDS = [
    (re.compile(r"greater than or equal to (.+)"), "must be at least {}"),
    (re.compile(r"less than or equal to (.+)"), "must be at most {}"),
    (re.compile(r"greater than (.+)"), "must be more than {}"),
    (re.compile(r"less than (.+)"), "must be less than {}"),
]
_KINDS = {
    "a valid integer": "must be a whole number",
    "a valid number": "must be a number",
    "a finite number": "must be a finite number",
    "a valid boolean": "must be true or false",
}


def _is(exc: BaseException, kind: str) -> bool:
    """Whether a usage error is of click's class ``kind`` or a subclass. Typer (0.29) raises
    its own copy of click's exceptions and makes only ``TyperException`` (their base) and
    ``BadParameter`` public, so the others are told apart by their documented names."""
    return isinstance(exc, typer.TyperException) and any(
        cls.__name__ == kind for cls in type(exc).__mro__
    )


def usage_message(exc: Exception, args: Sequence[str]) -> str:
    """The line for a usage error (bad, missing or unknown option or command)."""
    command = _command_path(exc)
    if isinstance(exc, typer.BadParameter) and _is(exc, "MissingParameter") and exc.param:
        what = _param_name(exc.param)
        help_text = getattr(exc.param, "help", None)
        return f"{what} is required" + (f" ({_plain(help_text).rstrip('.')})" if help_text else "")
    if isinstance(exc, typer.BadParameter) and exc.param is not None:
        what = _param_name(exc.param)
        wanted = _wanted(exc.message)
        given = _given_value(args, getattr(exc.param, "opts", []))
        got = "" if given is None else f" (got {given})" if given else " (got nothing)"
        return f"{what} {wanted}{got}"
    if _is(exc, "NoSuchOption"):
        option: str = getattr(exc, "option_name", "")
        msg = f"unknown option {option}"
        if command:
            msg += f" for `{command}`"
        guess = _closest(option, _all_options(exc))
        if guess:
            msg += f": did you mean {guess}?"
        return msg + (f" (see `{command} --help`)" if command else "")
    if isinstance(exc, typer.TyperException) and _is(exc, "BadOptionUsage"):
        option = getattr(exc, "option_name", "")
        if "requires an argument" in exc.format_message():
            return f"{option} needs a value"
        return f"{option}: {_plain(exc.format_message())}"
    text = _plain(exc.format_message()) if hasattr(exc, "format_message") else str(exc)
    if command and _is(exc, "UsageError"):
        text += f" (see `{command} --help`)"
    return text


def error_message(exc: BaseException) -> str:
    """The line for any other failure: a database error in plain words, a file problem with
    its path, else the exception's own message (never its class name)."""
    if "sqlalchemy" in sys.modules:
        from sqlalchemy.exc import DBAPIError, SQLAlchemyError

        if isinstance(exc, DBAPIError):
            return f"database error: {db_reason(exc)}"
        if isinstance(exc, SQLAlchemyError):
            return f"database error: {db_reason(exc)}"
    if _from_driver(exc):  # raw sqlite3 / psycopg errors from code that uses the cursor
        return f"database error: {db_reason(exc)}"
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    msg = " ".join(str(exc).split())
    if not msg:
        return "unexpected failure (set VSR_DEBUG=1 to see where)"
    return msg[:500]


def _from_driver(exc: BaseException) -> bool:
    return any(
        cls.__module__.split(".")[0] in ("sqlite3", "psycopg", "psycopg2")
        for cls in type(exc).__mro__
    )


def is_usage_error(exc: BaseException) -> bool:
    return isinstance(exc, typer.TyperException)


def is_help_request(exc: BaseException) -> bool:
    """`vsr` or `vsr db` alone: click raises this to print the help."""
    return type(exc).__name__ == "NoArgsIsHelpError"


def _wanted(message: str) -> str:
    text = _plain(message)
    if text.lower().startswith("input should be "):
        rest = text[len("input should be ") :]
        for pattern, template in _BOUNDS:
            m = pattern.fullmatch(rest)
            if m:
                return template.format(m.group(1))
        for kind, wanted in _KINDS.items():
            if rest.startswith(kind):
                return wanted
        return f"must be {rest}"
    return f"is not valid: {text}"


def _param_name(param: Any) -> str:
    opts: list[str] = [o for o in getattr(param, "opts", []) if o.startswith("-")]
    if opts:
        return str(max(opts, key=len))  # --pairs rather than -p
    return str(getattr(param, "metavar", None) or getattr(param, "name", "") or "argument").upper()


def _given_value(args: Sequence[str], opts: Sequence[str]) -> str | None:
    """The value given to an option on the command line (the last one, as click takes)."""
    found: str | None = None
    for i, arg in enumerate(args):
        if arg == "--":
            break
        for opt in opts:
            if not opt.startswith("-"):
                continue
            if arg == opt and i + 1 < len(args):
                found = args[i + 1]
            elif arg.startswith(opt + "=") and opt.startswith("--"):
                found = arg[len(opt) + 1 :]
    return found


def _all_options(exc: Any) -> list[str]:
    cmd = getattr(exc, "cmd", None) or getattr(getattr(exc, "ctx", None), "command", None)
    out: list[str] = []
    for param in getattr(cmd, "params", []):
        out.extend(o for o in getattr(param, "opts", []) if o.startswith("--"))
        out.extend(o for o in getattr(param, "secondary_opts", []) if o.startswith("--"))
    return out


def _closest(name: str, options: list[str]) -> str | None:
    # A stricter cut-off than Typer's own suggestions (it offers --out for --bogus).
    found = difflib.get_close_matches(name, options, n=1, cutoff=0.75)
    return found[0] if found else None


def _command_path(exc: Any) -> str:
    ctx = getattr(exc, "ctx", None)
    return str(getattr(ctx, "command_path", "") or "")


def _plain(text: str) -> str:
    """One line, starting in lower case unless the first word is an acronym (VSR, COCO)."""
    text = " ".join(str(text).split())
    if len(text) > 1 and text[1].isupper():
        return text
    return text[:1].lower() + text[1:]
