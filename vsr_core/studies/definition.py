"""Study definition files (TOML): load, validate, and report errors by field and line.

A study file says everything a lab configures about a VSR-style collection (docs/studies.md):
image sources, concept filters, the sampling rule, languages with their caption template and
relation vocabulary, the relation semantics matching uses, and the collection settings.
Pure: no database, no network. tomllib gives no positions, so ``line_index`` scans the text
for table headers and keys to name the line of each error.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

SLUG_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
LANG_RE = re.compile(r"[a-z]{2,3}(-[A-Za-z0-9]{1,8})*")
MAX_FILE_BYTES = 2_000_000  # a study file is hand-written; anything bigger is a mistake
TOO_DEEP = "arrays or inline tables are nested too deeply (a study file needs a few levels)"

Loc = tuple[str | int, ...]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# Keys earlier versions accepted in [[sources]] but never read: where the site finds an image
# is the server's IMAGE_ROOT, else the image's coco_url in the annotations file. A file that
# still has one is told so, by line, instead of seeming to choose where images come from.
REMOVED_SOURCE_KEYS = ("image_root", "image_url")
REMOVED_SOURCE_MESSAGE = (
    "no longer read (the site finds images in the server's IMAGE_ROOT folder, else at each "
    "image's coco_url in the annotations file): remove this line"
)


class Source(_Strict):
    annotations: str = Field(min_length=1, description="COCO-format instances JSON")
    format: Literal["coco", "lvis"] = "coco"
    image_root: Any = Field(None, exclude=True)  # REMOVED_SOURCE_KEYS: refused if given
    image_url: Any = Field(None, exclude=True)

    @field_validator(*REMOVED_SOURCE_KEYS)
    @classmethod
    def _removed(cls, value: Any) -> None:
        if value is not None:
            raise PydanticCustomError("removed_key", REMOVED_SOURCE_MESSAGE)


class Concepts(_Strict):
    allow: list[str] = []
    deny: list[str] = []
    supercategories: list[str] = []


class Sampling(_Strict):
    instances_per_concept: Literal[1] = 1
    min_area_px: float = Field(0.0, ge=0.0)
    min_area_share: float = Field(0.0, ge=0.0, lt=1.0)
    prefer_contrast: bool = True


class RelationEntry(_Strict):
    id: str = Field(min_length=1, max_length=64, description="shared across languages")
    name: str = Field(min_length=1, max_length=64, description="as written in captions")
    categories: list[str] = Field(min_length=1)
    verb: bool = False  # verbs take no copula ("The oven contains the cake.")
    enabled: bool = True
    import_only: bool = False


class Example(_Strict):
    caption: str = Field(min_length=1)
    label: bool
    why: str = ""


class Texts(_Strict):
    instructions: str = Field(min_length=1, max_length=20_000)
    examples: list[Example] = []
    consent: str = Field(min_length=1, max_length=20_000)


class Language(_Strict):
    code: str
    template: str = Field(description="with ENT1, RELATION and ENT2, RELATION before ENT2")
    copula: str = ""  # put before non-verb relations; "" for languages without one
    ellipsis: str = "…"  # in a name, marks where ENT2 goes ("在…上方")
    relations: list[RelationEntry] = Field(min_length=1)
    concepts: dict[str, str] = {}  # category name -> name in this language
    texts: Texts

    @field_validator("code")
    @classmethod
    def _code(cls, v: str) -> str:
        if not LANG_RE.fullmatch(v):
            raise ValueError("must be a language code such as 'en' or 'zh-Hans'")
        return v

    @field_validator("template")
    @classmethod
    def _template(cls, v: str) -> str:
        counts = [v.count(t) for t in ("ENT1", "RELATION", "ENT2")]
        if counts != [1, 1, 1] or not v.index("ENT1") < v.index("RELATION") < v.index("ENT2"):
            raise ValueError("must hold ENT1, RELATION and ENT2 once each, in that order")
        return v


class Semantics(_Strict):
    equivalents: list[list[str]] = []  # synonym groups
    converses: list[list[str]] = []  # [x, y]: "A x B" = "B y A"
    symmetric: list[str] = []
    entailments: list[list[str]] = []  # [premise, hypothesis]
    contradictions: list[tuple[str, str, float]] = []  # p = chance both judged true
    overlaps: list[tuple[str, str, float]] = []


class Collection(_Strict):
    votes_per_example: int = Field(3, ge=1, le=50)
    max_votes_per_example: int = Field(5, ge=1, le=50)
    keep_threshold: float = Field(2 / 3, gt=0.0, le=1.0)
    generate_batch_size: int = Field(200, ge=1, le=10_000)
    generate_minutes: int = Field(80, ge=1, le=24 * 60)
    validate_batch_size: int = Field(500, ge=1, le=10_000)
    validate_minutes: int = Field(90, ge=1, le=24 * 60)
    gold_rate: float = Field(0.05, ge=0.0, le=1.0)


class Card(_Strict):
    """What only the researcher knows, for the dataset card (the datasheet's facts the
    database cannot hold); every field is optional and the card says "not stated"."""

    # Of the annotations (an SPDX id such as cc-by-4.0 goes into the card's YAML as is).
    license: str | None = Field(None, max_length=200)
    creators: str | None = Field(None, max_length=2_000)
    funding: str | None = Field(None, max_length=2_000)
    ethics_approval: str | None = Field(None, max_length=2_000)
    contact: str | None = Field(None, max_length=500)
    version: str | None = Field(None, max_length=64)
    intended_uses: str | None = Field(None, max_length=5_000)
    out_of_scope_uses: str | None = Field(None, max_length=5_000)
    citation: str | None = Field(None, max_length=5_000)


QUALIFICATION_ITEMS = ("examples", "gold")
MAX_QUALIFICATION_ITEMS = 50  # a short check before paid work, not a batch of its own
MAX_QUALIFICATION_ATTEMPTS = 5


class TaskQualification(_Strict):
    """A check a new worker passes before their first batch of one task (docs/studies.md):
    ``count`` items drawn from the worked examples and/or the study's gold Examples, passed
    with ``pass_fraction`` or ``pass_count`` right answers, in at most ``attempts`` tries."""

    items: list[Literal["examples", "gold"]] = Field(min_length=1, max_length=2)
    count: int = Field(ge=1, le=MAX_QUALIFICATION_ITEMS)
    pass_fraction: float | None = Field(None, gt=0.0, le=1.0)
    pass_count: int | None = Field(None, ge=1, le=MAX_QUALIFICATION_ITEMS)
    # Prolific lets a participant try a comprehension check twice before a screen-out.
    attempts: int = Field(2, ge=1, le=MAX_QUALIFICATION_ATTEMPTS)

    def needed(self, shown: int) -> int:
        """Right answers needed to pass when ``shown`` items were drawn."""
        if self.pass_count is not None:
            return min(self.pass_count, shown)
        fraction = self.pass_fraction if self.pass_fraction is not None else 1.0
        # The smallest whole number of right answers that reaches the fraction.
        return max(1, -(-round(fraction * shown * 1_000_000) // 1_000_000))


class Qualification(_Strict):
    """Per task: ``[qualification.generate]`` (caption writing), ``[qualification.validate]``."""

    generate: TaskQualification | None = None
    validate_: TaskQualification | None = Field(None, alias="validate")

    def for_kind(self, kind: str) -> TaskQualification | None:
        return (
            self.generate if kind == "generate" else self.validate_ if kind == "validate" else None
        )

    def uses_gold(self) -> bool:
        """A check of some task draws the study's gold Examples."""
        return any(t is not None and "gold" in t.items for t in (self.generate, self.validate_))


