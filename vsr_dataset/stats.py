"""stats.json: the numbers the VSR paper reports (sections 3.4, 4.1, 4.2) for this export."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from vsr_core.agreement import (
    ItemVotes,
    category_counts,
    dataset_agreement,
    fleiss_kappa,
    per_relation_disagreement,
    per_worker_agreement,
)
from vsr_core.kept import kept_counts
from vsr_core.relations import CATEGORIES
from vsr_dataset.export_rows import ExportRow, _category
from vsr_dataset.splits import ZeroShotSplit


def compute_stats(
    rows: Sequence[ExportRow],
    *,
    threshold: Fraction,
    seed: int,
    split_unit: str,
    random_parts: dict[str, list[int]] | None,
    zeroshot: ZeroShotSplit | None,
    aggregate_model: str | None = None,
    aggregates: dict[Any, tuple[bool, float]] | None = None,
) -> dict[str, Any]:
    """stats.json's figures for these rows, the splits made of them and (optionally) the
    label model's labels."""
    items = [r.item_votes() for r in rows]
    validated = [r for r in rows if r.kept]
    stats: dict[str, Any] = {
        **_agreement(rows, items, validated, threshold, seed=seed, split_unit=split_unit),
        "workers": _workers(rows),
        **_relations(rows, items, validated),
        "categories": _categories(rows, validated),
        "concepts": _concepts(validated),
        "splits": _splits(random_parts, zeroshot),
        "validators": _validators(items),
    }
    if aggregate_model and aggregates is not None:
        stats["label_model"] = _label_model(rows, aggregate_model, aggregates)
    return stats


def _agreement(
    rows: Sequence[ExportRow],
    items: list[ItemVotes],
    validated: list[ExportRow],
    threshold: Fraction,
    *,
    seed: int,
    split_unit: str,
) -> dict[str, Any]:
    """How many Examples, votes and kept ones, and how much the validators agree (VSR 4.1)."""
    validated_items = [it for it, r in zip(items, rows, strict=True) if r.kept]
    summary = dataset_agreement(items, threshold)
    # The one definition of kept (vsr_core.kept), the same count as the dashboard's.
    counts = kept_counts(
        (
            (r.n_agree, len(r.true_ids) + len(r.false_ids), 1, r.adjudication, r.model_agrees)
            for r in rows
        ),
        threshold,
    )
    return {
        "threshold": summary.threshold,
        "seed": seed,
        "split_unit": split_unit,
        "n_raw": len(rows),
        "n_validated": counts.kept,
        "n_with_votes": counts.voted,
        "n_rejected": counts.rejected,
        # Settled by an admin (vsr_core.adjudication): kept with their final label, or
        # excluded (in all_raw only); their votes are written unchanged.
        "n_adjudicated": counts.adjudicated,
        "n_excluded": counts.excluded,
        "adjudications": dict(
            sorted(Counter(r.adjudication for r in rows if r.adjudication).items())
        ),
        "n_decided_by_label_model": counts.by_model,
        "n_unanimous": counts.unanimous,
        "unanimous_share": counts.unanimous_share,
        "kept_share": counts.kept_share,
        "n_votes": summary.n_votes,
        "votes_per_example": {str(k): v for k, v in summary.votes_per_item.items()},
        "min_votes": min(summary.votes_per_item, default=0),
        "labels": {
            "raw": _labels(rows),
            "validated": _labels(validated),
        },
        "origins": dict(sorted(Counter(r.origin for r in rows).items())),
        "fleiss_kappa": {
            "raw": summary.fleiss_kappa,
            "validated": fleiss_kappa(category_counts(validated_items)),
            "raw_with_label": fleiss_kappa(category_counts(items, include_label=True)),
        },
        "krippendorff_alpha": {"raw": summary.krippendorff_alpha},
    }


def _workers(rows: Sequence[ExportRow]) -> dict[str, int]:
    # Counted by export id, so an imported validator's repeated votes ("1#2") are one person.
    annotators = {r.author for r in rows if r.author is not None}
    validators = {w for r in rows for w in (*r.true_ids, *r.false_ids)}
    return {
        "annotators": len(annotators),
        "validators": len(validators),
        "both": len(annotators & validators),
    }


