"""The study settings form: plain labels, help text and the right control for every
``vsr_core.studies.settings.StudyConfig`` field; parsing what was typed, with errors per field.

Fields not listed in ``LABELS`` still appear (named from the field, helped by its
description, the control chosen from its type), so a new setting needs no template work.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pydantic import ValidationError
from pydantic.fields import FieldInfo

from vsr_core.relations import CATEGORIES, UNUSED, relations_by_category
from vsr_core.studies.settings import StudyConfig
from webapp.admin.formatting import fraction_text
from webapp.admin.forms import FORM_LEVEL, field_errors

# (label, help) per field; the order of StudyConfig is kept.
LABELS: dict[str, tuple[str, str]] = {
    "generate_batch_size": ("Captions per writing batch", "pairs one annotator gets per batch"),
    "generate_minutes": ("Minutes per writing batch", "time limit of one caption batch"),
    "generate_batches_per_day": ("Writing batches per person per day", "0 = unlimited"),
    "validate_batch_size": ("Judgements per validation batch", "items per validation batch"),
    "validate_minutes": ("Minutes per validation batch", "time limit of one validation batch"),
    "validate_batches_per_day": ("Validation batches per person per day", "0 = unlimited"),
    "lease_minutes": ("Minutes to answer one item", "after this an item goes back to the pool"),
    "votes_per_example": ("Votes per caption", "validators asked before a decision (VSR: 3)"),
    "max_votes_per_example": (
        "At most votes per caption",
        "extra votes only while they could change the decision",
    ),
    "keep_threshold": (
        "Keep a caption when at least this share agrees",
        "a fraction like 2/3 (VSR) or a decimal; 2 of 3, 3 of 4 and 4 of 6 pass at 2/3",
    ),
    "keep_rule": (
        "What decides whether a caption is kept",
        "a label model needs a fit (the preview below shows what it changes); "
        "adjudicated captions follow their adjudication",
    ),
    "decide_method": ("When to ask for more votes", ""),
    "decide_confidence": (
        "Confidence for the statistical rules",
        "only for the Wilson and Beta rules, e.g. 0.95",
    ),
    "gold_rate": ("Share of gold items", "checks with known answers mixed in, e.g. 0.05 = 5%"),
    "gold_min_answers": ("Gold answers before judging a validator", "accuracy is shown after"),
    "gold_accuracy_threshold": (
        "Flag validators below this gold accuracy",
        "a share, e.g. 0.7 = 70% correct",
    ),
    "fast_vote_seconds": (
        "Flag validators faster than (seconds per judgement)",
        "median time per vote; 0 turns the flag off",
    ),
    "fast_caption_seconds": (
        "Flag writers faster than (seconds per caption)",
        "median time per caption; 0 turns the flag off",
    ),
    "block_on_gold_failure": (
        "Block validators who fail the gold check",
        "otherwise they are only flagged",
    ),
    "completion_code": ("Completion code", "paste the same code into Prolific"),
    "screenout_code": ("Screen-out code", "for people who decline consent"),
    "relations_enabled": (
        "Relations offered to caption writers",
        "VSR Table 1; the five relations the paper did not use are off by default",
    ),
}

CHOICES: dict[str, list[tuple[str, str]]] = {
    "keep_rule": [
        ("agreement", "The share of votes agreeing with the label (VSR; the threshold above)"),
        ("dawid-skene", "Dawid-Skene's label agrees with the caption's label"),
        ("mace", "MACE's label agrees with the caption's label"),
    ],
    "decide_method": [
        ("next_vote", "Ask again while one more vote could change the decision (VSR default)"),
        ("exact", "Ask again while any further votes could change it (most votes)"),
        ("wilson", "Stop when the Wilson interval is clear of the threshold"),
        ("beta", "Stop when the Beta posterior is clear of the threshold"),
    ],
}
FRACTIONS = frozenset({"keep_threshold"})
LONG_TEXT = 200  # str fields allowing more characters than this get a text area


@dataclass
class FormField:
    name: str
    label: str
    help: str
    kind: str  # int | float | fraction | bool | select | text | textarea | relations
    choices: list[tuple[str, str]] = field(default_factory=list)


def _kind(name: str, info: FieldInfo) -> str:
    if name in CHOICES:
        return "select"
    if name == "relations_enabled":
        return "relations"
    if name in FRACTIONS:
        return "fraction"
    ann = info.annotation
    if ann is bool:
        return "bool"
    if ann is int:
        return "int"
    if ann is float:
        return "float"
    max_len = next((m.max_length for m in info.metadata if hasattr(m, "max_length")), None)
    return "textarea" if max_len is None or max_len > LONG_TEXT else "text"


def form_fields() -> list[FormField]:
    out = []
    for name, info in StudyConfig.model_fields.items():
        label, help_text = LABELS.get(
            name, (info.title or name.replace("_", " ").capitalize(), info.description or "")
        )
        out.append(FormField(name, label, help_text, _kind(name, info), CHOICES.get(name, [])))
    return out


def relation_groups() -> list[tuple[str, list[str]]]:
    """Table 1 by category, every relation once (``among`` is in two categories)."""
    seen: set[str] = set()
    groups = []
    for cat, rels in relations_by_category(only_enabled=False).items():
        fresh = [r for r in rels if r not in seen]
        seen.update(fresh)
        groups.append((cat, fresh))
    return [(c, rels) for c, rels in groups if c in CATEGORIES and rels]


def default_relations() -> set[str]:
    return {r for _, rels in relation_groups() for r in rels if r not in UNUSED}


def display_values(config: StudyConfig) -> dict[str, Any]:
    """Stored values as the form shows them (2/3, the enabled relations ticked)."""
    values: dict[str, Any] = config.model_dump()
    for name in FRACTIONS:
        values[name] = fraction_text(values[name])
    if values.get("relations_enabled") is None:
        values["relations_enabled"] = sorted(default_relations())
    return values


def _number(raw: str, kind: str) -> float | int:
    if kind == "int":
        return int(raw)
    if "/" in raw:  # "2/3": how the paper states the keep rule
        num, den = raw.split("/", 1)
        return float(Fraction(int(num.strip()), int(den.strip())))
    return float(raw)


def parse(form: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """``(changes, typed, errors)``: the values to save, what the admin typed (to show
    again after an error) and the errors by field name."""
    changes: dict[str, Any] = {}
    typed: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for f in form_fields():
        name = f.name
        if f.kind == "bool":
            typed[name] = changes[name] = form.get(name) in ("on", "true", "1")
            continue
        if f.kind == "relations":
            if form.get(f"{name}__shown") is None:
                continue
            chosen = [str(v) for v in form.getlist(name)]
            typed[name] = chosen
            known = {r for _, rels in relation_groups() for r in rels}
            picked = {r for r in chosen if r in known}
            if not picked:
                errors[name] = "tick at least one relation"
            else:
                changes[name] = None if picked == default_relations() else sorted(picked)
            continue
        raw = form.get(name)
        if raw is None:
            continue
        text = str(raw).replace("\r\n", "\n").strip()  # browsers send CRLF in textareas
        typed[name] = text
        if f.kind in ("int", "float", "fraction"):
            try:
                changes[name] = _number(text, f.kind)
            except (ValueError, ZeroDivisionError):
                errors[name] = (
                    "must be a whole number"
                    if f.kind == "int"
                    else "must be a number (a fraction like 2/3 works too)"
                    if f.kind == "fraction"
                    else "must be a number"
                )
        elif f.kind == "select" and text not in {v for v, _ in f.choices}:
            errors[name] = "choose one of the options"
        else:
            changes[name] = text
    return changes, typed, errors


# A hidden field of the form: a digest of each value as the form showed it, so a save stores
# only the fields the admin changed (a value shown and sent back unchanged is left alone: a
# study's own consent text, a threshold shown rounded, another admin's change meanwhile).
SHOWN_FIELD = "__shown"


def _as_sent(kind: str, value: Any) -> Any:
    """A value as the form sends it back when nobody touched it."""
    if kind == "bool":
        return bool(value)
    if kind == "relations":
        return sorted(str(v) for v in value or [])
    text = "" if value is None else str(value)
    return text.replace("\r\n", "\n").strip()  # browsers send CRLF in textareas


def _digest(kind: str, value: Any) -> str:
    raw = json.dumps(_as_sent(kind, value), ensure_ascii=False)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]


def shown_digests(values: dict[str, Any]) -> str:
    """The hidden field's value for a form showing ``values`` (display_values)."""
    return json.dumps({f.name: _digest(f.kind, values.get(f.name)) for f in form_fields()})


def read_shown(raw: Any) -> dict[str, str] | None:
    """The hidden field as sent back; None when absent or not what the form wrote."""
    try:
        data = json.loads(str(raw)) if raw is not None else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        return None
    return data


def touched(
    changes: dict[str, Any], typed: dict[str, Any], shown: dict[str, str]
) -> dict[str, Any]:
    """The changes whose field the admin edited: what came back differs from what was shown."""
    kinds = {f.name: f.kind for f in form_fields()}
    return {
        name: value
        for name, value in changes.items()
        if shown.get(name) != _digest(kinds[name], typed.get(name))
    }


def validation_errors(exc: ValidationError | ValueError) -> dict[str, str]:
    if isinstance(exc, ValidationError):
        return field_errors(exc)
    text = str(exc)
    name = next((n for n in StudyConfig.model_fields if text.startswith(n)), FORM_LEVEL)
    message = text.removeprefix(name).strip() or text
    for other, (label, _) in LABELS.items():  # "at least votes_per_example" in plain words
        message = message.replace(other, f"“{label.lower()}”")
    return {name: message}
