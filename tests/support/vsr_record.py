"""One valid record of the VSR release's JSONL format, for tests that vary a field of it."""

from __future__ import annotations

from typing import Any

GOOD: dict[str, Any] = {
    "image": "000000419052.jpg",
    "image_link": "http://images.cocodataset.org/train2017/000000419052.jpg",
    "caption": "The hot dog is on the dining table.",
    "label": 1,
    "relation": "on",
    "annotator_id": 3,
    "vote_true_validator_id": [1, 2],
    "vote_false_validator_id": "[5]",
}
