"""Admin form errors in plain words, per field (shown next to the field, inside the admin
layout), from pydantic's ValidationError.

Pydantic's messages are written for developers ("Value error, ...", "Input should be
greater than or equal to 1"); these say what is wanted.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

FORM_LEVEL = "_form"


def plain_message(err: dict[str, Any]) -> str:
    """One pydantic error as a sentence fragment a person understands."""
    kind = str(err.get("type", ""))
    ctx = err.get("ctx") or {}
    msg = str(err.get("msg", "is not valid")).removeprefix("Value error, ")
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        words = {
            "greater_than_equal": "at least",
            "greater_than": "more than",
            "less_than_equal": "at most",
            "less_than": "less than",
        }[kind]
        limit = next(iter(ctx.values()), "")
        return f"must be {words} {limit}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return "must be a whole number"
    if kind in ("float_parsing", "float_type"):
        return "must be a number (2/3 or 0.67 for a share)"
    if kind == "bool_parsing":
        return "must be yes or no"
    if kind == "missing":
        return "is required"
    if kind in ("too_short", "string_too_short"):
        return "must not be empty" if ctx.get("min_length") in (1, None) else msg.lower()
    if kind in ("too_long", "string_too_long"):
        return f"is too long (at most {ctx.get('max_length')} characters)"
    if kind == "string_pattern_mismatch":
        return "contains characters that are not allowed here"
    return msg[:1].lower() + msg[1:]


def field_errors(exc: ValidationError) -> dict[str, str]:
    """``{field name: message}``; errors not tied to one field go under ``FORM_LEVEL``."""
    out: dict[str, str] = {}
    for err in exc.errors():
        loc = err.get("loc") or ()
        name = str(loc[0]) if loc else FORM_LEVEL
        out.setdefault(name, plain_message(dict(err)))
    return out
