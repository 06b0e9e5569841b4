"""The dataset card (README.md of an export), rendered from ``templates/card.md.j2``.

It opens with the Hub's YAML front matter (licence, language, task, size, ``configs`` for
every part with its files and features) and follows *Datasheets for Datasets*: facts the
database holds come from it (vsr_dataset.datasheet), the researcher's from the study file's
``[card]`` ("not stated" when missing). The card's wording is in the template; only the
datasheet statements croissant.json repeats (``datasheet_text``) are built here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from jinja2 import Environment, PackageLoader, StrictUndefined

from vsr_core.relations import TABLE_1, UNUSED
from vsr_dataset import dictionary
from vsr_dataset.croissant import VSR_CITATION
from vsr_dataset.datasheet import NOT_STATED
from vsr_dataset.figures import FIGURES
from vsr_dataset.release_splits import card_lines as release_card_lines

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
        f"{k}: {v:,}" for k, v in sorted(s["votes_per_example"].items(), key=lambda kv: int(kv[0]))
    )
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
        "keep_rule": _keep_rule_text(s),
        "agreement": (
            f"Fleiss' kappa {_num(s['fleiss_kappa']['raw'])} over all Examples, "
            f"{_num(s['fleiss_kappa']['validated'])} over the validated set; all validators "
            f"agree on {_pct(s['unanimous_share'])} of the Examples with votes."
        ),
        "demographics_line": _demographics(inputs.demographics),
        "intended_uses": researcher["intended_uses"],
        "limitations": LIMITATIONS,
        "biases": BIASES,
        "maintenance": (
            f"- **Contact:** {researcher['contact']}\n- **Version:** {researcher['version']}"
        ),
    }


def _stated(inputs: CardInputs) -> dict[str, str]:
    """The researcher's facts, "not stated" where the study file's [card] gives none."""
    return {k: (v if v else NOT_STATED) for k, v in inputs.researcher.items()}


def render_card(stats: dict[str, Any], inputs: CardInputs) -> str:
    s = stats
    researcher = _stated(inputs)
    context = {
        **datasheet_text(stats, inputs),
        "front_matter": yaml.safe_dump(
            inputs.front_matter, sort_keys=False, allow_unicode=True, width=100
        ),
        "title": inputs.title,
        "s": s,
        "study": s.get("study"),
        "researcher": researcher,
        "pct": _pct,
        "num": _num,
        "has_mc": any(f.startswith("mc/") for f in inputs.files),
        "has_negatives": "machine_negatives.jsonl" in inputs.files,
        "vsr_compatible": inputs.vsr_compatible,
        "parquet": inputs.parquet,
        "origins": ", ".join(f"{k}: {v:,}" for k, v in s["origins"].items()) or "none",
        "count": _count,
        "negatives": s.get("machine_negatives") or {},
        "n_paired": inputs.n_paired,
        "n_table": len(TABLE_1),
        "unused": ", ".join(sorted(UNUSED)),
        "label_model": s.get("label_model"),
        "mc_lines": _mc_summary(s),
        "blind_rows": _blind_rows(s),
        "split_lines": release_card_lines(s),
        "dictionary_lines": dictionary.render(
            inputs.files, vsr_compatible=inputs.vsr_compatible, notes=dictionary.notes_from_stats(s)
        ),
        "bias_lines": bias_lines(s, inputs),
        # mc/ counts, when the export has any: in mc/, in mc_unvalidated/, rejected
        "mc_counts": inputs.mc_counts if inputs.mc_counts and any(inputs.mc_counts) else None,
        "figures": [
            {"title": FIGURE_TITLES[name], "path": FIGURES[name], "note": note}
            for name, note in (inputs.figure_notes or {}).items()
        ],
        "files": inputs.files,
        "researcher_citation": inputs.researcher.get("citation"),
        "vsr_citation": VSR_CITATION,
    }
    return _ENV.get_template("card.md.j2").render(**context)


def _blind_rows(s: dict[str, Any]) -> list[str]:
    """The card's table of stats.json ``blind_baselines``: per evaluation file, its strongest
    look-up or join attack and its blind baselines, each with its 95 % interval."""

    def fig(name: str, f: dict[str, Any]) -> str:
        lo, hi = f["ci95"]
        return f"{name} {f['accuracy']:.3f} ({lo:.3f}-{hi:.3f})"

    rows = []
    for config, splits in sorted((s.get("blind_baselines") or {}).items()):
        for split, r in sorted(splits.items()):
            attacks = r.get("attacks") or {}
            worst = max(attacks.items(), key=lambda kv: kv[1]["accuracy"], default=None)
            baselines = r.get("baselines") or {}
            # The answer-only suite (a few dozen models) shows as its strongest and a count.
            answer_only = [k for k in baselines if k.startswith("answer_only:")]
            shown = [
                fig(k, v)
                for k, v in sorted(baselines.items())
                if k not in answer_only and k != "answer_only_strongest"
            ]
            best = baselines.get("answer_only_strongest")
            if best:
                null = best.get("by_chance_alone")
                alone = f" [by chance alone {null['mean']:.3f}]" if null else ""
                shown.append(
                    fig(f"strongest of {len(answer_only)} answer-only: {best['name']}", best)
                    + alone
                )
            base = "; ".join(shown)
            rows.append(
                f"| `{config}/{split}` | {r['n']:,} | {r['chance']:.2f} | "
                f"{fig(*worst) if worst else '-'} | {base or '-'} |"
            )
    return rows


LANGUAGES = {"en": "English", "zh": "Chinese"}


def bias_lines(s: Mapping[str, Any], inputs: CardInputs) -> list[str]:
    """The Hub template's "Bias, Risks, and Limitations": what this export's own figures
    show (people, language, relation skew, machine-made distractors, answer-only
    baselines), then what holds for every export."""
    study = s.get("study") or {}
    lang = study.get("language", "en")
    w = s["workers"]
    by_source = (inputs.collection or {}).get("people_by_source") or {}
    sources = ", ".join(f"{k} {v:,}" for k, v in by_source.items()) or "not recorded"
    out = [
        f"- **People and language.** The captions are {LANGUAGES.get(lang, lang)} only "
        f"(`language` {lang}), written by {_people(w['annotators'])} and judged by "
        f"{_count(w['validators'], 'validator')} ({w['both']} did both; people by "
        f"source: {sources}): each person's habits of wording and judging are in the data, and "
        "results need not carry over to other languages or other people.",
        f"- **Images:** {BIASES} Each image keeps its own Flickr licence (`image_license_id`, "
        "COCO's list), which is not the annotations' licence.",
        f"- **Labels:** {LIMITATIONS}",
    ]
    skew = _relation_skew(s.get("relations") or {})
    if skew:
        out.append(skew)
    negatives = s.get("machine_negatives") or {}
    made = negatives.get("judged", 0) + negatives.get("unjudged", 0)
    if inputs.mc_counts and any(inputs.mc_counts):
        validated_mc, unvalidated_mc, rejected_mc = inputs.mc_counts
        line = (
            "- **Machine-made distractors.** Every multiple-choice distractor was made by "
            f"adversarial matching, not written by a person: {validated_mc:,} items have all "
            "distractors judged False by validators"
        )
        if unvalidated_mc:
            line += (
                f"; {unvalidated_mc:,} have one nobody judged (`validated: false`; it may be "
                "true for the image)"
            )
        if rejected_mc:
            line += f"; {rejected_mc:,} were left out because validators judged a distractor true"
        out.append(
            line + ". Distractors follow the matching model's notion of a plausible wrong "
            "relation, which a model can learn to spot without the image."
        )
    elif made:
        out.append(
            f"- **Machine-made captions.** {made:,} False captions were made by adversarial "
            f"matching, not written by a person; {negatives.get('judged', 0):,} of them were "
            "judged by validators."
        )
    mc = s.get("mc") or {}
    strongest = mc.get("strongest_adversary")
    if strongest:
        lo, hi = strongest["ci95"]
        chance = f", chance {mc['chance']}" if mc.get("chance") is not None else ""
        out.append(
            "- **Answers without the image.** The strongest answer-only adversary "
            f"({strongest['name']}, options only) scores {strongest['accuracy']:.3f} "
            f"(95 % CI {lo:.3f}-{hi:.3f}{chance}) on the "
            f"{mc.get('adversaries_n_test') or 0:,} items of "
            f"`{mc.get('measured_on', 'mc')}/test`: accuracy up to that level needs no image."
        )
    return out


def _people(n: int) -> str:
    return "1 person" if n == 1 else f"{n:,} people"


def _relation_skew(relations: Mapping[str, Any]) -> str:
    counts = sorted(
        ((r["n_validated"], name) for name, r in relations.items() if r["n_validated"]),
        reverse=True,
    )
    if len(counts) < 2:
        return ""
    total = sum(n for n, _ in counts)
    top = ", ".join(f"`{name}` {n:,} ({100 * n / total:.1f}%)" for n, name in counts[:3])
    rare = sum(1 for n, _ in counts if n < 10)
    return (
        f"- **Relation frequency skew.** Of {len(counts)} relations in the validated set the "
        f"most frequent are {top}; {rare} {'has' if rare == 1 else 'have'} fewer than 10 "
        "validated Examples, too few for "
        "a per-relation accuracy to mean much (`relations` in `stats.json`)."
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


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
    return (
        f"`meta_data.csv` publishes self-reported demographics of {d['n_people']} "
        f"people, keyed by their export id: {'; '.join(cols)}. Values shared by fewer "
        "than 5 people are not repeated here; in the file they are, so together with the "
        "votes they may single a person out: check that your consent text covers "
        "publishing them before you release the file."
    )


MODEL_NAMES = {"dawid-skene": "Dawid-Skene", "mace": "MACE"}


def _keep_rule_text(s: Mapping[str, Any]) -> str:
    """The keep rule in words, with how many Examples adjudication and a label model decided."""
    rule = s.get("keep_rule", "agreement")
    if rule in MODEL_NAMES:
        text = (
            f"an Example is validated when the {MODEL_NAMES[rule]} label model, fitted on all "
            "the votes, gives it its own label (the study's keep rule; "
            f"{s.get('n_decided_by_label_model', 0):,} Examples decided so), or, for one "
            f"voted on after the last fit, when at least {s['threshold']} of its votes agree "
            f"with its label{_keep_detail(s)}."
        )
    else:
        text = (
            f"an Example is validated when at least {s['threshold']} of its votes "
            f"agree with its label{_keep_detail(s)}."
        )
    n_adj = int(s.get("n_adjudicated", 0))
    if n_adj:
        text += (
            f" {n_adj:,} Examples were adjudicated by the researchers with a written reason "
            "and follow that decision instead (`adjudication` in the records: final label or "
            f"excluded; {int(s.get('n_excluded', 0)):,} excluded, in `all_raw.jsonl` only); "
            "their votes are published unchanged."
        )
    else:
        text += " No Example was adjudicated."
    return text


def _keep_detail(s: Mapping[str, Any]) -> str:
    detail = (
        " (a proportion: 2 of 3, 3 of 4, 4 of 6 keep; a 1-1 tie fails)"
        if s["threshold"] == "2/3"
        else " (a proportion of however many votes it has)"
    )
    if s.get("threshold_source", "study") == "study":
        return detail + ", the study's setting"
    return detail + ", given for this export (not the study's setting)"


def _mc_summary(s: dict[str, Any]) -> list[str]:
    if "mc" not in s:
        return []
    from vsr_dataset.mc_stats import card_lines

    return card_lines(s["mc"])


def _collection(c: dict[str, Any]) -> dict[str, str]:
    if not c:
        return {
            k: NOT_STATED
            for k in ("platforms", "batches", "timeframe", "timing", "pay", "consent_line")
        }
    sources = ", ".join(f"{k} {v:,}" for k, v in c["people_by_source"].items())
    platforms = ", ".join(c["platforms"]) or "no platform study recorded"
    batches = (
        "; ".join(
            f"{kind}: " + ", ".join(f"{n:,} {status}" for status, n in by.items())
            for kind, by in c["batches"].items()
        )
        or "none run here"
    )
    gen, val = c["batch_settings"]["generate"], c["batch_settings"]["validate"]
    batches += (
        f" (settings: caption batches of up to {gen[0]} in {gen[1]} min, validation "
        f"batches of up to {val[0]} in {val[1]} min)"
    )
    timing = []
    if c["median_seconds_per_caption"] is not None:
        timing.append(
            f"median {c['median_seconds_per_caption']} s per caption "
            f"({c['n_timed_captions']:,} timed)"
        )
    if c["median_seconds_per_vote"] is not None:
        timing.append(
            f"median {c['median_seconds_per_vote']} s per vote ({c['n_timed_votes']:,} timed)"
        )
    return {
        "platforms": f"{platforms}; people by source: {sources or 'none'}",
        "batches": batches,
        "timeframe": (
            f"batches from {c['first_batch']} to {c['last_batch']}"
            if c["first_batch"]
            else "no batches run here"
        ),
        "timing": "; ".join(timing) or "none measured (no timed work in the database)",
        "pay": "; ".join(c["pay"]) or "no platform study recorded",
        "consent_line": (
            (
                "participants agreed to the consent text below"
                if c["batches"]
                else "no one was recruited here (no batches), "
                "so no one saw the study's consent text"
            )
            + f" (SHA-256 `{c['consent_sha256']}`; `{{minutes}}` and `{{items}}` are filled in "
            "from the batch settings):\n\n"
            + "\n".join(f"  > {ln}" if ln else "  >" for ln in c["consent_text"].splitlines())
        ),
    }


def rai_facts(stats: Mapping[str, Any], inputs: CardInputs) -> dict[str, Any]:
    """Croissant's Responsible-AI fields, from the facts the card's datasheet states."""
    text = datasheet_text(stats, inputs)
    c = inputs.collection
    return {
        "dataCollection": text["task"],
        "dataCollectionType": "Crowdsourcing",
        # ISO 8601 dates, when batches ran here
        "dataCollectionTimeFrame": [c["first_batch"], c["last_batch"]]
        if c.get("first_batch")
        else "",
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
