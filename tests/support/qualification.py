"""A study with a qualification check, and a worker walking it over HTTP (docs/studies.md,
"Qualification"). The test plays a worker who read the instructions: it knows the worked
examples' labels from the study file and the gold answers from the database, never from the
page."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from tests.support.webapp_coco import form_field, make_pairs
from vsr_core.models import Example, ImagePair, Study
from vsr_core.studies.definition import default_study_path, parse_study
from vsr_core.studies.store import create_study

SLUG = "lab"
PREFIX = f"/s/{SLUG}"
QUALIFICATION = """
[qualification.generate]
items = ["examples"]
count = 3
pass_count = 3

[qualification.validate]
items = ["gold"]
count = 2
pass_fraction = 1.0
attempts = 2
"""
ITEM_RE = re.compile(r'name="a_((?:e|g)[0-9]+)" value="true"')


def study_text(extra: str = QUALIFICATION) -> str:
    """The shipped VSR study under another slug, with ``extra`` (a [qualification]) added."""
    text = default_study_path().read_text(encoding="utf-8")
    text = re.sub(r'(?m)^slug = "vsr"$', f'slug = "{SLUG}"', text, count=1)
    return text + extra


def make_study(session: Session, coco_dir: Path, pairs: int = 3, gold: int = 2) -> Study:
    """The study with real COCO pairs to caption and ``gold`` gold Examples (from pairs of
    its own) to judge."""
    study = create_study(session, study_text(), "lab.toml")
    session.commit()
    assert study.id is not None
    for n, pair_id in enumerate(make_pairs(session, coco_dir, pairs + gold)):
        pair = session.get(ImagePair, pair_id)
        assert pair is not None
        pair.study_id = study.id
        session.add(pair)
        if n >= pairs:  # a gold Example per pair: "The A is near the B.", labelled by hand
            session.add(
                Example(
                    study_id=study.id,
                    image_id=pair.image1_id,
                    caption=f"The {pair.concept_a} is near the {pair.concept_b}.",
                    relation="near",
                    subj=pair.concept_a,
                    obj=pair.concept_b,
                    label=True,
                    is_gold=True,
                    gold_label=n % 2 == 0,
                )
            )
    session.commit()
    return study


def item_ids(html: str) -> list[str]:
    return ITEM_RE.findall(html)


def known_answers(session: Session, study: Study) -> dict[str, bool]:
    """What a careful worker answers: worked examples' labels, gold Examples' gold labels."""
    definition = parse_study(study.definition)
    answers = {f"e{i}": ex.label for i, ex in enumerate(definition.default_language.texts.examples)}
    for example in session.exec(select(Example).where(Example.study_id == study.id)):
        if example.is_gold and example.gold_label is not None:
            answers[f"g{example.id}"] = example.gold_label
    return answers


def answers_form(html: str, known: dict[str, bool], right: bool) -> dict[str, str]:
    """The page's form filled in: every item right (``right``) or every item wrong."""
    data = {"csrf": form_field(html, "csrf"), "attempt": form_field(html, "attempt")}
    for item in item_ids(html):
        value = known[item] if right else not known[item]
        data[f"a_{item}"] = "true" if value else "false"
    return data


def try_check(client: Any, kind: str, known: dict[str, bool], right: bool) -> Any:
    """One try of the check as the page offers it; returns the page after it."""
    page = client.get(f"{PREFIX}/qualify/{kind}")
    assert page.status_code == 200, page.text
    r = client.post(
        f"{PREFIX}/qualify/{kind}",
        data=answers_form(page.text, known, right),
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == f"{PREFIX}/qualify/{kind}", r.text
    return client.get(f"{PREFIX}/qualify/{kind}")
