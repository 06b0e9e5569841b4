"""Re-validating an imported release: fresh votes on a chosen sample, kept apart from the
imported ones, and a report comparing the two (docs/dataset.md, `vsr revalidate`).

Researchers re-validate existing data: a human ceiling on a test sample (as the VSR paper did
with fresh annotators), a new validator pool, a check of a translated version. Re-opening the
imported Examples themselves would mix the fresh votes into the original keep rule (the
queue's counters, ``Example.queue_votes`` / ``queue_agree``, and every figure count all votes
of an Example). So each sampled Example gets a *copy*: origin ``revalidation``,
``parent_example_id`` = the imported Example, same image, caption, relation and label, its
own vote target and fresh queue counters (0 votes, open). The validation queue serves copies
like any human Example (never to its author); the original and its imported votes are not
touched. Copies are left out of exports, matching and the dashboard's kept counts; a round
name in ``source_key`` (``reval:<round>:<parent id>``) makes opening a round idempotent.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, func, select
from sqlmodel import Session, col
from sqlmodel import select as sqlmodel_select

from vsr_core import audit
from vsr_core.agreement import fleiss_kappa, keep_rule, wilson_interval
from vsr_core.audit import Actor
from vsr_core.models import DEFAULT_STUDY_ID, AuditKind, Example, ExampleOrigin
from vsr_core.studies.settings import StudyConfig
from vsr_core.tables import EXAMPLE, VOTE

REVALIDATION = ExampleOrigin.revalidation.value
ROUND_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
MAX_SAMPLE = 100_000


class RevalidationError(ValueError):
    """Bad request to open or report a round (message written for the user)."""


def check_round(name: str) -> str:
    if not ROUND_RE.fullmatch(name):
        raise RevalidationError(
            f"round name {name!r}: use 1-32 lower-case letters, digits, '-' or '_'"
        )
    return name


def _key(round_name: str, parent_id: int) -> str:
    return f"reval:{round_name}:{parent_id}"


@dataclass(frozen=True)
class Opened:
    round: str
    eligible: int
    opened: int
    already_open: int
    votes_each: int

    def line(self) -> str:
        return (
            f"round {self.round}: opened {self.opened} imported Examples for {self.votes_each} "
            f"fresh votes each ({self.already_open} were already in this round; "
            f"{self.eligible} imported Examples to choose from)"
        )


def open_round(
    session: Session,
    *,
    sample: int,
    seed: int,
    config: StudyConfig,
    relations: Sequence[str] = (),
    votes: int | None = None,
    round_name: str = "r1",
    actor: Actor | None = None,
) -> Opened:
    """Copy a seeded random sample of imported Examples into fresh, open Examples. Commits,
    with the audit trail's record of the round when ``actor`` is given.

    The sample is drawn from the imported Examples (optionally of some relations) in id
    order with ``random.Random(seed)``: the same database, seed and size give the same
    sample. Examples already in this round are not copied again.
    """
    check_round(round_name)
    if not 1 <= sample <= MAX_SAMPLE:
        raise RevalidationError(f"sample size must be 1 to {MAX_SAMPLE:,}, not {sample}")
    votes_each = votes or config.votes_per_example
    if not 1 <= votes_each <= 50:
        raise RevalidationError(f"votes per Example must be 1 to 50, not {votes_each}")
    query = select(EXAMPLE.c.id).where(EXAMPLE.c.origin == ExampleOrigin.imported.value)
    if relations:
        query = query.where(EXAMPLE.c.relation.in_(list(relations)))
    ids = [int(i) for (i,) in session.connection().execute(query.order_by(EXAMPLE.c.id))]
    if not ids:
        which = f" with relation {', '.join(relations)}" if relations else ""
        raise RevalidationError(
            f"there are no imported Examples{which} to re-validate (import a release with "
            "`vsr import-vsr` first)"
        )
    chosen = sorted(random.Random(seed).sample(ids, min(sample, len(ids))))
    taken = {
        str(k)
        for (k,) in session.connection().execute(
            select(EXAMPLE.c.source_key).where(
                EXAMPLE.c.source_key.in_([_key(round_name, i) for i in chosen])
            )
        )
    }
    fresh = [i for i in chosen if _key(round_name, i) not in taken]
    for start in range(0, len(fresh), 500):
        chunk = fresh[start : start + 500]
        parents = session.exec(sqlmodel_select(Example).where(col(Example.id).in_(chunk))).all()
        for parent in parents:
            session.add(
                Example(
                    source_key=_key(round_name, parent.id),  # type: ignore[arg-type]
                    image_id=parent.image_id,
                    caption=parent.caption,
                    relation=parent.relation,
                    subj=parent.subj,
                    obj=parent.obj,
                    label=parent.label,
                    origin=REVALIDATION,
                    parent_example_id=parent.id,
                    author_id=parent.author_id,  # never served to the caption's writer
                    target_votes=votes_each,
                )
            )
        session.flush()
    opened = Opened(round_name, len(ids), len(fresh), len(chosen) - len(fresh), votes_each)
    if actor is not None:
        audit.record(
            session,
            actor,
            AuditKind.revalidation_round,
            study_id=DEFAULT_STUDY_ID,  # imported releases live in the default study
            target=f"round {round_name}",
            change={
                "sample": sample,
                "seed": seed,
                "relations": list(relations),
                "votes_each": votes_each,
                "opened": opened.opened,
                "already_open": opened.already_open,
            },
        )
    session.commit()
    return opened


def rounds(session: Session) -> list[str]:
    """Round names present in the database, oldest first."""
    keys = session.connection().execute(
        select(EXAMPLE.c.source_key).where(EXAMPLE.c.origin == REVALIDATION).order_by(EXAMPLE.c.id)
    )
    seen: dict[str, None] = {}
    for (key,) in keys:
        parts = str(key).split(":")
        if len(parts) == 3:
            seen.setdefault(parts[1], None)
    return list(seen)


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Cohen's kappa of two raters' True/False judgements on the same items.

    Five lines instead of scikit-learn's ``cohen_kappa_score`` (which the tests compare
    against) so the web server never loads scikit-learn for one figure. None if undefined.
    """
    n = len(a)
    if n == 0 or n != len(b):
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    return None if expected >= 1 else (observed - expected) / (1 - expected)


