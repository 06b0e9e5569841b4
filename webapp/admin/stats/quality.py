"""The quality page's figures: kept and unanimous shares, Fleiss' kappa and Krippendorff's
alpha, the per-relation table (VSR Figure 7), concepts, and the reference frames
validators said they used."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Float, and_, case, cast, func, select
from sqlmodel import Session

from vsr_core.kept import KeptCounts, kept_counts
from vsr_core.models import DEFAULT_STUDY_ID
from vsr_core.studies.settings import StudyConfig
from vsr_core.tables import EXAMPLE, VOTE
from webapp.admin.stats.shared import MACHINE, REVALIDATION, example_agreement, vote_counts


def agreement_coefficients(
    session: Session, study_id: int = DEFAULT_STUDY_ID
) -> dict[str, float | None]:
    """Fleiss' kappa and Krippendorff's alpha (nominal) of the validators' True/False votes
    over Examples with at least two votes, from SQL sums alone.

    Both have closed forms in per-Example counts (t True, f False, n = t + f):
    Fleiss (unequal rater counts, as vsr_core.agreement.fleiss_kappa): P_i = (t(t-1) + f(f-1)) /
    (n(n-1)), chance from the pooled True share. Krippendorff: alpha = 1 - (N-1) *
    sum(t f / (n-1)) / (N_T N_F). Summing in SQL avoids loading every Example into Python
    (the krippendorff package alone took ~110 ms on the VSR release); tests check both
    against vsr_core.agreement and the krippendorff package.
    """
    vc = vote_counts(
        select(EXAMPLE.c.id).where(
            EXAMPLE.c.study_id == study_id, EXAMPLE.c.origin.not_in((REVALIDATION, MACHINE))
        )
    )
    n, t = vc.c.n, vc.c.t
    f = n - t
    row = (
        session.connection()
        .execute(
            select(
                func.count(),
                func.sum(t),
                func.sum(n),
                func.sum(cast(t * (t - 1) + f * (f - 1), Float) / cast(n * (n - 1), Float)),
                func.sum(cast(t * f, Float) / cast(n - 1, Float)),
            ).where(n >= 2)
        )
        .one()
    )
    items = int(row[0] or 0)
    if not items:
        return {"fleiss_kappa": None, "krippendorff_alpha": None, "rated_examples": 0}
    n_true, n_all = float(row[1]), float(row[2])
    n_false = n_all - n_true
    p_bar = float(row[3]) / items
    p_t = n_true / n_all
    p_e = p_t**2 + (1 - p_t) ** 2
    kappa = (p_bar - p_e) / (1 - p_e) if p_e < 1 else None
    alpha = 1 - (n_all - 1) * float(row[4]) / (n_true * n_false) if n_true and n_false else None
    return {"fleiss_kappa": kappa, "krippendorff_alpha": alpha, "rated_examples": items}


def quality(
    session: Session,
    cfg: StudyConfig,
    relations: list[dict[str, Any]] | None = None,
    study_id: int = DEFAULT_STUDY_ID,
) -> dict[str, Any]:
    """Dataset-level agreement figures. The counts are sums over the per-relation table
    (one GROUP BY pass over the Examples instead of one per figure), whose kept counts come
    from ``vsr_core.kept.kept_counts``."""
    rows = relation_table(session, cfg, study_id) if relations is None else relations

    def total(key: str) -> int:
        return sum(int(r[key]) for r in rows)

    counts = KeptCounts(
        total("examples"),
        total("voted"),
        total("kept"),
        total("rejected"),
        total("unanimous"),
        total("excluded"),
        total("adjudicated"),
        total("by_model"),
    )
    all_true, kept_true = total("true"), total("kept_true")
    return {
        "examples": counts.examples,
        "decided": total("decided"),
        "voted": counts.voted,
        "kept": counts.kept,
        "rejected": counts.rejected,
        "excluded": counts.excluded,
        "adjudicated": counts.adjudicated,
        "by_model": counts.by_model,
        "keep_rule": cfg.keep_rule,
        "unanimous": counts.unanimous,
        "kept_share": counts.kept_share,
        "unanimous_share": counts.unanimous_share,
        **agreement_coefficients(session, study_id),
        "label_balance": {
            "all_true": all_true,
            "all_false": counts.examples - all_true,
            "kept_true": kept_true,
            "kept_false": counts.kept - kept_true,
        },
    }


def _disagreement(label: bool, agree: int, n: int) -> float:
    """P(two random judges disagree) for one Example: its validators plus the author's label
    (VSR Figure 7)."""
    t = (agree if label else n - agree) + int(label)
    nj = n + 1
    return 2 * t * (nj - t) / (nj * (nj - 1))


def relation_table(
    session: Session, cfg: StudyConfig, study_id: int = DEFAULT_STUDY_ID
) -> list[dict[str, Any]]:
    """Per relation: Examples, kept, True-label share, and the probability that two randomly
    chosen judges (the author's label and the validators) disagree (VSR paper, Figure 7).

    One GROUP BY (relation, label, agreeing votes, votes) in SQL -- a few hundred rows --
    and the kept counts from ``vsr_core.kept.kept_counts`` over each relation's histogram.
    """
    ea = example_agreement(cfg, study_id=study_id)
    keys = (
        ea.c.relation,
        ea.c.label,
        ea.c.final_label,
        ea.c.agree,
        ea.c.n,
        ea.c.adjudication,
        ea.c.model_agrees,
    )
    rows = session.connection().execute(
        select(*keys, func.count(), func.sum(ea.c.decided)).group_by(*keys)
    )
    per: dict[str, dict[str, Any]] = {}
    for rel, label, final, agree, n, adj, model, c, dec in rows:
        r = per.setdefault(
            str(rel), {"hist": {True: [], False: []}, "decided": 0, "dis": 0.0, "dis_n": 0}
        )
        a, n, c = int(agree), int(n), int(c)
        # By the label it carries into the dataset (an adjudicated one's final label).
        r["hist"][bool(final)].append((a, n, c, adj, model))
        r["decided"] += int(dec or 0)
        if n > 0:
            r["dis"] += c * _disagreement(bool(label), a, n)
            r["dis_n"] += c
    from vsr_core.relations import CATEGORIES, category_of, is_known

    out = []
    for rel, r in per.items():
        cat = category_of(rel) if is_known(rel, allow_import_only=True) else "Unknown"
        both = kept_counts(r["hist"][True] + r["hist"][False], cfg.keep_threshold)
        true = kept_counts(r["hist"][True], cfg.keep_threshold)
        out.append(
            {
                "relation": rel,
                "category": cat,
                "examples": both.examples,
                "decided": r["decided"],
                "voted": both.voted,
                "kept": both.kept,
                "rejected": both.rejected,
                "excluded": both.excluded,
                "adjudicated": both.adjudicated,
                "by_model": both.by_model,
                "unanimous": both.unanimous,
                "true": true.examples,
                "kept_true": true.kept,
                "true_share": true.examples / both.examples if both.examples else None,
                "disagreement": r["dis"] / r["dis_n"] if r["dis_n"] else None,
            }
        )
    order = {c: i for i, c in enumerate(CATEGORIES)}
    out.sort(key=lambda r: (order.get(r["category"], 99), -r["examples"], r["relation"]))
    return out


def concept_counts(
    session: Session, limit: int = 40, study_id: int = DEFAULT_STUDY_ID
) -> list[dict[str, Any]]:
    """Concepts by how often they are ENT1 (subj) and ENT2 (obj), most frequent first."""
    conn = session.connection()
    data = and_(EXAMPLE.c.origin.not_in((REVALIDATION, MACHINE)), EXAMPLE.c.study_id == study_id)
    subj: dict[str, int] = dict(
        conn.execute(
            select(EXAMPLE.c.subj, func.count()).where(data).group_by(EXAMPLE.c.subj)
        ).all()
    )
    obj: dict[str, int] = dict(
        conn.execute(select(EXAMPLE.c.obj, func.count()).where(data).group_by(EXAMPLE.c.obj)).all()
    )
    names = set(subj) | set(obj)
    ranked = sorted(names, key=lambda c: (-(subj.get(c, 0) + obj.get(c, 0)), c))
    return [{"concept": c, "subj": subj.get(c, 0), "obj": obj.get(c, 0)} for c in ranked[:limit]]


FRAMES = ("intrinsic", "relative", "both")


def frame_answers(session: Session, study_id: int = DEFAULT_STUDY_ID) -> list[dict[str, Any]]:
    """Per relation, the reference frame validators said they used (the validation page asks
    for left/right and front/behind): counts and shares of intrinsic, relative and both, as
    the VSR paper's section 4.3 reports them (11 % / 84 % / 5 % on its left/right Trues).
    Only relations with at least one answer, most answered first."""
    conn = session.connection()
    rows = conn.execute(
        select(EXAMPLE.c.relation, VOTE.c.reference_frame, func.count())
        .select_from(VOTE.join(EXAMPLE, EXAMPLE.c.id == VOTE.c.example_id))
        .where(
            EXAMPLE.c.study_id == study_id,
            EXAMPLE.c.origin.not_in((REVALIDATION, MACHINE)),
            VOTE.c.reference_frame.in_(FRAMES),
        )
        .group_by(EXAMPLE.c.relation, VOTE.c.reference_frame)
    ).all()
    by_rel: dict[str, dict[str, int]] = {}
    for relation, frame, n in rows:
        by_rel.setdefault(relation, dict.fromkeys(FRAMES, 0))[frame] = int(n)
    out = []
    for relation, counts in by_rel.items():
        total = sum(counts.values())
        out.append(
            {
                "relation": relation,
                "answers": total,
                **counts,
                **{f"{f}_share": counts[f] / total for f in FRAMES},
            }
        )
    return sorted(out, key=lambda r: (-r["answers"], r["relation"]))


def negatives_check(
    session: Session, cfg: StudyConfig, study_id: int = DEFAULT_STUDY_ID
) -> dict[str, dict[str, Any]]:
    """Machine-made negatives beside the human captions whose label is False: how many have
    votes and how many validators rejected (kept as False), per origin. Validators who can
    tell machine captions apart reject them at a rate unlike the human False ones'."""
    ea = example_agreement(cfg, study_id=study_id, with_negatives=True)
    rows = session.connection().execute(
        select(
            ea.c.origin,
            func.count(),
            func.sum(case((ea.c.n > 0, 1), else_=0)),
            func.sum(case((and_(ea.c.n > 0, ea.c.kept == 1), 1), else_=0)),
        )
        .where(ea.c.label.is_(False), ea.c.is_gold.is_not(True))
        .group_by(ea.c.origin)
    )
    out: dict[str, dict[str, Any]] = {
        "machine": {"examples": 0, "voted": 0, "rejected": 0},
        "human": {"examples": 0, "voted": 0, "rejected": 0},
    }
    for origin, total, voted, rejected in rows:
        row = out["machine" if origin == MACHINE else "human"]
        row["examples"] += int(total)
        row["voted"] += int(voted or 0)
        row["rejected"] += int(rejected or 0)
    for row in out.values():
        row["rate"] = row["rejected"] / row["voted"] if row["voted"] else None
    return out
