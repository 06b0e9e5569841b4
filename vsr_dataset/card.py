"""The dataset card (README.md of an export), rendered from ``templates/card.md.j2``.

It opens with the Hub's YAML front matter (licence, language, task, size, ``configs`` for
every part with its files and features) and follows *Datasheets for Datasets*: facts the
database holds come from it (vsr_dataset.datasheet), the researcher's from the study file's
``[card]`` ("not stated" when missing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from jinja2 import Environment, PackageLoader, StrictUndefined

from vsr_core.relations import TABLE_1, UNUSED
from vsr_dataset.croissant import VSR_CITATION
from vsr_dataset.datasheet import NOT_STATED
from vsr_dataset.figures import FIGURES

_ENV = Environment(
    loader=PackageLoader("vsr_dataset", "templates"),
    autoescape=False,  # Markdown, not HTML  # noqa: S701
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=StrictUndefined,
)
FIGURE_TITLES = {
    "relations": "Relation distribution (cf. VSR Figure 5)",
    "concepts": "Concept distribution (cf. VSR Figure 6)",
    "disagreement": "Per-relation probability that two randomly chosen annotators disagree "
    "(cf. VSR Figure 7)",
}


@dataclass
class CardInputs:
    """Everything the card says beyond stats.json."""

    title: str
    files: list[str]
    front_matter: dict[str, Any]
    figure_notes: dict[str, str] | None = None
    mc_counts: tuple[int, int, int] | None = None  # in mc/, in mc_unvalidated/, rejected
    collection: dict[str, Any] = field(default_factory=dict)
    researcher: dict[str, str | None] = field(default_factory=dict)
    demographics: dict[str, Any] = field(default_factory=dict)
    n_paired: int = 0
    vsr_compatible: bool = False
    parquet: bool = False


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


LIMITATIONS = (
    "captions follow one template and a fixed relation vocabulary; labels are the writer's, "
    "confirmed by a majority of a few validators, so an Example with a narrow majority is less "
    "certain than a unanimous one (`agreement`)."
)
BIASES = (
    "the images are MS-COCO's, with its biases in what and who is photographed; the concepts "
    "are COCO's 80 categories; relations that people find easy to describe are more frequent."
)


def datasheet_text(stats: Mapping[str, Any], inputs: CardInputs) -> dict[str, str]:
    """The datasheet's statements, shared by the card and croissant.json's RAI fields."""
    s = stats
    researcher = _stated(inputs)
    votes_dist = ", ".join(
        f"{k}: {v:,}" for k, v in sorted(s["votes_per_example"].items(),
                                         key=lambda kv: int(kv[0])))
    collection = _collection(inputs.collection)
    return {
        **collection,
        "votes_dist": votes_dist,
        "task": (
            "captions were written with the contrastive template task: for a pair of images "
            "that share two concepts, the annotator picks a relation that makes the caption "
            "true for one image and false for the other, giving a True and a False Example. "
            "Every Example was judged True/False by validators who did not write it, with the "
            f"label hidden (votes per Example: {votes_dist}). For left/right and front/behind "
            "a caption is True if it holds in the intrinsic or the relative reference frame; "
            "validators also say which frame they used (`votes[].reference_frame` in "
            "`all_raw.jsonl`)."
        ),
        "keep_rule": (f"an Example is validated when at least {s['threshold']} of its votes "
                      f"agree with its label{_keep_detail(s)}."),
        "agreement": (
            f"Fleiss' kappa {_num(s['fleiss_kappa']['raw'])} over all Examples, "
            f"{_num(s['fleiss_kappa']['validated'])} over the validated set; all validators "
            f"agree on {_pct(s['unanimous_share'])} of the Examples with votes."
        ),
        "demographics_line": _demographics(inputs.demographics),
        "intended_uses": researcher["intended_uses"],
        "limitations": LIMITATIONS,
        "biases": BIASES,
        "maintenance": (f"- **Contact:** {researcher['contact']}\n"
                        f"- **Version:** {researcher['version']}"),
    }


def _stated(inputs: CardInputs) -> dict[str, str]:
    """The researcher's facts, "not stated" where the study file's [card] gives none."""
    return {k: (v if v else NOT_STATED) for k, v in inputs.researcher.items()}


def render_card(stats: dict[str, Any], inputs: CardInputs) -> str:
    s = stats
    researcher = _stated(inputs)
    context = {
        **datasheet_text(stats, inputs),
        "front_matter": yaml.safe_dump(inputs.front_matter, sort_keys=False,
                                       allow_unicode=True, width=100),
        "title": inputs.title,
        "s": s,
        "study": s.get("study"),
        "researcher": researcher,
        "pct": _pct,
        "num": _num,
        "has_mc": any(f.startswith("mc/") for f in inputs.files),
        "has_negatives": "machine_negatives.jsonl" in inputs.files,
        "format_note": _format_note(inputs),
        "origins": ", ".join(f"{k}: {v:,}" for k, v in s["origins"].items()) or "none",
        "people_line": _people(s["workers"]),
        "negatives_line": _negatives(s.get("machine_negatives") or {}),
        "pairs_line": _pairs(inputs.n_paired, s["n_raw"]),
        "n_table": len(TABLE_1),
        "unused": ", ".join(sorted(UNUSED)),
        "label_model": s.get("label_model"),
        "split_lines": _splits(s),
        "mc_lines": _mc_summary(s),
        "mc_paragraph": _mc_paragraph(inputs.mc_counts),
        "figures": [
            {"title": FIGURE_TITLES[name], "path": FIGURES[name], "note": note}
            for name, note in (inputs.figure_notes or {}).items()
        ],
        "files": inputs.files,
        "fields_text": _fields(inputs),
        "citation": (inputs.researcher.get("citation") or "")
        + ("\n\n" if inputs.researcher.get("citation") else "")
        + f"If you use this data, cite the VSR paper: {VSR_CITATION}",
    }
    return _ENV.get_template("card.md.j2").render(**context)


def _format_note(inputs: CardInputs) -> str:
    if inputs.vsr_compatible:
        base = ("Written with `--vsr-compatible`: each file has the VSR release's types "
                "(vote lists as strings in the split files, as arrays in `all_raw.jsonl`; "
                "`reference_frame` as VSR's numbers), so code written for the release reads "
                "it unchanged; the YAML lists no features for such files.")
    else:
        base = ("Hub-native types (the default): one type per field in every file (vote lists "
                "are arrays of integers, `reference_frame` is text or null); "
                "`build-dataset --vsr-compatible` writes the VSR release's own types instead.")
    if inputs.parquet:
        base += " Every JSONL file also has a Parquet copy (`.parquet`), which the configs use."
    return base


def _people(w: dict[str, int]) -> str:
    return (f"{_count(w['annotators'], 'caption writer')}, "
            f"{_count(w['validators'], 'validator')} ({w['both']} did both).")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _negatives(info: dict[str, Any]) -> str:
    if not info.get("judged") and not info.get("unjudged"):
        return "No machine-made captions were made for this study."
    text = (f"Machine-made False captions (adversarial matching's distractors) that validators "
            f"judged ({info.get('judged', 0):,}, of which {info.get('kept', 0):,} kept as False) "
            "are in `machine_negatives.jsonl`, each with its query Example and the verdict")
    if info.get("in_splits"):
        return text + ("; on request (`--with-negatives`) the kept ones also joined the "
                       "binary parts, each in its query's part.")
    return text + "; they are not in the binary parts."


def _pairs(n_paired: int, n_raw: int) -> str:
    return (f"{n_paired:,} of {n_raw:,} Examples have their contrastive other half in the "
            "data: `pair_id` (shared by the True and the False Example of one caption) and "
            "`pair_example_id` (the other half's `example_id`) allow pair-level (group) "
            "accuracy. Imported captions whose writer wrote the same caption more often than "
            "once per label have no pair.")


def _demographics(d: dict[str, Any]) -> str:
    if not d.get("n_people"):
        return "No demographic data is published."
    cols = []
    for name, c in d["columns"].items():
        if c["values"]:
            vals = ", ".join(f"{k} {v}" for k, v in c["values"].items())
            cols.append(f"`{name}` ({c['n_given']} given: {vals})")
        else:
            cols.append(f"`{name}` ({c['n_given']} given, {c['n_distinct']} distinct values)")
    return (f"`meta_data.csv` publishes self-reported demographics of {d['n_people']} "
            f"people, keyed by their export id: {'; '.join(cols)}. Values shared by fewer "
            "than 5 people are not repeated here; in the file they are, so together with the "
            "votes they may single a person out: check that your consent text covers "
            "publishing them before you release the file.")


def _keep_detail(s: Mapping[str, Any]) -> str:
    detail = (" (a proportion: 2 of 3, 3 of 4, 4 of 6 keep; a 1-1 tie fails)"
              if s["threshold"] == "2/3" else " (a proportion of however many votes it has)")
    if s.get("threshold_source", "study") == "study":
        return detail + ", the study's setting"
    return detail + ", given for this export (not the study's setting)"


def _splits(s: dict[str, Any]) -> list[str]:
    sp, out = s["splits"], []
    if "random" in sp:
        r = sp["random"]
        if s["split_unit"] == "annotation":
            how = ("grouped: the True and False halves of one annotation (which share their "
                   "caption) always land in the same part, so a model cannot learn a "
                   "caption's label from its other half. The released VSR splits are made per "
                   "Example and do not do this; sizes here are therefore close to, not "
                   "exactly, 70/10/20.")
        else:
            how = ("per Example, as the released VSR splits: the True and False halves of one "
                   "annotation may land in different parts.")
        out.append(f"`random/`: 70/10/20 of the validated set (seed {s['seed']}), {how} "
                   f"train {r['train']:,} / dev {r['dev']:,} / test {r['test']:,}. "
                   "Multiple-choice items use the same split: every mc truth is in the "
                   "random part of its mc part (the exporter checks it and fails otherwise).")
    if "zeroshot" in sp:
        z, c = sp["zeroshot"], sp["zeroshot_concepts"]
        out.append(
            f"`zeroshot/`: the concepts are partitioned into groups of 50/20/30 % "
            f"({len(c['train'])}/{len(c['dev'])}/{len(c['test'])} concepts) and an Example is "
            f"kept only if its subj and obj are in the same group: train {z['train']:,} / dev "
            f"{z['dev']:,} / test {z['test']:,}, {sum(z.values()):,} kept "
            f"({sp['zeroshot_excluded']:,} validated Examples cross groups and are left out; "
            "the paper's split keeps 5,560: 4,713 / 231 / 616). The partition is the one of a "
            "seeded search that keeps the most Examples with a train-heavy ratio (train at "
            "least half, dev at least 4 %, test at least 10 % of the kept). The exporter "
            "checks that no concept occurs in two parts and fails otherwise. The concept "
            "groups are listed in `stats.json`.")
    return out


def _mc_summary(s: dict[str, Any]) -> list[str]:
    if "mc" not in s:
        return []
    from vsr_dataset.mc_stats import card_lines

    return card_lines(s["mc"])


def _mc_paragraph(mc_counts: tuple[int, int, int] | None) -> list[str]:
    if mc_counts is None or not any(mc_counts):
        return []
    validated_mc, unvalidated_mc, rejected_mc = mc_counts
    lines = [f"`mc/` holds {validated_mc:,} items whose every distractor validators judged "
             "False (adversarial matching, `vsr match`)."]
    if unvalidated_mc:
        lines.append(
            f"`mc_unvalidated/` holds {unvalidated_mc:,} more items with a distractor nobody "
            "has judged yet (written on request, `build-dataset --unvalidated-mc`): it may be "
            "true for the image, so they are **not** cleared and not a benchmark as they stand "
            "(each line says `\"validated\": false`).")
    if rejected_mc:
        lines.append(f"{rejected_mc:,} items are left out of both: validators judged one of "
                     "their distractors true for the image.")
    return lines


def _collection(c: dict[str, Any]) -> dict[str, str]:
    if not c:
        return {k: NOT_STATED for k in ("platforms", "batches", "timeframe", "timing", "pay",
                                        "consent_line")}
    sources = ", ".join(f"{k} {v:,}" for k, v in c["people_by_source"].items())
    platforms = ", ".join(c["platforms"]) or "no platform study recorded"
    batches = "; ".join(
        f"{kind}: " + ", ".join(f"{n:,} {status}" for status, n in by.items())
        for kind, by in c["batches"].items()
    ) or "none run here"
    gen, val = c["batch_settings"]["generate"], c["batch_settings"]["validate"]
    batches += (f" (settings: caption batches of up to {gen[0]} in {gen[1]} min, validation "
                f"batches of up to {val[0]} in {val[1]} min)")
    timing = []
    if c["median_seconds_per_caption"] is not None:
        timing.append(f"median {c['median_seconds_per_caption']} s per caption "
                      f"({c['n_timed_captions']:,} timed)")
    if c["median_seconds_per_vote"] is not None:
        timing.append(f"median {c['median_seconds_per_vote']} s per vote "
                      f"({c['n_timed_votes']:,} timed)")
    return {
        "platforms": f"{platforms}; people by source: {sources or 'none'}",
        "batches": batches,
        "timeframe": (f"batches from {c['first_batch']} to {c['last_batch']}"
                      if c["first_batch"] else "no batches run here"),
        "timing": "; ".join(timing) or "none measured (no timed work in the database)",
        "pay": "; ".join(c["pay"]) or "no platform study recorded",
        "consent_line": ((
            "participants agreed to the consent text below" if c["batches"] else
            "no one was recruited here (no batches), so no one saw the study's consent text")
            + f" (SHA-256 `{c['consent_sha256']}`; `{{minutes}}` and `{{items}}` are filled in "
            "from the batch settings):\n\n"
                         + "\n".join(f"  > {ln}" if ln else "  >"
                                     for ln in c["consent_text"].splitlines())),
    }


def _fields(inputs: CardInputs) -> str:
    polygons = (
        " `instances.jsonl` has each marked instance's COCO polygons (`segmentation`), by "
        "`instance_id` = `subj_instance_id`/`obj_instance_id`."
        if "instances.jsonl" in inputs.files else ""
    )
    return (
        "VSR's field names: `image` (COCO file name), `image_link`, `caption`, `label` "
        "(1 True, 0 False), `relation`, `subj`, `obj`, `annotator_id`, "
        "`vote_true_validator_id` and `vote_false_validator_id` (integer validator ids). "
        "Added: `reference_frame` (the writer's frame, when known), `relation_category` "
        "(VSR Table 1), `agreement` (share of votes agreeing with the label), `origin` "
        "(human, imported or adversarial), `example_id` (the id in the exporting database), "
        "`pair_id` and `pair_example_id`, `coco_image_id`, `image_width`, `image_height`, "
        "`image_license_id`, `subj_instance_id`, `subj_bbox`, `obj_instance_id`, `obj_bbox`, "
        "`study` (the study's slug) and `language` (its language code). `all_raw.jsonl` also "
        "has `votes`: each vote's `validator_id`, `label`, `reference_frame` (intrinsic, "
        "relative or both, when asked) and `duration_ms`. `machine_negatives.jsonl` adds "
        "`query_example_id`, `query_caption`, `query_random_split` and `kept`. The exact "
        "types of every part are the `features` in the YAML above."
    ) + polygons


def rai_facts(stats: Mapping[str, Any], inputs: CardInputs) -> dict[str, Any]:
    """Croissant's Responsible-AI fields, from the facts the card's datasheet states."""
    text = datasheet_text(stats, inputs)
    c = inputs.collection
    return {
        "dataCollection": text["task"],
        "dataCollectionType": "Crowdsourcing",
        # ISO 8601 dates, when batches ran here
        "dataCollectionTimeFrame": [c["first_batch"], c["last_batch"]]
        if c.get("first_batch") else "",
        "dataAnnotationProtocol": text["keep_rule"],
        "dataAnnotationPlatform": text["platforms"],
        "dataAnnotationAnalysis": text["agreement"],
        "annotationsPerItem": text["votes_dist"],
        "annotatorDemographics": text["demographics_line"],
        "personalSensitiveInformation": text["demographics_line"],
        "dataUseCases": text["intended_uses"],
        "dataLimitations": text["limitations"],
        "dataBiases": text["biases"],
        "dataReleaseMaintenancePlan": text["maintenance"],
    }
