"""Reading an export's multiple-choice files back with their provenance (written by
`build-dataset --with-provenance`): the public records carry no Example id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vsr_dataset.mc_publish import MC_PROVENANCE_FILE


def mc_records(out: Path, directory: str = "mc") -> list[dict[str, Any]]:
    """Every record of ``out/directory/*.jsonl`` (train, dev, test order), each with the
    ``answer_example_id`` and ``distractor_example_ids`` of its provenance line."""
    prov = {
        (p["config"], p["item_id"]): p
        for p in map(json.loads, (out / MC_PROVENANCE_FILE).read_text().splitlines())
    }
    recs = []
    for split in ("train", "dev", "test"):
        path = out / directory / f"{split}.jsonl"
        if path.exists():
            for line in path.read_text().splitlines():
                rec = json.loads(line)
                p = prov[(directory, rec["item_id"])]
                rec["answer_example_id"] = p["answer_example_id"]
                rec["distractor_example_ids"] = p["distractor_example_ids"]
                recs.append(rec)
    return recs
