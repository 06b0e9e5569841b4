"""`vsr data fetch` against a local HTTP mirror on 127.0.0.1 (there is no internet here): the
VSR release arrives byte for byte in the layout `vsr import-vsr` reads, a second run keeps
the intact files, and a file that does not match its pinned checksum is refused in one line
with nothing left behind. Real console script in a subprocess; real VSR files as the mirror's
content."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import VSR_DIR
from tests.vsr_cli.test_first_use_round2 import _cli, _one_line
from vsr_cli.data import SOURCES


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "mirror"
    root.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", root
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.skipif(not (VSR_DIR / "data").is_dir(), reason="VSR release not found")
def test_fetch_vsr_from_a_mirror_checks_every_file(
    mirror: tuple[str, Path], tmp_path: Path
) -> None:
    url, root = mirror
    for remote in SOURCES["vsr"].files:
        (root / remote.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(VSR_DIR / remote.path, root / remote.path)
    out = tmp_path / "vsr"
    r = _cli("vsr", "data", "fetch", "vsr", "--to", str(out), "--mirror", url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"vsr: 9 file(s) downloaded, 0 already there and intact, in {out}"
    for remote in SOURCES["vsr"].files:
        assert (out / remote.path).read_bytes() == (VSR_DIR / remote.path).read_bytes()
    again = _cli("vsr", "data", "fetch", "vsr", "--to", str(out), "--mirror", url)
    assert "0 file(s) downloaded, 9 already there" in again.stdout, again
    # A tampered file on the mirror (and a damaged local copy) is refused, and nothing of it
    # is kept: neither the download nor a partial file.
    target = SOURCES["vsr"].files[2].path
    (root / target).write_bytes(b"id,age\n1,99\n")
    (out / target).write_bytes(b"damaged")
    line = _one_line(_cli("vsr", "data", "fetch", "vsr", "--to", str(out), "--mirror", url), 1)
    assert "does not match its pinned checksum" in line and target in line, line
    assert (out / target).read_bytes() == b"damaged"
    assert not list(out.rglob("*.part"))


def test_fetch_refuses_what_it_does_not_know_and_a_missing_file(
    mirror: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = mirror
    line = _one_line(_cli("vsr", "data", "fetch", "imagenet", "--to", str(tmp_path)), 2)
    assert line == "error: fetch takes one of vsr, coco-annotations (got imagenet)"
    out = tmp_path / "coco"
    line = _one_line(
        _cli("vsr", "data", "fetch", "coco-annotations", "--to", str(out), "--mirror", url), 1
    )
    assert "annotations_trainval2017.zip answered 404: nothing written" in line, line
    assert not list(out.rglob("*.zip*"))
