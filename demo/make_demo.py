"""Rebuild the bundled demo data (demo/coco/ and demo/SOURCE.md) from ../shared/coco.

    python demo/make_demo.py [--source ../shared/coco] [--min-area 10000] [--max-pairs 40]

Picks real COCO 2017 images whose JPEG is in the source folder so that the VSR rule at
``--min-area`` yields at most ``--max-pairs`` image pairs over as many concept pairs as
possible (rarest concept pairs first), then writes

  demo/coco/annotations/instances_demo.json   the chosen images with ALL their annotations,
                                              every record verbatim (so "exactly one instance"
                                              stays true), plus the original info, licenses
                                              and all 80 categories
  demo/coco/images/<split>/<file_name>        the JPEGs, re-encoded at the same width and
                                              height with a lower quality only when needed
                                              to keep demo/ under 5 MB
  demo/SOURCE.md                              source, licences, per-image attribution

Only the 30,000 px VSR threshold is lowered (to 10,000 by default): the subsets in
../shared/coco hold too few large single instances to give a useful demo otherwise.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
from itertools import combinations
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BUDGET = 4_800_000  # bytes for the JPEGs: demo/ must stay under 5 MB with JSON and docs
QUALITIES = (90, 85, 80, 75, 70, 65, 60)


def _eligible(
    images: dict[int, dict[str, Any]], anns: list[dict[str, Any]], names: dict[int, str], t: float
) -> dict[tuple[str, str], set[int]]:
    """(concept A, concept B) -> images eligible by the VSR rule (plain json, no pycocotools)."""
    per: dict[int, list[dict[str, Any]]] = {}
    for a in anns:
        per.setdefault(a["image_id"], []).append(a)
    out: dict[tuple[str, str], set[int]] = {}
    for iid in images:
        counts: dict[int, int] = {}
        for a in per.get(iid, []):
            counts[a["category_id"]] = counts.get(a["category_id"], 0) + (2 if a["iscrowd"] else 1)
        single = sorted(
            {
                names[a["category_id"]]
                for a in per.get(iid, [])
                if counts[a["category_id"]] == 1 and a["area"] >= t
            }
        )
        for pair in combinations(single, 2):
            out.setdefault(pair, set()).add(iid)
    return out


def _n_pairs(chosen: set[int], by_cp: dict[tuple[str, str], set[int]]) -> int:
    return sum(len(s & chosen) * (len(s & chosen) - 1) // 2 for s in by_cp.values())


def _encode(src: Path, quality: int | None) -> bytes:
    data = src.read_bytes()
    if quality is None:
        return data
    from PIL import Image

    with Image.open(src) as im:
        buf = io.BytesIO()
        im.convert("RGB").save(buf, "JPEG", quality=quality, optimize=True)
    out = buf.getvalue()
    return out if len(out) < len(data) else data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--source", type=Path, default=ROOT.parent / "shared" / "coco")
    ap.add_argument("--min-area", type=float, default=10_000)
    ap.add_argument("--max-pairs", type=int, default=40)
    args = ap.parse_args()
    src: Path = args.source
    if not (src / "annotations").is_dir():
        sys.exit(f"error: no COCO annotations under {src}")

    files = sorted((src / "annotations").glob("instances_*2017_subset.json"))
    header: dict[str, Any] = {}
    images: dict[int, dict[str, Any]] = {}
    anns: list[dict[str, Any]] = []
    categories: list[dict[str, Any]] = []
    for f in files:
        data = json.loads(f.read_text())
        header = {"info": data["info"], "licenses": data["licenses"]}
        categories = data["categories"]
        images.update({i["id"]: i for i in data["images"]})
        anns += data["annotations"]

    def split_of(img: dict[str, Any]) -> str:
        return "val2017" if "/val2017/" in img["coco_url"] else "train2017"

    local = {
        iid: img
        for iid, img in images.items()
        if (src / "images" / split_of(img) / img["file_name"]).is_file()
    }
    names = {c["id"]: c["name"] for c in categories}
    by_cp = _eligible(local, anns, names, args.min_area)
    by_cp = {cp: s for cp, s in by_cp.items() if len(s) >= 2}

    # Rarest concept pairs first, two images each, while the total stays within max-pairs.
    chosen: set[int] = set()
    for cp in sorted(by_cp, key=lambda cp: (len(by_cp[cp]), cp)):
        trial = chosen | set(sorted(by_cp[cp])[:2])
        if _n_pairs(trial, by_cp) <= args.max_pairs:
            chosen = trial
    n_pairs = _n_pairs(chosen, by_cp)
    n_cps = sum(1 for s in by_cp.values() if len(s & chosen) >= 2)

    out = HERE / "coco"
    if out.exists():
        shutil.rmtree(out)
    (out / "annotations").mkdir(parents=True)
    picked = [local[i] for i in sorted(chosen)]
    demo = {
        **header,
        "images": picked,
        "annotations": sorted((a for a in anns if a["image_id"] in chosen), key=lambda a: a["id"]),
        "categories": categories,
    }
    (out / "annotations" / "instances_demo.json").write_text(
        json.dumps(demo, separators=(",", ":"))
    )

    paths = {i["id"]: src / "images" / split_of(i) / i["file_name"] for i in picked}
    quality: int | None = None
    blobs = {iid: _encode(p, None) for iid, p in paths.items()}
    for q in QUALITIES:
        if sum(map(len, blobs.values())) <= BUDGET:
            break
        quality = q
        blobs = {iid: _encode(p, q) for iid, p in paths.items()}
    reencoded = {iid for iid, b in blobs.items() if b != paths[iid].read_bytes()}
    for img in picked:
        dest = out / "images" / split_of(img) / img["file_name"]
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(blobs[img["id"]])

    _write_source_md(
        header, picked, reencoded, quality, args, n_pairs, n_cps, len(demo["annotations"])
    )
    total = sum(p.stat().st_size for p in HERE.rglob("*") if p.is_file())
    print(
        f"demo: {len(picked)} images, {len(demo['annotations'])} annotations, {n_pairs} pairs over "
        f"{n_cps} concept pairs at min-area {args.min_area:g}; demo/ is {total / 1e6:.2f} MB"
    )


def _write_source_md(
    header: dict[str, Any],
    picked: list[dict[str, Any]],
    reencoded: set[int],
    quality: int | None,
    args: argparse.Namespace,
    n_pairs: int,
    n_cps: int,
    n_anns: int,
) -> None:
    lic = {x["id"]: x for x in header["licenses"]}
    rows = []
    for img in picked:
        lc = lic.get(img["license"], {"name": "?", "url": ""})
        re = f"yes (q{quality})" if img["id"] in reencoded else "no"
        rows.append(
            f"| {img['id']} | `{img['file_name']}` | {img['flickr_url']} | "
            f"[{lc['name']}]({lc['url']}) | {re} |"
        )
    counts: dict[str, int] = {}
    for img in picked:
        name = lic.get(img["license"], {"name": "?"})["name"]
        counts[name] = counts.get(name, 0) + 1
    if reencoded:
        jpeg_note = (
            f"{len(reencoded)} of them were re-encoded with Pillow at JPEG quality {quality} to "
            "keep `demo/` under 5 MB (pixels differ slightly from the originals); the others "
            "are byte-identical copies."
        )
    else:
        jpeg_note = (
            "All are byte-identical copies of the files in `../shared/coco/images` "
            "(no re-encoding was needed to stay under 5 MB)."
        )
    text = (
        f"""# Demo data: where it comes from

