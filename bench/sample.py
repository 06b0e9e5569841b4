"""Benchmark: the pair sampler at the scale of COCO train2017 + val2017.

Builds two COCO instance files (118,287 + 5,000 images, 860,001 + 36,781 instances) in a temp
dir by replicating the real records of ../shared/coco/annotations (new ids, real polygons),
then, each in a fresh subprocess:

  baseline  json.load of both files
  ours      collection.coco.load_coco + collection.pairs.sample_pairs(10,000 pairs)
            (loading, indexing, sampling, with the shapely geometry of every pair)

and prints time(ours) / time(json.load) (target <= 1.5) and the peak memory of ours, above
the idle interpreter, relative to the files' size (target <= 3). Storing the pairs in a
database is timed separately. Usage:

  python bench/sample.py [--scale 1.0] [--pairs 10000] [--repeat 2] [--pycocotools] [--no-store]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [
    ROOT.parent / "shared/coco/annotations/instances_train2017_subset.json",
    ROOT.parent / "shared/coco/annotations/instances_val2017_subset.json",
]
FULL = {"train2017": (118_287, 860_001), "val2017": (5_000, 36_781)}


def _rss_now_kb() -> int:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * (resource.getpagesize() // 1024)


def build_files(out: Path, scale: float, seed: int = 7) -> list[Path]:
    """Replicate real COCO records to the target image and annotation counts."""
    import orjson

    src_images: list[dict[str, Any]] = []
    by_image: dict[int, list[dict[str, Any]]] = {}
    header: dict[str, Any] = {}
    for path in SOURCES:
        data = json.loads(path.read_text())
        header = {"info": data["info"], "licenses": data["licenses"]}
        categories = data["categories"]
        src_images += data["images"]
        for ann in data["annotations"]:
            by_image.setdefault(ann["image_id"], []).append(ann)
    rng = random.Random(seed)
    files = []
    next_img, next_ann = 1, 1
    for split, (n_img_full, n_ann_full) in FULL.items():
        n_img, n_ann = max(2, int(n_img_full * scale)), max(2, int(n_ann_full * scale))
        ratio = n_ann / n_img
        images: list[dict[str, Any]] = []
        anns: list[dict[str, Any]] = []
        order = src_images[:]
        while len(images) < n_img:
            rng.shuffle(order)
            for src in order:
                if len(images) >= n_img:
                    break
                src_anns = by_image.get(src["id"], [])
                # Keep the running annotations-per-image ratio at the real one: COCO has
                # 7.3 instances per image, our subsets 9.2, so smaller images are favoured.
                if len(anns) + len(src_anns) > ratio * (len(images) + 1) + 20:
                    continue
                iid = next_img
                next_img += 1
                fname = f"{iid:012d}.jpg"
                images.append(
                    {
                        **src,
                        "id": iid,
                        "file_name": fname,
                        "coco_url": f"http://images.cocodataset.org/{split}/{fname}",
                    }
                )
                for a in src_anns:
                    anns.append({**a, "id": next_ann, "image_id": iid})
                    next_ann += 1
        path = out / f"instances_{split}.json"
        path.write_bytes(
            orjson.dumps(
                {**header, "images": images, "annotations": anns, "categories": categories}
            )
        )
        files.append(path)
        del images, anns
    return files


def child(mode: str, files: list[str], n_pairs: int, db_url: str | None) -> None:
    """Run one measurement in this (fresh) process and print a JSON line."""
    sys.path.insert(0, str(ROOT))
    if mode == "ours":
        from collection.coco import load_coco
        from collection.pairs import sample_pairs
        from vsr_core.defaults import MIN_AREA_PX
    elif mode == "pycocotools":
        from pycocotools.coco import COCO
    base_kb = _rss_now_kb()
    t0 = time.perf_counter()
    info: dict[str, Any] = {}
    if mode == "json":
        data = []
        for f in files:
            with open(f) as fh:
                data.append(json.load(fh))
        info["annotations"] = sum(len(d["annotations"]) for d in data)
    elif mode == "pycocotools":
        cocos = [COCO(f) for f in files]
        info["annotations"] = sum(len(c.anns) for c in cocos)
    else:
        index = load_coco(files, min_area=MIN_AREA_PX)
        t1 = time.perf_counter()
        res = sample_pairs(index, n_pairs, seed=1)
        info.update(
            annotations=index.n_annotations,
            load_s=t1 - t0,
            sample_s=time.perf_counter() - t1,
            pairs=len(res.pairs),
            available=res.available,
            concept_pairs=len({(p.concept_a, p.concept_b) for p in res.pairs}),
            eligible_images=res.eligible_images,
        )
        if db_url:
            from collection.store import store_pairs
            from migrations.runner import upgrade
            from vsr_core.db import make_engine

            upgrade(db_url)
            engine = make_engine(db_url)
            t2 = time.perf_counter()
            stored = store_pairs(engine, index, res.pairs, run_id="bench")
            info["store_s"] = time.perf_counter() - t2
            info["stored"] = stored.stored
    info["seconds"] = time.perf_counter() - t0 - info.get("store_s", 0.0)
    info["peak_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    info["base_kb"] = base_kb
    print(json.dumps(info))


def measure(
    mode: str, files: list[Path], n_pairs: int, db_url: str | None = None
) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", mode, "--pairs", str(n_pairs)]
    if db_url:
        cmd += ["--db", db_url]
    out = subprocess.run(cmd + [str(f) for f in files], capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the full COCO size")
    ap.add_argument("--pairs", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=2, help="runs per mode (median is reported)")
    ap.add_argument("--pycocotools", action="store_true", help="also time pycocotools COCO()")
    ap.add_argument("--no-store", action="store_true", help="skip the database store timing")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--db", help=argparse.SUPPRESS)
    ap.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.files, args.pairs, args.db)
        return

    with tempfile.TemporaryDirectory(prefix="vsr-bench-") as tmp:
        t0 = time.perf_counter()
        files = build_files(Path(tmp), args.scale)
        size = sum(f.stat().st_size for f in files)
        print(
            f"built {len(files)} files, {size / 1e6:.1f} MB, in {time.perf_counter() - t0:.1f} s",
            flush=True,
        )
        modes = ["json", "ours"] + (["pycocotools"] if args.pycocotools else [])
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
        for _ in range(args.repeat):  # interleaved, so drift hits both alike
            for m in modes:
                runs[m].append(measure(m, files, args.pairs))
        med = {m: statistics.median(r["seconds"] for r in rs) for m, rs in runs.items()}
        ours = runs["ours"][-1]
        print(
            f"annotations: {ours['annotations']:,}; eligible images: {ours['eligible_images']:,}; "
            f"pairs sampled: {ours['pairs']:,} of {ours['available']:,} available, "
            f"{ours['concept_pairs']:,} concept pairs"
        )
        for m in modes:
            peak = max(r["peak_kb"] - r["base_kb"] for r in runs[m]) * 1024
            print(
                f"{m:12s} {med[m]:7.2f} s (median of {args.repeat})   "
                f"peak memory above idle {peak / 1e6:7.1f} MB = {peak / size:.2f}x file size"
            )
        load_s = statistics.median(r["load_s"] for r in runs["ours"])
        sample_s = statistics.median(r["sample_s"] for r in runs["ours"])
        print(f"  ours split: load+index {load_s:.2f} s, sample+geometry {sample_s:.2f} s")
        ratio = med["ours"] / med["json"]
        peak_ours = max(r["peak_kb"] - r["base_kb"] for r in runs["ours"]) * 1024
        print(f"RATIO time ours/json.load = {ratio:.2f}x (target <= 1.5x)")
        print(f"RATIO peak memory ours/file size = {peak_ours / size:.2f}x (target <= 3x)")
        if "pycocotools" in med:
            print(f"      pycocotools COCO()/json.load = {med['pycocotools'] / med['json']:.2f}x")
        if not args.no_store:
            db = f"sqlite:///{tmp}/bench.db"
            r = measure("ours", files, args.pairs, db_url=db)
            print(f"store {r['stored']:,} pairs in SQLite: {r['store_s']:.2f} s (separate)")


if __name__ == "__main__":
    main()