class StudyDefinition(_Strict):
    name: str = Field(min_length=1, max_length=200)
    slug: str
    sources: list[Source] = Field(min_length=1)
    concepts: Concepts = Concepts()
    sampling: Sampling = Sampling()
    languages: list[Language] = Field(min_length=1)
    semantics: Semantics = Semantics()
    collection: Collection = Collection()
    card: Card = Card()
    qualification: Qualification = Qualification()

    @field_validator("slug")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not SLUG_RE.fullmatch(v):
            raise ValueError("must be 1-63 of a-z, 0-9 and '-', starting with a letter or digit")
        return v

    @property
    def default_language(self) -> Language:
        return self.languages[0]


class StudyFileError(ValueError):
    """Every problem of one file, each as 'FILE:LINE: field: message'."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


# --- positions ----------------------------------------------------------------------------

_KEY_PART = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'|[A-Za-z0-9_-]+')


def _key_parts(text: str) -> tuple[str, ...]:
    return tuple(p.strip("\"'") for p in _KEY_PART.findall(text))


def line_index(text: str) -> dict[Loc, int]:
    """Key path (as pydantic writes locations, array-of-table indexes included) -> line."""
    index: dict[Loc, int] = {}
    counts: dict[Loc, int] = {}  # concrete path of an array of tables -> elements so far
    current: Loc = ()
    in_multiline = False

    def resolve(parts: tuple[str, ...]) -> Loc:
        path: Loc = ()
        for part in parts:
            path = (*path, part)
            if path in counts and part != parts[-1]:
                path = (*path, counts[path] - 1)
        return path

    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if in_multiline:
            in_multiline = line.count('"""') % 2 == 0
            continue
        if not line or line.startswith("#"):
            continue
        if m := re.fullmatch(r"\[\[([^\]]+)\]\]\s*(#.*)?", line):
            path = resolve(_key_parts(m.group(1)))
            i = counts.get(path, 0)
            counts[path] = i + 1
            index.setdefault(path, number)
            current = (*path, i)
            index[current] = number
        elif m := re.fullmatch(r"\[([^\]]+)\]\s*(#.*)?", line):
            current = resolve(_key_parts(m.group(1)))
            index.setdefault(current, number)
        elif m := re.match(r'((?:"[^"]*"|\'[^\']*\'|[A-Za-z0-9_.\- ])+?)\s*=', line):
            index.setdefault((*current, *_key_parts(m.group(1))), number)
            in_multiline = line.count('"""') % 2 == 1
    return index


