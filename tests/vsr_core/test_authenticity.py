"""The authenticity tests on worker records: each signal flags what it should and a person's
record passes; on the VSR release's real votes, injected bots are flagged and people are not."""

from __future__ import annotations

import random
from pathlib import Path

from bench import authenticity_vsr
from vsr_core.authenticity import (
    ItemSignals,
    Signal,
    WorkerRecord,
    assess,
    first_flag,
    shared_patterns,
    wilson,
)


def _person(n: int = 60, seed: int = 1) -> WorkerRecord:
    rng = random.Random(seed)
    items = [
        ItemSignals(
            shown_ms=int(rng.lognormvariate(8, 0.5)),
            pointer_events=rng.randint(0, 9),
            key_events=rng.randint(1, 3),
            focus_changes=int(rng.random() < 0.05),
        )
        for _ in range(n)
    ]
    return WorkerRecord(
        answers=[rng.random() < 0.5 for _ in range(n)],
        agrees=[rng.random() < 0.88 for _ in range(n)],
        gold=[True, True, True],
        items=items,
    )


def test_a_person_is_not_flagged() -> None:
    out = assess(_person())
    assert not out.flagged, out.evidence
    assert out.score == 1.0
    assert out.summary["answers"] == 60


def test_each_page_signal_flags_with_evidence() -> None:
    person = _person()
    cases = {
        Signal.regular_timing: [
            ItemSignals(shown_ms=1500 + i % 3, key_events=1) for i in range(30)
        ],
        Signal.before_image: [ItemSignals(shown_ms=None, image_shown=False, key_events=1)] * 3
        + list(person.items[:27]),
        Signal.canary: [ItemSignals(canary=True, shown_ms=2000, key_events=1)]
        + list(person.items[:29]),
        Signal.no_input: [ItemSignals(shown_ms=900 + 97 * i) for i in range(30)],
        Signal.too_fast: [ItemSignals(shown_ms=100 + 9 * i, key_events=1) for i in range(30)],
        Signal.focus_away: [
            ItemSignals(shown_ms=900 + 97 * i, focus_changes=2, key_events=1) for i in range(30)
        ],
    }
    for signal, items in cases.items():
        out = assess(WorkerRecord(answers=person.answers, agrees=person.agrees, items=items))
        assert signal in out.flags, (signal, out.flags)
        assert out.score < 1.0 and out.evidence


def test_vote_patterns_flag_always_true_and_coin_flips() -> None:
    rng = random.Random(7)
    always = [True] * 100
    assert Signal.same_answer in assess(WorkerRecord(answers=always, agrees=[None] * 100)).flags
    coin = [rng.random() < 0.5 for _ in range(100)]
    agrees = [rng.random() < 0.5 for _ in range(100)]
    assert Signal.low_agreement in assess(WorkerRecord(answers=coin, agrees=agrees)).flags
    assert first_flag(coin, agrees, 100) is not None
    assert first_flag(always[:9], [None] * 9, 100) is None  # too few answers to judge


def test_wilson_interval_brackets_the_share() -> None:
    lo, hi = wilson(50, 100, 1.96)
    assert 0.40 < lo < 0.5 < hi < 0.60
    assert wilson(0, 0) == (0.0, 1.0)


def test_release_bots_flagged_and_people_not(vsr_dir: Path) -> None:
    records = authenticity_vsr._load(vsr_dir / "data" / "data_files" / "all_vsr_raw_data.jsonl")
    to_flag, real_flagged = authenticity_vsr.run_seed(records, seed=5)
    assert real_flagged == 0
    for kind, firsts in to_flag.items():
        hit = sum(k is not None for k in firsts)
        assert hit >= 14, (kind, firsts)  # 15 injected of each kind


def test_one_lab_behind_one_address_is_not_matched(vsr_dir: Path) -> None:
    """All 45 VSR validators as if behind one university NAT: no two of them answer alike
    enough (489 pairs share 10+ items, agreeing up to 92 %); one agent under two names on
    the same items does, and so do two identities driven by one clock."""
    records = authenticity_vsr._load(vsr_dir / "data" / "data_files" / "all_vsr_raw_data.jsonl")
    people: dict[int, WorkerRecord] = {}
    for i, r in enumerate(records):
        for value, key in ((True, "vote_true_validator_id"), (False, "vote_false_validator_id")):
            for w in r[key]:
                rec = people.setdefault(int(w), WorkerRecord(answers=[], examples=[]))
                rec.answers.append(value)  # type: ignore[attr-defined]
                rec.examples.append(i)  # type: ignore[attr-defined]
    assert len(people) == 45
    assert shared_patterns([set(people)], people) == {}
    agent = authenticity_vsr.CaptionPrior(records[1000:])
    blind = [agent.answer(r) for r in records[:300]]
    twins = {
        1: WorkerRecord(answers=blind, examples=range(300)),
        2: WorkerRecord(answers=blind[::-1], examples=range(299, -1, -1)),
    }
    assert set(shared_patterns([{1, 2}], twins)) == {1, 2}
    rng = random.Random(4)
    beat = [ItemSignals(shown_ms=1000 + rng.randint(0, 30)) for _ in range(20)]
    clock = {7: WorkerRecord(items=beat), 8: WorkerRecord(items=beat[::-1])}
    (why,) = shared_patterns([{7, 8}], clock)[7]
    assert why[0] == 8 and "answer times" in why[1]
    humans = {9: _person(20, seed=9), 10: _person(20, seed=10)}
    assert shared_patterns([{9, 10}], humans) == {}
