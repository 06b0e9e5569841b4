"""Is this worker a person doing the task? Evidence from how they answer, for a person to judge.

Pure functions, no database: the dashboard's workers page, ``vsr platform plan``, the export's
worker file and ``bench/authenticity_vsr.py`` all call :func:`assess` with what they loaded,
so one set of rules and thresholds decides every flag (docs/quality.md lists each signal and
its false-positive risks). A flag never rejects anything by itself: it holds the worker's
submissions for an admin's review.

The vote-pattern tests are one-sided Wilson bounds at a strict confidence (``Z``): a worker is
flagged only when even the most favourable reading of their answers so far is unlike a person
who looks at the photos. That makes the tests safe to re-run after every vote (the bench does)
and leaves new workers with a handful of answers unflagged.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

# z of the one-sided bounds: 3.29 is a 99.95 % one-sided bound, so a person re-tested after
# each of a few hundred votes is rarely flagged by a chance run (chosen on the bench's
# threshold seeds, docs/quality.md).
Z = 3.29
# A person who looks at the photo agrees with the other validators' majority far more often
# than chance: the 45 VSR validators agree 80-96 % (leave-one-out majority), an image-blind
# answer on VSR's paired captions 50 %.
MIN_AGREEMENT = 0.77
# The same answer nearly every time (always True): VSR validators answer True 40-61 %.
MAX_SAME_ANSWER = 0.75
# Machine-regular timing: people's answer times vary (robust spread well above 0.3; the
# browser bench's people 0.25-0.45); a script on a fixed beat does not.
MIN_LATENCY_CV = 0.10
# Answers faster than a person can look at a photo and read a caption.
FAST_ANSWER_MS = 400
MAX_FAST_SHARE = 0.5
# Focus leaves the page on most items: answers looked up elsewhere (or pasted from a model).
MAX_FOCUS_LOSS_SHARE = 0.8
# No test runs on fewer answers than this.
MIN_ANSWERS = 10
# Two identities from one address answer alike beyond what two people do: the Wilson lower
# bound (z ``Z``) of their agreement (on the Examples both answered, or position by position)
# above this. Of the 489 pairs of VSR validators sharing 10+ items the highest bound is 0.87
# (89 % agreement over 3,141 items); one agent under two names agrees on every item.
SHARED_MIN_AGREEMENT = 0.90
# ... or their answer times match position by position (within 5 % or 50 ms) far more often
# than two people's do (5-10 % by chance for log-normal latencies): the lower bound of the
# matching share above this, over at least MIN_ANSWERS timed items.
SHARED_MIN_TIMING_MATCH = 0.40
TIMING_MATCH_MS = 50
TIMING_MATCH_SHARE = 0.05


class Signal(StrEnum):
    """Why a worker is flagged; each one is described in docs/quality.md."""

    same_answer = "same_answer"
    low_agreement = "low_agreement"
    low_gold = "low_gold"
    regular_timing = "regular_timing"
    before_image = "before_image"
    too_fast = "too_fast"
    no_input = "no_input"
    focus_away = "focus_away"
    canary = "canary"
    paste = "paste"
    shared_pattern = "shared_pattern"


@dataclass(frozen=True)
class ItemSignals:
    """What the page measured for one answer (all optional: the JSON API sends none)."""

    shown_ms: int | None = None  # image decoded and on screen -> answer; None: never shown
    image_shown: bool = True
    focus_changes: int = 0
    pointer_events: int = 0
    key_events: int = 0
    canary: bool = False
    pasted: bool = False


@dataclass
class WorkerRecord:
    """One worker's answers in the order given. ``agrees[i]`` is whether answer i agrees with
    the study's label model (or the other validators' majority), None when undecided."""

    answers: Sequence[bool] = ()
    agrees: Sequence[bool | None] = ()
    gold: Sequence[bool] = ()  # each gold answer: right or wrong
    items: Sequence[ItemSignals] = ()
    examples: Sequence[int] = ()  # the Example of each answer (same order), when known
    # Other identities from the same address whose answers or timings are near-identical,
    # each with what matched (:func:`shared_pattern`).
    shared_with: Sequence[tuple[int, str]] = ()


@dataclass
class Assessment:
    """An authenticity score in [0, 1] (1: nothing unusual) and the evidence behind it."""

    score: float
    flags: list[Signal] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    summary: dict[str, float | int | None] = field(default_factory=dict)

    @property
    def flagged(self) -> bool:
        return bool(self.flags)


def wilson(successes: int, n: int, z: float = Z) -> tuple[float, float]:
    """The Wilson score interval of a proportion (both ends; (0, 1) for n = 0)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def answer_entropy(answers: Sequence[bool]) -> float | None:
    """Shannon entropy of the True/False answers in bits (1: balanced, 0: always one)."""
    if not answers:
        return None
    p = sum(answers) / len(answers)
    if p in (0.0, 1.0):
        return 0.0
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def latency_spread(times: Sequence[int]) -> float:
    """How much answer times vary: the median absolute deviation (scaled to a standard
    deviation, 1.4826) over the median. Robust: one slow page load on a busy machine does
    not make a scripted beat look human; people's spread is 0.3-0.6."""
    median = statistics.median(times)
    if median <= 0:
        return 0.0
    mad = statistics.median(abs(t - median) for t in times)
    return 1.4826 * mad / median


