"""The data dictionary: every field of every file an export writes, its type and meaning.

One source for three readers: the card's "Data dictionary" section is rendered from it
(``render``), the Hub features and Parquet schemas take the declared types of the JSONL
fields from it (``declared_types``, read by vsr_dataset.hub), and the CSV writers take
their headers from it. tests/vsr_dataset/test_dictionary.py reads every record of every
file of real builds and fails on a key the dictionary does not describe or a value of
another type, so a field cannot be added to a file without its entry here.

Types are the Hub's (``string``, ``int64``, ``float64``, ``bool``, ``("list", inner)``, a
dict for a struct), plus ``object`` (a JSON object described in docs/dataset.md: the
figures of ``stats.json``), ``json`` (any JSON value: COCO's polygons or RLE) and, for CSV
cells, ``number`` (an integer or a decimal).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatch
from typing import Any

from vsr_core.kept import Verdict
from vsr_core.models import AdjudicationDecision, ExampleOrigin

Kind = Any  # "string" | "int64" | ... | ("list", Kind) | dict[str, Kind]

NEGATIVES_FILE = "machine_negatives.jsonl"
INSTANCES_FILE = "instances.jsonl"
QUALIFICATION_FILE = "qualification.csv"
AUTHENTICITY_FILE = "worker_authenticity.csv"
META_FILE = "meta_data.csv"
# What --vsr-compatible writes instead, where the release's type differs (vsr_compat).
COMPAT_VOTES = "string"  # "[2, 10, 1]" in every file but all_raw.jsonl


@dataclass(frozen=True)
class FieldDoc:
    name: str
    kind: Kind
    text: str
    nullable: bool = False
    # Present only when this is so (an option, a kind of record); otherwise in every record.
    only: str | None = None
    compat: Kind | None = None  # the type --vsr-compatible writes instead


@dataclass(frozen=True)
class FileDoc:
    title: str  # how the card names the file(s)
    patterns: tuple[str, ...]  # export-relative paths it covers (fnmatch)
    text: str
    fields: tuple[FieldDoc, ...]
    # A CSV whose further columns come from the data (meta_data.csv: whatever demographics
    # were recorded): their type and meaning.
    other_columns: FieldDoc | None = None
    # Another file whose fields these records also have (listed once, under that file).
    extends: FileDoc | None = None

    @property
    def all_fields(self) -> tuple[FieldDoc, ...]:
        return (self.extends.all_fields if self.extends else ()) + self.fields

    def field(self, name: str) -> FieldDoc | None:
        for f in self.all_fields:
            if f.name == name:
                return f
        return self.other_columns

    def covers(self, rel: str) -> bool:
        return any(fnmatch(rel, p) for p in self.patterns)


def _values(enum: Any) -> str:
    return ", ".join(f"`{e.value}`" for e in enum)


_ORIGIN_WORDS = {
    ExampleOrigin.human: "written here",
    ExampleOrigin.imported: "from an imported release",
    ExampleOrigin.adversarial: "machine-made by adversarial matching",
}
_ORIGINS = ", ".join(f"`{o.value}` ({w})" for o, w in _ORIGIN_WORDS.items())

# --- the binary records: all_raw, all_validated, random/, zeroshot/ ----------------------

BINARY_FIELDS: tuple[FieldDoc, ...] = (
    FieldDoc("image", "string", "COCO 2017 file name of the image (`000000239417.jpg`)."),
    FieldDoc("image_link", "string", "The image's URL on images.cocodataset.org."),
    FieldDoc("caption", "string", "The caption, one template sentence."),
    FieldDoc(
        "label",
        "int64",
        "1: the caption is true of the image, 0: false. An adjudicated record's final label.",
    ),
    FieldDoc("relation", "string", "The spatial relation (VSR Table 1)."),
    FieldDoc("subj", "string", "Subject concept (a COCO category), parsed from the caption."),
    FieldDoc("obj", "string", "Object concept (a COCO category), parsed from the caption."),
    FieldDoc(
        "annotator_id",
        "int64",
        "Export id of the caption writer; null for a machine-made caption.",
        nullable=True,
    ),
    FieldDoc(
        "vote_true_validator_id",
        ("list", "int64"),
        "Export ids of the validators who judged the caption true, in vote order.",
        compat=COMPAT_VOTES,
    ),
    FieldDoc(
        "vote_false_validator_id",
        ("list", "int64"),
        "Export ids of the validators who judged the caption false, in vote order.",
        compat=COMPAT_VOTES,
    ),
    FieldDoc(
        "reference_frame",
        "string",
        "The caption's reference frame when known: VSR's code (`0`, `1`, `2`) for imported "
        "records, the writer's choice for captions written here.",
        nullable=True,
        compat="float64",
    ),
    FieldDoc(
        "relation_category",
        "string",
        "The relation's meta-category in VSR Table 1 (Adjacency, Directional, Orientation, "
        "Projective, Proximity, Topological, Unallocated; `Unknown` outside the table).",
    ),
    FieldDoc(
        "agreement",
        "float64",
        "Share of the votes that agree with `label` (4 decimals); null without votes.",
        nullable=True,
    ),
    FieldDoc("origin", "string", f"Who made the caption: {_ORIGINS}."),
    FieldDoc(
        "example_id",
        "int64",
        "The Example's id in the exporting database (another database numbers anew).",
    ),
    FieldDoc(
        "pair_id",
        "int64",
        "Shared by the True and the False Example of one caption (the smaller `example_id`); "
        "null without a contrastive other half.",
        nullable=True,
    ),
    FieldDoc(
        "pair_example_id",
        "int64",
        "The other half's `example_id`; null without one.",
        nullable=True,
    ),
    FieldDoc("coco_image_id", "int64", "The image's COCO id."),
    FieldDoc("image_width", "int64", "Image width in pixels; null when unknown.", nullable=True),
    FieldDoc("image_height", "int64", "Image height in pixels; null when unknown.", nullable=True),
    FieldDoc(
        "image_license_id",
        "int64",
        "The image's licence in COCO's list (its Flickr licence); null when unknown.",
        nullable=True,
    ),
    FieldDoc(
        "subj_instance_id",
        "int64",
        "COCO annotation id of the subject instance the writer saw marked; null for "
        "imported captions.",
        nullable=True,
    ),
    FieldDoc(
        "subj_bbox",
        ("list", "float64"),
        "That instance's box `[x, y, width, height]` in pixels; null without one.",
        nullable=True,
    ),
    FieldDoc(
        "obj_instance_id",
        "int64",
        "COCO annotation id of the marked object instance; null for imported captions.",
        nullable=True,
    ),
    FieldDoc(
        "obj_bbox",
        ("list", "float64"),
        "That instance's box `[x, y, width, height]` in pixels; null without one.",
        nullable=True,
    ),
    FieldDoc("study", "string", "The study's slug."),
    FieldDoc("language", "string", "The study's language code."),
    FieldDoc(
        "verdict",
        "string",
        f"How the record was decided: {_values(Verdict)} (excluded records are in "
        "`all_raw.jsonl` only; unvoted ones have no votes yet).",
    ),
    FieldDoc(
        "decided_by",
        "string",
        "What decided `verdict`: `agreement` (the keep rule over the votes), `adjudication` "
        "(a researcher's decision) or the label model's name (`dawid-skene`, `mace`).",
    ),
    FieldDoc(
        "adjudication",
        {
            "decision": "string",
            "reason": "string",
            "by": "string",
            "at": "string",
            "label_before": "int64",
        },
        f"Null, or a researcher's settlement: `decision` ({_values(AdjudicationDecision)}), "
        "the written `reason`, who (`by`) and when (`at`, ISO 8601), and `label_before` (the "
        "writer's label). The votes stay the validators' answers, unchanged.",
        nullable=True,
    ),
    FieldDoc(
        "aggregate_label",
        "int64",
        "The label model's label from the votes alone (1/0).",
        only="with `--label-model`, on Examples with votes",
    ),
    FieldDoc(
        "aggregate_confidence",
        "float64",
        "The label model's confidence in `aggregate_label` (4 decimals).",
        only="with `--label-model`, on Examples with votes",
    ),
)
VOTE_STRUCT: dict[str, Kind] = {
    "validator_id": "int64",
    "label": "int64",
    "reference_frame": "string",
    "duration_ms": "int64",
}
RAW_FIELDS = (
    FieldDoc(
        "votes",
        ("list", VOTE_STRUCT),
        "Every vote in full: `validator_id` (export id), `label` (1/0), `reference_frame` "
        "(the frame the validator used when asked: intrinsic, relative or both; else null) "
        "and `duration_ms` (time to answer; null when not measured).",
    ),
)
QUERY_FIELDS = (
    FieldDoc(
        "query_example_id",
        "int64",
        "The `example_id` of the true caption this negative was made against.",
        nullable=True,
    ),
    FieldDoc(
        "query_random_split",
        "string",
        "The random part (train/dev/test) of that query.",
        nullable=True,
    ),
    FieldDoc("kept", "bool", "Whether validators kept the negative as False (the keep rule)."),
)
NEGATIVES_PROVENANCE_FIELDS = (
    FieldDoc(
        "query_caption",
        "string",
        "The query's caption: the answer of the multiple-choice item.",
        nullable=True,
    ),
    FieldDoc("not_for_evaluation", "bool", "Always true: this file holds answers."),
)

# --- multiple choice ------------------------------------------------------------------------

MC_FIELDS: tuple[FieldDoc, ...] = (
    FieldDoc(
        "item_id",
        "string",
        "The item's place in the file's seeded shuffle (`test-00012`); no database id.",
    ),
    FieldDoc("image", "string", "COCO 2017 file name of the image."),
    FieldDoc("image_link", "string", "The image's URL."),
    FieldDoc("subj", "string", "Subject concept of every choice."),
    FieldDoc("obj", "string", "Object concept of every choice."),
    FieldDoc(
        "choices",
        ("list", "string"),
        "The captions to choose from: one true, the others machine-made distractors.",
    ),
    FieldDoc("relations", ("list", "string"), "Each choice's relation, in the same order."),
    FieldDoc("split", "string", "The part: train, dev or test."),
    FieldDoc("answer", "int64", "Index of the true choice in `choices` (the key)."),
    FieldDoc("answer_caption", "string", "The true choice's caption (the key)."),
    FieldDoc("run_id", "int64", "The adversarial matching run that made the item."),
    FieldDoc(
        "validated",
        "bool",
        "Always false: a distractor nobody has judged may be true for the image.",
        only="in the `_unvalidated` sets",
    ),
)
MC_PROVENANCE_FIELDS: tuple[FieldDoc, ...] = (
    FieldDoc("config", "string", "The multiple-choice set (`mc`, `mc_zeroshot`, ...)."),
    FieldDoc("item_id", "string", "The item's `item_id` in that set."),
    FieldDoc("split", "string", "Its part."),
    FieldDoc("answer_example_id", "int64", "The `example_id` of the true caption."),
    FieldDoc(
        "distractor_example_ids",
        ("list", "int64"),
        "The Examples whose captions the distractors were made from.",
    ),
    FieldDoc(
        "negative_example_ids",
        ("list", "int64"),
        "The machine-made negatives sent to validators for this item.",
    ),
    FieldDoc("run_id", "int64", "The matching run."),
    FieldDoc("not_for_evaluation", "bool", "Always true: this file holds answers."),
)

INSTANCE_FIELDS: tuple[FieldDoc, ...] = (
    FieldDoc(
        "instance_id", "int64", "COCO annotation id (= `subj_instance_id`/`obj_instance_id`)."
    ),
    FieldDoc("coco_image_id", "int64", "The image's COCO id."),
    FieldDoc("category", "string", "COCO category."),
    FieldDoc("bbox", ("list", "float64"), "Box `[x, y, width, height]` in pixels."),
    FieldDoc("iscrowd", "bool", "COCO's crowd flag."),
    FieldDoc("segmentation", "json", "COCO's outline: polygons, or RLE for crowds."),
)

# --- stats.json -----------------------------------------------------------------------------


def _stat(name: str, kind: Kind, text: str, only: str | None = None) -> FieldDoc:
    return FieldDoc(name, kind, text, only=only)


STATS_FIELDS: tuple[FieldDoc, ...] = (
    _stat("threshold", "string", "The keep rule's share of agreeing votes (`2/3`)."),
    _stat("threshold_source", "string", "`study` (its setting) or `option` (given)."),
    _stat("keep_rule", "string", "`agreement` or the label model the study keeps by."),
    _stat("seed", "int64", "Seed of the drawn splits and of every shuffle."),
    _stat("split_unit", "string", "`annotation` or `example`: the drawn random split's unit."),
    _stat("n_raw", "int64", "Examples in `all_raw.jsonl`."),
    _stat("n_validated", "int64", "Examples kept (`all_validated.jsonl`)."),
    _stat("n_with_votes", "int64", "Examples with at least one vote."),
    _stat("n_rejected", "int64", "Examples with votes the keep rule drops."),
    _stat("n_adjudicated", "int64", "Examples settled by a researcher."),
    _stat("n_excluded", "int64", "Adjudicated Examples left out (in `all_raw.jsonl` only)."),
    _stat("adjudications", "object", "Adjudications per decision."),
    _stat("n_decided_by_label_model", "int64", "Examples the study's label model decided."),
    _stat("n_unanimous", "int64", "Examples whose every vote agrees with the label."),
    _stat("unanimous_share", "float64", "`n_unanimous` / `n_with_votes`."),
    _stat("kept_share", "float64", "`n_validated` / `n_with_votes`."),
    _stat("n_votes", "int64", "Votes in the export."),
    _stat("votes_per_example", "object", "Number of votes -> Examples with that many."),
    _stat("min_votes", "int64", "Fewest votes on an Example."),
    _stat("labels", "object", "True/False counts, raw and validated."),
    _stat("origins", "object", "Examples per origin."),
    _stat("fleiss_kappa", "object", "Fleiss' kappa: raw, validated, raw with the label."),
    _stat("krippendorff_alpha", "object", "Krippendorff's alpha (nominal), raw."),
    _stat("workers", "object", "Caption writers, validators, people who did both."),
    _stat("relations", "object", "Per relation: counts, category, disagreement."),
    _stat("n_relations_validated", "int64", "Relations that occur in the validated set."),
    _stat("categories", "object", "Per relation category: raw and validated counts."),
    _stat("concepts", "object", "Per concept: validated Examples as subject and object."),
    _stat("splits", "object", "Part sizes; the zero-shot split's concept groups."),
    _stat(
        "split_source",
        "object",
        "Per scheme: the release's own parts or drawn here (seed, unit, ratios), and the "
        "release's parts' gaps and shared concepts.",
        only="when the splits are written",
    ),
    _stat("validators", "object", "Per validator: votes and agreement."),
    _stat("n_paired", "int64", "Examples with a contrastive other half (`pair_id`)."),
    _stat("machine_negatives", "object", "Machine-made negatives: judged, written, kept."),
    _stat("study", "object", "The study: slug, name, definition SHA-256, language, template."),
    _stat(
        "reference_frame_known",
        "object",
        "Validated Examples with a `reference_frame`, and all validated Examples.",
    ),
    _stat(
        "repeated_validators",
        "object",
        "Records (raw, validated) whose vote lists name one validator more than once.",
    ),
    _stat("label_model", "object", "The label model's agreement.", only="with `--label-model`"),
    _stat(
        "mc",
        "object",
        "Multiple-choice items and their answer-only adversaries.",
        only="when the study has a matching run",
    ),
    _stat(
        "blind_baselines",
        "object",
        "Per evaluation file: look-up and join attacks, blind baselines, 95 % intervals.",
        only="in a whole build",
    ),
    _stat("leak_audit", "object", "Attacks above chance, and whether allowed.", "in a whole build"),
)

# --- CSV files --------------------------------------------------------------------------------

QUALIFICATION_FIELDS: tuple[FieldDoc, ...] = (
    FieldDoc("worker_id", "int64", "Export id (as `annotator_id` and the validator ids)."),
    FieldDoc("task", "string", "`generate` or `validate`."),
    FieldDoc("tries", "int64", "Attempts at the check."),
    FieldDoc("passed", "int64", "1 passed, 0 not."),
    FieldDoc("outcome", "string", "passed, failed (screened out) or pending (tries left)."),
)
AUTHENTICITY_FIELDS: tuple[FieldDoc, ...] = (
    FieldDoc("worker_id", "int64", "Export id."),
    FieldDoc("score", "number", "1: nothing unusual, halved per flag."),
    FieldDoc(
        "flags",
        "string",
        "Space-separated signals (same_answer, low_agreement, before_image, regular_timing, "
        "canary).",
    ),
    FieldDoc("answers", "int64", "Answers measured.", nullable=True),
    FieldDoc("true_share", "number", "Share of True answers.", nullable=True),
    FieldDoc("answer_entropy", "number", "Entropy of the answers.", nullable=True),
    FieldDoc("agreement", "number", "Agreement with the other votes' majority.", nullable=True),
    FieldDoc("gold", "int64", "Gold items answered.", nullable=True),
    FieldDoc("gold_right", "int64", "Gold items answered right.", nullable=True),
    FieldDoc("items_measured", "int64", "Items with timings.", nullable=True),
    FieldDoc("median_ms", "number", "Median time from photo on screen to answer.", nullable=True),
    FieldDoc("latency_cv", "number", "Robust spread of those times.", nullable=True),
    FieldDoc("before_image", "int64", "Items answered before the photo was shown.", nullable=True),
    FieldDoc("canary_hits", "int64", "Hidden canaries acted on.", nullable=True),
    FieldDoc("no_input_items", "int64", "Items with no pointer or key activity.", nullable=True),
    FieldDoc("focus_away_items", "int64", "Items with the page left.", nullable=True),
    FieldDoc("pastes", "int64", "Pastes into a caption.", nullable=True),
)
META_FIELDS: tuple[FieldDoc, ...] = (
    FieldDoc("id", "int64", "Export id (as `annotator_id` and the validator ids)."),
)
META_OTHER = FieldDoc(
    "(every other column)",
    "string",
    "One self-reported demographic answer as recorded (the VSR release's: age, Country of "
    "Birth, ...; a platform's), empty when not given.",
    nullable=True,
)

# --- the files ------------------------------------------------------------------------------

_SPLIT_FILES = tuple(
    f"{s}/{p}.jsonl" for s in ("random", "zeroshot") for p in ("train", "dev", "test")
)
_MC_FILES = tuple(
    f"{d}/{p}.jsonl"
    for d in ("mc", "mc_unvalidated", "mc_zeroshot", "mc_zeroshot_unvalidated")
    for p in ("train", "dev", "test")
)

BINARY_DOC = FileDoc(
    "`all_validated.jsonl`, `random/*.jsonl`, `zeroshot/*.jsonl`",
    ("all_validated.jsonl", *_SPLIT_FILES),
    "The validated Examples, and their splits: one record per Example.",
    BINARY_FIELDS,
)
NEGATIVES_DOC = FileDoc(
    f"`{NEGATIVES_FILE}`",
    (NEGATIVES_FILE,),
    "Machine-made False captions validators judged (not those of dev/test multiple-choice "
    "items), in a seeded order.",
    QUERY_FIELDS,
    extends=BINARY_DOC,
)
FILES: tuple[FileDoc, ...] = (
    BINARY_DOC,
    FileDoc(
        "`all_raw.jsonl`",
        ("all_raw.jsonl",),
        "Every Example written by people, validated or not (with `--with-negatives`, also "
        "the kept machine-made negatives).",
        RAW_FIELDS,
        extends=BINARY_DOC,
    ),
    NEGATIVES_DOC,
    FileDoc(
        "`mc/`, `mc_unvalidated/`, `mc_zeroshot/`, `mc_zeroshot_unvalidated/` (`*.jsonl`)",
        _MC_FILES,
        "Multiple-choice items, in a seeded order.",
        MC_FIELDS,
    ),
    FileDoc(
        "`provenance/mc_items.jsonl` (NOT FOR EVALUATION)",
        ("provenance/mc_items.jsonl",),
        "Where each multiple-choice item came from (`--with-provenance`): it holds the answers.",
        MC_PROVENANCE_FIELDS,
    ),
    FileDoc(
        "`provenance/machine_negatives.jsonl` (NOT FOR EVALUATION)",
        ("provenance/machine_negatives.jsonl",),
        "The judged negatives of dev/test multiple-choice items (`--with-provenance`).",
        NEGATIVES_PROVENANCE_FIELDS,
        extends=NEGATIVES_DOC,
    ),
    FileDoc(
        f"`{INSTANCES_FILE}`",
        (INSTANCES_FILE,),
        "The marked COCO instances with their outlines (`--polygons`).",
        INSTANCE_FIELDS,
    ),
    FileDoc(
        "`stats.json`",
        ("stats.json",),
        "One JSON object: the export's figures (docs/dataset.md explains each block).",
        STATS_FIELDS,
    ),
    FileDoc(
        f"`{META_FILE}`",
        (META_FILE,),
        "Self-reported demographics of the people who have them, one row per person.",
        META_FIELDS,
        other_columns=META_OTHER,
    ),
    FileDoc(
        f"`{QUALIFICATION_FILE}`",
        (QUALIFICATION_FILE,),
        f"`{QUALIFICATION_FILE}` says who took the study's qualification check before their "
        "first batch of a task, and how it ended.",
        QUALIFICATION_FIELDS,
    ),
    FileDoc(
        f"`{AUTHENTICITY_FILE}`",
        (AUTHENTICITY_FILE,),
        f"`{AUTHENTICITY_FILE}` is what was recorded about how each worker who used this "
        "site's task pages answered (docs/quality.md of the tool; workers were told on the "
        "consent page). Only counts and timings were recorded, never typed text or pointer "
        "positions; a flag held a worker's submission for a person's review and rejected "
        "nothing by itself.",
        AUTHENTICITY_FIELDS,
    ),
)
# Not data: described by their own format (the card, Croissant, figures, Parquet copies of
# the JSONL files above, with their fields).
NOT_DATA = ("README.md", "croissant.json", "figures/*.png", "*.parquet")


def doc_of(rel: str) -> FileDoc | None:
    """The dictionary entry of an export file (relative path), None for non-data files."""
    for doc in FILES:
        if doc.covers(rel):
            return doc
    return None


def columns(doc_file: str) -> list[str]:
    """A CSV file's header as the writer writes it."""
    for doc in FILES:
        if doc.covers(doc_file):
            return [f.name for f in doc.fields]
    raise KeyError(doc_file)


