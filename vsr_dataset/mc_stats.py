"""What stats.json and the dataset card say about the multiple-choice items: the held-out
answer-only adversaries (matching.adversaries) computed on exactly the items written, from
their exported lines: ``mc/`` when it holds items, else ``mc_unvalidated/`` (and the figure
says which), fitted on train and, apart, on dev. The headline is the strongest adversary.
`vsr match --report` computes the same suite on the same items
(matching.diagnostics.measured_suites)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import select
from sqlalchemy.engine import Connection

from vsr_core.tables import MATCH_RUN, MC_ITEM, VOTE

if TYPE_CHECKING:
    from matching.pipeline import Item

PACKAGED = "(packaged)"  # how a run names the packaged MiniLM in its params


def items_from_lines(lines: dict[str, list[bytes]]) -> dict[str, list[Item]]:
    """Exported JSONL lines (split -> lines) back into matching Items, in file order."""
    from matching.pipeline import Item
    from matching.records import Record

    out: dict[str, list[Item]] = {}
    for split, rows in lines.items():
        for n, line in enumerate(rows):
            rec = orjson.loads(line)
            rels, answer = rec["relations"], rec["answer"]
            truth = Record(
                id=n,  # the file holds no Example id (the item's position will do)
                image=rec["image"],
                subj=rec["subj"],
                relation=rels[answer],
                obj=rec["obj"],
                caption=rec["answer_caption"],
                label=True,
            )
            out.setdefault(split, []).append(
                Item(
                    query=truth,
                    split=split,
                    choices=list(rec["choices"]),
                    triples=[(rec["subj"], r, rec["obj"]) for r in rels],
                    answer_index=answer,
                    source_ids=[],
                )
            )
    return out


def suite_on_lines(
    lines: dict[str, list[bytes]], model: str | None, seed: int, encoder: Any = None
) -> dict[str, Any]:
    """The adversary suite on the exported items, as `vsr match` runs it: fitted on train
    and, apart, on dev (matching.diagnostics.measured_suites), scored on test."""
    from matching.diagnostics import measured_suites
    from matching.relevance import load_encoder

    items = items_from_lines(lines)
    train, dev, test = (items.get(p, []) for p in ("train", "dev", "test"))
    if not test or not (train or dev):
        return {"n_test": len(test), "adversaries": {}, "strongest": None}
    if encoder is None:
        encoder = load_encoder(None if not model or model.endswith(PACKAGED) else model)
    return measured_suites(train, dev, test, encoder, seed)


def votes_on_negatives(conn: Connection, run_id: int) -> int:
    """Votes cast so far on the run's negatives (each counted once, however many items
    share it)."""
    from sqlalchemy import func

    ids = sorted(
        {
            n
            for (params,) in conn.execute(
                select(MC_ITEM.c.params).where(MC_ITEM.c.run_id == run_id)
            )
            for n in (params or {}).get("negative_example_ids", [])
            if n
        }
    )
    total = 0
    for i in range(0, len(ids), 500):
        total += conn.execute(
            select(func.count()).select_from(VOTE).where(VOTE.c.example_id.in_(ids[i : i + 500]))
        ).scalar_one()
    return int(total)


def cost_summary(
    conn: Connection, run_id: int, diag: dict[str, Any], validated: int
) -> dict[str, Any] | None:
    """The run's validation cost as `vsr match` stated it, with what happened since: votes
    cast on its negatives and items validated (in mc/) per vote."""
    cost = diag.get("validation_cost")
    if not cost:
        return None
    cast = votes_on_negatives(conn, run_id)
    return {
        **cost,
        "votes_cast": cast,
        "items_validated": validated,
        "actual_items_per_vote": round(validated / cast, 4) if cast else None,
    }


def mc_summary(
    conn: Connection,
    lines: dict[str, list[bytes]],
    unvalidated: dict[str, list[bytes]] | None = None,
    *,
    study_id: int,
) -> dict[str, Any] | None:
    """None when matching never ran for the study; else its latest run, its items per split
    as written, and the adversary figures computed on the exported items: ``mc/``
    (``lines``) when it holds any, else ``mc_unvalidated/`` (``unvalidated``, when written)."""
    row = conn.execute(
        select(MATCH_RUN.c.id, MATCH_RUN.c.params, MATCH_RUN.c.diagnostics)
        .where(MATCH_RUN.c.study_id == study_id)
        .order_by(MATCH_RUN.c.id.desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    run_id, params, diag = row
    params, diag = params or {}, diag or {}
    measured_on, measured = "mc", lines
    if not any(lines.values()) and unvalidated and any(unvalidated.values()):
        measured_on, measured = "mc_unvalidated", unvalidated
    seed = int(params.get("seed") or 0)
    suite = suite_on_lines(measured, params.get("model"), seed)
    return {
        "run_id": run_id,
        "items": {split: len(v) for split, v in sorted(lines.items())},
        "items_unvalidated": {split: len(v) for split, v in sorted((unvalidated or {}).items())},
        "k": params.get("k"),
        "splits": params.get("splits"),
        "balance": params.get("balance"),
        "chance": diag.get("chance"),
        "measured_on": measured_on,
        "adversaries": suite.get("adversaries", {}),
        "adversaries_n_test": suite.get("n_test"),
        "strongest_adversary": suite.get("strongest"),
        "adversaries_n_dev": suite.get("n_dev"),
        "strongest_null": suite.get("strongest_null"),
        # What the build's blind baselines fit the same suite with (vsr_dataset.mc_blind).
        "suite_model": params.get("model"),
        "suite_seed": seed,
        "validation_cost": cost_summary(conn, run_id, diag, sum(map(len, lines.values()))),
    }


def card_lines(mc: dict[str, Any]) -> list[str]:
    items = " / ".join(f"{s} {n:,}" for s, n in mc["items"].items()) or "none"
    out = [
        f"- `mc/`: multiple-choice items of matching run {mc['run_id']} (k = {mc['k']}, "
        f"split {mc['splits'] or 'image'}): {items}."
    ]
    s = mc.get("strongest_adversary")
    if s:
        lo, hi = s["ci95"]
        where = mc.get("measured_on", "mc")
        note = "" if where == "mc" else " (validators have not cleared these items)"
        others = ", ".join(f"{n} {a['accuracy']:.3f}" for n, a in mc["adversaries"].items())
        out.append(
            f"  Strongest answer-only adversary (sees only the options, trained on "
            f"{where}/train or, `dev_fit:`, on {where}/dev alone; every model also read "
            f"as `_least`), scored on the {mc['adversaries_n_test']:,} items of "
            f"{where}/test{note}): {s['name']} "
            f"{s['accuracy']:.3f} (95 % CI {lo:.3f}-{hi:.3f}; chance {mc['chance']}). "
            f"All: {others}."
        )
        null = mc.get("strongest_null")
        if null:
            out.append(
                f"  By chance alone (answers drawn at random), the strongest of these "
                f"{len(mc['adversaries'])} readings would score {null['mean']:.3f} on average, "
                f"{null['p95']:.3f} or less 95 times in 100."
            )
    cost = mc.get("validation_cost")
    if cost:
        from matching.store import format_cost

        actual = cost.get("actual_items_per_vote")
        out.append(
            f"  {format_cost(cost)[0].upper()}{format_cost(cost)[1:]}. So far "
            f"{cost['votes_cast']:,} votes on these negatives and {cost['items_validated']:,} "
            f"items validated" + (f": {actual:.3f} items per vote." if actual is not None else ".")
        )
    return out
