"""The CLI as a first-time user meets it: errors that name the option and say what is wanted,
commands that never create a database they only read, plain help at 80 columns, progress bars
that count items and never share a line with an error. Everything runs the real console
scripts in a subprocess (and under a pseudo-terminal where a terminal matters)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import VSR_DIR, _create_pg_database, _drop_pg_database, require_backend

BIN = Path(sys.executable).parent
# Exception class names (BadParameter, OperationalError, ProgrammingError, NoSuchOption ...).
CLASS_NAME = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)+\b")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "VSR_DEBUG")}
    env.update(COLUMNS="80", **extra)
    return env


def _cli(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    exe = str(BIN / args[0]) if (BIN / args[0]).exists() else shutil.which(args[0]) or args[0]
    return subprocess.run(
        [exe, *args[1:]], capture_output=True, text=True, timeout=120, cwd=cwd, env=_env(**env)
    )


def _one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr and "\r" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert not CLASS_NAME.search(lines[0]), lines[0]
    return lines[0]


# --- options -------------------------------------------------------------------------------


def test_an_out_of_range_value_names_the_option_and_the_rule(tmp_path: Path) -> None:
    line = _one_error_line(_cli("vsr", "sample", "--pairs", "0", "--coco", "x.json"))
    assert line == "error: --pairs must be at least 1 (got 0)"
    line = _one_error_line(_cli("vsr", "sample", "--coco", "x.json", "--pairs=-3"))
    assert line == "error: --pairs must be at least 1 (got -3)"
    line = _one_error_line(_cli("vsr", "serve", "--port", "70000"))
    assert line == "error: --port must be at most 65535 (got 70000)"


def test_a_value_of_the_wrong_kind_names_the_option() -> None:
    line = _one_error_line(_cli("vsr", "serve", "--port", "notaport"))
    assert line == "error: --port must be a whole number (got notaport)"
    line = _one_error_line(_cli("vsr", "match", "--h", "much"))
    assert line == "error: --h must be a number (got much)"


def test_a_missing_option_or_value_says_which() -> None:
    line = _one_error_line(_cli("build-dataset"))
    assert line.startswith("error: --out is required (output directory, or '-' ")
    line = _one_error_line(_cli("vsr", "build", "--out"))
    assert line == "error: --out needs a value"
    line = _one_error_line(_cli("vsr", "import-vsr"))
    assert line.startswith("error: PATHS is required (VSR JSONL files")


def test_an_unknown_option_suggests_the_near_one_only() -> None:
    line = _one_error_line(_cli("vsr", "build", "--ovewrite"))
    assert line == (
        "error: unknown option --ovewrite for `vsr build`: did you mean --overwrite? "
        "(see `vsr build --help`)"
    )
    line = _one_error_line(_cli("vsr", "build", "--bogus"))
    assert line == "error: unknown option --bogus for `vsr build` (see `vsr build --help`)"
    line = _one_error_line(_cli("vsr", "sampel"))
    assert "no such command 'sampel'" in line and "'sample'" in line


# --- databases -----------------------------------------------------------------------------


READING = [
    ["build-dataset", "--out", "x"],
    ["vsr", "build", "--out", "-"],
    ["vsr", "match", "--dry-run"],
    ["vsr", "import-vsr", str(VSR_DIR / "data/data_files/meta_data.csv")],
    ["vsr", "sample", "--coco", "x.json"],
    ["vsr", "invite", "create"],
    ["vsr", "admin", "create", "--username", "alice", "--password", "long-enough-1"],
    ["vsr", "serve", "--port", "1"],
]


@pytest.mark.parametrize("cmd", READING, ids=lambda c: " ".join(c[:2]))
def test_no_command_but_db_upgrade_creates_a_database(cmd: list[str], tmp_path: Path) -> None:
    # The first-time tester's case: no DATABASE_URL, no ./vsr.db in the folder.
    line = _one_error_line(_cli(*cmd, cwd=tmp_path))
    assert line.startswith(f"error: no database at {tmp_path / 'vsr.db'} (DATABASE_URL is not set")
    assert "run `vsr db upgrade` first" in line
    assert list(tmp_path.iterdir()) == []  # no empty vsr.db (nor -wal/-shm) left behind


def test_the_demo_database_is_pointed_out(tmp_path: Path) -> None:
    (tmp_path / "vsr_demo.db").touch()
    line = _one_error_line(_cli("build-dataset", "--out", "x", cwd=tmp_path))
    assert "the demo's is sqlite:///./vsr_demo.db" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vsr_demo.db"]


@pytest.fixture(params=["sqlite", "postgresql"])
def unmigrated_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database that exists but has no tables (created, never upgraded)."""
    require_backend(request.param)
    if request.param == "sqlite":
        (tmp_path / "empty.db").touch()
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    url = _create_pg_database()
    try:
        yield url
    finally:
        _drop_pg_database(url)