def _share(k: int, n: int) -> dict[str, Any]:
    low, high = wilson_interval(k, n)
    return {"k": k, "n": n, "share": k / n if n else None, "low": low, "high": high}


def _majority(t: int, n: int) -> bool | None:
    """The majority judgement of n votes with t True; None on a tie or without votes."""
    return None if n == 0 or 2 * t == n else 2 * t > n


def report(session: Session, config: StudyConfig, round_name: str | None = None) -> dict[str, Any]:
    """Fresh judgements (the copies' votes) against the original ones (the imported votes of
    the same Examples): accuracy against the labels with Wilson 95 % intervals, keep
    decisions, Cohen's kappa between the fresh and the original majority, Fleiss' kappa of
    each group. ``round_name`` None: the latest round."""
    names = rounds(session)
    if round_name is None:
        round_name = names[-1] if names else None
    if round_name is None:
        return {"round": None, "rounds": names, "examples": 0}
    check_round(round_name)
    conn = session.connection()
    copy_q = select(
        EXAMPLE.c.id, EXAMPLE.c.parent_example_id, EXAMPLE.c.label, EXAMPLE.c.relation
    ).where(EXAMPLE.c.origin == REVALIDATION, EXAMPLE.c.source_key.like(f"reval:{round_name}:%"))
    copies = conn.execute(copy_q).all()
    ids = [int(c.id) for c in copies] + [int(c.parent_example_id) for c in copies]
    counts: dict[int, tuple[int, int]] = {}
    for start in range(0, len(ids), 1000):
        chunk = ids[start : start + 1000]
        for eid, n, t in conn.execute(
            select(
                VOTE.c.example_id,
                func.count(),
                func.sum(case((VOTE.c.value.is_(True), 1), else_=0)),
            )
            .where(VOTE.c.example_id.in_(chunk))
            .group_by(VOTE.c.example_id)
        ):
            counts[int(eid)] = (int(n), int(t or 0))
    kept = keep_rule(config.keep_threshold)
    fresh_votes = fresh_agree = orig_votes = orig_agree = 0
    fresh_major = fresh_major_n = orig_major = orig_major_n = 0
    same_keep = judged = fresh_kept = orig_kept = 0
    pairs_fresh: list[bool] = []
    pairs_orig: list[bool] = []
    table_fresh: list[list[int]] = []
    table_orig: list[list[int]] = []
    per_relation: dict[str, list[int]] = {}
    for c in copies:
        label = bool(c.label)
        fn, ft = counts.get(int(c.id), (0, 0))
        on, ot = counts.get(int(c.parent_example_id), (0, 0))
        if fn == 0:
            continue
        judged += 1
        fa = ft if label else fn - ft
        oa = ot if label else on - ot
        fresh_votes, fresh_agree = fresh_votes + fn, fresh_agree + fa
        orig_votes, orig_agree = orig_votes + on, orig_agree + oa
        table_fresh.append([ft, fn - ft])
        table_orig.append([ot, on - ot])
        fm, om = _majority(ft, fn), _majority(ot, on)
        if fm is not None:
            fresh_major_n += 1
            fresh_major += fm == label
        if om is not None:
            orig_major_n += 1
            orig_major += om == label
        if fm is not None and om is not None:
            pairs_fresh.append(fm)
            pairs_orig.append(om)
        fk, ok = kept(fa, fn), kept(oa, on)
        fresh_kept += fk
        orig_kept += ok
        same_keep += fk == ok
        rel = per_relation.setdefault(str(c.relation), [0, 0, 0])
        rel[0] += 1
        rel[1] += fm == label if fm is not None else 0
        rel[2] += fm is not None
    return {
        "round": round_name,
        "rounds": names,
        "examples": len(copies),
        "judged": judged,
        "fresh_votes": fresh_votes,
        "original_votes": orig_votes,
        "vote_accuracy": {
            "fresh": _share(fresh_agree, fresh_votes),
            "original": _share(orig_agree, orig_votes),
        },
        "majority_accuracy": {
            "fresh": _share(fresh_major, fresh_major_n),
            "original": _share(orig_major, orig_major_n),
        },
        "kept": {
            "fresh": _share(fresh_kept, judged),
            "original": _share(orig_kept, judged),
            "same_decision": _share(same_keep, judged),
        },
        "cohen_kappa_majorities": cohen_kappa(pairs_fresh, pairs_orig),
        "compared_majorities": len(pairs_fresh),
        "fleiss_kappa": {
            "fresh": fleiss_kappa(table_fresh),
            "original": fleiss_kappa(table_orig),
        },
        "per_relation": {
            rel: {"examples": v[0], "majority_right": v[1], "with_majority": v[2]}
            for rel, v in sorted(per_relation.items())
        },
    }


