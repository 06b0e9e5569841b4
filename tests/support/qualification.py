"""A study with a qualification check, and a worker walking it over HTTP (docs/studies.md,
"Qualification"). The test plays a worker who read the instructions: it knows the worked
examples' labels from the study file and the gold answers from the database, never from the
page, and tells the items apart as a worker does, by their captions (the page names them by
opaque ids)."""

from __future__ import annotations

import html as html_lib
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
ITEM_RE = re.compile(r'name="a_([^"]+)" value="true"')
CAPTION_RE = re.compile(r'<p class="q-caption">([^<]*)</p>')


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
        if n >= pairs:  # a gold Example per pair, labelled by hand; no two captions alike
            gold_label = n % 2 == 0
            relation = "near" if gold_label else "far away from"
            session.add(
                Example(
                    study_id=study.id,
                    image_id=pair.image1_id,
                    caption=f"The {pair.concept_a} is {relation} the {pair.concept_b}.",
                    relation=relation,
                    subj=pair.concept_a,
                    obj=pair.concept_b,
                    label=True,
                    is_gold=True,
                    gold_label=gold_label,
                )
            )
    session.commit()
    return study


def item_ids(html: str) -> list[str]:
    """The ids the page gives its items (the answer fields' names without ``a_``)."""
    return ITEM_RE.findall(html)


def page_items(html: str) -> dict[str, str]:
    """Item id -> the caption the page shows with it, in the page's order."""
    ids, captions = item_ids(html), [html_lib.unescape(c) for c in CAPTION_RE.findall(html)]
    assert len(ids) == len(captions), (ids, captions)
    return dict(zip(ids, captions, strict=True))


def item_answers(session: Session, study: Study) -> dict[str, bool]:
    """The server's own item ids (``e<index>``, ``g<Example id>``) -> the known answer."""
    definition = parse_study(study.definition)
    answers = {f"e{i}": ex.label for i, ex in enumerate(definition.default_language.texts.examples)}
    for example in session.exec(select(Example).where(Example.study_id == study.id)):
        if example.is_gold and example.gold_label is not None:
            answers[f"g{example.id}"] = example.gold_label
    return answers


def item_captions(session: Session, study: Study) -> dict[str, str]:
    """The server's item ids -> their captions."""
    definition = parse_study(study.definition)
    out = {f"e{i}": ex.caption for i, ex in enumerate(definition.default_language.texts.examples)}
    for example in session.exec(select(Example).where(Example.study_id == study.id)):
        if example.is_gold and example.gold_label is not None:
            out[f"g{example.id}"] = example.caption
    return out


def known_answers(session: Session, study: Study) -> dict[str, bool]:
    """What a careful worker answers, by caption: worked examples' labels, gold Examples'
    gold labels (each caption one answer, or the test could not tell the items apart)."""
    answers, captions = item_answers(session, study), item_captions(session, study)
    known: dict[str, bool] = {}
    for item, caption in captions.items():
        assert known.get(caption, answers[item]) == answers[item], caption
        known[caption] = answers[item]
    return known


def answers_form(html: str, known: dict[str, bool], right: bool) -> dict[str, str]:
    """The page's form filled in: every item right (``right``) or every item wrong."""
    data = {"csrf": form_field(html, "csrf"), "attempt": form_field(html, "attempt")}
    for item, caption in page_items(html).items():
        value = known[caption] if right else not known[caption]
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