def declared_types() -> dict[str, Kind]:
    """Field -> its type across the JSONL files (the Hub features' declared types). A name
    means one type in every file that has it."""
    out: dict[str, Kind] = {}
    for doc in FILES:
        if not any(p.endswith(".jsonl") for p in doc.patterns):
            continue
        for f in doc.all_fields:
            if f.kind in ("json", "object", "number"):
                continue
            if out.setdefault(f.name, f.kind) != f.kind:
                raise ValueError(f"field {f.name} has two types: {out[f.name]} and {f.kind}")
    return out


def type_text(kind: Kind) -> str:
    if isinstance(kind, tuple):
        return f"list of {type_text(kind[1])}"
    if isinstance(kind, dict):
        return "struct {" + ", ".join(f"{k}: {type_text(v)}" for k, v in kind.items()) + "}"
    return str(kind)


def render(
    files: Sequence[str], *, vsr_compatible: bool, notes: Mapping[str, str] | None = None
) -> list[str]:
    """The card's data dictionary (Markdown lines) for the files this export has; ``notes``
    adds what this export's own figures say about a field (by name)."""
    notes = notes or {}
    out: list[str] = []
    shown: list[FileDoc] = []
    for doc in FILES:
        if not any(doc.covers(f) for f in files):
            continue
        text, fields = doc.text, doc.all_fields
        if doc.extends is not None and doc.extends in shown:
            # The shared fields once, under the file listed first.
            text, fields = f"{text} Every field of {doc.extends.title}, and:", doc.fields
        shown.append(doc)
        out += ["", f"#### {doc.title}", "", text, "", "| field | type | meaning |"]
        out.append("|---|---|---|")
        rows = list(fields) + ([doc.other_columns] if doc.other_columns else [])
        for f in rows:
            kind = type_text(f.kind)
            if (
                vsr_compatible
                and f.compat is not None
                and not (f.compat == COMPAT_VOTES and doc.covers("all_raw.jsonl"))
            ):
                kind = f"{type_text(f.compat)} (`--vsr-compatible`)"
            if f.nullable:
                kind += " or null"
            text = f.text
            if f.only:
                text += f" Only {f.only}."
            if f.name in notes:
                text += " " + notes[f.name]
            name = f.name if f.name.startswith("(") else f"`{f.name}`"
            out.append(f"| {name} | {kind} | {text} |")
    return out


def notes_from_stats(s: Mapping[str, Any]) -> dict[str, str]:
    """What this export's figures add to a field's meaning: repeated validator ids in the
    vote lists, and why ``reference_frame`` is null where it is."""
    from vsr_dataset.release_splits import card_lines

    out: dict[str, str] = {}
    rep = s.get("repeated_validators")
    if rep is not None:
        repeat = (
            "One validator id can occur twice in one record's vote lists (`[1, 2, 22, 1]`): "
            "the VSR release has such records and counts each occurrence as a vote, so they "
            f"are kept as they are. Here {rep['validated']:,} validated records "
            f"({rep['raw']:,} raw) list a validator more than once."
        )
        out["vote_true_validator_id"] = repeat
        out["vote_false_validator_id"] = "A validator can be listed twice, as in the True list."
    frames = card_lines(s).get("frames")
    if frames:
        out["reference_frame"] = frames
    return out