def report_lines(r: dict[str, Any]) -> list[str]:
    """The report as a few plain lines (the CLI prints them)."""
    if not r.get("round"):
        return ["no re-validation round yet: open one with `vsr revalidate --sample N`"]

    def pct(s: dict[str, Any]) -> str:
        if not s["n"]:
            return "–"
        return (
            f"{100 * s['share']:.1f}% [{100 * s['low']:.1f}, {100 * s['high']:.1f}] (n={s['n']:,})"
        )

    def num(x: float | None) -> str:
        return "–" if x is None else f"{x:.3f}"

    va, ma, k = r["vote_accuracy"], r["majority_accuracy"], r["kept"]
    return [
        f"round {r['round']}: {r['judged']:,} of {r['examples']:,} Examples have fresh votes "
        f"({r['fresh_votes']:,} fresh, {r['original_votes']:,} original votes)",
        f"votes agreeing with the label:    fresh {pct(va['fresh'])}  "
        f"original {pct(va['original'])}",
        f"majority agreeing with the label: fresh {pct(ma['fresh'])}  "
        f"original {pct(ma['original'])}",
        f"kept by the keep rule:            fresh {pct(k['fresh'])}  original {pct(k['original'])}",
        f"same keep decision: {pct(k['same_decision'])}",
        f"Cohen's kappa, fresh vs original majority: {num(r['cohen_kappa_majorities'])} "
        f"(n={r['compared_majorities']:,}, ties left out)",
        f"Fleiss' kappa: fresh {num(r['fleiss_kappa']['fresh'])}  "
        f"original {num(r['fleiss_kappa']['original'])}",
    ]