def _vote_tests(rec: WorkerRecord, out: Assessment) -> None:
    n = len(rec.answers)
    trues = sum(rec.answers)
    same = max(trues, n - trues)
    out.summary["answers"] = n
    out.summary["true_share"] = round(trues / n, 3) if n else None
    entropy = answer_entropy(rec.answers)
    out.summary["answer_entropy"] = None if entropy is None else round(entropy, 3)
    if n >= MIN_ANSWERS and wilson(same, n)[0] > MAX_SAME_ANSWER:
        out.flags.append(Signal.same_answer)
        word = "True" if trues >= n - trues else "False"
        out.evidence.append(f"answered {word} {same} of {n} times (entropy {entropy:.2f} bits)")
    decided = [a for a in rec.agrees if a is not None]
    agree = sum(decided)
    out.summary["agreement"] = round(agree / len(decided), 3) if decided else None
    if len(decided) >= MIN_ANSWERS and wilson(agree, len(decided))[1] < MIN_AGREEMENT:
        out.flags.append(Signal.low_agreement)
        out.evidence.append(
            f"agrees with the label model on {agree} of {len(decided)} decided items "
            f"({agree / len(decided):.0%}; people who look at the photo: over 70 %)"
        )
    right = sum(rec.gold)
    out.summary["gold"] = len(rec.gold)
    out.summary["gold_right"] = right
    if len(rec.gold) >= 3 and wilson(right, len(rec.gold), 1.64)[1] < MIN_AGREEMENT:
        out.flags.append(Signal.low_gold)
        out.evidence.append(f"gold items right {right} of {len(rec.gold)}")


def _page_tests(rec: WorkerRecord, out: Assessment) -> None:
    items = rec.items
    out.summary["items_measured"] = len(items)
    if not items:
        return
    n = len(items)
    canaries = sum(i.canary for i in items)
    out.summary["canary_hits"] = canaries
    if canaries:
        out.flags.append(Signal.canary)
        out.evidence.append(f"acted on a control no person can see on {canaries} item(s)")
    blind = sum(not i.image_shown for i in items)
    out.summary["before_image"] = blind
    if blind >= 2 or (blind and n < MIN_ANSWERS):
        out.flags.append(Signal.before_image)
        out.evidence.append(f"answered {blind} of {n} items before the photo was on screen")
    pasted = sum(i.pasted for i in items)
    out.summary["pastes"] = pasted
    if pasted:
        out.flags.append(Signal.paste)
        out.evidence.append(f"pasted text into {pasted} caption(s)")
    times = [i.shown_ms for i in items if i.shown_ms is not None]
    if len(times) >= MIN_ANSWERS:
        median = statistics.median(times)
        cv = latency_spread(times)
        out.summary["median_ms"] = int(median)
        out.summary["latency_cv"] = round(cv, 3)
        if cv < MIN_LATENCY_CV:
            out.flags.append(Signal.regular_timing)
            out.evidence.append(
                f"answer times nearly constant: median {median:.0f} ms, spread {cv:.0%}"
            )
        fast = sum(t < FAST_ANSWER_MS for t in times)
        if fast / len(times) > MAX_FAST_SHARE:
            out.flags.append(Signal.too_fast)
            out.evidence.append(f"{fast} of {len(times)} answers within {FAST_ANSWER_MS} ms")
    silent = sum(i.pointer_events == 0 and i.key_events == 0 for i in items)
    out.summary["no_input_items"] = silent
    if n >= MIN_ANSWERS and silent == n:
        out.flags.append(Signal.no_input)
        out.evidence.append(f"no pointer or key activity on any of {n} items")
    away = sum(i.focus_changes > 0 for i in items)
    out.summary["focus_away_items"] = away
    if n >= MIN_ANSWERS and away / n > MAX_FOCUS_LOSS_SHARE:
        out.flags.append(Signal.focus_away)
        out.evidence.append(f"left the page during {away} of {n} items")