A small, real slice of MS-COCO 2017 for trying the pipeline (`bash scripts/demo.sh`).
Rebuilt by `python demo/make_demo.py` from `../shared/coco` (see its `SOURCE.md`: the
annotation subsets there are real COCO 2017 records taken from public GitHub mirrors of
COCO, every value unchanged).

## What is here
- `coco/annotations/instances_demo.json`: {len(picked)} images (train2017 and val2017) with
  **all** their {n_anns} annotations, every image and annotation record verbatim, plus the
  original COCO 2017 `info`, `licenses` and all 80 `categories`. Images whose JPEG is not in
  `../shared/coco/images` were never considered.
- `coco/images/<split>/<file_name>`: the {len(picked)} JPEGs, same width and height as in the
  annotations. {jpeg_note}
- At `--min-area {args.min_area:g}` the VSR rule yields {n_pairs} image pairs over {n_cps}
  concept pairs. The VSR paper's threshold is 30,000 px; the demo lowers it because the
  subsets hold few large single instances. `scripts/demo.sh` passes `--min-area {args.min_area:g}`.

## How the images were chosen
Concept pairs with at least two eligible local images, rarest first; two images each, kept
while the total number of image pairs stays at most {args.max_pairs}.

## Licences
- Annotations: (c) COCO Consortium, **CC BY 4.0** (https://cocodataset.org/#termsofuse).
- Images: Flickr photos, each under its own licence (COCO `license` id), **not** CC BY 4.0;
  many are NonCommercial. Use them for demos and tests only and keep the attribution below.
  Counts here: {", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))}.

| COCO id | file | Flickr source (attribution) | licence | re-encoded |
|---|---|---|---|---|
"""
        + "\n".join(rows)
        + "\n"
    )
    (HERE / "SOURCE.md").write_text(text)


if __name__ == "__main__":
    main()
