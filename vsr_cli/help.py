"""Plain value names in `--help`: ``--pairs INTEGER`` rather than Typer's ``<int range>``,
``--coco PATH`` rather than ``<list[Path]>`` (a repeatable option says so in its help)."""

from __future__ import annotations

from typing import Any

_WORDS = (("int", "INTEGER"), ("float", "NUMBER"), ("path", "PATH"), ("str", "TEXT"))


def plain_metavars(command: Any) -> Any:
    """Give every option of ``command`` and its subcommands that takes a value and has no
    metavar of its own a plain one; returns ``command``."""
    import typer

    ctx = typer.Context(command)
    for param in getattr(command, "params", []):
        if param.metavar is not None or getattr(param, "is_flag", False):
            continue
        if not hasattr(param, "display_type"):
            continue
        if getattr(param, "param_type_name", "") == "argument":
            # Named, not typed: "PATHS", not "paths... <list[Path]>".
            param.metavar = str(param.name or "value").upper()
            param.display_type_rich = _no_type
            continue
        param.metavar = _plain(str(param.display_type(ctx)))
    for sub in getattr(command, "commands", {}).values():
        plain_metavars(sub)
    return command


def _no_type(ctx: Any = None) -> None:
    return None


def _plain(label: str) -> str:
    inner = label.strip("<>")
    if inner.startswith("list[") and inner.endswith("]"):
        inner = inner[5:-1]
    if "|" in inner:  # a choice: show the choices
        return f"[{inner}]"
    low = inner.lower()
    for key, word in _WORDS:
        if low.startswith(key):
            return word
    return inner.upper() or "VALUE"