def _line_of(index: dict[Loc, int], loc: Loc) -> int:
    for end in range(len(loc), 0, -1):
        if loc[:end] in index:
            return index[loc[:end]]
    return 1


def _field(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(file)"


# --- loading ------------------------------------------------------------------------------


def _cross_check(study: StudyDefinition) -> list[tuple[Loc, str]]:
    """What pydantic cannot see field by field: duplicates and references between tables."""
    problems: list[tuple[Loc, str]] = []
    ids: set[str] | None = None
    for li, lang in enumerate(study.languages):
        seen_ids: set[str] = set()
        seen_names: set[str] = set()
        for ri, rel in enumerate(lang.relations):
            loc: Loc = ("languages", li, "relations", ri)
            if rel.id in seen_ids:
                problems.append(((*loc, "id"), f"duplicate relation {rel.id!r}"))
            if rel.name in seen_names:
                problems.append(((*loc, "name"), f"duplicate relation name {rel.name!r}"))
            if rel.name.count(lang.ellipsis) > 1:
                problems.append(((*loc, "name"), f"at most one {lang.ellipsis!r} in a name"))
            seen_ids.add(rel.id)
            seen_names.add(rel.name)
        if ids is None:
            ids = seen_ids
        elif seen_ids != ids:
            diff = sorted(ids ^ seen_ids)[:5]
            problems.append(
                (
                    ("languages", li, "relations"),
                    f"relation ids differ from the first language's: {diff}",
                )
            )
    known = ids or set()
    sem = study.semantics
    groups: list[tuple[str, list[Any]]] = [
        ("equivalents", sem.equivalents),
        ("converses", sem.converses),
        ("entailments", sem.entailments),
        ("contradictions", [list(t[:2]) for t in sem.contradictions]),
        ("overlaps", [list(t[:2]) for t in sem.overlaps]),
    ]
    for key, rows in groups:
        for i, row in enumerate(rows):
            if key != "equivalents" and len(row) != 2:
                problems.append((("semantics", key), f"entry {i} must name two relations"))
            for name in row:
                if name not in known:
                    problems.append(
                        (
                            ("semantics", key),
                            f"entry {i}: {name!r} is not in the relation vocabulary",
                        )
                    )
    for name in sem.symmetric:
        if name not in known:
            problems.append((("semantics", "symmetric"), f"{name!r} is not in the vocabulary"))
    for kind in ("generate", "validate"):
        task = study.qualification.for_kind(kind)
        if task is not None:
            problems += _qualification_problems(study, kind, task)
    if study.collection.max_votes_per_example < study.collection.votes_per_example:
        problems.append(
            (("collection", "max_votes_per_example"), "must be at least votes_per_example")
        )
    return problems


def _qualification_problems(
    study: StudyDefinition, kind: str, task: TaskQualification
) -> list[tuple[Loc, str]]:
    loc: Loc = ("qualification", kind)
    problems: list[tuple[Loc, str]] = []
    if (task.pass_fraction is None) == (task.pass_count is None):
        problems.append((loc, "give one of pass_fraction or pass_count"))
    if task.pass_count is not None and task.pass_count > task.count:
        problems.append(((*loc, "pass_count"), f"is more than count ({task.count})"))
    if len(set(task.items)) != len(task.items):
        problems.append(((*loc, "items"), "names an item source twice"))
    examples = len(study.default_language.texts.examples)
    if task.items == ["examples"] and task.count > examples:
        problems.append(
            (
                (*loc, "count"),
                f"is more than the {examples} worked examples of the first language",
            )
        )
    return problems


def parse_study(text: str, name: str = "<study>") -> StudyDefinition:
    """Parse and validate a study file's text; raise ``StudyFileError`` naming field and line."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends with "(at line N, column M)".
        raise StudyFileError([f"{name}: not valid TOML: {exc}"]) from None
    except RecursionError:  # tomllib reads nested arrays and inline tables recursively
        raise StudyFileError([f"{name}: {TOO_DEEP}"]) from None
    index = line_index(text)
    try:
        study = StudyDefinition.model_validate(data)
    except RecursionError:
        raise StudyFileError([f"{name}: {TOO_DEEP}"]) from None
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown key"
            elif err["type"] == "missing":
                msg = "missing field"
            problems.append(f"{name}:{_line_of(index, loc)}: {_field(loc)}: {msg}")
        raise StudyFileError(problems) from None
    cross = _cross_check(study)
    if cross:
        raise StudyFileError(
            [f"{name}:{_line_of(index, loc)}: {_field(loc)}: {msg}" for loc, msg in cross]
        )
    return study


def load_study(path: Path | str) -> StudyDefinition:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise StudyFileError([f"{path}: cannot read: {exc.strerror}"]) from None
    if len(raw) > MAX_FILE_BYTES:
        raise StudyFileError([f"{path}: larger than {MAX_FILE_BYTES} bytes"])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise StudyFileError([f"{path}: not UTF-8 text"]) from None
    return parse_study(text, str(path))


def default_study_path() -> Path:
    return Path(__file__).resolve().parents[2] / "studies" / "vsr.toml"
