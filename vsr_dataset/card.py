"""The dataset card (README.md of an export): collection, numbers, splits, figures, fields."""

from __future__ import annotations

from typing import Any

from vsr_core.relations import TABLE_1, UNUSED
from vsr_dataset.figures import FIGURES


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def render_card(
    stats: dict[str, Any],
    *,
    title: str,
    figure_notes: dict[str, str] | None,
    files: list[str],
    mc_counts: tuple[int, int] | None = None,
) -> str:
    s = stats
    origins = ", ".join(f"{k}: {v:,}" for k, v in s["origins"].items()) or "none"
    lab_raw, lab_val = s["labels"]["raw"], s["labels"]["validated"]
    w = s["workers"]
    lines = [
        f"# {title}",
        "",
        "A visual spatial reasoning dataset in the format of VSR (Liu, Emerson & Collier, "
        "*Visual Spatial Reasoning*, TACL 2023): each record pairs a COCO 2017 image with a "
        "caption \"The ENT1 (is) RELATION the ENT2.\" and a True/False label.",
        "",
        *_definition(s.get("study")),
        "## Collection",
        "",
        f"- Relations: VSR Table 1 ({len(TABLE_1)} entries, 7 categories; "
        f"{', '.join(sorted(UNUSED))} switched off by default). "
        f"{s['n_relations_validated']} relations occur in the validated set.",
        "- Captions were written with the contrastive template task: for a pair of images "
        "that share two concepts, the annotator picks a relation that makes the caption true "
        "for one image and false for the other, giving a True and a False Example.",
        f"- Every Example was judged True/False by validators who did not write it, with the "
        f"label hidden (votes per Example: {_votes(s['votes_per_example'])}). For left/right "
        "and front/behind a caption is True if it holds in the intrinsic or the relative "
        "reference frame.",
        f"- Keep rule: an Example is validated when at least {s['threshold']} of its votes "
        "agree with its label"
        + (" (a proportion: 2 of 3, 3 of 4, 4 of 6 keep; a 1-1 tie fails)."
           if s["threshold"] == "2/3" else " (a proportion of however many votes it has)."),
        f"- People: {_people(w['annotators'], 'caption writer')}, "
        f"{_people(w['validators'], 'validator')} "
        f"({w['both']} did both). Origins of the Examples: {origins}.",
        "",
        "## Numbers",
        "",
        "| | value |",
        "|---|---|",
        f"| Examples (raw) | {s['n_raw']:,} (True {lab_raw['true']:,} / False "
        f"{lab_raw['false']:,}) |",
        f"| Validation votes | {s['n_votes']:,} |",
        f"| All validators agree with the label | {s['n_unanimous']:,} "
        f"({_pct(s['unanimous_share'])}) |",
        f"| At least {s['threshold']} agree (validated) | {s['n_validated']:,} "
        f"({_pct(s['kept_share'])} of {s.get('n_with_votes', s['n_raw']):,} with votes; "
        f"True {lab_val['true']:,} / False {lab_val['false']:,}) |",
        f"| Fleiss' kappa, validators, all Examples | {_num(s['fleiss_kappa']['raw'])} |",
        f"| Fleiss' kappa, validators + caption writer | "
        f"{_num(s['fleiss_kappa']['raw_with_label'])} |",
        f"| Fleiss' kappa, validators, validated set | {_num(s['fleiss_kappa']['validated'])} |",
        f"| Krippendorff's alpha (nominal), all Examples | "
        f"{_num(s['krippendorff_alpha']['raw'])} |",
        "",
        "Fleiss' kappa with unequal numbers of votes per Example uses the usual "
        "generalisation (per-Example agreement over n_i(n_i-1) pairs, chance agreement from "
        "the pooled category shares; Fleiss, Levin & Paik 2003). All numbers are in "
        "`stats.json`.",
    ]
    if "label_model" in s:
        lm = s["label_model"]
        lines += [
            "",
            f"Model-based labels ({lm['model']}, from the votes alone) are in the "
            f"`aggregate_label` field: they agree with the writer's label on "
            f"{lm['agrees_with_label']:,} of {lm['n_labelled']:,} Examples "
            f"({_pct(lm['agreement_share'])}).",
        ]
    lines += ["", "## Splits", ""]
    sp = s["splits"]
    if "random" in sp:
        r = sp["random"]
        if s["split_unit"] == "annotation":
            how = (
                "grouped: the True and False halves of one annotation (which share their "
                "caption) always land in the same part, so a model cannot learn a caption's "
                "label from its other half. The released VSR splits are made per Example and "
                "do not do this; sizes here are therefore close to, not exactly, 70/10/20."
            )
        else:
            how = (
                "per Example, as the released VSR splits: the True and False halves of one "
                "annotation may land in different parts."
            )
        lines.append(
            f"- `random/`: 70/10/20 of the validated set (seed {s['seed']}), {how} "
            f"train {r['train']:,} / dev {r['dev']:,} / test {r['test']:,}."
        )
    if "zeroshot" in sp:
        z = sp["zeroshot"]
        c = sp["zeroshot_concepts"]
        lines.append(
            f"- `zeroshot/`: the concepts are partitioned into groups of 50/20/30 % "
            f"({len(c['train'])}/{len(c['dev'])}/{len(c['test'])} concepts) and an Example is "
            f"kept only if its subj and obj are in the same group: train {z['train']:,} / dev "
            f"{z['dev']:,} / test {z['test']:,}, {sum(z.values()):,} kept "
            f"({sp['zeroshot_excluded']:,} validated Examples cross groups and are left out; "
            "the paper's split keeps 5,560: 4,713 / 231 / 616). The partition is the one of a "
            "seeded search that keeps the most Examples with a train-heavy ratio (train at "
            "least half, dev at least 4 %, test at least 10 % of the kept). The exporter "
            "checks that no concept occurs in two parts and fails otherwise. The concept "
            "groups are listed in `stats.json`."
        )
    if "mc" in s:
        from vsr_dataset.mc_stats import card_lines

        lines += card_lines(s["mc"])
    if figure_notes:
        lines += ["", "## Figures", ""]
        titles = {
            "relations": "Relation distribution (cf. VSR Figure 5)",
            "concepts": "Concept distribution (cf. VSR Figure 6)",
            "disagreement": "Per-relation probability that two randomly chosen annotators "
            "disagree (cf. VSR Figure 7)",
        }
        for name, note in figure_notes.items():
            lines += [f"### {titles[name]}", "", f"![{titles[name]}]({FIGURES[name]})", "",
                      note, ""]
    if mc_counts is not None and any(mc_counts):
        validated_mc, unvalidated_mc = mc_counts
        lines += [
            "## Multiple-choice items",
            "",
            f"`mc/` holds {validated_mc:,} items whose every distractor validators judged "
            "False (adversarial matching, `vsr match`).",
        ]
        if unvalidated_mc:
            lines.append(
                f"`mc_unvalidated/` holds {unvalidated_mc:,} more items that validators have "
                "**not** cleared (written on request, `build-dataset --unvalidated-mc`): "
                "some of their distractors may be true for the image, so they are not a "
                "benchmark as they stand (each line says `\"validated\": false`)."
            )
        lines.append("")
    lines += [
        "## Files",
        "",
        *[f"- `{f}`" for f in files],
        "",
        "## Fields",
        "",
        "VSR's field names and types: `image` (COCO file name), `image_link`, `caption`, "
        "`label` (1 True, 0 False), `relation`, `subj`, `obj`, `annotator_id`, "
        "`vote_true_validator_id` and `vote_false_validator_id` (lists of integer validator "
        "ids). Added: `reference_frame` (when known; VSR's own numeric codes are kept as "
        "numbers), `relation_category` (VSR Table 1), `agreement` (share of votes agreeing "
        "with the label), `origin` (human, adversarial or imported), `example_id`, `study` "
        "(the study's slug) and `language` (its language code). Worker "
        "ids are integers: imported workers keep their release number, others are numbered "
        "after them; no platform ids are published.",
        "",
        "## Licence and citation",
        "",
        "Images are MS-COCO 2017 train/val images under the COCO and Flickr terms; they are "
        "linked, not included. If you use this data, cite Liu, Emerson & Collier (2023), "
        "Visual Spatial Reasoning, TACL 11:635-651.",
        "",
    ]
    return "\n".join(lines)


def _people(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _votes(dist: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v:,}" for k, v in sorted(dist.items(), key=lambda kv: int(kv[0])))


def _definition(study: dict[str, Any] | None) -> list[str]:
    """The study definition that produced the data: name, slug, language and content hash."""
    if not study:
        return []
    return [
        "## Study definition",
        "",
        f"Collected in the study **{study['name']}** (`{study['slug']}`, language "
        f"`{study['language']}`), defined by a study file (docs/studies.md) with SHA-256 "
        f"`{study['sha256']}`: the same hash means the same relations, template, texts and "
        "collection rules.",
        "",
    ]
