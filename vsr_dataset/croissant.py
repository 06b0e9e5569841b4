"""``croissant.json``: the export described in Croissant 1.1 (MLCommons), with its
Responsible-AI fields filled from the same facts as the card's datasheet, its creators and
publication date, and PROV-O provenance saying which records people wrote and which
multiple-choice distractors a machine made.

One FileObject per JSONL file (with its sha256) and one RecordSet per part and split, whose
fields are the features the card's YAML lists (vsr_dataset.hub), each extracted by its
column. Lists are described by their element type; nested records (``votes`` in
``all_raw``) by subfields.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vsr_dataset.hub import Config, Feature

CROISSANT_FILE = "croissant.json"
VSR_CITATION = (
    "Liu, Emerson & Collier (2023), Visual Spatial Reasoning, Transactions of the ACL 11:635-651."
)

CROISSANT_VERSION = "http://mlcommons.org/croissant/1.1"
# The 1.1 context as mlcroissant writes it, plus PROV-O for the provenance statements.
CONTEXT: dict[str, Any] = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "arrayShape": "cr:arrayShape",
    "containedIn": "cr:containedIn",
    "description": {"@container": "@language"},
    "isArray": "cr:isArray",
    "name": {"@container": "@language"},
    "prov": "http://www.w3.org/ns/prov#",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}
DATA_TYPES = {
    "string": "sc:Text",
    "int64": "sc:Integer",
    "float64": "sc:Float",
    "bool": "sc:Boolean",
    "null": "sc:Text",
}


def _field(record_set: str, file_id: str, feature: Feature, parent: str = "") -> dict[str, Any]:
    name = feature["name"]
    fid = f"{record_set}/{parent}{name}"
    out: dict[str, Any] = {"@type": "cr:Field", "@id": fid, "name": name}
    inner = feature.get("list")
    if isinstance(inner, list):  # a list of records: subfields
        out["repeated"] = True
        out["subField"] = [_field(record_set, file_id, f, f"{name}/") for f in inner]
        out["source"] = {"fileObject": {"@id": file_id}, "extract": {"column": name}}
        return out
    if isinstance(feature.get("struct"), list):
        out["subField"] = [_field(record_set, file_id, f, f"{name}/") for f in feature["struct"]]
        out["source"] = {"fileObject": {"@id": file_id}, "extract": {"column": name}}
        return out
    dtype = inner if isinstance(inner, str) else feature.get("dtype", "string")
    out["dataType"] = DATA_TYPES.get(dtype, "sc:Text")
    if inner is not None:
        out["repeated"] = True
    if parent:  # a subfield: taken from its parent's column
        out["source"] = {
            "fileObject": {"@id": file_id},
            "extract": {"column": parent.rstrip("/")},
            "transform": {"jsonPath": name},
        }
    else:
        out["source"] = {"fileObject": {"@id": file_id}, "extract": {"column": name}}
    return out


def distractor_provenance(config: str) -> str:
    """What a multiple-choice record set's distractors are and whether people checked them."""
    checked = (
        "validators judged every distractor of every item False for its image"
        if not config.endswith("_unvalidated")
        else "at least one distractor of every item has not been judged by anyone, so it "
        "may be true for the image"
    )
    return (
        "The true choice is a caption people wrote and validators confirmed; the three "
        "other choices (distractors) are machine-made: adversarial matching (`vsr match`) "
        f"put another Example's relation into the true caption. In this set {checked}."
    )


def _creators(creators: str | None, study_name: str) -> list[dict[str, str]]:
    """The study file's ``[card] creators`` (one per ``;``-separated part), else a
    placeholder naming the study, since Croissant 1.1 requires a creator."""
    names = [n.strip() for n in (creators or "").split(";") if n.strip()]
    if not names:
        names = [f"Researchers of the study {study_name} (creators not stated)"]
    return [{"@type": "sc:Organization", "name": n} for n in names]


def croissant(
    out_dir: Path,
    *,
    title: str,
    description: str,
    configs: Sequence[Config],
    features: Mapping[str, list[Feature]],
    facts: Mapping[str, Any],
    license_url: str | None,
    version: str | None,
    cite_as: str | None,
    creators: str | None,
    study_name: str,
    date_published: str | None,
) -> dict[str, Any]:
    """The Croissant document of the export in ``out_dir`` (its files must be written)."""
    distribution: list[dict[str, Any]] = []
    record_sets: list[dict[str, Any]] = []
    for c in configs:
        for split, rel in c.files.items():
            fid = rel
            with (out_dir / rel).open("rb") as fh:  # in chunks: all_raw is the biggest file
                digest = hashlib.file_digest(fh, "sha256").hexdigest()
            distribution.append(
                {
                    "@type": "cr:FileObject",
                    "@id": fid,
                    "name": fid,
                    "contentUrl": rel,
                    "encodingFormat": "application/jsonlines"
                    if rel.endswith(".jsonl")
                    else "application/x-parquet",
                    "sha256": digest,
                }
            )
            rs = f"{c.name}_{split}"
            if c.name not in features:  # --vsr-compatible: the files' types vary
                continue
            record_set: dict[str, Any] = {
                "@type": "cr:RecordSet",
                "@id": rs,
                "name": rs,
                "description": f"{c.description} ({split})",
                "field": [_field(rs, fid, f) for f in features[c.name]],
            }
            if c.name.startswith("mc"):
                record_set["description"] += ". " + distractor_provenance(c.name)
                record_set["prov:wasGeneratedBy"] = {"@id": "#adversarial-matching"}
            record_sets.append(record_set)
    doc: dict[str, Any] = {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "name": title,
        "description": description,
        "conformsTo": CROISSANT_VERSION,
        "creator": _creators(creators, study_name),
        # A date of the data (its newest Example or vote), not of the build's wall clock.
        "datePublished": date_published or "1970-01-01",
        "url": "https://cocodataset.org/",
        "license": license_url or "https://spdx.org/licenses/NOASSERTION.html",
        "version": version or "0.0.0",
        "distribution": distribution,
        "recordSet": record_sets,
        "prov:wasGeneratedBy": [
            {
                "@id": "#crowdsourcing",
                "@type": "prov:Activity",
                "description": "People wrote the captions and judged them True/False.",
            },
            {
                "@id": "#adversarial-matching",
                "@type": "prov:Activity",
                "description": "Machine-made False captions: the multiple-choice "
                "distractors and machine_negatives.jsonl, made by adversarial matching "
                "from the human Examples; validators judged some of them.",
            },
        ],
    }
    doc["citeAs"] = cite_as or VSR_CITATION
    doc.update({f"rai:{k}": v for k, v in facts.items() if v})
    return doc