def _relations(
    rows: Sequence[ExportRow], items: list[ItemVotes], validated: list[ExportRow]
) -> dict[str, Any]:
    """Per relation: Examples, validated ones and disagreement; how many relations are
    validated."""
    # VSR Figure 7 ("two randomly chosen annotators") counts the caption writer as one of the
    # annotators; with the writer's label included our ranking matches the paper's section
    # 4.2 (near, close to high; within, inside, part of low). Validators-only kept alongside.
    dis = per_relation_disagreement(items, include_label=True)
    dis_val = per_relation_disagreement(items)
    raw_rel = Counter(r.relation for r in rows)
    val_rel = Counter(r.relation for r in validated)
    relations = {
        rel: {
            "category": _category(rel),
            "n_raw": raw_rel[rel],
            "n_validated": val_rel.get(rel, 0),
            "disagreement": dis.get(rel, {}).get("disagreement"),
            "disagreement_validators": dis_val.get(rel, {}).get("disagreement"),
        }
        for rel in sorted(raw_rel)
    }
    return {"relations": relations, "n_relations_validated": len(val_rel)}


def _categories(rows: Sequence[ExportRow], validated: list[ExportRow]) -> dict[str, dict[str, int]]:
    """Examples per relation category, in VSR Table 1's order (unknown ones after)."""
    cats_raw = Counter(_category(r.relation) for r in rows)
    cats_val = Counter(_category(r.relation) for r in validated)
    return {
        c: {"n_raw": cats_raw.get(c, 0), "n_validated": cats_val.get(c, 0)}
        for c in (*CATEGORIES, *sorted(set(cats_raw) - set(CATEGORIES)))
        if cats_raw.get(c)
    }


def _concepts(validated: list[ExportRow]) -> dict[str, dict[str, int]]:
    """How often each concept is the subject and the object of a validated Example."""
    subj = Counter(r.subj for r in validated)
    obj = Counter(r.obj for r in validated)
    return {c: {"subj": subj.get(c, 0), "obj": obj.get(c, 0)} for c in sorted(set(subj) | set(obj))}


def _splits(
    random_parts: dict[str, list[int]] | None, zeroshot: ZeroShotSplit | None
) -> dict[str, Any]:
    """The parts' sizes, and the zero-shot split's concept groups."""
    out: dict[str, Any] = {}
    if random_parts is not None:
        out["random"] = {p: len(ks) for p, ks in random_parts.items()}
    if zeroshot is not None:
        out["zeroshot"] = {p: len(ks) for p, ks in zeroshot.parts.items()}
        out["zeroshot_excluded"] = zeroshot.excluded
        out["zeroshot_concepts"] = zeroshot.concepts
    return out


def _validators(items: list[ItemVotes]) -> dict[str, dict[str, Any]]:
    """Per validator: votes, and agreement with the labels and with the majority."""
    per_worker = per_worker_agreement(items)
    return {
        str(w): {
            "n_votes": a.n_votes,
            "label_agreement": a.label_share,
            "majority_agreement": a.majority_share,
        }
        for w, a in sorted(per_worker.items(), key=lambda kv: int(str(kv[0])))
    }


def _label_model(
    rows: Sequence[ExportRow], model: str, aggregates: dict[Any, tuple[bool, float]]
) -> dict[str, Any]:
    """How often the label model's labels agree with the writers'."""
    agree = sum(1 for r in rows if r.id in aggregates and aggregates[r.id][0] == r.label)
    return {
        "model": model,
        "n_labelled": len(aggregates),
        "agrees_with_label": agree,
        "agreement_share": agree / len(aggregates) if aggregates else None,
    }


def _labels(rows: Sequence[ExportRow]) -> dict[str, int]:
    t = sum(1 for r in rows if r.label)
    return {"true": t, "false": len(rows) - t}