def assess(rec: WorkerRecord) -> Assessment:
    """Every test on one worker's record; the score falls with each independent flag."""
    out = Assessment(score=1.0)
    _vote_tests(rec, out)
    _page_tests(rec, out)
    out.summary["shared_pattern_with"] = len(rec.shared_with)
    if rec.shared_with:
        out.flags.append(Signal.shared_pattern)
        others = "; ".join(f"worker {w}: {why}" for w, why in rec.shared_with)
        out.evidence.append(
            f"{len(rec.shared_with)} other identity(ies) from the same address answered "
            f"near-identically ({others})"
        )
    out.score = round(0.5 ** len(out.flags), 3)
    return out


def first_flag(answers: Sequence[bool], agrees: Sequence[bool | None], limit: int) -> int | None:
    """After how many answers (1-based, within ``limit``) the vote-pattern tests first flag
    a worker re-tested after each answer; None if they never do."""
    trues = same_n = agree = decided = 0
    for k, (value, ok) in enumerate(zip(answers[:limit], agrees[:limit], strict=True), 1):
        trues += value
        same_n = max(trues, k - trues)
        if ok is not None:
            decided += 1
            agree += ok
        if k >= MIN_ANSWERS and wilson(same_n, k)[0] > MAX_SAME_ANSWER:
            return k
        if decided >= MIN_ANSWERS and wilson(agree, decided)[1] < MIN_AGREEMENT:
            return k
    return None


def _alike(agree: int, n: int) -> bool:
    return n >= MIN_ANSWERS and wilson(agree, n)[0] > SHARED_MIN_AGREEMENT


def shared_pattern(a: WorkerRecord, b: WorkerRecord) -> str | None:
    """What two identities' records share beyond what two people's do (None: nothing): the
    same answers on the Examples both answered, the same answer sequence position by
    position (a script answering without regard to the item), or the same answer times
    position by position (one script's clock). Only ever asked of identities from one
    address; docs/quality.md lists its false-positive risks."""
    mine = dict(zip(a.examples, a.answers, strict=False))
    theirs = dict(zip(b.examples, b.answers, strict=False))
    both = mine.keys() & theirs.keys()
    same = sum(mine[e] == theirs[e] for e in both)
    if _alike(same, len(both)):
        return f"same answer on {same} of {len(both)} shared items"
    n = min(len(a.answers), len(b.answers))
    same = sum(x == y for x, y in zip(a.answers[:n], b.answers[:n], strict=True))
    if _alike(same, n):
        return f"same answer sequence at {same} of {n} positions"
    ta = [i.shown_ms for i in a.items if i.shown_ms is not None]
    tb = [i.shown_ms for i in b.items if i.shown_ms is not None]
    n = min(len(ta), len(tb))
    close = sum(
        abs(x - y) <= max(TIMING_MATCH_MS, TIMING_MATCH_SHARE * max(x, y))
        for x, y in zip(ta[:n], tb[:n], strict=True)
    )
    if n >= MIN_ANSWERS and wilson(close, n)[0] > SHARED_MIN_TIMING_MATCH:
        return f"answer times within 5 % at {close} of {n} positions"
    return None


def shared_patterns(
    groups: Iterable[Collection[int]], records: Mapping[int, WorkerRecord]
) -> dict[int, list[tuple[int, str]]]:
    """For each identity, the others of any of its address groups (``groups``: the identities
    seen from one address) that :func:`shared_pattern` matches; identities without a record
    are skipped. Pairs are compared once however many addresses they share."""
    out: dict[int, list[tuple[int, str]]] = {}
    seen: set[tuple[int, int]] = set()
    for group in groups:
        ids = sorted(w for w in set(group) if w in records)
        for i, x in enumerate(ids):
            for y in ids[i + 1 :]:
                if (x, y) in seen:
                    continue
                seen.add((x, y))
                why = shared_pattern(records[x], records[y])
                if why is not None:
                    out.setdefault(x, []).append((y, why))
                    out.setdefault(y, []).append((x, why))
    return out


def batch_line(batch_id: int, found: Assessment) -> str:
    """One batch's evidence in one line (``vsr platform plan``, the worker page)."""
    s = found.summary
    counts = f"{s.get('answers', 0)} answers, {s.get('items_measured', 0)} measured"
    detail = "; ".join(found.evidence) if found.flagged else "nothing unusual"
    return f"batch #{batch_id} (score {found.score:.2f}): {counts}; {detail}"