def test_an_unmigrated_database_says_run_db_upgrade(unmigrated_url: str, tmp_path: Path) -> None:
    # `vsr import-vsr` here once printed only "error: ProgrammingError".
    raw = tmp_path / "raw.jsonl"
    with (VSR_DIR / "data/data_files/all_vsr_raw_data.jsonl").open() as src:
        raw.write_text("".join(next(src) for _ in range(3)))
    for cmd in (["vsr", "import-vsr", str(raw)], ["build-dataset", "--out", str(tmp_path / "o")]):
        line = _one_error_line(_cli(*cmd, "--database-url", unmigrated_url))
        assert line.endswith("has no schema yet: run `vsr db upgrade` first"), line
    assert not (tmp_path / "o").exists()


def test_a_dropped_table_mid_command_is_plain(sqlite_url: str, tmp_path: Path) -> None:
    # A database from an older or damaged schema: the driver's words, no SQL, no class name.
    import sqlite3

    from sqlalchemy.engine import make_url

    copy = tmp_path / "old.db"
    shutil.copy(str(make_url(sqlite_url).database), copy)
    with sqlite3.connect(copy) as conn:
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.execute("DROP TABLE example")
    line = _one_error_line(
        _cli("build-dataset", "--out", str(tmp_path / "o"), "--database-url", f"sqlite:///{copy}")
    )
    assert line == (
        "error: database error: no such table: example: the schema is missing or old, "
        "run `vsr db upgrade`"
    )
    assert "SQL" not in line and "[" not in line


def test_bad_paths_and_unreachable_servers_are_plain(tmp_path: Path) -> None:
    # A bad SQLite path once printed "error: OperationalError".
    bad = "sqlite:////no/such/folder/vsr.db"
    meta = str(VSR_DIR / "data/data_files/meta_data.csv")
    line = _one_error_line(_cli("vsr", "import-vsr", meta, "--database-url", bad))
    assert line.startswith("error: no database at /no/such/folder/vsr.db (--database-url is")
    line = _one_error_line(_cli("vsr", "db", "upgrade", "--database-url", bad))
    assert line == (
        f"error: cannot open the database {bad}: unable to open database file "
        "(does the folder exist, and may this user write to it?)"
    )
    pg = "postgresql://someone:s3cret@127.0.0.1:1/vsr"
    for cmd in (["vsr", "db", "upgrade"], ["build-dataset", "--out", "x"]):
        line = _one_error_line(_cli(*cmd, "--database-url", pg, cwd=tmp_path))
        assert line.startswith(
            "error: cannot open the database postgresql+psycopg://someone:***@127.0.0.1:1/vsr: "
        ), line
        assert "s3cret" not in line and "refused" in line
    line = _one_error_line(_cli("vsr", "db", "upgrade", "--database-url", "mysq://x/y"))
    assert "unknown kind of database 'mysq'" in line
    line = _one_error_line(
        _cli(
            "vsr", "db", "upgrade", "nosuchrev", "--database-url", f"sqlite:///{tmp_path / 'n.db'}"
        )
    )
    assert "nosuchrev" in line


