"""stats.json: the numbers the VSR paper reports (sections 3.4, 4.1, 4.2) for this export."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from vsr_core.agreement import (
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
    items = [r.item_votes() for r in rows]
    validated = [r for r in rows if r.kept]
    validated_items = [it for it, r in zip(items, rows, strict=True) if r.kept]
    summary = dataset_agreement(items, threshold)
    # The one definition of kept (vsr_core.kept), the same count as the dashboard's.
    counts = kept_counts(
        ((r.n_agree, len(r.true_ids) + len(r.false_ids), 1) for r in rows), threshold
    )
    n_raw = len(rows)
    votes_total = summary.n_votes
    annotators = {r.author for r in rows if r.author is not None}
    validators = {w for r in rows for w in (*r.true_ids, *r.false_ids)}
    stats: dict[str, Any] = {
        "threshold": summary.threshold,
        "seed": seed,
        "split_unit": split_unit,
        "n_raw": n_raw,
        "n_validated": counts.kept,
        "n_with_votes": counts.voted,
        "n_unanimous": counts.unanimous,
        "unanimous_share": counts.unanimous_share,
        "kept_share": counts.kept_share,
        "n_votes": votes_total,
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
    # Counted by export id, so an imported validator's repeated votes ("1#2") are one person.
    stats["workers"] = {
        "annotators": len(annotators),
        "validators": len(validators),
        "both": len(annotators & validators),
    }

    # VSR Figure 7 ("two randomly chosen annotators") counts the caption writer as one of the
    # annotators; with the writer's label included our ranking matches the paper's section
    # 4.2 (near, close to high; within, inside, part of low). Validators-only kept alongside.
    dis = per_relation_disagreement(items, include_label=True)
    dis_val = per_relation_disagreement(items)
    raw_rel = Counter(r.relation for r in rows)
    val_rel = Counter(r.relation for r in validated)
    stats["relations"] = {
        rel: {
            "category": _category(rel),
            "n_raw": raw_rel[rel],
            "n_validated": val_rel.get(rel, 0),
            "disagreement": dis.get(rel, {}).get("disagreement"),
            "disagreement_validators": dis_val.get(rel, {}).get("disagreement"),
        }
        for rel in sorted(raw_rel)
    }
    stats["n_relations_validated"] = len(val_rel)
    cats_raw = Counter(_category(r.relation) for r in rows)
    cats_val = Counter(_category(r.relation) for r in validated)
    stats["categories"] = {
        c: {"n_raw": cats_raw.get(c, 0), "n_validated": cats_val.get(c, 0)}
        for c in (*CATEGORIES, *sorted(set(cats_raw) - set(CATEGORIES)))
        if cats_raw.get(c)
    }
    subj = Counter(r.subj for r in validated)
    obj = Counter(r.obj for r in validated)
    stats["concepts"] = {
        c: {"subj": subj.get(c, 0), "obj": obj.get(c, 0)} for c in sorted(set(subj) | set(obj))
    }
    stats["splits"] = {}
    if random_parts is not None:
        stats["splits"]["random"] = {p: len(ks) for p, ks in random_parts.items()}
    if zeroshot is not None:
        stats["splits"]["zeroshot"] = {p: len(ks) for p, ks in zeroshot.parts.items()}
        stats["splits"]["zeroshot_excluded"] = zeroshot.excluded
        stats["splits"]["zeroshot_concepts"] = zeroshot.concepts
    per_worker = per_worker_agreement(items)
    stats["validators"] = {
        str(w): {
            "n_votes": a.n_votes,
            "label_agreement": a.label_share,
            "majority_agreement": a.majority_share,
        }
        for w, a in sorted(per_worker.items(), key=lambda kv: int(str(kv[0])))
    }
    if aggregate_model and aggregates is not None:
        agree = sum(1 for r in rows if r.id in aggregates and aggregates[r.id][0] == r.label)
        stats["label_model"] = {
            "model": aggregate_model,
            "n_labelled": len(aggregates),
            "agrees_with_label": agree,
            "agreement_share": agree / len(aggregates) if aggregates else None,
        }
    return stats


def _labels(rows: Sequence[ExportRow]) -> dict[str, int]:
    t = sum(1 for r in rows if r.label)
    return {"true": t, "false": len(rows) - t}
