"""Whether a study file's sources are where it says: its annotation files and image folders.

Kept apart from the loader (``definition``, which reads no other file): a definition is valid
wherever it is, but it can be sampled only where its files are. Relative paths are relative
to the directory ``vsr`` runs in, as ``--coco`` is (docs/studies.md).
"""

from __future__ import annotations

from pathlib import Path

from vsr_core.studies.definition import StudyDefinition, line_index

# What the COCO 2017 files are and where they come from, for a name a shipped file might use.
_COCO_HINT = (
    "the COCO 2017 instance annotations (annotations_trainval2017.zip from "
    "https://cocodataset.org/#download)"
)


def _hint(annotations: str) -> str:
    if Path(annotations).parts[:1] == ("demo",):
        return (
            "it is the demo slice shipped in the repository (demo/SOURCE.md): run vsr in "
            "the repository's folder"
        )
    if "instances_" in Path(annotations).name:
        return f"put {_COCO_HINT} there, or point annotations at your copy"
    return "put that file there, or point annotations at your copy"


def missing_sources(
    study: StudyDefinition, text: str, name: str, base: Path | None = None
) -> list[str]:
    """One line per source file or folder that does not exist, as 'FILE:LINE: field: ...'
    (the loader's format); empty when every source is there."""
    where = base or Path.cwd()
    index = line_index(text)
    problems = []
    for i, src in enumerate(study.sources):
        line = index.get(("sources", i, "annotations"), index.get(("sources", i), 1))
        path = where / src.annotations
        if not path.is_file():
            problems.append(
                f"{name}:{line}: sources[{i}].annotations: no file {src.annotations} (looked "
                f"in {where}); {_hint(src.annotations)}"
            )
        if src.image_root is not None and not (where / src.image_root).is_dir():
            line = index.get(("sources", i, "image_root"), line)
            problems.append(
                f"{name}:{line}: sources[{i}].image_root: no folder {src.image_root} (looked "
                f"in {where}); put the images there, or point image_root at them"
            )
    return problems
