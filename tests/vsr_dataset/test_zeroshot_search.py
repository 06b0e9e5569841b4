"""The concept zero-shot split on the real VSR release: a searched partition, not one lucky
shuffle (the paper's split keeps 5,560 of 10,972: 4,713 / 231 / 616)."""

from __future__ import annotations

import pytest

from tests.matching.support import VSR_VALIDATED, vsr_validated
from vsr_dataset.splits import (
    ZEROSHOT_MIN_DEV,
    ZEROSHOT_MIN_TEST,
    SplitError,
    SplitItem,
    check_zeroshot,
    zeroshot_split,
)

pytestmark = pytest.mark.skipif(not VSR_VALIDATED.exists(), reason="real VSR data not found")


def _items() -> list[SplitItem]:
    return [SplitItem(r.id, r.caption, r.subj, r.obj) for r in vsr_validated() if r.kept()]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_search_keeps_more_than_the_paper_with_a_train_heavy_ratio(seed: int) -> None:
    items = _items()
    assert len(items) == 10_972
    z = zeroshot_split(items, seed)
    kept = {p: len(ks) for p, ks in z.parts.items()}
    total = sum(kept.values())
    # One shuffle kept 4,308 at seed 0 (2,709 to 5,546 over seeds); the search beats the paper.
    assert total > 5_560, kept
    assert kept["train"] >= total / 2
    assert kept["dev"] >= ZEROSHOT_MIN_DEV * total and kept["test"] >= ZEROSHOT_MIN_TEST * total
    assert total + z.excluded == len(items)
    # 50/20/30 of the concepts, none shared.
    sizes = [len(z.concepts[p]) for p in ("train", "dev", "test")]
    n = sum(sizes)
    assert sizes[:2] == [n // 2, n * 2 // 10]
    owners = [set(z.concepts[p]) for p in ("train", "dev", "test")]
    assert not (owners[0] & owners[1] or owners[0] & owners[2] or owners[1] & owners[2])


def test_search_is_deterministic_for_the_seed() -> None:
    items = _items()
    a, b = zeroshot_split(items, 7), zeroshot_split(items, 7)
    assert a.parts == b.parts and a.concepts == b.concepts


def test_a_shared_concept_fails_loudly() -> None:
    items = _items()
    z = zeroshot_split(items, 0)
    by_key = {it.key: it for it in items}
    dev_concept = by_key[z.parts["dev"][0]].subj
    leak = next(it for it in items if it.subj == dev_concept and it.key not in z.parts["dev"])
    parts = {p: list(ks) for p, ks in z.parts.items()}
    parts["train"].append(leak.key)
    with pytest.raises(SplitError, match="zero-shot leak"):
        check_zeroshot(items, parts)
