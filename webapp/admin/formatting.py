"""How the dashboard shows numbers and times to people (Jinja filters).

Thresholds are fractions (2/3, not 0.6666666666666666) and timestamps are readable times in
the viewer's own zone: the server writes a UTC ``<time datetime=...>`` with a readable UTC
fallback, and admin.js rewrites it in the browser's local zone.
"""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction

from markupsafe import Markup, escape

# Denominators a study is likely to mean (2/3, 3/4, 4/5, 7/10 ...); beyond that a decimal.
_MAX_DENOMINATOR = 20


def fraction_text(value: float | Fraction | int | None) -> str:
    """``2/3`` for 0.666..., ``1`` for 1.0, ``0.615`` when no small fraction matches."""
    if value is None:
        return ""
    frac = Fraction(value).limit_denominator(_MAX_DENOMINATOR)
    if abs(float(frac) - float(value)) > 1e-9:
        return f"{float(value):.3g}"
    return str(frac.numerator) if frac.denominator == 1 else f"{frac.numerator}/{frac.denominator}"


def readable_time(value: datetime | str | None, data_key: str | None = None) -> Markup:
    """A ``<time>`` element: "22 Nov 2026, 21:48 UTC" until the browser localises it
    (``data_key``: the live overview refreshes it from that JSON key)."""
    if value is None or value == "":
        return Markup("–")
    when = datetime.fromisoformat(value) if isinstance(value, str) else value
    if when.tzinfo is None:  # the database stores UTC without a zone on SQLite
        when = when.replace(tzinfo=UTC)
    when = when.astimezone(UTC)
    iso = when.isoformat(timespec="seconds")
    text = when.strftime("%-d %b %Y, %H:%M UTC")
    key = Markup(' data-key="{}"').format(data_key) if data_key else ""
    return Markup('<time class="local"{} datetime="{}">{}</time>').format(key, escape(iso), text)


def install(env: object) -> None:
    """Register the filters on a Jinja environment."""
    filters = env.filters  # type: ignore[attr-defined]
    filters["fraction"] = fraction_text
    filters["readable_time"] = readable_time