# --- help ----------------------------------------------------------------------------------


def _commands() -> list[list[str]]:
    import typer

    from vsr_cli.main import app

    out: list[list[str]] = [["build-dataset"]]

    def walk(cmd: object, path: list[str]) -> None:
        subs = getattr(cmd, "commands", {})
        for name, sub in subs.items():
            if not getattr(sub, "hidden", False):
                walk(sub, [*path, name])
        if not subs:
            out.append(path)

    walk(typer.main.get_command(app), ["vsr"])
    return out


@pytest.mark.parametrize("cmd", _commands(), ids=" ".join)
def test_help_at_80_columns_is_whole_and_plain(cmd: list[str]) -> None:
    import typer

    from vsr_cli.main import app, build_app

    r = _cli(*cmd, "--help")
    assert r.returncode == 0, r.stderr
    assert "…" not in r.stdout and "<bool>" not in r.stdout and "╭" not in r.stdout
    click_cmd = typer.main.get_command(build_app if cmd[0] == "build-dataset" else app)
    for name in cmd[1:]:
        click_cmd = click_cmd.commands[name]  # type: ignore[attr-defined]
    for param in click_cmd.params:
        for opt in [*param.opts, *getattr(param, "secondary_opts", [])]:
            if opt.startswith("--"):
                assert re.search(rf"(^|[ ,/]){re.escape(opt)}([ ,]|$)", r.stdout, re.M), opt
    for line in r.stdout.splitlines():
        assert len(line) <= 80 or " " not in line.strip(), line


# --- progress bars -------------------------------------------------------------------------


def _in_terminal(*args: str, cwd: Path | None = None) -> tuple[int, str]:
    """Run a console script with its output on a pseudo-terminal; return (exit code, output)."""
    exe = str(BIN / args[0])
    master, slave = pty.openpty()
    # A fresh pseudo-terminal is 0 columns wide, and tqdm draws nothing in 0 columns.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen(
        [exe, *args[1:]], stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=_env()
    )
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode(errors="replace")


def _screen_lines(output: str) -> list[str]:
    """What a terminal shows: each line's text after its last carriage return, colours off."""
    plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", output)
    return [ln.rsplit("\r", 1)[-1] for ln in plain.replace("\r\n", "\n").split("\n")]


def test_progress_bars_count_items_and_errors_start_their_own_line(
    sqlite_url: str, tmp_path: Path
) -> None:
    raw = tmp_path / "raw.jsonl"
    with (VSR_DIR / "data/data_files/all_vsr_raw_data.jsonl").open() as src:
        raw.write_text("".join(next(src) for _ in range(400)))
    code, out = _in_terminal("vsr", "import-vsr", str(raw), "--database-url", sqlite_url)
    assert code == 0, out
    assert " lines/s" in out and "%/s" not in out

    code, out = _in_terminal(
        "build-dataset", "--out", str(tmp_path / "x"), "--database-url", sqlite_url
    )
    assert code == 0, out
    assert "build-dataset:" in out  # the bar was shown, with its stage and no rate
    assert "%/s" not in out and "it/s" not in out
    # The same export again into the now non-empty folder fails while the bar is up: the
    # error must start a terminal line of its own.
    code, out = _in_terminal(
        "build-dataset", "--out", str(tmp_path / "x"), "--database-url", sqlite_url
    )
    assert code == 1
    errors = [ln for ln in _screen_lines(out) if "error:" in ln]
    assert len(errors) == 1 and errors[0].startswith("error: "), out
    assert "is not empty: pass --overwrite" in errors[0]


def test_without_a_terminal_there_is_no_bar(sqlite_url: str, tmp_path: Path) -> None:
    # Logs and pipes got the bar's carriage returns, and the error after them shared its line.
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep").touch()
    r = _cli("build-dataset", "--out", str(tmp_path / "x"), "--database-url", sqlite_url)
    line = _one_error_line(r)
    assert "is not empty" in line
