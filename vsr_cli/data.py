"""`vsr data fetch vsr|coco-annotations --to DIR`: the public data a study starts from, from
its official address, each file checked against its pinned SHA-256 (or MD5 where that is
all the publisher gives) before it is kept.

- ``vsr``: the VSR release (Liu, Emerson & Collier, TACL 2023) from the authors' GitHub
  repository, pinned to commit b27a0af (the TACL data), in the repository's own layout, so
  ``vsr import-vsr DIR`` reads it as it is.
- ``coco-annotations``: COCO 2017's instance annotations zip from cocodataset.org, unpacked
  into ``DIR/annotations/`` (``vsr sample --coco DIR/annotations/instances_train2017.json``).

A file already there with the right checksum is not fetched again; a download is written
beside its target and moved into place only once its checksum matches, so a broken or
tampered download leaves nothing behind. ``--mirror URL`` fetches the same paths from a
mirror (the tests use a local one).
"""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import typer

from vsr_cli.common import progress_bar
from vsr_cli.failure import CliError, CliUsageError

data_app = typer.Typer(
    name="data",
    help="Fetch the public data a study starts from (VSR release, COCO annotations).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

VSR_COMMIT = "b27a0af0ee1462d2b6b92c8c83e869d9254a241a"


@dataclass(frozen=True)
class Remote:
    path: str  # below the source's base URL, and where it goes below --to
    digest: str  # "sha256:…" or "md5:…"


@dataclass(frozen=True)
class Source:
    base: str
    files: tuple[Remote, ...]
    unzip: bool = False  # unpack each zip into --to (the zip stays: a re-run finds it intact)


SOURCES: dict[str, Source] = {
    "vsr": Source(
        f"https://raw.githubusercontent.com/cambridgeltl/visual-spatial-reasoning/{VSR_COMMIT}/",
        tuple(
            Remote(path, f"sha256:{digest}")
            for path, digest in (
                (
                    "data/data_files/all_vsr_raw_data.jsonl",
                    "8ffdc9aff1155f996bdb82f114409d9b9fa730fa93e78e9bae864698e3b985ac",
                ),
                (
                    "data/data_files/all_vsr_validated_data.jsonl",
                    "096251a50060c63b242e074697d835acd0e7d5c97eedaeeccf08301982f1252e",
                ),
                (
                    "data/data_files/meta_data.csv",
                    "fc6dc64bdb2055ee2125049929388329b66534d3d492a5e4e391981ccc5c47a3",
                ),
                (
                    "data/splits/random/train.jsonl",
                    "8b725a8621f2d0f94745f1fefdcf3ff8a7eb96fd358676296ff9c9a4ff463c6e",
                ),
                (
                    "data/splits/random/dev.jsonl",
                    "90de24b811597a913310d043758f1119a1ba9ebf1b1ca8f1e27c4907f01980d4",
                ),
                (
                    "data/splits/random/test.jsonl",
                    "8ade82a0b93ac9dc1e53f6cf1f11e9d5536776a3715102b6b4d27d4f81d551cc",
                ),
                (
                    "data/splits/zeroshot/train.jsonl",
                    "62daf2c5d573667038f88feaf1d26a1154c892083a72d83ed5c7551666ed3066",
                ),
                (
                    "data/splits/zeroshot/dev.jsonl",
                    "0abda42fe9333ab6a8671b32886738b5cfa6d37a8c277b56d8368c339c8dffce",
                ),
                (
                    "data/splits/zeroshot/test.jsonl",
                    "914d9156723b912d8f794b179248af865a68c5f81c9d8e3a21d007778cacaad4",
                ),
            )
        ),
    ),
    # cocodataset.org publishes no SHA-256; this MD5 is the one its download mirrors list.
    "coco-annotations": Source(
        "http://images.cocodataset.org/",
        (
            Remote(
                "annotations/annotations_trainval2017.zip", "md5:f4bbac642086de4f52a3fdda2de5fa2c"
            ),
        ),
        unzip=True,
    ),
}


def _matches(path: Path, digest: str) -> bool:
    algorithm, expected = digest.split(":", 1)
    h = hashlib.new(algorithm)
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest() == expected


def _download(url: str, target: Path, digest: str, quiet: bool) -> None:
    import httpx

    part = target.with_name(target.name + ".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with httpx.stream("GET", url, follow_redirects=True, timeout=60) as r:
            if r.status_code != 200:
                raise CliError(f"{url} answered {r.status_code}: nothing written")
            total = int(r.headers.get("content-length") or 0) or None
            with (
                part.open("wb") as fh,
                progress_bar(
                    quiet=quiet, total=total, unit="B", unit_scale=True, desc=target.name
                ) as bar,
            ):
                for chunk in r.iter_bytes(1 << 16):
                    fh.write(chunk)
                    bar.update(len(chunk))
        if not _matches(part, digest):
            raise CliError(
                f"{url} does not match its pinned checksum ({digest[:20]}…): nothing written"
            )
        part.replace(target)
    except httpx.HTTPError as exc:
        raise CliError(f"cannot download {url}: {exc}") from None
    finally:
        part.unlink(missing_ok=True)


@data_app.command("fetch")
def fetch(
    what: str = typer.Argument(..., help="vsr or coco-annotations"),
    to: Path = typer.Option(..., "--to", help="Folder to put the files in (made if missing)"),
    mirror: str | None = typer.Option(
        None, "--mirror", help="Fetch the same paths from this base URL instead"
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Download a public data set from its official address, checking every file's
    checksum; files already there and intact are kept."""
    source = SOURCES.get(what)
    if source is None:
        raise CliUsageError(f"fetch takes one of {', '.join(SOURCES)} (got {what})")
    base = (mirror.rstrip("/") + "/") if mirror else source.base
    fetched = kept = 0
    for remote in source.files:
        target = to / remote.path
        if target.is_file() and _matches(target, remote.digest):
            kept += 1
        else:
            _download(base + remote.path, target, remote.digest, quiet)
            fetched += 1
        if source.unzip:
            with zipfile.ZipFile(target) as archive:
                archive.extractall(to)
    typer.echo(f"{what}: {fetched} file(s) downloaded, {kept} already there and intact, in {to}")
